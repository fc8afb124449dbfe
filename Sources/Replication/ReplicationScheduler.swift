import Foundation
import GatewayConfig
import GatewaySupport
import JSONCore
import Logging
import Synchronization

/// The time the scheduler reads: wall-clock time for schedules and windows (stored across restarts),
/// a monotonic count for run budgets. Tests inject a clock they move by hand.
public protocol ReplicationClock: Sendable {
    /// The current wall-clock time.
    var now: Date { get }
    /// A monotonic count of nanoseconds (run budgets).
    var uptimeNanos: UInt64 { get }
}

/// The system's clocks.
public struct SystemReplicationClock: ReplicationClock {
    /// Creates the clock.
    public init() {}
    public var now: Date { Date() }
    public var uptimeNanos: UInt64 { monotonicNanos() }
}

/// What asking for a run did.
public enum TriggerResult: Sendable, Equatable {
    /// No replication has that id.
    case unknown
    /// A run of it is going on.
    case alreadyRunning
    /// The run started on a thread of its own.
    case started
}

/// The one scheduler of every replication: the syncs of mirrored Algolia indices and the runs of OData
/// services (upload, then download). For each it decides when a run starts — the policy's interval in
/// use or idle, windows, reachability, the condition command, pause, retry backoff with jitter — runs it
/// on a thread of its own with its budget, stores the schedule so that a restart carries on, and reports
/// every run as events (`runDidStart`, `runDidProgress`, `runBudgetReached`, `runDidFinish`,
/// `runDidFail`).
///
/// Promises: at most one run of a replication at a time; a paused policy starts no run (and a run going
/// on stops at its next checkpoint); a run that stopped early is continued by the next one (at once
/// after a pause, a shutdown or a crash, at the next scheduled time after its budget); the timer work
/// never blocks (conditions and runs go to their own threads).
public final class ReplicationScheduler: Sendable {
    private struct Entry {
        var job: ReplicationJob
        var policy: ReplicationPolicy
        var record: ScheduleRecord
        var running = false
        var trigger: RunTrigger?
        var woken = false
        var requested = false
        /// After a `.busy` outcome (a manual run or build held the mirror): no new attempt before this.
        var notBefore: Date?
        var plan = SchedulePlan(startNow: false, nextRunAt: nil, waitingFor: .interval)
        var condition: String?
    }

    private struct State {
        var policies: [String: ReplicationPolicy] = [:]
        var entries: [String: Entry] = [:]
        var paused: [String: Date] = [:]
        var started = false
        var stopping = false
        var timer: ScheduledWork?
    }

    /// The policies in force by name (a configuration reload may change them, see
    /// ``reconfigure(policies:jobs:)``).
    public var policies: [String: ReplicationPolicy] { state.withLock { $0.policies } }
    private let state = Mutex(State())
    private let store: ReplicationStore?
    private let clock: any ReplicationClock
    private let calendar: Calendar
    private let conditions: any ConditionRunner
    private let events: @Sendable (String, JSON) -> Void
    private let logger: Logger
    private let spawn: @Sendable (String, @escaping @Sendable () -> Void) -> Void
    private let random: @Sendable (ClosedRange<Double>) -> Double

    /// A scheduler for `policies` (`default` is added when missing). `store` nil keeps schedules in memory
    /// only; `spawn` runs a run's work (a new thread by default; tests run it inline); `random` draws
    /// jitter.
    public init(
        policies: [String: PolicyConfig], store: ReplicationStore?,
        clock: any ReplicationClock = SystemReplicationClock(), calendar: Calendar = .current,
        conditions: any ConditionRunner = NoConditionRunner(),
        events: @escaping @Sendable (String, JSON) -> Void = { _, _ in },
        logger: Logger = Logger(label: "mirrorgate.replication"),
        spawn: @escaping @Sendable (String, @escaping @Sendable () -> Void) -> Void = ReplicationScheduler
            .newThread,
        random: @escaping @Sendable (ClosedRange<Double>) -> Double = { Double.random(in: $0) }
    ) {
        self.store = store
        self.clock = clock
        self.calendar = calendar
        self.conditions = conditions
        self.events = events
        self.logger = logger
        self.spawn = spawn
        self.random = random
        let paused = (try? store?.paused()) ?? [:]
        let all = Self.named(policies)
        state.withLock {
            $0.paused = paused
            $0.policies = all
        }
    }

