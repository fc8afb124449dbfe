import Foundation
import GatewayConfig
import HTTPCore
import JSONCore
import SearchEngine

/// What one write call does, computed on the writer thread from the request and the current indices:
/// the steps to commit, the indices that get a task, the request to replay upstream when the write is
/// queued (with the objectIDs the gateway generated, so that the upstream gets the same ones), and the
/// answer once the tasks are known.
struct WritePlan {
    var steps: [IndexWriter.Step] = []
    var taskIndices: [String] = []
    /// Replaying the write must not re-apply built-in partial operations (`Increment`, `Add`, …).
    var idempotent = true
    /// The body to replay (nil: the request's own).
    var replayBody: [UInt8]?
    /// The method and path to replay (nil: the request's own).
    var replayMethod: String?
    var replayPath: String?
    var answer: @Sendable ([String: Int64]) -> HTTPResponse

    init(answer: @escaping @Sendable ([String: Int64]) -> HTTPResponse) { self.answer = answer }
}

/// The net effect of a sequence of record actions on one index (a batch, or one call), against its
/// current records: Algolia applies them in order, and so does this, keeping only each objectID's last
/// state.
struct BatchEvaluator {
    let name: String
    let base: SearchIndex?
    private(set) var write = IndexWrite()
    private var pending: [String: JSON?] = [:]
    private var touched: [String: Int] = [:]
    private var counter = 0
    private var cleared = false
    var idempotent = true

    init(name: String, base: SearchIndex?) {
        self.name = name
        self.base = base
    }

    /// The record `id` as the actions so far left it.
    func current(_ id: String) -> JSON? {
        if let p = pending[id] { return p }
        return cleared ? nil : base?.storedRecord(id)
    }

    private mutating func set(_ id: String, _ record: JSON?) {
        pending[id] = .some(record)
        counter += 1
        touched[id] = counter
    }

    /// Adds or replaces a record (its objectID set to `id`).
    mutating func upsert(_ record: JSONObject, id: String) {
        var record = record
        record["objectID"] = .string(id)
        set(id, .object(record))
    }

    mutating func delete(_ id: String) { set(id, nil) }

    /// A partial update; `create`: a missing record is created from the body.
    mutating func partial(_ body: JSONObject, id: String, create: Bool) throws(AlgoliaError) {
        let existing = current(id)
        if existing == nil && !create { return }
        if !PartialUpdate.isIdempotent(body) { idempotent = false }
        do {
            if case .updated(let record) = try PartialUpdate.apply(body, to: existing, objectID: id) {
                set(id, record)
            }
        } catch {
            throw AlgoliaError(error.status, error.message)
        }
    }

    /// Removes every record (`clear`); `reset` also drops settings, synonyms and rules (`delete`).
    mutating func clear(reset: Bool) {
        cleared = true
        pending = [:]
        touched = [:]
        write = IndexWrite()
        write.clear = true
        if reset {
            write.settings = .object(JSONObject())
            write.synonyms = []
            write.rules = []
        }
    }

    /// The write: deletions and the last state of each record, in the order last touched.
    func finish() -> IndexWrite {
        var out = write
        for (id, _) in touched.sorted(by: { $0.value < $1.value }) {
            if let record = pending[id] ?? nil {
                out.upserts.append(record)
            } else if !cleared {
                out.deletes.append(id)
            }
        }
        return out
    }
}

/// Turns write calls into plans (Algolia's request and response shapes, reference §2.2).
enum WritePlans {
    static func parseBody(_ request: HTTPRequest) throws(AlgoliaError) -> JSON {
        if request.body.isEmpty { return .object(JSONObject()) }
        do {
            return try JSON.parse(request.body)
        } catch {
            throw AlgoliaError(400, "Invalid JSON body: \(error)")
        }
    }

    static func object(_ json: JSON, _ what: String) throws(AlgoliaError) -> JSONObject {
        guard let o = json.objectValue else { throw AlgoliaError(400, "\(what) must be a JSON object") }
        return o
    }

