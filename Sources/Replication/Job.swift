import Foundation
import GatewaySupport
import JSONCore
import Synchronization

/// Which API a replication belongs to; names it in events, status and metrics.
public enum ReplicationAPI: String, Sendable {
    /// A mirrored Algolia index: a run is a sync.
    case algolia
    /// An OData service: a run uploads the request queue (push), then downloads the mirror (pull).
    case odata

    /// The key naming the mirror in event data: `index` or `service`.
    var subjectKey: String { self == .algolia ? "index" : "service" }
}

/// What a replication has waiting besides its schedule.
public enum ReplicationUrgency: Sendable, Equatable {
    /// Nothing beyond the schedule.
    case none
    /// Work waits (queued OData requests): run at start, when the upstream is reachable again, and when
    /// the service asks (``ReplicationScheduler/requestRun(_:)``).
    case pending
    /// The mirror cannot answer as configured (never synced, data selection changed): run now.
    case required
}

/// Where a client request marks a mirror as in use. Touching is cheap (an atomic store) and safe on
/// the server's polling threads; the first touch after an idle period wakes the scheduler.
public final class ReplicationUsage: Sendable {
    /// Milliseconds since 1970 of the last touch (0: never).
    private let last = Atomic<Int64>(0)
    private let wake = Mutex<(@Sendable () -> Void)?>(nil)
    private let window = Atomic<Int64>(600_000)

    /// Creates a tracker never touched.
    public init() {}

    /// Notes a client request now.
    public func touch() { touch(at: Date()) }

    /// Notes a client request at `date` (tests pass their clock's time).
    public func touch(at date: Date) {
        let now = Int64(date.timeIntervalSince1970 * 1000)
        let before = last.exchange(now, ordering: .relaxed)
        if now - before >= window.load(ordering: .relaxed) {
            // Idle until now: a run may be overdue at the active interval.
            if let wake = wake.withLock({ $0 }) { wake() }
        }
    }

    /// The last touch (nil: never since start, and none restored).
    public var lastUsed: Date? {
        let ms = last.load(ordering: .relaxed)
        return ms == 0 ? nil : Date(timeIntervalSince1970: Double(ms) / 1000)
    }

    func attach(window: Duration, restored: Date?, wake: @escaping @Sendable () -> Void) {
        self.window.store(window.milliseconds, ordering: .relaxed)
        if let restored {
            let ms = Int64(restored.timeIntervalSince1970 * 1000)
            var current = last.load(ordering: .relaxed)
            while ms > current {
                let (done, found) = last.compareExchange(
                    expected: current, desired: ms, ordering: .relaxed)
                if done { break }
                current = found
            }
        }
        self.wake.withLock { $0 = wake }
    }
}

/// Why a run was started.
public enum RunTrigger: String, Sendable {
    /// Its time came (interval, a retry, a missed run after a restart, in use again).
    case schedule
    /// The upstream became reachable again, or the service asked (queued work).
    case wake
    /// An operator asked (admin API or command line): no window, condition, pause or budget applies.
    case manual
}

/// Why a run stopped before its end.
public enum StopReason: String, Sendable {
    /// `maxRunDuration` passed: the next scheduled run resumes.
    case budget
    /// Its policy was paused: the run after `resume` continues.
    case paused
    /// The gateway is stopping: the first run after the restart continues.
    case shutdown
}

/// What a run ended with.
public enum RunOutcome: Sendable {
    /// The mirror is complete (details: the run's statistics).
    case completed(JSON)
    /// The run stopped because ``RunContext/stopReason`` said so; its resume point is stored.
    case stopped(JSON)
    /// The run failed (the message names the cause, never a key); retried with backoff.
    case failed(String)
    /// Another run of the same mirror (a manual one, a build) held it; nothing happened.
    case busy
}

/// One run as the mirror's code sees it: whether it resumes, whether it must stop now (checked at each
/// checkpoint: an Algolia browse page, an OData page or queued request), and its progress reports.
public final class RunContext: Sendable {
    /// Why the run started.
    public let trigger: RunTrigger
    /// Whether the previous run stopped before its end (its resume point should be used).
    public let resumed: Bool
    private let startedNanos: UInt64
    private let budgetNanos: UInt64
    private let uptime: @Sendable () -> UInt64
    private let pausedCheck: @Sendable () -> Bool
    private let stopping: @Sendable () -> Bool
    private let report: @Sendable (JSON) -> Void
    private let observed = Mutex<StopReason?>(nil)

