import Foundation

/// What is stored of one replication's schedule (in `state.sqlite`), so that a restart carries on: the
/// last run, its outcome, the backoff, whether the next run resumes, the jitter drawn for it.
public struct ScheduleRecord: Sendable, Equatable {
    /// How the next run relates to the last one.
    public enum Resume: String, Sendable {
        /// The last run ended (completed or failed): nothing to resume beyond the run's own checkpoint.
        case none
        /// The last run stopped at its budget: the next scheduled run (after the interval, even for a first
        /// sync or pending work) continues where it stopped.
        case budget
        /// The last run was interrupted (paused, stopped, killed): it continues as soon as allowed.
        case now
    }

    /// Start of the last run.
    public var lastStart: Date?
    /// End of the last run (any outcome).
    public var lastEnd: Date?
    /// End of the last completed run.
    public var lastSuccess: Date?
    /// `completed`, `budgetReached`, `stopped` or `failed`.
    public var lastOutcome: String?
    /// The last failure's message (cleared by a completed run).
    public var lastError: String?
    /// Duration of the last run.
    public var lastDurationMs: Int?
    /// Consecutive failed runs.
    public var failures = 0
    /// When a failed run is retried.
    public var retryAt: Date?
    /// Consecutive refusals of the policy's condition.
    public var refusals = 0
    /// When a refused condition is asked again.
    public var recheckAt: Date?
    /// Whether the next run resumes.
    public var resume: Resume = .none
    /// A run started and has not ended (a crash leaves this set: the run resumes at once after it).
    public var inProgress = false
    /// Seconds of jitter added to the next scheduled run.
    public var jitter: Double = 0
    /// The last client request, as far as known.
    public var lastUsed: Date?
    /// Runs started (scheduled and manual).
    public var runs = 0

    /// An empty record (never run).
    public init() {}
}

/// Why a replication is not running now.
public enum WaitReason: String, Sendable {
    /// Its next run is not due yet.
    case interval
    /// Outside every window of its policy.
    case window
    /// The policy's condition said no; asked again at `nextRunAt`.
    case condition
    /// Its policy is paused.
    case paused
    /// The last run failed; retried at `nextRunAt`.
    case backoff
    /// The upstream is not reachable (`onlyWhenReachable`).
    case unreachable
}

/// The decision for one replication at one moment.
public struct SchedulePlan: Sendable, Equatable {
    /// Start a run now (the condition, if any, is asked first).
    public var startNow: Bool
    /// When the next run is due or may start (nil: unknown, e.g. paused or unreachable).
    public var nextRunAt: Date?
    /// Why it waits (nil when it starts now).
    public var waitingFor: WaitReason?

    static func start(_ now: Date) -> SchedulePlan {
        SchedulePlan(startNow: true, nextRunAt: now, waitingFor: nil)
    }
    static func wait(_ at: Date?, _ reason: WaitReason) -> SchedulePlan {
        SchedulePlan(startNow: false, nextRunAt: at, waitingFor: reason)
    }
}

/// The scheduling rules of SPEC §6 as one pure function: no clock, thread or store, so that every rule
/// is unit-tested with plain values.
public enum SchedulePlanner {
    /// The inputs beside the record and the policy.
    public struct Facts: Sendable {
        /// The current time.
        public var now: Date
        /// Whether a client used the mirror within the policy's `activeWindow`.
        public var inUse: Bool
        /// Whether the upstream is believed reachable.
        public var reachable: Bool
        /// Whether the policy is paused.
        public var paused: Bool
        /// What waits besides the schedule.
        public var urgency: ReplicationUrgency
        /// Whether a wake-up (start, reachable again, a service's request) asks to run pending work now.
        public var woken: Bool
        /// Algolia's `delayBetweenSyncs`.
        public var activeIntervalCap: Duration?
        /// The mirror's code asked for a run now (``ReplicationScheduler/requestRun(_:)``).
        public var requested: Bool

        /// Creates facts.
        public init(
            now: Date, inUse: Bool, reachable: Bool = true, paused: Bool = false,
            urgency: ReplicationUrgency = .none, woken: Bool = false, activeIntervalCap: Duration? = nil,
            requested: Bool = false
        ) {
            self.requested = requested
            self.now = now
            self.inUse = inUse
            self.reachable = reachable
            self.paused = paused
            self.urgency = urgency
            self.woken = woken
            self.activeIntervalCap = activeIntervalCap
        }
    }

    /// When the next run is due, ignoring windows, reachability and pause, and why it would wait.
    public static func due(_ record: ScheduleRecord, _ policy: ReplicationPolicy, _ facts: Facts) -> (
        Date, WaitReason
    ) {
        let now = facts.now
        var due: Date
        var reason = WaitReason.interval
        if record.failures > 0, let retryAt = record.retryAt {
            due = retryAt
            reason = .backoff
        } else if record.resume == .budget, let base = record.lastEnd {
            // The last run used its budget: the next continues at the next scheduled time, whatever waits
            // (a first sync, pending work, a wake-up) — the budget is what the platform grants per run.
            let interval = policy.interval(inUse: facts.inUse, cap: facts.activeIntervalCap)
            due = base.addingTimeInterval(interval.seconds + record.jitter)
        } else if record.resume == .now || facts.urgency == .required || facts.requested
            || (facts.woken && facts.urgency == .pending)
        {
            due = now
        } else if let base = record.lastEnd ?? record.lastSuccess {
            let interval = policy.interval(inUse: facts.inUse, cap: facts.activeIntervalCap)
            due = base.addingTimeInterval(interval.seconds + record.jitter)
        } else {
            due = now  // never ran
        }
        if let recheck = record.recheckAt, record.refusals > 0, recheck > due {
            due = recheck
            reason = .condition
        }
        return (due, reason)
    }

    /// The decision: start now, or wait until when and why.
    public static func plan(
        _ record: ScheduleRecord, _ policy: ReplicationPolicy, _ facts: Facts, calendar: Calendar
    ) -> SchedulePlan {
        let (due, reason) = due(record, policy, facts)
        if facts.paused { return .wait(nil, .paused) }
        if due > facts.now { return .wait(due, reason) }
        if !policy.isInsideWindow(facts.now, calendar: calendar) {
            return .wait(policy.nextWindowOpening(after: facts.now, calendar: calendar), .window)
        }
        if policy.config.onlyWhenReachable && !facts.reachable { return .wait(nil, .unreachable) }
        return .start(facts.now)
    }
}