    /// `configs` as policies by name, `default` added when missing.
    private static func named(_ configs: [String: PolicyConfig]) -> [String: ReplicationPolicy] {
        var all = configs
        if all["default"] == nil { all["default"] = PolicyConfig() }
        return all.reduce(into: [:]) { $0[$1.key] = ReplicationPolicy(name: $1.key, config: $1.value) }
    }

    /// Runs `work` on a new thread named `name`.
    public static func newThread(_ name: String, _ work: @escaping @Sendable () -> Void) {
        let thread = Thread(block: work)
        thread.name = name
        thread.start()
    }

    // MARK: registration and lifecycle

    /// Adds a replication; its stored schedule is loaded (a run left in progress by a crash resumes at
    /// once). Call before ``start()``.
    public func register(_ job: ReplicationJob) {
        let entry = newEntry(job, policies: policies)
        state.withLock { $0.entries[job.id] = entry }
    }

    /// A new job's entry under `policies`: its stored schedule, its usage attached to the scheduler.
    private func newEntry(_ job: ReplicationJob, policies: [String: ReplicationPolicy]) -> Entry {
        let policy = policies[job.policy] ?? policies["default"]!
        var record = ((try? store?.records()) ?? [:])[job.id] ?? ScheduleRecord()
        if record.lastSuccess == nil, record.lastEnd == nil, let known = job.lastSuccess {
            // A mirror synced before schedules were stored: its last success is the base of the next run.
            record.lastSuccess = known
            record.lastEnd = known
        }
        if record.inProgress {
            record.inProgress = false
            record.resume = .now
        }
        job.usage.attach(window: policy.config.activeWindow, restored: record.lastUsed) { [weak self] in
            self?.wake()
        }
        return Entry(job: job, policy: policy, record: record)
    }

    /// Applies a configuration reload: `policies` replace the policies in force, and `jobs` the registered
    /// replications. A job whose id was registered keeps its schedule, retry state and resume point, and
    /// follows its (possibly changed) policy from the next decision on; a run of it going on is not
    /// interrupted (it ends with the job it started with, and its outcome is recorded in the kept
    /// schedule). A new id is registered as ``register(_:)`` does; a registered id missing from `jobs` is
    /// dropped, and a run of it going on stops at its next checkpoint (its resume point stored, used if
    /// the id comes back). Pauses are kept. Then decides at once.
    public func reconfigure(policies configs: [String: PolicyConfig], jobs: [ReplicationJob]) {
        let all = Self.named(configs)
        let known = Set(jobIDs)
        var added: [String: Entry] = [:]
        for job in jobs where !known.contains(job.id) { added[job.id] = newEntry(job, policies: all) }
        let dropped = state.withLock { s -> [(String, ScheduleRecord)] in
            s.policies = all
            var next: [String: Entry] = [:]
            for job in jobs {
                if var e = s.entries[job.id] {
                    let policy = all[job.policy] ?? all["default"]!
                    let replaced = job.usage !== e.job.usage
                    if replaced || policy.config.activeWindow != e.policy.config.activeWindow {
                        // A rebuilt service's new tracker starts from the old one's last use.
                        let restored = e.job.usage.lastUsed ?? e.record.lastUsed
                        job.usage.attach(window: policy.config.activeWindow, restored: restored) {
                            [weak self] in self?.wake()
                        }
                    }
                    e.job = job
                    e.policy = policy
                    next[job.id] = e
                } else if let e = added[job.id] {
                    next[job.id] = e
                }
            }
            let gone = s.entries.filter { next[$0.key] == nil }.map { id, e -> (String, ScheduleRecord) in
                var r = e.record
                r.lastUsed = e.job.usage.lastUsed ?? r.lastUsed
                return (id, r)
            }
            s.entries = next
            return gone
        }
        for (id, r) in dropped where !r.inProgress { persist(id, r) }
        if !dropped.isEmpty || !added.isEmpty {
            logger.info(
                "replications reconfigured",
                metadata: [
                    "added": .array(added.keys.sorted().map { .string($0) }),
                    "dropped": .array(dropped.map(\.0).sorted().map { .string($0) }),
                ])
        }
        tick()
    }

