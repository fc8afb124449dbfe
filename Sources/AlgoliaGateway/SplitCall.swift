import GatewayConfig
import HTTPCore
import JSONCore
import Synchronization

/// A multi-query or getObjects naming local (offline or mirrored) and remote-only indices: the parts
/// are answered where they can be — offline indices and mirrors that are `offlineOnly` or whose
/// upstream is down locally, the rest by one forwarded sub-request — and merged in request order.
/// A mirrored part whose remote answer fails falls back to the mirror; a remote-only part that cannot be
/// answered fails the whole call with the unavailable status, as Algolia would.
struct SplitCall: Sendable {
    let paths: AnswerPaths
    let catalog: LocalCatalog
    /// The strategy the request asked for (`X-Mirrorgate-Strategy`), if any.
    let strategy: RequestStrategy?

    /// Answers `out` once both parts are in (or the first failure).
    func start(_ request: HTTPRequest, _ route: AlgoliaRoute, _ out: any Responder) {
        guard let body = try? JSON.parse(request.body), case .object(let envelope) = body,
            let parts = envelope["requests"]?.arrayValue
        else {
            out.respond(AlgoliaError.response(400, "Invalid JSON body: expected an object with `requests`"))
            return
        }
        let paths = self.paths
        let reachable = paths.isReachable
        let catalog = self.catalog
        func isLocal(_ part: JSON) -> Bool {
            guard let name = part["indexName"]?.stringValue else { return false }
            if catalog.offline.isOffline(name) { return true }
            guard let mirror = catalog.mirror(for: name) else { return false }
            return (strategy ?? mirror.settings.strategy) == .offlineOnly || !reachable
        }
        let localIdx = parts.indices.filter { isLocal(parts[$0]) }
        let remoteIdx = parts.indices.filter { !isLocal(parts[$0]) }
        let merger = Merger(count: parts.count, perResultOrigin: route == .multiQuery, out: out)
        @Sendable func subRequest(_ indices: [Int]) -> HTTPRequest {
            var e = envelope
            e["requests"] = .array(indices.map { parts[$0] })
            var r = request
            r.body = JSON.object(e).serializedBytes()
            r.headers.set("Content-Length", String(r.body.count))
            return r
        }
        let answerLocally: @Sendable ([Int]) -> Void = { indices in
            paths.pool.submit {
                let response = paths.local.answer(
                    subRequest(indices), route: route, isAbandoned: { out.isAbandoned })
                merger.fill(indices, response: response, origin: "local")
            }
        }
        if !localIdx.isEmpty { answerLocally(localIdx) } else { merger.skipLocal() }
        guard !remoteIdx.isEmpty else {
            merger.skipRemote()
            return
        }
        let remoteNames = remoteIdx.compactMap { parts[$0]["indexName"]?.stringValue }
        let capture = CaptureResponder(streamRefusal: tooLargeToCapture) { response in
            merger.fill(remoteIdx, response: response, origin: "remote")
        }
        paths.forward(
            subRequest(remoteIdx), capture, mirrored: remoteNames.filter { catalog.mirror(for: $0) != nil },
            tag: false
        ) {
            if remoteNames.allSatisfy({ catalog.mirror(for: $0) != nil }) {
                answerLocally(remoteIdx)
            } else {
                merger.fail(
                    AlgoliaError.response(
                        paths.unavailableStatus,
                        "upstream unavailable and no local data for a part of this call"))
            }
        }
    }
}

/// Collects the two halves of a split multi-query or getObjects and answers once both are in.
final class Merger: Sendable {
    private struct State {
        var results: [JSON?]
        var pending = 2
        var anyLocal = false
        var failed = false
    }
    private let state: Mutex<State>
    private let perResultOrigin: Bool
    private let out: any Responder

    init(count: Int, perResultOrigin: Bool, out: any Responder) {
        state = Mutex(State(results: Array(repeating: nil, count: count)))
        self.perResultOrigin = perResultOrigin
        self.out = out
    }

    func skipLocal() { done { _ in } }
    func skipRemote() { done { _ in } }

    func fail(_ response: HTTPResponse) {
        let first = state.withLock { s -> Bool in
            defer { s.failed = true }
            return !s.failed
        }
        if first { out.respond(response) }
    }

    /// Places one half's results (or relays its error as the whole call's answer).
    func fill(_ indices: [Int], response: HTTPResponse, origin: String) {
        guard case .bytes(let body) = response.body, (200..<300).contains(response.status),
            let json = try? JSON.parse(body), let results = json["results"]?.arrayValue,
            results.count == indices.count
        else {
            fail(response)
            return
        }
        done { s in
            for (i, result) in zip(indices, results) {
                if perResultOrigin, case .object = result {
                    s.results[i] = OriginTag.json(result, origin: origin)
                } else {
                    s.results[i] = result
                }
            }
            if origin == "local" { s.anyLocal = true }
        }
    }

    private func done(_ update: (inout State) -> Void) {
        let finished = state.withLock { s -> State? in
            update(&s)
            s.pending -= 1
            return s.pending == 0 && !s.failed ? s : nil
        }
        guard let finished else { return }
        let envelope: JSON = [
            "origin": .string(finished.anyLocal ? "local" : "remote"),
            "results": .array(finished.results.map { $0 ?? .null }),
        ]
        var response = HTTPResponse.json(200, "")
        response.body = .bytes(envelope.serializedBytes())
        response.headers.set(MirrorgateHeader.origin, finished.anyLocal ? "local" : "remote")
        out.respond(response)
    }
}
