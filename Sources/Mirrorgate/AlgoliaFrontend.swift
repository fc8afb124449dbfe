import AlgoliaGateway
import Dispatch
import Foundation
import GatewayConfig
import GatewaySupport
import HTTPCore
import JSONCore
import Logging
import SearchEngine
import Synchronization
import Upstream

/// Everything under `/1/`: offline indices answered locally; mirrored indices by their request strategy
/// (forward, fall back to the local mirror on failure or timeout, preventive NDJSON streams); anything
/// else forwarded unchanged. Never answers a 5xx.
final class AlgoliaFrontend: Sendable {
    let configuration: MirrorgateConfiguration
    let forwarder: AlgoliaForwarder?
    let offline: OfflineIndexRegistry
    let mirrors: MirrorCoordinator
    let keys: KeyMemory
    let pool: WorkerPool
    let logger: Logger
    private let offlineLocal: LocalAlgolia
    private let mirrorLocal: LocalAlgolia

    init(
        configuration: MirrorgateConfiguration, forwarder: AlgoliaForwarder?, offline: OfflineIndexRegistry,
        mirrors: MirrorCoordinator, keys: KeyMemory, pool: WorkerPool, logger: Logger
    ) {
        self.configuration = configuration
        self.forwarder = forwarder
        self.offline = offline
        self.mirrors = mirrors
        self.keys = keys
        self.pool = pool
        self.logger = logger
        offlineLocal = LocalAlgolia(lookup: { offline.lookup($0) })
        let appId = configuration.algolia.appId
        let ownKey = configuration.algolia.apiKey
        let mirrorMap = mirrors.mirrors
        mirrorLocal = LocalAlgolia(lookup: { name in
            if let o = offline.lookup(name) { return o }
            guard let m = mirrorMap[name] else { return nil }
            return OfflineIndex(
                index: m.current, apiKeys: nil,
                authorize: { creds in
                    guard let appId, creds.appId == appId, let key = creds.apiKey else { return false }
                    // The operator's own sync key (algolia.apiKey) is trusted; other keys only once the
                    // upstream has accepted them for this index.
                    return key == ownKey || keys.isAccepted(appId: appId, index: name, key: key)
                })
        })
    }

    private static let localRoutes: Set<String> = [
        "search", "multiQuery", "browse", "getObject", "getObjects", "getSettings", "facetSearch",
        "synonymSearch",
    ]

    private func kind(_ route: AlgoliaRoute) -> String {
        switch route {
        case .search: "search"
        case .multiQuery: "multiQuery"
        case .browse: "browse"
        case .getObject: "getObject"
        case .getObjects: "getObjects"
        case .getSettings: "getSettings"
        case .facetSearch: "facetSearch"
        case .synonymSearch: "synonymSearch"
        default: "other"
        }
    }

    /// Handles one request; never blocks (local work goes to the pool, upstream work to the curl loop).
    func handle(_ request: HTTPRequest, _ out: any Responder) {
        let route = AlgoliaRoute.parse(method: request.method, path: request.path)
        let names: [String] =
            route.index.map { [$0] }
            ?? ((route == .multiQuery || route == .getObjects) ? Self.indexNames(request.body) : [])
        if !names.isEmpty && names.allSatisfy({ offline.lookup($0) != nil }) {
            pool.submit { out.respond(self.offlineLocal.answer(request, route: route)) }
            return
        }
        let mirrored = names.filter { mirrors.mirrors[$0] != nil }
        let localCapable =
            !mirrored.isEmpty && Self.localRoutes.contains(kind(route))
            && names.allSatisfy { offline.lookup($0) != nil || mirrors.mirrors[$0] != nil }
        for name in mirrored { mirrors.mirrors[name]?.touch() }
        let anyLocal = names.contains { offline.lookup($0) != nil || mirrors.mirrors[$0] != nil }
        if (route == .multiQuery || route == .getObjects) && anyLocal && !localCapable {
            splitAndMerge(request, route: route, out)
            return
        }
        guard localCapable else {
            forward(request, out, mirrored: mirrored, tag: false, onUnavailable: nil)
            return
        }
        let first = mirrors.mirrors[mirrored[0]]!.settings
        let requested = request.headers[MirrorgateHeader.strategy].flatMap {
            MirrorSettings.Strategy(rawValue: $0)
        }
        let wantsStream =
            requested == .preventive || (request.headers["Accept"]?.contains("application/x-ndjson") ?? false)
        let strategy = requested ?? first.strategy
        let tag = ["search", "multiQuery", "getObjects"].contains(kind(route))
        let reachable = forwarder?.reachability.isReachable ?? false
        if wantsStream && kind(route) == "search" || wantsStream && kind(route) == "multiQuery" {
            preventive(
                request, out, route: route, mirrored: mirrored, delay: first.preventiveDelay,
                reachable: reachable)
            return
        }
        switch strategy {
        case .offlineOnly:
            answerLocally(request, route, out)
        case .onlineOnly:
            forward(request, out, mirrored: mirrored, tag: tag, onUnavailable: nil)
        case .fallbackOnFailure, .fallbackOnTimeout, .preventive:
            if !reachable || forwarder == nil {
                answerLocally(request, route, out)
                return
            }
            if route == .browse(index: mirrored[0]), Self.isLocalCursor(request) {
                answerLocally(request, route, out)
                return
            }
            let race = FirstWins(out)
            forward(request, race, mirrored: mirrored, tag: tag) { [self] in
                answerLocally(request, route, race)
            }
            if strategy != .fallbackOnFailure {
                let wait = strategy == .preventive ? first.preventiveDelay : first.offlineFallbackTimeout
                Scheduler.shared.schedule(after: wait) { [self] in
                    if !race.isAnswered { answerLocally(request, route, race) }
                }
            }
        }
    }