    /// The ids of the registered replications.
    public var jobIDs: [String] { state.withLock { $0.entries.keys.sorted() } }

    /// Starts scheduling: pending work (queued requests) runs as soon as allowed, then every schedule is
    /// followed.
    public func start() {
        state.withLock { s in
            s.started = true
            for id in s.entries.keys { s.entries[id]?.woken = true }
        }
        tick()
    }

    /// Stops scheduling; runs going on stop at their next checkpoint. Stores when each mirror was last used.
    public func stop() {
        let records = state.withLock { s -> [(String, ScheduleRecord)] in
            s.stopping = true
            s.timer?.cancel()
            s.timer = nil
            return s.entries.map { id, e in
                var r = e.record
                r.lastUsed = e.job.usage.lastUsed ?? r.lastUsed
                return (id, r)
            }
        }
        for (id, r) in records { persist(id, r) }
    }

    // MARK: deciding

    /// Evaluates every replication now: starts what is due and allowed, and sets the timer for the next
    /// decision. Never blocks (conditions and runs go to their own threads).
    public func tick() {
        let now = clock.now
        var launches: [(String, RunTrigger)] = []
        let next: Date? = state.withLock { s in
            guard !s.stopping else { return nil }
            var earliest: Date?
            for id in s.entries.keys.sorted() {
                guard var e = s.entries[id], !e.running else { continue }
                if let notBefore = e.notBefore, notBefore > now {
                    earliest = earliest.map { min($0, notBefore) } ?? notBefore
                    continue
                }
                if e.job.isHeld() {
                    let again = now.addingTimeInterval(1)
                    earliest = earliest.map { min($0, again) } ?? again
                    continue
                }
                e.plan = plan(e, paused: s.paused[e.policy.name] != nil, now: now)
                if e.plan.startNow && s.started {
                    e.running = true
                    e.trigger = e.woken || e.requested ? .wake : .schedule
                    launches.append((id, e.trigger!))
                } else if let at = e.plan.nextRunAt {
                    earliest = earliest.map { min($0, at) } ?? at
                }
                s.entries[id] = e
            }
            return earliest
        }
        for (id, trigger) in launches { launch(id, trigger: trigger, completion: nil) }
        rearm(next, now: now)
    }

    private func plan(_ e: Entry, paused: Bool, now: Date) -> SchedulePlan {
        let inUse =
            e.job.usage.lastUsed.map { now.timeIntervalSince($0) < e.policy.config.activeWindow.seconds }
            ?? false
        let facts = SchedulePlanner.Facts(
            now: now, inUse: inUse, reachable: e.job.isReachable(), paused: paused, urgency: e.job.urgency(),
            woken: e.woken, activeIntervalCap: e.job.activeIntervalCap, requested: e.requested)
        return SchedulePlanner.plan(e.record, e.policy, facts, calendar: calendar)
    }

    /// Sets the timer for the next decision: the earliest due time (at most 30 s away, so that windows,
    /// clock changes and the end of an in-use period are seen).
    private func rearm(_ next: Date?, now: Date) {
        var delay = 30.0
        if let next { delay = max(0.01, min(delay, next.timeIntervalSince(now) + 0.005)) }
        state.withLock { s in
            guard s.started, !s.stopping else { return }
            s.timer?.cancel()
            s.timer = Scheduler.shared.schedule(after: .milliseconds(Int64(delay * 1000))) { [weak self] in
                self?.tick()
            }
        }
    }

