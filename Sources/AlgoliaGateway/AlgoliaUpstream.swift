import HTTPCore
import Upstream

/// The upstream side of the request strategies: Algolia's hosts as the strategies see them.
/// ``AlgoliaForwarder`` is the real one; tests script one (`MirrorgateTesting.ScriptedAlgoliaUpstream`).
///
/// Promises of a conforming type: `forward` never blocks its caller; it answers through the responder
/// exactly once (a relayed answer, or `unavailableStatus` in Algolia's format) unless
/// ``ForwardHooks/onUnavailable`` is set, in which case that hook is called instead of the unavailable
/// answer (no host answered, every host answered a 5xx, or — with the hook set — a 429), or
/// ``ForwardHooks/onNotSent`` is set and no byte of the request reached any host.
public protocol AlgoliaUpstream: Sendable {
    /// Whether the upstream is believed to answer; strategies answer locally at once when it is not.
    var reachability: ReachabilityTracker { get }

    /// Forwards `request` (its target unchanged) and answers through `responder`, decorated by `hooks`.
    func forward(_ request: HTTPRequest, _ responder: any Responder, hooks: ForwardHooks)
}

/// What a strategy adds to a plain forward.
public struct ForwardHooks: Sendable {
    /// Mark the answer `X-Mirrorgate-Origin: remote`.
    public var originHeader = false
    /// Insert `"origin":"remote"` into a 2xx JSON envelope (asks the upstream for identity encoding).
    public var tagBody = false
    /// With `tagBody`: also tag each object of the envelope's `results` (multi-queries).
    public var tagResults = false
    /// Called with the status of a relayed answer (after it was handed to the client).
    public var onRelayed: (@Sendable (Int) -> Void)?
    /// Called instead of answering `unavailableStatus` when no host answers or all answered 5xx (and, when
    /// set, on a 429: with a local fallback a rate limit is a transient failure).
    public var onUnavailable: (@Sendable () -> Void)?
    /// Called instead of ``onUnavailable`` (or the unavailable answer) when the request certainly did not
    /// reach the upstream: no host answered and every try failed before writing any of it (connection
    /// refused, host name not resolved, connect or TLS failure or timeout: ``UpstreamError/Delivery``).
    /// A request that may have reached a host (sent, then no answer) never gets here.
    public var onNotSent: (@Sendable () -> Void)?
    /// Polled while a transfer runs: true cancels it and stops trying hosts.
    public var isCancelled: (@Sendable () -> Bool)?
    /// Hold the answer until it is complete (up to ``AlgoliaForwarder/wholeAnswerLimit``), never stream
    /// part of it: a host that is still sending when the budget ends is a failure like any other (the
    /// local answer or the unavailable status), never a truncated success. For the calls a local index
    /// can answer (their answers are small JSON).
    public var wholeAnswer = false

    /// Creates empty hooks.
    public init() {}
}