    static func indexNames(_ body: [UInt8]) -> [String] {
        guard let json = try? JSON.parse(body), let requests = json["requests"]?.arrayValue else { return [] }
        return requests.compactMap { $0["indexName"]?.stringValue }
    }

    /// A browse cursor the local engine issued (base64 of a JSON object with a generation).
    static func isLocalCursor(_ request: HTTPRequest) -> Bool {
        let cursor =
            request.queryValue("cursor")
            ?? (try? JSON.parse(request.body))?["cursor"]?.stringValue
        guard let cursor, !cursor.isEmpty else { return false }
        var b64 = cursor.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        b64 += String(repeating: "=", count: (4 - b64.count % 4) % 4)
        guard let data = Data(base64Encoded: b64), let json = try? JSON.parse([UInt8](data)) else {
            return false
        }
        return json["g"] != nil && json["o"] != nil
    }

    private func answerLocally(_ request: HTTPRequest, _ route: AlgoliaRoute, _ out: any Responder) {
        pool.submit { out.respond(self.mirrorLocal.answer(request, route: route)) }
    }

    private func forward(
        _ request: HTTPRequest, _ out: any Responder, mirrored: [String], tag: Bool,
        isCancelled: (@Sendable () -> Bool)? = nil, onUnavailable: (() -> Void)?
    ) {
        guard let forwarder else {
            if let onUnavailable { return onUnavailable() }
            out.respond(
                AlgoliaError.response(
                    configuration.algolia.unavailableStatus,
                    "upstream unavailable: no Algolia host configured (algolia.hosts or algolia.appId)"))
            return
        }
        var hooks = AlgoliaForwarder.Hooks()
        hooks.originHeader = !mirrored.isEmpty
        hooks.tagBody = tag
        hooks.tagResults = tag && request.path.hasSuffix("/queries")
        hooks.onUnavailable = onUnavailable
        hooks.isCancelled = isCancelled
        if !mirrored.isEmpty, let appId = configuration.algolia.appId {
            let credentials = AlgoliaCredentials(request)
            let keys = self.keys
            hooks.onRelayed = { status in
                guard (200..<300).contains(status), credentials.appId == appId, let key = credentials.apiKey
                else {
                    return
                }
                for name in mirrored { keys.accept(appId: appId, index: name, key: key) }
            }
        }
        forwarder.forward(request, out, hooks: hooks)
    }

    // MARK: mixed multi-queries and getObjects

