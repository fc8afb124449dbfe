import AlgoliaGateway
import HTTPCore
import JSONCore
import Synchronization
import Upstream

/// A fake Algolia upstream for the request strategies' unit tests: each forwarded request gets the
/// outcome the script gives it, with the hooks applied as ``AlgoliaForwarder`` applies them (origin
/// header, `"origin":"remote"` in a 2xx envelope, per-result tags of multi-queries, `onRelayed`, a 5xx,
/// a 429 with a fallback, or a network error turned into `onUnavailable` or the unavailable answer, and a
/// request that reached no host into `onNotSent`).
/// Nothing leaves the process.
public final class ScriptedAlgoliaUpstream: AlgoliaUpstream {
    /// What the upstream does with one request.
    public indirect enum Outcome: Sendable {
        /// A host answers this (relayed as it is, tagged when 2xx).
        case answer(HTTPResponse)
        /// Every host answers this 5xx.
        case serverError(Int)
        /// A host answers 429 (a transient failure when the strategy has a fallback, else relayed).
        case rateLimited
        /// No host answers, and the request may have reached one (a connection reset after it was
        /// sent): the upstream is then known to be down.
        case networkError
        /// No host could be reached and nothing of the request was sent (connection refused): the
        /// upstream is then known to be down; `onNotSent` is called when set.
        case notSent
        /// No answer ever comes (the strategy's timer decides).
        case silent
        /// The outcome comes when the test opens `gate` (at once if it is open), unless the caller
        /// cancelled meanwhile: an order of events without timing.
        case held(Gate, Outcome)
    }

    /// Holds scripted outcomes until the test opens it.
    public final class Gate: Sendable {
        private let state = Mutex<(open: Bool, waiting: [@Sendable () -> Void])>((false, []))

        /// A closed gate.
        public init() {}

        /// Opens the gate: the held outcomes come now, later ones at once.
        public func open() {
            let waiting = state.withLock { s -> [@Sendable () -> Void] in
                s.open = true
                defer { s.waiting = [] }
                return s.waiting
            }
            for work in waiting { work() }
        }

        func whenOpen(_ work: @escaping @Sendable () -> Void) {
            let now = state.withLock { s -> Bool in
                if s.open { return true }
                s.waiting.append(work)
                return false
            }
            if now { work() }
        }
    }

    /// Marked down by network errors (and ``markDown()``); its probe succeeds once ``markUp()`` is called.
    public let reachability: ReachabilityTracker
    /// `algolia.unavailableStatus`.
    public let unavailableStatus: Int
    private let script: @Sendable (HTTPRequest) -> Outcome
    private let down = DownFlag()
    private let received = Mutex<[HTTPRequest]>([])

    /// An upstream answering each request by `script`.
    public init(unavailableStatus: Int = 424, _ script: @escaping @Sendable (HTTPRequest) -> Outcome) {
        self.unavailableStatus = unavailableStatus
        self.script = script
        let down = self.down
        reachability = ReachabilityTracker(name: "algolia-scripted") { !down.isDown }
    }

    /// An upstream answering every request with `outcome`.
    public convenience init(always outcome: Outcome) { self.init { _ in outcome } }

    /// Every request forwarded so far, in order.
    public var requests: [HTTPRequest] { received.withLock { $0 } }

    /// Makes the upstream known to be down (as after a failed request); the probe keeps failing.
    public func markDown() {
        down.isDown = true
        reachability.reportFailure("scripted: down")
    }

    /// Lets the probe succeed again and reports the upstream reachable.
    public func markUp() {
        down.isDown = false
        reachability.reportSuccess()
    }

    public func forward(_ request: HTTPRequest, _ responder: any Responder, hooks: ForwardHooks) {
        received.withLock { $0.append(request) }
        perform(script(request), responder, hooks)
    }

    private func perform(_ outcome: Outcome, _ responder: any Responder, _ hooks: ForwardHooks) {
        switch outcome {
        case .answer(var response):
            if response.status == 429 && hooks.onUnavailable != nil {
                return unavailable("host answered 429", responder, hooks)
            }
            if hooks.originHeader { response.headers.set(MirrorgateHeader.origin, "remote") }
            if hooks.tagBody, (200..<300).contains(response.status), case .bytes(let body) = response.body {
                response.body = .bytes(hooks.tagResults ? OriginTag.tagResults(body) : OriginTag.tag(body))
            }
            reachability.reportSuccess()
            responder.respond(response)
            hooks.onRelayed?(response.status)
        case .serverError(let status):
            unavailable("host answered \(status)", responder, hooks)
        case .rateLimited:
            perform(.answer(AlgoliaError.response(429, "Too many requests")), responder, hooks)
        case .networkError:
            reachability.reportFailure("scripted: network error")
            unavailable("network error", responder, hooks)
        case .notSent:
            reachability.reportFailure("scripted: connection refused")
            if let notSent = hooks.onNotSent { return notSent() }
            unavailable("connection refused", responder, hooks)
        case .silent:
            break
        case .held(let gate, let next):
            gate.whenOpen { [self] in
                if hooks.isCancelled?() == true { return }
                perform(next, responder, hooks)
            }
        }
    }

    private func unavailable(_ problem: String, _ responder: any Responder, _ hooks: ForwardHooks) {
        if let fallback = hooks.onUnavailable { return fallback() }
        responder.respond(AlgoliaError.response(unavailableStatus, "upstream unavailable: \(problem)"))
    }

    /// A 2xx JSON answer with `body`.
    public static func ok(_ body: JSON) -> Outcome {
        .answer(HTTPResponse.json(200, body.serialized()))
    }
}

/// Whether the scripted upstream plays down (its probe fails).
private final class DownFlag: Sendable {
    private let value = Atomic<Bool>(false)
    var isDown: Bool {
        get { value.load(ordering: .relaxed) }
        set { value.store(newValue, ordering: .relaxed) }
    }
}
