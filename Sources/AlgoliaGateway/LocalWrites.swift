import Foundation
import GatewayConfig
import HTTPCore
import JSONCore
import Logging
import SearchEngine
import Upstream

/// Algolia's write API on local indices (SPEC §3): offline indices take every write; a mirrored index
/// with `offlineWrites: queue` takes writes while its upstream is unreachable (or while earlier ones
/// still wait), applied to the mirror and queued (``WriteQueue``). Also the reads that go with writes:
/// tasks, one synonym, one rule.
///
/// Promises: `handle` decides on the calling (polling) thread from the route alone and never blocks;
/// the work runs on the writer's thread in arrival order; every answer has Algolia's shape, and errors
/// are `{"message","status"}` (403 for a key without the ACL a call needs, 404 for an unknown task,
/// synonym or rule); a local write is answered only once it is on disk and searchable.
struct LocalWrites: Sendable {
    let writer: IndexWriter
    let queue: WriteQueue?
    let configuration: MirrorgateConfiguration
    let upstream: (any AlgoliaUpstream)?
    let keys: KeyMemory
    let logger: Logger
    /// Forwards the writes of mirrored indices that may be queued (nil: they are left to the caller).
    var paths: AnswerPaths?

    var registry: OfflineIndexRegistry { writer.registry }

    /// Handles `request` when a local index owns it; false when the caller should go on (forward it).
    func handle(_ request: HTTPRequest, _ out: any Responder) -> Bool {
        guard let route = WriteRoute.parse(method: request.method, path: request.path) else { return false }
        switch route {
        case .appTask(let id):
            guard let id = Int64(id), writer.tasks.lookup(id) != nil else { return false }
            task(id, request, out)
            return true
        case .task(let index, let text):
            let id = Int64(text)
            if registry.isOffline(index) || id.flatMap({ writer.tasks.lookup($0) }) != nil {
                guard let id else {
                    out.respond(
                        local(AlgoliaError.response(400, "Invalid taskID \(text): expected an integer")))
                    return true
                }
                task(id, request, out)
                return true
            }
            return false
        case .multiBatch:
            let names = Self.batchIndexNames(request.body)
            let offline = names.filter { registry.isOffline($0) }
            if offline.isEmpty { return false }
            guard offline.count == names.count else {
                out.respond(
                    local(
                        AlgoliaError.response(
                            400, "A batch on several indices may not mix offline indices and upstream indices"
                        )))
                return true
            }
            offlineWrite(route, request, out, indices: Array(Set(names)).sorted())
            return true
        default:
            guard let index = route.index else { return false }
            if registry.isOffline(index) {
                offlineWrite(route, request, out, indices: [index])
                return true
            }
            if let mirror = writer.mirrors[index], route.isWrite,
                configuration.algolia.indices[index]?.offlineWrites == .queue
            {
                return queuedWrite(route, request, out, mirror: mirror)
            }
            return false
        }
    }

    static func batchIndexNames(_ body: [UInt8]) -> [String] {
        guard let json = try? JSON.parse(body), let requests = json["requests"]?.arrayValue else { return [] }
        return requests.map { $0["indexName"]?.stringValue ?? "" }
    }

    // MARK: - Access

    /// Checks the caller's key for `acl` on every index of `indices` (offline ones).
    private func authorize(_ request: HTTPRequest, _ indices: [String], _ acl: AlgoliaACL) -> HTTPResponse? {
        let credentials = AlgoliaCredentials(request)
        guard let key = credentials.apiKey, !key.isEmpty, credentials.appId != nil else {
            return AlgoliaError.response(403, "Invalid Application-ID or API key")
        }
        for index in indices {
            guard
                let allowed = registry.configuration(for: index)?.apiKeys
                    ?? registry.lookup(index).flatMap({
                        if case .keys(let k) = $0.access { return k }
                        return nil
                    })
            else { continue }
            guard let acls = allowed[key] else {
                return AlgoliaError.response(403, "Invalid Application-ID or API key")
            }
            guard acls.contains(acl) else {
                return AlgoliaError.response(403, "Method not allowed with this API key")
            }
        }
        return nil
    }

    // MARK: - Offline indices