    /// An objectID given as a string or a number.
    static func objectID(_ value: JSON?) -> String? {
        switch value {
        case .string(let s)? where !s.isEmpty: return s
        case .int(let i)?: return String(i)
        case .double(let d)?: return JSON.double(d).serialized()
        default: return nil
        }
    }

    static func generatedID() -> String {
        UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
    }

    static func flag(_ request: HTTPRequest, _ name: String, default value: Bool) -> Bool {
        guard let text = request.queryValue(name) else { return value }
        return text.lowercased() == "true" || text == "1"
    }

    /// The ACLs the actions of a batch need: `addObject` for additions and updates, `deleteObject` for
    /// deletions, `deleteIndex` for `clear` and `delete`.
    static func acls(ofBatch body: JSON) -> Set<AlgoliaACL> {
        var out = Set<AlgoliaACL>()
        for item in body["requests"]?.arrayValue ?? [] {
            switch item["action"]?.stringValue {
            case "deleteObject": out.insert(.deleteObject)
            case "clear", "delete": out.insert(.deleteIndex)
            default: out.insert(.addObject)
            }
        }
        return out
    }

    static let actions: Set<String> = [
        "addObject", "updateObject", "partialUpdateObject", "partialUpdateObjectNoCreate", "deleteObject",
        "delete", "clear",
    ]

    /// Applies one batch request to `evaluator`; the objectID it reports (nil for index actions), and
    /// the request as it must be replayed (with a generated objectID).
    static func apply(_ item: JSON, to evaluator: inout BatchEvaluator) throws(AlgoliaError) -> (
        String?, JSON
    ) {
        guard let action = item["action"]?.stringValue else {
            throw AlgoliaError(400, "Each batch request needs an `action`")
        }
        guard actions.contains(action) else {
            throw AlgoliaError(
                400, "Invalid action \(action) (expected one of \(actions.sorted().joined(separator: ", ")))")
        }
        let body = item["body"] ?? .object(JSONObject())
        switch action {
        case "clear", "delete":
            evaluator.clear(reset: action == "delete")
            return (nil, item)
        default: break
        }
        guard var record = body.objectValue else {
            throw AlgoliaError(400, "The body of a \(action) request must be a JSON object")
        }
        var replay = item
        let id: String
        if let given = objectID(record["objectID"]) {
            id = given
        } else if action == "addObject" {
            id = generatedID()
            record["objectID"] = .string(id)
            if case .object(var r) = replay {
                r["body"] = .object(record)
                replay = .object(r)
            }
        } else {
            throw AlgoliaError(400, "\(action) needs an objectID in its body")
        }
        switch action {
        case "addObject", "updateObject": evaluator.upsert(record, id: id)
        case "partialUpdateObject": try evaluator.partial(record, id: id, create: true)
        case "partialUpdateObjectNoCreate": try evaluator.partial(record, id: id, create: false)
        default: evaluator.delete(id)
        }
        return (id, replay)
    }

