import Foundation
import GatewayConfig
import HTTPCore
import JSONCore

/// A call of Algolia's write API (reference §2.2), or one of the reads that go with writes (tasks, one
/// synonym, one rule), parsed from the method and the raw path. Bodies are read later, by the writer.
enum WriteRoute: Equatable, Sendable {
    /// `POST /1/indexes/{i}`: add a record (objectID generated when absent).
    case addObject(index: String)
    /// `PUT /1/indexes/{i}/{objectID}`: add or replace a record.
    case replaceObject(index: String, objectID: String)
    /// `DELETE /1/indexes/{i}/{objectID}`.
    case deleteObject(index: String, objectID: String)
    /// `POST /1/indexes/{i}/{objectID}/partial[?createIfNotExists=]`.
    case partialUpdate(index: String, objectID: String)
    /// `POST /1/indexes/{i}/batch`.
    case batch(index: String)
    /// `POST /1/indexes/*/batch`.
    case multiBatch
    /// `POST /1/indexes/{i}/deleteByQuery`.
    case deleteBy(index: String)
    /// `POST /1/indexes/{i}/clear`.
    case clear(index: String)
    /// `DELETE /1/indexes/{i}`.
    case deleteIndex(index: String)
    /// `PUT /1/indexes/{i}/settings[?forwardToReplicas=]`.
    case setSettings(index: String)
    /// `PUT /1/indexes/{i}/synonyms/{id}`.
    case saveSynonym(index: String, id: String)
    /// `POST /1/indexes/{i}/synonyms/batch[?replaceExistingSynonyms=&forwardToReplicas=]`.
    case saveSynonyms(index: String)
    /// `DELETE /1/indexes/{i}/synonyms/{id}`.
    case deleteSynonym(index: String, id: String)
    /// `POST /1/indexes/{i}/synonyms/clear`.
    case clearSynonyms(index: String)
    /// `GET /1/indexes/{i}/synonyms/{id}`.
    case getSynonym(index: String, id: String)
    /// `GET /1/indexes/{i}/rules/{id}`.
    case getRule(index: String, id: String)
    /// `PUT /1/indexes/{i}/rules/{id}`.
    case saveRule(index: String, id: String)
    /// `POST /1/indexes/{i}/rules/batch[?clearExistingRules=&forwardToReplicas=]`.
    case saveRules(index: String)
    /// `DELETE /1/indexes/{i}/rules/{id}`.
    case deleteRule(index: String, id: String)
    /// `POST /1/indexes/{i}/rules/clear`.
    case clearRules(index: String)
    /// `POST /1/indexes/{i}/operation`: copy or move.
    case operation(index: String)
    /// `GET /1/indexes/{i}/task/{id}`.
    case task(index: String, id: String)
    /// `GET /1/task/{id}`.
    case appTask(id: String)

    /// Parses method and raw path (percent-encoded segments are decoded); nil for other calls.
    static func parse(method: String, path: Substring) -> WriteRoute? {
        if path.hasPrefix("/1/task/") {
            let id = FormCodec.percentDecode(path.dropFirst("/1/task/".count))
            return method == "GET" && !id.isEmpty && !id.contains("/") ? .appTask(id: id) : nil
        }
        guard path.hasPrefix("/1/indexes/") else { return nil }
        let parts = path.dropFirst("/1/indexes/".count).split(
            separator: "/", omittingEmptySubsequences: false
        )
        .map { FormCodec.percentDecode($0) }
        guard let index = parts.first, !index.isEmpty, !parts.contains(where: \.isEmpty) else { return nil }
        if index == "*" { return method == "POST" && parts == ["*", "batch"] ? .multiBatch : nil }
        switch (method, parts.count) {
        case ("POST", 1): return .addObject(index: index)
        case ("DELETE", 1): return .deleteIndex(index: index)
        case ("POST", 2):
            switch parts[1] {
            case "batch": return .batch(index: index)
            case "deleteByQuery": return .deleteBy(index: index)
            case "clear": return .clear(index: index)
            case "operation": return .operation(index: index)
            default: return nil
            }
        case ("PUT", 2):
            return parts[1] == "settings"
                ? .setSettings(index: index) : .replaceObject(index: index, objectID: parts[1])
        case ("DELETE", 2):
            return Self.reserved.contains(parts[1]) ? nil : .deleteObject(index: index, objectID: parts[1])
        case ("POST", 3) where parts[2] == "partial":
            return .partialUpdate(index: index, objectID: parts[1])
        case ("POST", 3) where parts[1] == "synonyms" && parts[2] == "batch":
            return .saveSynonyms(index: index)
        case ("POST", 3) where parts[1] == "synonyms" && parts[2] == "clear":
            return .clearSynonyms(index: index)
        case ("POST", 3) where parts[1] == "rules" && parts[2] == "batch": return .saveRules(index: index)
        case ("POST", 3) where parts[1] == "rules" && parts[2] == "clear": return .clearRules(index: index)
        case ("PUT", 3) where parts[1] == "synonyms": return .saveSynonym(index: index, id: parts[2])
        case ("DELETE", 3) where parts[1] == "synonyms": return .deleteSynonym(index: index, id: parts[2])
        case ("GET", 3) where parts[1] == "synonyms": return .getSynonym(index: index, id: parts[2])
        case ("PUT", 3) where parts[1] == "rules": return .saveRule(index: index, id: parts[2])
        case ("GET", 3) where parts[1] == "rules" && parts[2] != "search":
            return .getRule(index: index, id: parts[2])
        case ("DELETE", 3) where parts[1] == "rules": return .deleteRule(index: index, id: parts[2])
        case ("GET", 3) where parts[1] == "task": return .task(index: index, id: parts[2])
        default: return nil
        }
    }