    init(
        trigger: RunTrigger, resumed: Bool, budget: Duration, uptime: @escaping @Sendable () -> UInt64,
        paused: @escaping @Sendable () -> Bool, stopping: @escaping @Sendable () -> Bool,
        report: @escaping @Sendable (JSON) -> Void
    ) {
        self.trigger = trigger
        self.resumed = resumed
        self.uptime = uptime
        self.startedNanos = uptime()
        self.budgetNanos = trigger == .manual ? 0 : budget.nanoseconds
        let never: @Sendable () -> Bool = { false }
        self.pausedCheck = trigger == .manual ? never : paused
        self.stopping = stopping
        self.report = report
    }

    /// A context outside any scheduler (tests, tools): never stops, reports nowhere.
    public static func unscheduled(trigger: RunTrigger = .manual) -> RunContext {
        RunContext(
            trigger: trigger, resumed: false, budget: .zero, uptime: { monotonicNanos() }, paused: { false },
            stopping: { false }, report: { _ in })
    }

    /// Why the run must stop now (nil: go on). The first reason seen is kept as ``firstStopReason``.
    public var stopReason: StopReason? {
        let reason: StopReason? =
            if stopping() {
                .shutdown
            } else if pausedCheck() {
                .paused
            } else if budgetNanos > 0, uptime() &- startedNanos >= budgetNanos {
                .budget
            } else {
                nil
            }
        if let reason { observed.withLock { $0 = $0 ?? reason } }
        return reason
    }

    /// The reason the run was first told to stop (nil when ``stopReason`` never said so): why a run that
    /// ended early stopped, even if the pause was lifted since.
    public var firstStopReason: StopReason? { observed.withLock { $0 } }

    /// Whether the run must stop at this checkpoint.
    public var shouldStop: Bool { stopReason != nil }

    /// Time since the run started.
    public var elapsed: Duration { .nanoseconds(Int64(uptime() &- startedNanos)) }

    /// Reports progress (`runDidProgress`, with the mirror's name and policy added).
    public func progress(_ details: JSON) { report(details) }
}

/// A replication the scheduler runs: one mirrored index or one OData service.
public struct ReplicationJob: Sendable {
    /// Which API.
    public var api: ReplicationAPI
    /// The index or service name.
    public var name: String
    /// The policy's name (`default` when the configuration names none).
    public var policy: String
    /// Algolia's `delayBetweenSyncs`: the in-use interval is never longer.
    public var activeIntervalCap: Duration?
    /// When the mirror last completed a run before this scheduler knew it (from the mirror's own state).
    public var lastSuccess: Date?
    /// Client requests mark the mirror in use here.
    public var usage: ReplicationUsage
    /// Whether the upstream is believed reachable.
    public var isReachable: @Sendable () -> Bool
    /// What waits besides the schedule.
    public var urgency: @Sendable () -> ReplicationUrgency
    /// The run itself (blocking, on a thread of its own).
    public var run: @Sendable (RunContext) -> RunOutcome
    /// Whether the mirror holds its runs for now (queued local writes wait for the upstream): no run
    /// starts, and the scheduler looks again a second later.
    public var isHeld: @Sendable () -> Bool

    /// Creates a job.
    public init(
        api: ReplicationAPI, name: String, policy: String, activeIntervalCap: Duration? = nil,
        lastSuccess: Date? = nil, usage: ReplicationUsage, isReachable: @escaping @Sendable () -> Bool,
        urgency: @escaping @Sendable () -> ReplicationUrgency,
        isHeld: @escaping @Sendable () -> Bool = { false },
        run: @escaping @Sendable (RunContext) -> RunOutcome
    ) {
        self.api = api
        self.name = name
        self.policy = policy
        self.activeIntervalCap = activeIntervalCap
        self.lastSuccess = lastSuccess
        self.usage = usage
        self.isReachable = isReachable
        self.urgency = urgency
        self.run = run
        self.isHeld = isHeld
    }

    /// `algolia:NAME` or `odata:NAME`: the job's key in the store, status and metrics.
    public var id: String { "\(api.rawValue):\(name)" }
}