    /// A multi-query or getObjects naming local (offline or mirrored) and remote-only indices: the parts
    /// are answered where they can be — offline indices and mirrors that are `offlineOnly` or whose
    /// upstream is down locally, the rest by one forwarded sub-request — and merged in request order.
    /// A mirrored part whose remote answer fails falls back to the mirror; a remote-only part that cannot be
    /// answered fails the whole call with the unavailable status, as Algolia would.
    private func splitAndMerge(_ request: HTTPRequest, route: AlgoliaRoute, _ out: any Responder) {
        guard let body = try? JSON.parse(request.body), case .object(let envelope) = body,
            let parts = envelope["requests"]?.arrayValue
        else {
            out.respond(AlgoliaError.response(400, "Invalid JSON body: expected an object with `requests`"))
            return
        }
        let reachable = forwarder?.reachability.isReachable ?? false
        let strategy = request.headers[MirrorgateHeader.strategy].flatMap {
            MirrorSettings.Strategy(rawValue: $0)
        }
        func isLocal(_ part: JSON) -> Bool {
            guard let name = part["indexName"]?.stringValue else { return false }
            if offline.lookup(name) != nil { return true }
            guard let mirror = mirrors.mirrors[name] else { return false }
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
        let answerLocally: @Sendable ([Int]) -> Void = { [self] indices in
            pool.submit {
                let response = self.mirrorLocal.answer(subRequest(indices), route: route)
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
        forward(
            subRequest(remoteIdx), capture, mirrored: remoteNames.filter { mirrors.mirrors[$0] != nil },
            tag: false
        ) {
            [self] in
            if remoteNames.allSatisfy({ mirrors.mirrors[$0] != nil }) {
                answerLocally(remoteIdx)
            } else {
                merger.fail(
                    AlgoliaError.response(
                        configuration.algolia.unavailableStatus,
                        "upstream unavailable and no local data for a part of this call"))
            }
        }
    }

    // MARK: preventive offline search

    private func preventive(
        _ request: HTTPRequest, _ out: any Responder, route: AlgoliaRoute, mirrored: [String],
        delay: Duration,
        reachable: Bool
    ) {
        let timeout = configuration.algolia.timeout + delay + .seconds(2)
        let stream = ResponseStream(timeout: timeout)
        var headers = HTTPHeaders()
        headers.add("Content-Type", "application/x-ndjson")
        headers.add(MirrorgateHeader.origin, reachable ? "remote" : "local")
        headers.add("Cache-Control", "no-store")
        out.respond(HTTPResponse(status: 200, headers: headers, body: .stream(stream)))
        let state = PreventiveState(stream: stream)
        let localLine: @Sendable () -> [UInt8] = { [self] in
            let r = mirrorLocal.answer(request, route: route)
            guard case .bytes(let body) = r.body else { return [] }
            if r.status == 200 { return body + [0x0A] }
            let message = (try? JSON.parse(body))?["message"]?.stringValue ?? "local answer failed"
            let line: JSON = [
                "origin": "local", "status": .int(Int64(r.status)), "message": .string(message),
            ]
            return line.serializedBytes() + [0x0A]
        }
        if !reachable || forwarder == nil {
            pool.submit {
                stream.write(localLine())
                stream.finish()
            }
            return
        }
        let capture = CaptureResponder(streamRefusal: tooLargeToCapture) { response in
            var line: [UInt8]
            if case .bytes(let body) = response.body, (200..<300).contains(response.status) {
                line = body
            } else {
                var message = "upstream answered \(response.status)"
                if case .bytes(let body) = response.body,
                    let m = (try? JSON.parse(body))?["message"]?.stringValue
                {
                    message = m
                }
                let status =
                    (400..<500).contains(response.status)
                    ? response.status : self.configuration.algolia.unavailableStatus
                let j: JSON = [
                    "origin": "remote", "status": .int(Int64(status)), "message": .string(message),
                ]
                line = j.serializedBytes()
            }
            state.remote(line + [0x0A])
        }
        let unavailable: JSON = [
            "origin": "remote", "status": .int(Int64(configuration.algolia.unavailableStatus)),
            "message": "upstream unavailable",
        ]
        forward(
            request, capture, mirrored: mirrored, tag: true, isCancelled: { stream.isClosed },
            onUnavailable: { state.remote(unavailable.serializedBytes() + [0x0A]) })
        Scheduler.shared.schedule(after: delay) { [self] in
            guard state.delayExpired() else { return }
            pool.submit { state.local(localLine()) }
        }
    }
}

/// What a capture gets instead of a streamed remote answer (a preventive stream or a split call needs the
/// whole body).
let tooLargeToCapture = HTTPResponse(
    status: 424,
    body: .bytes(Array(#"{"message":"remote answer too large for a preventive stream"}"#.utf8)))

/// The order of a preventive stream: remote alone if it comes before the delay; else the local line
/// at the delay, then the remote line (or its error); then the end.
final class PreventiveState: Sendable {
    private enum Phase { case waiting, localPending, localSent, done }
    private struct S {
        var phase = Phase.waiting
        var heldRemote: [UInt8]?
    }
    private let s = Mutex(S())
    private let stream: ResponseStream
    init(stream: ResponseStream) { self.stream = stream }

    /// The delay expired: true if the local line should be computed now.
    func delayExpired() -> Bool {
        s.withLock { st in
            guard st.phase == .waiting else { return false }
            st.phase = .localPending
            return true
        }
    }

    func local(_ line: [UInt8]) {
        s.withLock { st in
            guard st.phase == .localPending else { return }
            stream.write(line)
            if let held = st.heldRemote {
                stream.write(held)
                stream.finish()
                st.phase = .done
            } else {
                st.phase = .localSent
            }
        }
    }

    func remote(_ line: [UInt8]) {
        s.withLock { st in
            switch st.phase {
            case .waiting, .localSent:
                st.phase = .done
                stream.write(line)
                stream.finish()
            case .localPending:
                st.heldRemote = line
            case .done:
                break
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
