import Foundation
import GatewayConfig
import GatewaySupport
import HTTPCore
import JSONCore

/// The two ways any call can be answered, shared by every strategy: forwarded to the upstream (the
/// keys it accepts remembered for the mirrored indices named) or answered by ``LocalAlgolia`` on the
/// worker pool.
struct AnswerPaths: Sendable {
    let upstream: (any AlgoliaUpstream)?
    let local: LocalAlgolia
    let pool: WorkerPool
    let keys: KeyMemory
    /// `algolia.appId`: keys are remembered only for the configured application.
    let appId: String?
    let unavailableStatus: Int

    /// Whether the upstream is believed to answer (false without one).
    var isReachable: Bool { upstream?.reachability.isReachable ?? false }

    /// Answers `request` from the local indices on the worker pool (not at all when nobody waits for
    /// the answer any more: the client is gone, or another answer won).
    func answerLocally(_ request: HTTPRequest, _ route: AlgoliaRoute, _ out: any Responder) {
        pool.submit {
            if out.isAbandoned { return }
            out.respond(local.answer(request, route: route, isAbandoned: { out.isAbandoned }))
        }
    }

    /// Forwards `request`. For mirrored indices the answer is marked remote and a 2xx remembers the
    /// caller's key for them; `tag` puts `"origin":"remote"` in the envelope; `onUnavailable` replaces the
    /// unavailable answer (also without any upstream); `onNotSent` replaces it when the request certainly
    /// reached no host (also without any upstream).
    func forward(
        _ request: HTTPRequest, _ out: any Responder, mirrored: [String], tag: Bool,
        isCancelled: (@Sendable () -> Bool)? = nil, onUnavailable: (@Sendable () -> Void)?,
        onNotSent: (@Sendable () -> Void)? = nil
    ) {
        guard let upstream else {
            if let onNotSent { return onNotSent() }
            if let onUnavailable { return onUnavailable() }
            out.respond(
                AlgoliaError.response(
                    unavailableStatus,
                    "upstream unavailable: no Algolia host configured (algolia.hosts or algolia.appId)"))
            return
        }
        var hooks = ForwardHooks()
        hooks.originHeader = !mirrored.isEmpty
        hooks.tagBody = tag
        hooks.tagResults = tag && request.path.hasSuffix("/queries")
        hooks.onUnavailable = onUnavailable
        hooks.onNotSent = onNotSent
        hooks.isCancelled = isCancelled
        // A mirrored index's answer (or one with a local fallback) is never relayed in part.
        hooks.wholeAnswer = !mirrored.isEmpty || onUnavailable != nil
        if !mirrored.isEmpty, let appId {
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
        upstream.forward(request, out, hooks: hooks)
    }
}

/// The request strategies of mirrored indices (SPEC §3, after the Offline SDK's `MirroredIndex`):
/// `onlineOnly` forwards; `offlineOnly` answers locally; `fallbackOnFailure` forwards and answers locally
/// when the upstream fails transiently (network error, 5xx, 429) or is known to be down;
/// `fallbackOnTimeout` also answers locally when the upstream has not answered within
/// `offlineFallbackTimeout`; `preventive` (or `Accept: application/x-ndjson`) streams the local answer
/// after `preventiveOfflineSearchDelay` and then the remote one. A request may choose its strategy with
/// `X-Mirrorgate-Strategy`. The first answer wins; a 4xx from the upstream is relayed, never replaced.
struct RequestStrategies: Sendable {
    let paths: AnswerPaths
    let catalog: LocalCatalog
    /// `algolia.timeout`: bounds a preventive stream.
    let readTimeout: Duration

    /// The strategy a request asked for with `X-Mirrorgate-Strategy`, if it names one.
    static func requested(_ request: HTTPRequest) -> RequestStrategy? {
        request.headers[MirrorgateHeader.strategy].flatMap { RequestStrategy(rawValue: $0) }
    }

    /// Answers a read call whose indices are all local and of which `mirrored` (not empty) are mirrored,
    /// by the strategy of the request or of the first mirrored index.
    func run(_ request: HTTPRequest, _ route: AlgoliaRoute, mirrored: [String], _ out: any Responder) {
        guard let first = catalog.mirror(for: mirrored[0])?.settings else { return }
        let requested = Self.requested(request)
        let wantsStream =
            requested == .preventive || (request.headers["Accept"]?.contains("application/x-ndjson") ?? false)
        let strategy = requested ?? first.strategy
        let tag = route.tagsEnvelope
        let reachable = paths.isReachable
        if wantsStream && route.streamsPreventively {
            PreventiveStream(paths: paths, readTimeout: readTimeout).start(
                request, out, route: route, mirrored: mirrored, delay: first.preventiveDelay,
                reachable: reachable)
            return
        }
        switch strategy {
        case .offlineOnly:
            paths.answerLocally(request, route, out)
        case .onlineOnly:
            paths.forward(request, out, mirrored: mirrored, tag: tag, onUnavailable: nil)
        case .fallbackOnFailure, .fallbackOnTimeout, .preventive:
            if !reachable || paths.upstream == nil {
                paths.answerLocally(request, route, out)
                return
            }
            if route == .browse(index: mirrored[0]), Self.isLocalCursor(request) {
                paths.answerLocally(request, route, out)
                return
            }
            let race = FirstWins(out)
            let paths = self.paths
            paths.forward(request, race, mirrored: mirrored, tag: tag) {
                paths.answerLocally(request, route, race)
            }
            if strategy != .fallbackOnFailure {
                let wait = strategy == .preventive ? first.preventiveDelay : first.offlineFallbackTimeout
                Scheduler.shared.schedule(after: wait) {
                    if !race.isAnswered { paths.answerLocally(request, route, race) }
                }
            }
        }
    }

    /// A multi-query or getObjects naming local and remote-only indices, answered in parts
    /// (``SplitCall``).
    func split(_ request: HTTPRequest, _ route: AlgoliaRoute, _ out: any Responder) {
        SplitCall(paths: paths, catalog: catalog, strategy: Self.requested(request)).start(
            request, route, out)
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
}