    /// The plan of a record, settings, synonym, rule or index call on `name` (not `*/batch`).
    /// `current` gives the index of a name as it is now; `replicas` are the local replicas of the
    /// index (``forwardToReplicas``).
    static func plan(
        _ route: WriteRoute, _ request: HTTPRequest, current: (String) -> SearchIndex?, replicas: [String]
    ) throws(AlgoliaError) -> WritePlan {
        guard let name = route.index else { throw AlgoliaError(400, "no index in \(request.path)") }
        let body = try parseBody(request)
        let base = current(name)
        var evaluator = BatchEvaluator(name: name, base: base)
        var plan = WritePlan { _ in AlgoliaError.response(500, "no answer") }
        plan.taskIndices = [name]
        func record(_ write: IndexWrite) { plan.steps.append(.write(name, write)) }
        switch route {
        case .addObject:
            var o = try object(body, "The record")
            let id = objectID(o["objectID"]) ?? generatedID()
            o["objectID"] = .string(id)
            evaluator.upsert(o, id: id)
            record(evaluator.finish())
            plan.replayMethod = "PUT"
            plan.replayPath = "/1/indexes/\(FormCodec.percentEncode(name))/\(FormCodec.percentEncode(id))"
            plan.replayBody = JSON.object(o).serializedBytes()
            plan.answer = {
                WriteAnswer.stamped("createdAt", task: $0[name]!, ["objectID": .string(id)], status: 201)
            }
        case .replaceObject(_, let id):
            evaluator.upsert(try object(body, "The record"), id: id)
            record(evaluator.finish())
            plan.answer = { WriteAnswer.stamped("updatedAt", task: $0[name]!, ["objectID": .string(id)]) }
        case .deleteObject(_, let id):
            if base != nil {
                evaluator.delete(id)
                record(evaluator.finish())
            }
            plan.answer = { WriteAnswer.stamped("deletedAt", task: $0[name]!) }
        case .partialUpdate(_, let id):
            try evaluator.partial(
                try object(body, "The partial update"), id: id,
                create: flag(request, "createIfNotExists", default: true))
            plan.idempotent = evaluator.idempotent
            let write = evaluator.finish()
            if !write.upserts.isEmpty { record(write) }
            plan.answer = { WriteAnswer.stamped("updatedAt", task: $0[name]!, ["objectID": .string(id)]) }
        case .batch:
            guard let requests = body["requests"]?.arrayValue else {
                throw AlgoliaError(400, "The batch body needs `requests`, an array")
            }
            var ids: [String] = []
            var replays: [JSON] = []
            for item in requests {
                let (id, replay) = try apply(item, to: &evaluator)
                if let id { ids.append(id) }
                replays.append(replay)
            }
            plan.idempotent = evaluator.idempotent
            record(evaluator.finish())
            plan.replayBody = JSON.object(["requests": .array(replays)]).serializedBytes()
            let objectIDs = ids
            plan.answer = {
                WriteAnswer.json(
                    200, ["taskID": .int($0[name]!), "objectIDs": .array(objectIDs.map { .string($0) })])
            }
        case .deleteBy:
            let params = try object(body, "The deleteBy parameters")
            let merged = SearchIndex.mergedParameters(.object(params))
            let filters = [
                "filters", "facetFilters", "numericFilters", "tagFilters", "aroundLatLng",
                "insideBoundingBox",
                "insidePolygon",
            ]
            guard filters.contains(where: { merged[$0] != nil && merged[$0] != .null && merged[$0] != "" })
            else {
                throw AlgoliaError(
                    400,
                    "deleteBy needs at least one filter (filters, facetFilters, numericFilters, tagFilters or a geo parameter)"
                )
            }
            if let base {
                do {
                    for id in try base.objectIDs(matching: .object(merged)) { evaluator.delete(id) }
                } catch {
                    throw AlgoliaError(error.status, error.message)
                }
                record(evaluator.finish())
            }
            plan.answer = { WriteAnswer.stamped("updatedAt", task: $0[name]!) }
        case .clear:
            if base != nil {
                evaluator.clear(reset: false)
                record(evaluator.finish())
            }
            plan.answer = { WriteAnswer.stamped("updatedAt", task: $0[name]!) }
        case .deleteIndex:
            if base != nil { plan.steps.append(.delete(name)) }
            plan.answer = { WriteAnswer.stamped("deletedAt", task: $0[name]!) }
        case .setSettings:
            let given = try object(body, "The settings")
            var forwarded = given
            for key in ["replicas", "slaves", "primary"] { forwarded[key] = nil }
            var targets = [(name, given)]
            if flag(request, "forwardToReplicas", default: false) {
                targets += replicas.map { ($0, forwarded) }
            }
            for (target, changes) in targets {
                var settings = current(target)?.settingsJSON.objectValue ?? JSONObject()
                for (key, value) in changes { settings[key] = value.isNull ? nil : value }
                var write = IndexWrite()
                write.settings = .object(settings)
                plan.steps.append(.write(target, write))
            }
            plan.answer = { WriteAnswer.stamped("updatedAt", task: $0[name]!) }
        case .saveSynonym, .saveSynonyms, .deleteSynonym, .clearSynonyms:
            var change: (inout [JSON]) -> Void
            switch route {
            case .saveSynonym(_, let id):
                var synonym = try object(body, "The synonym")
                synonym["objectID"] = .string(id)
                try checkSynonym(synonym)
                change = { upsert(&$0, .object(synonym)) }
            case .saveSynonyms:
                guard let list = body.arrayValue ?? body["synonyms"]?.arrayValue else {
                    throw AlgoliaError(400, "The body must be an array of synonyms")
                }
                for item in list {
                    let synonym = try object(item, "Each synonym")
                    guard objectID(synonym["objectID"]) != nil else {
                        throw AlgoliaError(400, "Each synonym needs an objectID")
                    }
                    try checkSynonym(synonym)
                }
                let replace = flag(request, "replaceExistingSynonyms", default: false)
                change = { synonyms in
                    if replace { synonyms = [] }
                    for item in list { upsert(&synonyms, item) }
                }
            case .deleteSynonym(_, let id): change = { $0.removeAll { objectID($0["objectID"]) == id } }
            default: change = { $0 = [] }
            }
            for target in [name] + (flag(request, "forwardToReplicas", default: false) ? replicas : []) {
                var synonyms = current(target)?.synonyms ?? []
                change(&synonyms)
                var write = IndexWrite()
                write.synonyms = synonyms
                plan.steps.append(.write(target, write))
            }
            switch route {
            case .saveSynonym(_, let id):
                plan.answer = { WriteAnswer.stamped("updatedAt", task: $0[name]!, ["id": .string(id)]) }
            case .deleteSynonym: plan.answer = { WriteAnswer.stamped("deletedAt", task: $0[name]!) }
            default: plan.answer = { WriteAnswer.stamped("updatedAt", task: $0[name]!) }
            }
        case .saveRule, .saveRules, .deleteRule, .clearRules:
            var change: (inout [JSON]) -> Void
            switch route {
            case .saveRule(_, let id):
                var rule = try object(body, "The rule")
                rule["objectID"] = .string(id)
                change = { upsert(&$0, .object(rule)) }
            case .saveRules:
                guard let list = body.arrayValue ?? body["rules"]?.arrayValue else {
                    throw AlgoliaError(400, "The body must be an array of rules")
                }
                for item in list {
                    let rule = try object(item, "Each rule")
                    guard objectID(rule["objectID"]) != nil else {
                        throw AlgoliaError(400, "Each rule needs an objectID")
                    }
                }
                let clear = flag(request, "clearExistingRules", default: false)
                change = { rules in
                    if clear { rules = [] }
                    for item in list { upsert(&rules, item) }
                }
            case .deleteRule(_, let id): change = { $0.removeAll { objectID($0["objectID"]) == id } }
            default: change = { $0 = [] }
            }
            for target in [name] + (flag(request, "forwardToReplicas", default: false) ? replicas : []) {
                var rules = current(target)?.rules ?? []
                change(&rules)
                var write = IndexWrite()
                write.rules = rules
                plan.steps.append(.write(target, write))
            }
            if case .saveRule(_, let id) = route {
                plan.answer = { WriteAnswer.stamped("updatedAt", task: $0[name]!, ["objectID": .string(id)]) }
            } else {
                plan.answer = { WriteAnswer.stamped("updatedAt", task: $0[name]!) }
            }
        default:
            throw AlgoliaError(400, "\(request.method) \(request.path) is not a write of one index")
        }
        return plan
    }

    static func upsert(_ list: inout [JSON], _ item: JSON) {
        let id = objectID(item["objectID"])
        if let i = list.firstIndex(where: { objectID($0["objectID"]) == id }) {
            list[i] = item
        } else {
            list.append(item)
        }
    }

    static let synonymTypes: Set<String> = [
        "synonym", "onewaysynonym", "altcorrection1", "altcorrection2", "placeholder",
    ]

    static func checkSynonym(_ synonym: JSONObject) throws(AlgoliaError) {
        guard let type = synonym["type"]?.stringValue, synonymTypes.contains(type.lowercased()) else {
            throw AlgoliaError(
                400,
                "A synonym needs a type: one of synonym, onewaysynonym, altcorrection1, altcorrection2, placeholder"
            )
        }
    }
}