    private func offlineWrite(
        _ route: WriteRoute, _ request: HTTPRequest, _ out: any Responder, indices: [String]
    ) {
        var checked = indices
        if case .operation = route, let destination = Self.destination(request.body) {
            checked.append(destination)
        }
        var acls: Set<AlgoliaACL> = [route.acl]
        switch route {
        case .batch, .multiBatch:
            // Each action needs its own ACL (the body is small next to what the writer does with it); a
            // batch without actions still needs a known key with the route's ACL.
            if let body = try? JSON.parse(request.body) {
                let perAction = WritePlans.acls(ofBatch: body)
                if !perAction.isEmpty { acls = perAction }
            }
        default: break
        }
        for acl in acls.sorted(by: { $0.rawValue < $1.rawValue }) {
            if let refusal = authorize(request, checked, acl) {
                out.respond(local(refusal))
                return
            }
        }
        switch route {
        case .getSynonym(let index, let id):
            guard
                let synonym = writer.current(index)?.synonyms.first(where: {
                    WritePlans.objectID($0["objectID"]) == id
                })
            else {
                out.respond(local(AlgoliaError.response(404, "Synonym set does not exist")))
                return
            }
            out.respond(local(.json(200, synonym.serialized())))
            return
        case .getRule(let index, let id):
            guard let rule = writer.current(index)?.getRule(id) else {
                out.respond(local(AlgoliaError.response(404, "ObjectID does not exist")))
                return
            }
            out.respond(local(.json(200, rule.serialized())))
            return
        default: break
        }
        let writer = self.writer
        let logger = self.logger
        writer.submit {
            let response: HTTPResponse
            do throws(AlgoliaError) {
                let plan = try Self.plan(route, request, writer: writer)
                do {
                    let ids = try writer.commit(plan.steps, taskIndices: plan.taskIndices)
                    response = plan.answer(ids)
                } catch {
                    logger.error("offline write not stored", metadata: ["error": "\(error)"])
                    response = AlgoliaError.response(503, "the write could not be stored: \(error)")
                }
            } catch {
                response = error.response()
            }
            out.respond(Self.local(response))
        }
    }

    static func local(_ response: HTTPResponse) -> HTTPResponse {
        var r = response
        r.headers.set(MirrorgateHeader.origin, "local")
        return r
    }

    private func local(_ response: HTTPResponse) -> HTTPResponse { Self.local(response) }

    /// The plan of any write call on offline indices, from the current indices (writer thread).
    static func plan(_ route: WriteRoute, _ request: HTTPRequest, writer: IndexWriter) throws(AlgoliaError)
        -> WritePlan
    {
        let current = { (name: String) in writer.current(name) }
        switch route {
        case .multiBatch:
            return try multiBatchPlan(request, current: current)
        case .operation(let source):
            return try operationPlan(
                request, source: source, current: current, isOffline: writer.registry.isOffline)
        default:
            let replicas = route.index.map { localReplicas($0, writer) } ?? []
            return try WritePlans.plan(route, request, current: current, replicas: replicas)
        }
    }

    /// The replicas of `index` (its `replicas` setting, `virtual(…)` unwrapped) that are local indices.
    static func localReplicas(_ index: String, _ writer: IndexWriter) -> [String] {
        guard let settings = writer.current(index)?.settingsJSON,
            let list = (settings["replicas"] ?? settings["slaves"])?.arrayValue
        else { return [] }
        return list.compactMap(\.stringValue).map { name in
            name.hasPrefix("virtual(") && name.hasSuffix(")") ? String(name.dropFirst(8).dropLast()) : name
        }.filter { $0 != index && writer.registry.lookup($0) != nil }
    }

    static func multiBatchPlan(_ request: HTTPRequest, current: (String) -> SearchIndex?) throws(AlgoliaError)
        -> WritePlan
    {
        let body = try WritePlans.parseBody(request)
        guard let requests = body["requests"]?.arrayValue else {
            throw AlgoliaError(400, "The batch body needs `requests`, an array")
        }
        var order: [String] = []
        var evaluators: [String: BatchEvaluator] = [:]
        var ids: [String] = []
        for item in requests {
            guard let name = item["indexName"]?.stringValue, !name.isEmpty else {
                throw AlgoliaError(400, "Each request of a batch on several indices needs an `indexName`")
            }
            if evaluators[name] == nil {
                order.append(name)
                evaluators[name] = BatchEvaluator(name: name, base: current(name))
            }
            let (id, _) = try WritePlans.apply(item, to: &evaluators[name]!)
            if let id { ids.append(id) }
        }
        var plan = WritePlan { _ in AlgoliaError.response(500, "no answer") }
        plan.steps = order.map { .write($0, evaluators[$0]!.finish()) }
        plan.taskIndices = order
        let objectIDs = ids
        let names = order
        plan.answer = { tasks in
            var taskIDs = JSONObject()
            for name in names { taskIDs[name] = .int(tasks[name] ?? 0) }
            return WriteAnswer.json(
                200, ["taskID": .object(taskIDs), "objectIDs": .array(objectIDs.map { .string($0) })])
        }
        return plan
    }