    /// Asks for a decision soon (on the timer thread): a mirror became in use, an upstream reachable.
    private func wake() {
        guard state.withLock({ $0.started && !$0.stopping }) else { return }
        Scheduler.shared.schedule(after: .zero) { [weak self] in self?.tick() }
    }

    /// One replication as the status shows it.
    func snapshot(_ id: String) -> Snapshot? {
        let now = clock.now
        return state.withLock { s in
            guard var e = s.entries[id] else { return nil }
            let paused = s.paused[e.policy.name]
            if !e.running { e.plan = plan(e, paused: paused != nil, now: now) }
            return Snapshot(
                job: e.job, policy: e.policy, record: e.record, running: e.running, plan: e.plan,
                paused: paused != nil, condition: e.condition, now: now)
        }
    }

    /// Every paused policy and since when.
    func pausedPolicies() -> [String: Date] { state.withLock { $0.paused } }

    /// The jobs of `policy`.
    func jobs(of policy: String) -> [String] {
        state.withLock { s in s.entries.filter { $0.value.policy.name == policy }.keys.sorted() }
    }

    struct Snapshot {
        var job: ReplicationJob
        var policy: ReplicationPolicy
        var record: ScheduleRecord
        var running: Bool
        var plan: SchedulePlan
        var paused: Bool
        var condition: String?
        var now: Date
    }

    // MARK: triggers

    /// Pending work of `id` (queued requests) should run now if its policy allows (a write queued while
    /// the upstream answers, an ErrorArchive entry reverted).
    public func requestRun(_ id: String) {
        state.withLock { $0.entries[id]?.requested = true }
        wake()
    }

    /// The upstream of `id` changed; when it is reachable again, a failed run is retried and pending
    /// work runs at once (if the policy allows).
    public func reachabilityChanged(_ id: String, reachable: Bool) {
        guard reachable else { return }
        let now = clock.now
        state.withLock { s in
            guard var e = s.entries[id] else { return }
            e.woken = true
            if e.record.failures > 0 { e.record.retryAt = now }
            s.entries[id] = e
        }
        wake()
    }

    /// Starts a run of `id` now, as an operator asked: no window, condition, pause or budget applies.
    /// `completion` gets its outcome.
    @discardableResult
    public func trigger(_ id: String, completion: (@Sendable (RunOutcome) -> Void)? = nil) -> TriggerResult {
        let result = state.withLock { s -> TriggerResult in
            guard var e = s.entries[id] else { return .unknown }
            if e.running { return .alreadyRunning }
            e.running = true
            e.trigger = .manual
            s.entries[id] = e
            return .started
        }
        if result == .started { launch(id, trigger: .manual, completion: completion) }
        return result
    }

    // MARK: pause

    /// Pauses every run of `policy`: none starts, and one going on stops at its next checkpoint (its
    /// resume point kept). False for an unknown policy.
    @discardableResult
    public func pause(_ policy: String) -> Bool {
        guard policies[policy] != nil else { return false }
        let now = clock.now
        let changed = state.withLock { s -> Bool in
            if s.paused[policy] != nil { return false }
            s.paused[policy] = now
            return true
        }
        if changed {
            do { try store?.setPaused(policy, since: now) } catch {
                logger.error(
                    "cannot store the pause", metadata: ["policy": "\(policy)", "error": "\(error)"])
            }
            logger.notice("policy paused", metadata: ["policy": "\(policy)"])
            events("policyPaused", ["policy": .string(policy)])
        }
        return true
    }

    /// Resumes `policy`: what is due runs now (a run stopped by the pause continues). False for an unknown
    /// policy.
    @discardableResult
    public func resume(_ policy: String) -> Bool {
        guard policies[policy] != nil else { return false }
        let changed = state.withLock { $0.paused.removeValue(forKey: policy) != nil }
        if changed {
            do { try store?.setPaused(policy, since: nil) } catch {
                logger.error(
                    "cannot store the resume", metadata: ["policy": "\(policy)", "error": "\(error)"])
            }
            logger.notice("policy resumed", metadata: ["policy": "\(policy)"])
            events("policyResumed", ["policy": .string(policy)])
            tick()
        }
        return true
    }

