import Foundation
import HTTPCore
import JSONCore
import ODataCore
import Storage

extension ODataOfflineWriter {
    /// Blocking: a `$batch` answered locally, in order: each changeset (or change outside one) applied to
    /// the mirror and queued in one transaction (all or nothing), reads answered from the mirror; a
    /// request whose `dependsOn` failed gets 424. A batch that only reads takes the same way.
    func batchResponse(to request: HTTPRequest) -> HTTPResponse {
        let version = self.version
        let isJSON = (request.headers["Content-Type"] ?? "").lowercased().hasPrefix("application/json")
        let items: [BatchItem]
        do {
            items = try ODataBatchCodec.items(request)
        } catch {
            switch error {
            case .malformed(let why):
                return ODataServiceError.response(
                    400, code: "BadRequest", "invalid $batch: \(why)", version: version)
            }
        }
        guard let m = mirror.model else {
            return ODataServiceError.response(
                503, code: "UpstreamUnavailable",
                "the upstream is unreachable and the service is not mirrored",
                version: version)
        }
        let gatewayRoot = mount.gatewayRoot(for: request)
        var references: [String: String] = [:]
        var failed = Set<String>()
        /// Per item: responses with their ids (one for a failed changeset).
        var answers: [(changeset: Bool, parts: [(id: String?, response: HTTPResponse)])] = []
        for item in items {
            switch item {
            case .single(let part):
                if part.dependsOn.contains(where: failed.contains) {
                    if let id = part.contentID { failed.insert(id) }
                    answers.append(
                        (false, [(part.contentID, failedDependency(version))]))
                    continue
                }
                if part.method == "GET" {
                    let read = ODataBatchCodec.request(
                        part, url: ODataBatchCodec.resolveURL(part.url, references), outer: request,
                        mount: mount.path, gatewayRoot: gatewayRoot)
                    let r = reader.response(to: read)
                    if r.status >= 400, let id = part.contentID { failed.insert(id) }
                    answers.append((false, [(part.contentID, r)]))
                    continue
                }
                let result = applyChangeset([part], model: m, request: request, references: &references)
                if result.count == 1, result[0].response.status >= 400, let id = part.contentID {
                    failed.insert(id)
                }
                answers.append((false, result))
            case .changeset(let parts, let group):
                if parts.contains(where: { $0.dependsOn.contains(where: failed.contains) }) {
                    for p in parts { if let id = p.contentID { failed.insert(id) } }
                    if let group { failed.insert(group) }
                    answers.append((true, [(parts.first?.contentID, failedDependency(version))]))
                    continue
                }
                let result = applyChangeset(parts, model: m, request: request, references: &references)
                if result.count == 1, result[0].response.status >= 400 {
                    for p in parts { if let id = p.contentID { failed.insert(id) } }
                    if let group { failed.insert(group) }
                }
                answers.append((true, result))
            }
        }
        return ODataBatchCodec.response(answers, json: isJSON, items: items, version: version)
    }

    private func failedDependency(_ version: ODataVersion) -> HTTPResponse {
        ODataServiceError.response(
            424, code: "FailedDependency", "a request this one depends on failed", version: version)
    }

    /// Applies the requests of one changeset to the mirror and queues them, in one transaction; the
    /// responses per request, or one error response when any of them failed (nothing applied or queued).
    func applyChangeset(
        _ parts: [BatchPart], model m: MirrorModel, request: HTTPRequest, references: inout [String: String]
    ) -> [(id: String?, response: HTTPResponse)] {
        let gatewayRoot = mount.gatewayRoot(for: request)
        let changesetID = parts.count > 1 ? UUID().uuidString.lowercased() : nil
        var local = references
        do {
            let outcomes = try queue.appendAll { db -> ([QueuedRequest], [LocalWriteOutcome]) in
                var entries: [QueuedRequest] = []
                var outcomes: [LocalWriteOutcome] = []
                for (index, part) in parts.enumerated() {
                    let url = ODataBatchCodec.resolveURL(part.url, local)
                    let target = ODataBatchCodec.request(
                        part, url: url, outer: request, mount: mount.path, gatewayRoot: gatewayRoot
                    )
                    .target
                    var relativeTarget = Substring(target.dropFirst(mount.path.count))
                    var query = ""
                    if let qi = relativeTarget.firstIndex(of: "?") {
                        query = String(relativeTarget[relativeTarget.index(after: qi)...])
                        relativeTarget = relativeTarget[..<qi]
                    }
                    var headers = HTTPHeaders()
                    for (k, v) in part.headers { headers.set(k, v) }
                    // The batch's own credentials and options stand for its parts unless a part has its own.
                    for name in ["Authorization", "Cookie"] + ODataRequestOptions.headers
                    where headers[name] == nil {
                        if let value = request.headers[name] { headers.set(name, value) }
                    }
                    var method = part.method
                    if method == "POST", let tunneled = headers["X-HTTP-Method"], !tunneled.isEmpty {
                        method = tunneled.uppercased()
                    }
                    let input = LocalWriteInput(
                        method: method, path: String(relativeTarget), query: query,
                        body: ODataBatchCodec.resolveBody(part.body, local), headers: headers,
                        gatewayRoot: gatewayRoot)
                    var (entry, outcome) = try apply(MirrorWriter(db: db, model: m), input)
                    entry.changeset = changesetID
                    entry.contentID = part.contentID ?? String(index + 1)
                    entries.append(entry)
                    outcomes.append(outcome)
                    if let id = part.contentID {
                        local[id] = outcome.createdKey.map { outcome.set + $0 } ?? String(relativeTarget)
                    }
                }
                return (entries, outcomes)
            }
            references = local
            return zip(parts, outcomes).map { part, outcome in
                var response = answer(outcome, request: request)
                response.headers.remove(MirrorgateHeader.origin)
                return (part.contentID, response)
            }
        } catch let e as ODataServiceError {
            return [(parts.first?.contentID, e.response(version: version))]
        } catch {
            return [
                (
                    parts.first?.contentID,
                    ODataServiceError.response(
                        500, code: "InternalError", "the changeset could not be stored: \(error)",
                        version: version)
                )
            ]
        }
    }
}