    /// Second path segments that are not objectIDs.
    static let reserved: Set<String> = ["settings", "browse", "task", "rules", "synonyms", "keys", "query"]

    /// The index addressed (nil for `*/batch` and app-level tasks).
    var index: String? {
        switch self {
        case .addObject(let i), .replaceObject(let i, _), .deleteObject(let i, _), .partialUpdate(let i, _),
            .batch(let i), .deleteBy(let i), .clear(let i), .deleteIndex(let i), .setSettings(let i),
            .saveSynonym(let i, _), .saveSynonyms(let i), .deleteSynonym(let i, _), .clearSynonyms(let i),
            .getSynonym(let i, _), .getRule(let i, _), .saveRule(let i, _), .saveRules(let i),
            .deleteRule(let i, _),
            .clearRules(let i), .operation(let i), .task(let i, _):
            return i
        case .multiBatch, .appTask: return nil
        }
    }

    /// Whether the call changes something (tasks and single synonym reads do not).
    var isWrite: Bool {
        switch self {
        case .getSynonym, .getRule, .task, .appTask: false
        default: true
        }
    }

    /// Whether the call is an Algolia record write that may create its index.
    var createsIndex: Bool {
        switch self {
        case .deleteObject, .deleteIndex, .deleteSynonym, .deleteRule, .clear, .clearSynonyms, .clearRules,
            .deleteBy, .getSynonym, .getRule, .task, .appTask, .operation:
            false
        default: true
        }
    }

    /// The ACL a key needs for this call (Algolia's API reference).
    var acl: AlgoliaACL {
        switch self {
        case .addObject, .replaceObject, .partialUpdate, .batch, .multiBatch, .operation, .task, .appTask:
            .addObject
        case .deleteObject: .deleteObject
        case .deleteBy, .clear, .deleteIndex: .deleteIndex
        case .setSettings, .saveSynonym, .saveSynonyms, .deleteSynonym, .clearSynonyms, .saveRule, .saveRules,
            .deleteRule, .clearRules:
            .editSettings
        case .getSynonym, .getRule: .settings
        }
    }
}

extension AlgoliaRoute {
    /// The ACL a key needs for this read (Algolia's API reference).
    var acl: AlgoliaACL {
        switch self {
        case .browse: .browse
        case .getSettings, .synonymSearch, .ruleSearch, .getRule: .settings
        case .listIndices: .listIndexes
        case .search, .multiQuery, .getObject, .getObjects, .facetSearch, .otherIndexCall, .other: .search
        }
    }
}

/// Algolia's answers to writes: the time stamps in RFC 3339 and the task.
enum WriteAnswer {
    static func now() -> String { rfc3339(Date()) }

    static func json(_ status: Int, _ body: JSON) -> HTTPResponse { .json(status, body.serialized()) }

    /// `{"<stamp>": now, "taskID": id, …extra}`.
    static func stamped(_ stamp: String, task: Int64, _ extra: JSONObject = [:], status: Int = 200)
        -> HTTPResponse
    {
        var o: JSONObject = [stamp: .string(now()), "taskID": .int(task)]
        for (k, v) in extra { o[k] = v }
        return json(status, .object(o))
    }
}