    /// Whether `policy` is paused.
    public func isPaused(_ policy: String) -> Bool { state.withLock { $0.paused[policy] != nil } }

    // MARK: running

    private func launch(_ id: String, trigger: RunTrigger, completion: (@Sendable (RunOutcome) -> Void)?) {
        spawn("mg-run-\(id)") { [self] in
            execute(id, trigger: trigger, completion: completion)
        }
    }

    private func execute(_ id: String, trigger: RunTrigger, completion: (@Sendable (RunOutcome) -> Void)?) {
        guard let entry = state.withLock({ $0.entries[id] }) else { return }
        let job = entry.job
        let policy = entry.policy
        if trigger != .manual, let condition = policy.config.condition {
            guard checkCondition(id, job: job, policy: policy, condition) else {
                completion?(.busy)
                tick()
                return
            }
        }
        let start = clock.now
        let before = entry.record
        let record = state.withLock { s -> ScheduleRecord in
            var r = s.entries[id]!.record
            r.lastStart = start
            r.inProgress = true
            r.runs += 1
            r.lastUsed = job.usage.lastUsed ?? r.lastUsed
            s.entries[id]?.record = r
            s.entries[id]?.woken = false
            s.entries[id]?.requested = false
            return r
        }
        persist(id, record)
        let resumed = before.resume != .none
        emit("runDidStart", job, policy, ["trigger": .string(trigger.rawValue), "resumed": .bool(resumed)])
        logger.info(
            "run started",
            metadata: [
                "mirror": "\(id)", "policy": "\(policy.name)", "trigger": "\(trigger.rawValue)",
                "resumed": "\(resumed)",
            ])
        let context = RunContext(
            trigger: trigger, resumed: resumed, budget: policy.config.maxRunDuration,
            uptime: { [clock] in clock.uptimeNanos },
            paused: { [weak self] in self?.isPaused(policy.name) ?? false },
            stopping: { [weak self] in self?.isStoppingOrDropped(id) ?? true },
            report: { [weak self] details in self?.emit("runDidProgress", job, policy, details) })
        let outcome = job.run(context)
        finish(id, job: job, policy: policy, before: before, start: start, outcome: outcome, context: context)
        completion?(outcome)
        tick()
    }

    /// Whether the scheduler stops, or a reload dropped `id`: a run of it stops at its next checkpoint.
    private func isStoppingOrDropped(_ id: String) -> Bool {
        state.withLock { $0.stopping || $0.entries[id] == nil }
    }

    /// Asks the condition; records a refusal (asked again after the policy's backoff). True to go on.
    private func checkCondition(
        _ id: String, job: ReplicationJob, policy: ReplicationPolicy, _ condition: ConditionConfig
    ) -> Bool {
        let result = conditions.run(condition.command, timeout: condition.timeout)
        let output = result.output.trimmingCharacters(in: .whitespacesAndNewlines)
        logger.info(
            "condition \(result.allows ? "allows" : "refuses") the run",
            metadata: [
                "mirror": "\(id)", "policy": "\(policy.name)", "result": "\(result.summary)",
                "output": "\(output.prefix(1000))",
            ])
        let now = clock.now
        let factor = random(0.5...1.0)
        let record = state.withLock { s -> ScheduleRecord? in
            guard var e = s.entries[id] else { return nil }
            if result.allows {
                e.condition = nil
                guard e.record.refusals > 0 else {
                    s.entries[id] = e
                    return nil
                }
                e.record.refusals = 0
                e.record.recheckAt = nil
            } else {
                e.running = false
                e.trigger = nil
                e.condition = result.summary
                e.record.refusals += 1
                e.record.recheckAt = now.addingTimeInterval(
                    policy.backoff(attempt: e.record.refusals, factor: factor).seconds)
            }
            s.entries[id] = e
            return e.record
        }
        if let record { persist(id, record) }
        return result.allows
    }