    static func destination(_ body: [UInt8]) -> String? {
        (try? JSON.parse(body))?["destination"]?.stringValue
    }

    /// `POST /1/indexes/{source}/operation`: copy (whole, or only `scope`: settings, synonyms, rules,
    /// keeping the destination's records) or move, between offline indices.
    static func operationPlan(
        _ request: HTTPRequest, source: String, current: (String) -> SearchIndex?, isOffline: (String) -> Bool
    ) throws(AlgoliaError) -> WritePlan {
        let body = try WritePlans.object(WritePlans.parseBody(request), "The operation")
        guard let operation = body["operation"]?.stringValue, operation == "copy" || operation == "move"
        else {
            throw AlgoliaError(400, "operation must be copy or move")
        }
        guard let destination = body["destination"]?.stringValue, !destination.isEmpty else {
            throw AlgoliaError(400, "destination must be an index name")
        }
        guard destination != source else {
            throw AlgoliaError(400, "Source and destination are the same index")
        }
        guard isOffline(destination) else {
            throw AlgoliaError(
                400,
                "\(destination) is not an offline index (algolia.offlineIndices): a local index is copied or moved only to another"
            )
        }
        var scope: Set<String>?
        if let value = body["scope"], !value.isNull {
            guard let list = value.arrayValue?.compactMap(\.stringValue),
                list.count == value.arrayValue?.count,
                list.allSatisfy({ ["settings", "synonyms", "rules"].contains($0) })
            else { throw AlgoliaError(400, "scope must be a list of settings, synonyms, rules") }
            scope = list.isEmpty ? nil : Set(list)
        }
        let index = current(source)
        var plan = WritePlan { WriteAnswer.stamped("updatedAt", task: $0[source]!) }
        plan.taskIndices = [source]
        if operation == "move" {
            if index != nil { plan.steps = [.move(from: source, to: destination)] }
        } else if let scope {
            var write = IndexWrite()
            if scope.contains("settings") { write.settings = index?.settingsJSON ?? .object(JSONObject()) }
            if scope.contains("synonyms") { write.synonyms = index?.synonyms ?? [] }
            if scope.contains("rules") { write.rules = index?.rules ?? [] }
            plan.steps = [.write(destination, write)]
        } else if index != nil {
            plan.steps = [.copy(from: source, to: destination)]
        } else {
            // Copying an index that does not exist gives an empty destination.
            plan.steps = [.delete(destination), .write(destination, IndexWrite())]
        }
        return plan
    }

    // MARK: - Tasks

    /// `GET …/task/{id}`: the gateway's task; a replayed one follows the upstream's task.
    private func task(_ id: Int64, _ request: HTTPRequest, _ out: any Responder) {
        guard let (index, state) = writer.tasks.lookup(id) else {
            out.respond(local(AlgoliaError.response(404, "Task \(id) does not exist")))
            return
        }
        @Sendable func answer(_ published: Bool) -> HTTPResponse {
            Self.local(
                .json(
                    200,
                    #"{"status":"\#(published ? "published" : "notPublished")","pendingTask":\#(!published)}"#
                ))
        }
        switch state {
        case .published: out.respond(answer(true))
        case .queued: out.respond(answer(false))
        case .replayed(let upstreamTask):
            guard let upstream else {
                out.respond(answer(false))
                return
            }
            var asked = request
            asked.target = "/1/indexes/\(FormCodec.percentEncode(index))/task/\(upstreamTask)"
            let tasks = writer.tasks
            var hooks = ForwardHooks()
            hooks.onUnavailable = { out.respond(answer(false)) }
            upstream.forward(
                asked,
                CaptureResponder { response in
                    if case .bytes(let bytes) = response.body, response.status == 200,
                        (try? JSON.parse(bytes))?["status"]?.stringValue == "published"
                    {
                        try? tasks.publish(id)
                        out.respond(answer(true))
                    } else {
                        out.respond(answer(false))
                    }
                }, hooks: hooks)
        }
    }

    // MARK: - Mirrored indices

