import Foundation
import GatewaySupport
import Logging
import Metrics
import Synchronization

/// Whether one upstream answers. A transient failure marks it down at once; a background probe with
/// exponential backoff and jitter marks it up again when the probe succeeds (or when a real request
/// does). Every change is logged, counted, and reported to observers — the rest of the gateway uses
/// `isReachable` to answer locally at once instead of waiting for a timeout on every request.
///
/// Until a request or a probe has told (``knownReachability`` nil), the tracker assumes the upstream
/// answers (so requests are forwarded), but reports nothing: the gauge
/// `mirrorgate_upstream_reachable{upstream}` is absent and the status says `null`. ``probeNow()`` asks
/// once in the background (at start), so that an upstream nothing else calls is not shown as reachable.
public final class ReachabilityTracker: Sendable {
    /// The upstream's name (`algolia`, `odata:NAME`).
    public let name: String
    private struct State {
        var reachable = true
        var known = false
        var since = Date()
        var probing = false
        var observers: [@Sendable (Bool) -> Void] = []
        var stopped = false
    }
    private let state = Mutex(State())
    /// Wakes the probe's backoff wait when the upstream is seen again or the tracker stops.
    private let wake = StopSignal()
    private let probe: @Sendable () -> Bool
    private let initialBackoff: Duration
    private let maxBackoff: Duration
    private let logger: Logger
    private let changes: Counter
    private let gauge = Mutex<Gauge?>(nil)

    /// Creates a tracker that starts optimistic (reachable) and unknown. `probe` is a cheap blocking check
    /// that returns true when the upstream answered anything at all.
    public init(
        name: String, initialBackoff: Duration = .milliseconds(250), maxBackoff: Duration = .seconds(30),
        logger: Logger = Logger(label: "mirrorgate.reachability"), probe: @escaping @Sendable () -> Bool
    ) {
        self.name = name
        self.probe = probe
        self.initialBackoff = initialBackoff
        self.maxBackoff = maxBackoff
        self.logger = logger
        self.changes = Counter(
            label: "mirrorgate_upstream_reachability_changes_total", dimensions: [("upstream", name)])
    }

    /// Whether the upstream is believed to answer (true while unknown).
    public var isReachable: Bool { state.withLock { $0.reachable } }

    /// Whether the upstream answered the last request or probe; nil before the first one.
    public var knownReachability: Bool? { state.withLock { $0.known ? $0.reachable : nil } }

    /// Probes once in the background, unless a request or probe already told; a failure marks the
    /// upstream down and starts the probing with backoff.
    public func probeNow() {
        let run = state.withLock { !$0.known && !$0.stopped && !$0.probing }
        guard run else { return }
        let thread = Thread { [self] in
            let up = probe()
            let tell = state.withLock { !$0.known && !$0.stopped }
            guard tell else { return }
            if up { reportSuccess() } else { reportFailure("no answer to the first probe") }
        }
        thread.name = "mg-probe-\(name)"
        thread.start()
    }

    /// When the current state began.
    public var since: Date { state.withLock { $0.since } }

    /// Registers `observer`, called (on some background thread) with the new state at every change.
    public func onChange(_ observer: @escaping @Sendable (Bool) -> Void) {
        state.withLock { $0.observers.append(observer) }
    }

    /// A real request got an answer from the upstream.
    public func reportSuccess() { set(true) }

    /// A real request failed transiently (network error, timeout, 5xx after retries).
    public func reportFailure(_ reason: String) {
        if set(false, reason: reason) { startProbing() }
    }

    /// Stops background probing (at shutdown).
    public func stop() {
        state.withLock { $0.stopped = true }
        wake.stop()
    }

    @discardableResult
    private func set(_ reachable: Bool, reason: String = "") -> Bool {
        let (observers, learned): ([@Sendable (Bool) -> Void]?, Bool) = state.withLock { s in
            let learned = !s.known
            s.known = true
            if learned { s.since = Date() }
            guard s.reachable != reachable else { return (nil, learned) }
            s.reachable = reachable
            s.since = Date()
            return (s.observers, learned)
        }
        if observers != nil || learned { recordGauge(reachable) }
        guard let observers else { return false }
        if reachable { wake.poke() }
        changes.increment()
        if reachable {
            logger.notice("upstream reachable again", metadata: ["upstream": "\(name)"])
        } else {
            logger.warning("upstream unreachable", metadata: ["upstream": "\(name)", "reason": "\(reason)"])
        }
        for o in observers { o(reachable) }
        return true
    }

    /// The gauge exists from the first time the state is known (a scrape before shows no sample).
    private func recordGauge(_ reachable: Bool) {
        gauge.withLock { g in
            if g == nil {
                g = Gauge(label: "mirrorgate_upstream_reachable", dimensions: [("upstream", name)])
            }
            g?.record(reachable ? 1 : 0)
        }
    }

    private func startProbing() {
        let start = state.withLock { s -> Bool in
            guard !s.probing, !s.stopped else { return false }
            s.probing = true
            return true
        }
        guard start else { return }
        let thread = Thread { [self] in self.probeLoop() }
        thread.name = "mg-probe-\(name)"
        thread.start()
    }

    private func probeLoop() {
        var delay = initialBackoff
        while true {
            let jitter = Double.random(in: 0.5...1.0)
            let pause = Duration.nanoseconds(Int64(Double(delay.nanoseconds) * jitter))
            wake.wait(for: pause, until: { state.withLock { $0.reachable || $0.stopped } })
            let done = state.withLock { s -> Bool in
                if s.reachable || s.stopped {
                    s.probing = false
                    return true
                }
                return false
            }
            if done { return }
            if probe() {
                state.withLock { $0.probing = false }
                set(true)
                return
            }
            delay = min(delay * 2, maxBackoff)
        }
    }
}