    private func finish(
        _ id: String, job: ReplicationJob, policy: ReplicationPolicy, before: ScheduleRecord, start: Date,
        outcome: RunOutcome, context: RunContext
    ) {
        let end = clock.now
        let durationMs = Int(context.elapsed.seconds * 1000)
        let jitter = policy.config.jitter > .zero ? random(0...policy.config.jitter.seconds) : 0
        let factor = random(0.5...1.0)
        // Read outside the lock: the context's checks take the scheduler's lock themselves.
        let reason = context.firstStopReason ?? context.stopReason ?? .budget
        var event: (String, JSON)?
        let record = state.withLock { s -> ScheduleRecord? in
            guard var e = s.entries[id] else { return nil }
            e.running = false
            e.trigger = nil
            var r = e.record
            r.inProgress = false
            r.lastUsed = job.usage.lastUsed ?? r.lastUsed
            switch outcome {
            case .busy:
                r = before  // nothing happened; try again in a second
                e.notBefore = end.addingTimeInterval(1)
            case .completed(let details):
                r.lastEnd = end
                r.lastSuccess = end
                r.lastOutcome = "completed"
                r.lastError = nil
                r.lastDurationMs = durationMs
                r.failures = 0
                r.retryAt = nil
                r.resume = .none
                r.jitter = jitter
                event = (
                    "runDidFinish",
                    Self.merge(details, ["durationMs": .int(Int64(durationMs)), "completed": true])
                )
            case .stopped(let details):
                r.lastEnd = end
                r.lastDurationMs = durationMs
                r.failures = 0
                r.retryAt = nil
                r.jitter = jitter
                if reason == .budget {
                    r.lastOutcome = "budgetReached"
                    r.resume = .budget
                    event = (
                        "runBudgetReached",
                        Self.merge(
                            details,
                            [
                                "durationMs": .int(Int64(durationMs)),
                                "budgetMs": .int(policy.config.maxRunDuration.milliseconds),
                            ])
                    )
                } else {
                    r.lastOutcome = "stopped"
                    r.resume = .now
                    event = (
                        "runDidFinish",
                        Self.merge(
                            details,
                            [
                                "durationMs": .int(Int64(durationMs)), "completed": false,
                                "stoppedBy": .string(reason.rawValue),
                            ])
                    )
                }
            case .failed(let message):
                r.lastEnd = end
                r.lastOutcome = "failed"
                r.lastError = message
                r.lastDurationMs = durationMs
                r.failures += 1
                let retryAt = end.addingTimeInterval(
                    policy.backoff(attempt: r.failures, factor: factor).seconds)
                r.retryAt = retryAt
                event = (
                    "runDidFail",
                    [
                        "error": .string(message), "durationMs": .int(Int64(durationMs)),
                        "failures": .int(Int64(r.failures)),
                        "retryAt": .string(
                            Timestamps.rfc3339(secondsSince1970: retryAt.timeIntervalSince1970)),
                    ]
                )
            }
            e.record = r
            s.entries[id] = e
            return r
        }
        guard let record else { return }
        persist(id, record)
        if let (name, details) = event {
            emit(name, job, policy, details)
            logger.info(
                "run ended",
                metadata: [
                    "mirror": "\(id)", "outcome": "\(record.lastOutcome ?? "-")", "ms": "\(durationMs)",
                ])
        }
    }

    private func persist(_ id: String, _ record: ScheduleRecord) {
        do { try store?.save(id, record) } catch {
            logger.error("cannot store the schedule", metadata: ["mirror": "\(id)", "error": "\(error)"])
        }
    }

    private func emit(_ name: String, _ job: ReplicationJob, _ policy: ReplicationPolicy, _ details: JSON) {
        var o = details.objectValue ?? JSONObject()
        o[job.api.subjectKey] = .string(job.name)
        o["mirror"] = .string(job.id)
        o["policy"] = .string(policy.name)
        events(name, .object(o))
    }

    private static func merge(_ details: JSON, _ extra: JSONObject) -> JSON {
        var o = details.objectValue ?? JSONObject()
        for (k, v) in extra { o[k] = v }
        return .object(o)
    }
}