    /// A write to a mirrored index with `offlineWrites: queue`. While the upstream is believed reachable
    /// and nothing of this index waits, it is forwarded; if it then certainly did not reach the upstream
    /// (connection refused, name not resolved, connect timeout: `onNotSent`), it is queued as below,
    /// whatever the tracker said when it came. A forwarded write that may have reached the upstream (sent,
    /// then no answer) gets `unavailableStatus` and is not queued. Otherwise it is applied to the mirror and
    /// queued at once.
    private func queuedWrite(
        _ route: WriteRoute, _ request: HTTPRequest, _ out: any Responder, mirror: MirroredIndex
    )
        -> Bool
    {
        guard let queue else { return false }
        let index = mirror.settings.name
        let reachable = upstream?.reachability.isReachable ?? false
        if reachable && !queue.hasPending(index) {
            guard let paths, Self.isQueueable(route) else { return false }
            mirror.touch()
            let writes = self
            paths.forward(
                request, out, mirrored: [index], tag: false, onUnavailable: nil,
                onNotSent: {
                    writes.logger.notice(
                        "write not sent to the upstream: queued", metadata: ["index": "\(index)"])
                    writes.enqueue(route, request, out, mirror: mirror, queue: queue)
                })
            return true
        }
        enqueue(route, request, out, mirror: mirror, queue: queue)
        return true
    }

    /// Whether a write of `route` to a mirrored index can be queued (deleting, copying or moving the
    /// index cannot).
    static func isQueueable(_ route: WriteRoute) -> Bool {
        switch route {
        case .deleteIndex, .operation: false
        default: true
        }
    }

    /// Applies a write to the mirror and queues it, answering through `out` (or refuses it with
    /// `unavailableStatus` when it cannot be queued).
    private func enqueue(
        _ route: WriteRoute, _ request: HTTPRequest, _ out: any Responder, mirror: MirroredIndex,
        queue: WriteQueue
    ) {
        let index = mirror.settings.name
        let unavailable = configuration.algolia.unavailableStatus
        func refuse(_ message: String) {
            out.respond(local(AlgoliaError.response(unavailable, "upstream unavailable: \(message)")))
        }
        guard Self.isQueueable(route) else {
            return refuse("deleting, copying or moving the mirrored index \(index) cannot be queued")
        }
        let credentials = AlgoliaCredentials(request)
        guard let appId = configuration.algolia.appId, credentials.appId == appId,
            let key = credentials.apiKey,
            !key.isEmpty,
            key == configuration.algolia.apiKey || keys.isAccepted(appId: appId, index: index, key: key)
        else {
            return refuse(
                "the write to \(index) was not queued: the upstream has not accepted this application ID and API key for it before"
            )
        }
        guard mirror.current != nil else {
            return refuse("index \(index) has no offline data: the write cannot be applied locally")
        }
        let writer = self.writer
        let logger = self.logger
        let target = Self.replayTarget(request)
        writer.submit {
            let response: HTTPResponse
            do throws(AlgoliaError) {
                let plan = try WritePlans.plan(route, request, current: { writer.current($0) }, replicas: [])
                let entry = WriteQueue.Entry(
                    index: index, method: plan.replayMethod ?? request.method,
                    target: plan.replayPath ?? target, body: plan.replayBody ?? request.body, appId: appId,
                    apiKey: key, idempotent: plan.idempotent)
                do {
                    let ids = try writer.commit(plan.steps, taskIndices: [index], queued: true) { db, ids in
                        try queue.insert(entry, task: ids[index]!, in: db)
                    }
                    queue.queued(index)
                    response = plan.answer(ids)
                } catch {
                    logger.error(
                        "queued write not stored", metadata: ["index": "\(index)", "error": "\(error)"])
                    response = AlgoliaError.response(
                        unavailable, "upstream unavailable, and the write could not be queued")
                }
            } catch {
                response = error.response()
            }
            out.respond(Self.local(response))
        }
    }

    /// The request's path and query without credentials (they are stored apart and sent as headers).
    static func replayTarget(_ request: HTTPRequest) -> String {
        let kept = request.queryItems.filter { item in
            !["x-algolia-application-id", "x-algolia-api-key", "x-algolia-agent"].contains(
                item.name.lowercased())
        }
        guard !kept.isEmpty else { return String(request.path) }
        return String(request.path) + "?"
            + kept.map { FormCodec.percentEncode($0.name) + "=" + FormCodec.percentEncode($0.value) }.joined(
                separator: "&")
    }
}
