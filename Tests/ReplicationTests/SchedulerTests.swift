import Foundation
import GatewayConfig
import JSONCore
import Storage
import Synchronization
import Testing

@testable import Replication

/// Events collected from a scheduler.
final class EventLog: Sendable {
    private let items = Mutex<[(String, JSON)]>([])
    func record(_ name: String, _ data: JSON) { items.withLock { $0.append((name, data)) } }
    var names: [String] { items.withLock { $0.map(\.0) } }
    func last(_ name: String) -> JSON? { items.withLock { $0.last { $0.0 == name }?.1 } }
}

/// A condition whose answer the test sets.
final class ScriptedCondition: ConditionRunner {
    let answer = Mutex<Int32>(1)
    let calls = Mutex<[[String]]>([])
    func run(_ argv: [String], timeout: Duration) -> ConditionResult {
        calls.withLock { $0.append(argv) }
        return ConditionResult(exitStatus: answer.withLock { $0 }, output: "metered=yes")
    }
}

/// A mirror of `pages` pages; each page takes `pageTime` of the clock; the position survives runs (as a
/// stored checkpoint would).
final class PagedMirror: Sendable {
    let clock: ManualClock
    let pages: Int
    let pageTime: Duration
    let position = Mutex(0)
    let runs = Mutex<[(RunTrigger, Bool)]>([])
    let fail = Mutex(false)

    init(clock: ManualClock, pages: Int, pageTime: Duration) {
        self.clock = clock
        self.pages = pages
        self.pageTime = pageTime
    }

    func run(_ context: RunContext) -> RunOutcome {
        runs.withLock { $0.append((context.trigger, context.resumed)) }
        if fail.withLock({ $0 }) { return .failed("upstream unavailable: refused") }
        while position.withLock({ $0 }) < pages {
            if context.shouldStop { return .stopped(["pages": .int(Int64(position.withLock { $0 }))]) }
            clock.advance(pageTime)
            let done = position.withLock { p -> Int in
                p += 1
                return p
            }
            context.progress(["pages": .int(Int64(done))])
        }
        position.withLock { $0 = 0 }
        return .completed(["pages": .int(Int64(pages))])
    }
}

/// A flag shared with closures.
final class Flag: Sendable {
    let value: Mutex<Bool>
    init(_ v: Bool) { value = Mutex(v) }
    var get: Bool { value.withLock { $0 } }
    func set(_ v: Bool) { value.withLock { $0 = v } }
}

/// A count shared with closures.
final class Counter: Sendable {
    private let count = Mutex(0)
    var value: Int { count.withLock { $0 } }
    func add() { count.withLock { $0 += 1 } }
}

final class Harness: Sendable {
    let clock: ManualClock
    let events: EventLog
    let condition: ScriptedCondition
    let usage: ReplicationUsage
    let mirror: PagedMirror
    let scheduler: ReplicationScheduler
    let reachable: Flag

    init(
        policy: PolicyConfig, store: ReplicationStore? = nil, lastSuccess: Date? = nil, pages: Int = 3,
        pageTime: Duration = .milliseconds(400),
        urgency: @escaping @Sendable () -> ReplicationUrgency = { .none }
    ) {
        let clock = ManualClock()
        let events = EventLog()
        let condition = ScriptedCondition()
        let usage = ReplicationUsage()
        let reachable = Flag(true)
        let mirror = PagedMirror(clock: clock, pages: pages, pageTime: pageTime)
        let scheduler = ReplicationScheduler(
            policies: ["p": policy], store: store, clock: clock, calendar: utc, conditions: condition,
            events: { events.record($0, $1) }, spawn: { _, work in work() }, random: { $0.upperBound })
        scheduler.register(
            ReplicationJob(
                api: .algolia, name: "products", policy: "p", lastSuccess: lastSuccess, usage: usage,
                isReachable: { reachable.get }, urgency: urgency, run: { mirror.run($0) }))
        self.clock = clock
        self.events = events
        self.condition = condition
        self.usage = usage
        self.reachable = reachable
        self.mirror = mirror
        self.scheduler = scheduler
    }

    var runs: Int { mirror.runs.withLock { $0.count } }
    var status: JSON { scheduler.status("algolia:products")! }
}

func basePolicy(_ edit: (inout PolicyConfig) -> Void = { _ in }) -> PolicyConfig {
    var c = PolicyConfig(
        activeInterval: .seconds(5), idleInterval: .seconds(60), activeWindow: .seconds(10),
        retry: RetryConfig(initial: .seconds(2), max: .seconds(30)))
    edit(&c)
    return c
}

@Suite struct SchedulerTests {
    @Test func idleToInUseSwitchesTheInterval() {
        let h = Harness(policy: basePolicy())
        h.scheduler.tick()  // not started: decides, runs nothing
        #expect(h.runs == 0)
        h.scheduler.start()  // never synced: runs at once
        #expect(h.runs == 1)
        h.clock.advance(.seconds(6))
        h.scheduler.tick()
        #expect(h.runs == 1)  // idle: 60 s
        #expect(h.status["waitingFor"] == "interval")
        #expect(h.status["inUse"] == false)
        h.usage.touch(at: h.clock.now)
        h.scheduler.tick()
        #expect(h.runs == 2)  // in use: 5 s had passed, so at once
        #expect(h.status["inUse"] == true)
        h.clock.advance(.seconds(4))
        h.scheduler.tick()
        #expect(h.runs == 2)
        h.clock.advance(.seconds(2))
        h.scheduler.tick()
        #expect(h.runs == 3)
        #expect(h.events.names.filter { $0 == "runDidFinish" }.count == 3)
        #expect(h.events.last("runDidFinish")?["mirror"] == "algolia:products")
        #expect(h.events.last("runDidFinish")?["index"] == "products")
    }

    @Test func aBudgetSpreadsALargeRunOverSeveralRuns() {
        let h = Harness(policy: basePolicy { $0.maxRunDuration = .seconds(1) }, pages: 7)
        h.scheduler.start()
        #expect(h.runs == 1)
        #expect(h.mirror.position.withLock { $0 } == 3)  // 3 pages of 400 ms: 1.2 s ≥ 1 s
        #expect(h.events.names.contains("runBudgetReached"))
        #expect(h.status["resumePending"] == true)
        #expect(h.status["lastRunOutcome"] == "budgetReached")
        h.usage.touch(at: h.clock.now)
        h.clock.advance(.seconds(5))
        h.scheduler.tick()
        #expect(h.mirror.runs.withLock { $0.last?.1 } == true)  // resumed
        #expect(h.mirror.position.withLock { $0 } == 6)
        h.usage.touch(at: h.clock.now)  // still in use (the active window is 10 s)
        h.clock.advance(.seconds(5))
        h.scheduler.tick()
        #expect(h.mirror.position.withLock { $0 } == 0)  // completed and reset
        #expect(h.status["lastRunOutcome"] == "completed")
        #expect(h.status["resumePending"] == false)
        #expect(h.events.names.filter { $0 == "runBudgetReached" }.count == 2)
        #expect(h.events.last("runBudgetReached")?["budgetMs"] == 1000)
        #expect(h.events.names.filter { $0 == "runDidProgress" }.count == 7)
    }

    @Test func aFirstSyncStoppedByItsBudgetWaitsForTheInterval() {
        // Never synced (the mirror cannot answer: urgency `.required`), 7 pages of 400 ms, 1 s budget.
        let h = Harness(
            policy: basePolicy { $0.maxRunDuration = .seconds(1) }, pages: 7, urgency: { .required })
        h.scheduler.start()
        #expect(h.runs == 1)  // the run after its budget does not start at once
        #expect(h.status["lastRunOutcome"] == "budgetReached")
        #expect(h.status["waitingFor"] == "interval")
        let end = h.clock.now
        let next = Timestamps.rfc3339(secondsSince1970: end.addingTimeInterval(60).timeIntervalSince1970)
        #expect(h.status["nextRunAt"] == .string(next))  // idle: 60 s after the run ended
        h.clock.advance(.seconds(59))
        h.scheduler.tick()
        #expect(h.runs == 1)
        h.clock.advance(.seconds(1))
        h.scheduler.tick()
        #expect(h.runs == 2)
        #expect(h.mirror.runs.withLock { $0.last?.0 } == .schedule)
        #expect(h.mirror.runs.withLock { $0.last?.1 } == true)  // resumed
        #expect(h.mirror.position.withLock { $0 } == 6)
    }

    @Test func aConditionSaysNoThenYes() {
        let h = Harness(
            policy: basePolicy { $0.condition = ConditionConfig(command: ["on-wifi"], timeout: .seconds(1)) })
        h.scheduler.start()
        #expect(h.runs == 0)
        #expect(h.condition.calls.withLock { $0 } == [["on-wifi"]])
        #expect(h.status["waitingFor"] == "condition")
        #expect(h.status["condition"] == "exit 1")
        h.clock.advance(.seconds(1))
        h.scheduler.tick()
        #expect(h.condition.calls.withLock { $0.count } == 1)  // asked again after retry.initial (2 s)
        h.condition.answer.withLock { $0 = 0 }
        h.clock.advance(.seconds(1))
        h.scheduler.tick()
        #expect(h.runs == 1)
        #expect(h.condition.calls.withLock { $0.count } == 2)
        #expect(h.status["condition"] == .null)
    }

    @Test func pauseStopsARunAndResumeContinuesIt() {
        let h = Harness(policy: basePolicy(), pages: 3)
        h.scheduler.pause("p")
        h.scheduler.start()
        #expect(h.runs == 0)
        #expect(h.status["waitingFor"] == "paused")
        #expect(h.scheduler.policiesStatus()["p"]?["paused"] == true)
        h.scheduler.resume("p")
        #expect(h.runs == 1)
        #expect(h.scheduler.pause("nope") == false)
    }

    @Test func aPolicyPausedDuringARunStopsItAtTheNextCheckpoint() {
        let clock = ManualClock()
        let events = EventLog()
        let position = Mutex(0)
        let schedulerBox = Mutex<ReplicationScheduler?>(nil)
        let scheduler = ReplicationScheduler(
            policies: ["p": basePolicy()], store: nil, clock: clock, calendar: utc,
            events: { events.record($0, $1) }, spawn: { _, work in work() })
        schedulerBox.withLock { $0 = scheduler }
        scheduler.register(
            ReplicationJob(
                api: .odata, name: "nw", policy: "p", usage: ReplicationUsage(), isReachable: { true },
                urgency: { .none },
                run: { context in
                    while position.withLock({ $0 }) < 5 {
                        if context.shouldStop { return .stopped([:]) }
                        position.withLock { $0 += 1 }
                        if position.withLock({ $0 }) == 2 { _ = schedulerBox.withLock { $0 }?.pause("p") }
                    }
                    return .completed([:])
                }))
        scheduler.start()
        #expect(position.withLock { $0 } == 2)
        #expect(events.last("runDidFinish")?["stoppedBy"] == "paused")
        #expect(events.last("runDidFinish")?["service"] == "nw")
        scheduler.resume("p")
        #expect(position.withLock { $0 } == 5)
        #expect(events.last("runDidFinish")?["completed"] == true)
    }

    @Test func aFailedRunBacksOffAndRetriesWhenReachableAgain() {
        let h = Harness(policy: basePolicy())
        h.mirror.fail.withLock { $0 = true }
        h.scheduler.start()
        #expect(h.runs == 1)
        #expect(h.status["waitingFor"] == "backoff")
        #expect(h.status["failures"] == 1)
        #expect(h.events.last("runDidFail")?["error"] == "upstream unavailable: refused")
        h.clock.advance(.seconds(1))
        h.scheduler.tick()
        #expect(h.runs == 1)  // retry in 2 s
        h.reachable.set(false)
        h.clock.advance(.seconds(1))
        h.scheduler.tick()
        #expect(h.runs == 1)
        #expect(h.status["waitingFor"] == "unreachable")
        h.reachable.set(true)
        h.mirror.fail.withLock { $0 = false }
        h.scheduler.reachabilityChanged("algolia:products", reachable: true)
        h.scheduler.tick()
        #expect(h.runs == 2)
        #expect(h.status["failures"] == 0)
        h.clock.advance(.seconds(3))
        h.scheduler.tick()
        #expect(h.runs == 2)  // idle again: 60 s
    }

    @Test func theScheduleSurvivesARestart() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("repl-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let pool = try DatabasePool(path: dir.appendingPathComponent("state.sqlite").path)
        let store = try ReplicationStore(pool: pool)
        let first = Harness(policy: basePolicy { $0.maxRunDuration = .seconds(1) }, store: store, pages: 5)
        first.scheduler.start()
        #expect(first.status["resumePending"] == true)
        first.scheduler.pause("p")
        first.usage.touch(at: first.clock.now)
        first.scheduler.stop()

        // Same store, a new process: paused, resume pending, in use, the last run known.
        let second = Harness(policy: basePolicy { $0.maxRunDuration = .seconds(1) }, store: store, pages: 5)
        second.clock.set(first.clock.now.addingTimeInterval(3))
        #expect(second.scheduler.isPaused("p"))
        #expect(second.status["resumePending"] == true)
        #expect(second.status["inUse"] == true)
        #expect(second.status["runs"] == 1)
        second.scheduler.start()
        #expect(second.runs == 0)
        second.scheduler.resume("p")
        second.clock.advance(.seconds(3))
        second.scheduler.tick()
        #expect(second.runs == 1)
        #expect(second.mirror.runs.withLock { $0.first?.1 } == true)

        // A crash in the middle of a run: the next start resumes at once.
        var crashed = try #require(try store.records()["algolia:products"])
        crashed.inProgress = true
        crashed.resume = .none
        crashed.lastEnd = second.clock.now
        try store.save("algolia:products", crashed)
        let third = Harness(policy: basePolicy(), store: store)
        third.clock.set(second.clock.now.addingTimeInterval(1))
        third.scheduler.start()
        #expect(third.runs == 1)
        #expect(third.mirror.runs.withLock { $0.first?.1 } == true)
    }

    @Test func aManualRunIgnoresPauseAndBudget() {
        let h = Harness(policy: basePolicy { $0.maxRunDuration = .seconds(1) }, pages: 6)
        h.scheduler.pause("p")
        let outcome = Mutex<String?>(nil)
        #expect(
            h.scheduler.trigger("algolia:products") { o in
                if case .completed = o { outcome.withLock { $0 = "completed" } }
            } == .started)
        #expect(outcome.withLock { $0 } == "completed")
        #expect(h.scheduler.trigger("algolia:nothing") == .unknown)
        #expect(h.events.last("runDidStart")?["trigger"] == "manual")
    }

    @Test func aFirstTouchAfterIdleWakesTheScheduler() {
        let usage = ReplicationUsage()
        let woken = Mutex(0)
        usage.attach(window: .seconds(10), restored: nil) { woken.withLock { $0 += 1 } }
        let t = Date()
        usage.touch(at: t)
        usage.touch(at: t.addingTimeInterval(1))
        #expect(woken.withLock { $0 } == 1)
        usage.touch(at: t.addingTimeInterval(20))
        #expect(woken.withLock { $0 } == 2)
    }

    /// A job of `h`'s scheduler named `name` whose runs are counted in `count`.
    private func counted(_ name: String, _ count: Counter, policy: String = "p") -> ReplicationJob {
        ReplicationJob(
            api: .algolia, name: name, policy: policy, usage: ReplicationUsage(), isReachable: { true },
            urgency: { .none },
            run: { _ in
                count.add()
                return .completed([:])
            })
    }

    @Test func aReconfigurationKeepsSchedulesAppliesPoliciesDropsAndAdds() {
        let h = Harness(policy: basePolicy { $0.maxRunDuration = .seconds(1) }, pages: 7)
        let other = Counter()
        let extra = Counter()
        h.scheduler.register(counted("other", other))
        h.scheduler.start()
        #expect(h.runs == 1)
        #expect(other.value == 1)
        #expect(h.status["resumePending"] == true)
        // A reload: the idle interval goes from 60 s to 20 s, "other" is removed, "extra" added.
        let products = ReplicationJob(
            api: .algolia, name: "products", policy: "p", usage: h.usage, isReachable: { true },
            urgency: { .none }, run: { h.mirror.run($0) })
        h.scheduler.reconfigure(
            policies: [
                "p": basePolicy {
                    $0.maxRunDuration = .seconds(1)
                    $0.idleInterval = .seconds(20)
                }
            ],
            jobs: [products, counted("extra", extra)])
        #expect(h.scheduler.jobIDs == ["algolia:extra", "algolia:products"])
        #expect(extra.value == 1)  // never synced: at once
        #expect(h.runs == 1)
        #expect(h.status["resumePending"] == true)  // the resume point is kept
        #expect(h.scheduler.policies["p"]?.config.idleInterval == .seconds(20))
        h.clock.advance(.seconds(25))  // under the old 60 s nothing would run
        h.scheduler.tick()
        #expect(h.runs == 2)
        #expect(h.mirror.runs.withLock { $0.last?.1 } == true)  // resumed from the kept point
        #expect(h.status["runs"] == 2)
        #expect(other.value == 1)  // dropped: never run again
        #expect(h.scheduler.status("algolia:other") == nil)
    }

    @Test func aRunGoingOnDuringAReconfigurationGoesOnUnlessItsJobIsDropped() {
        let h = Harness(policy: basePolicy())
        let seen = Mutex<[Bool]>([])
        let scheduler = h.scheduler
        let keep = Mutex(true)
        let job = ReplicationJob(
            api: .algolia, name: "products", policy: "p", usage: h.usage, isReachable: { true },
            urgency: { .none },
            run: { context in
                let kept = keep.withLock { $0 }
                scheduler.reconfigure(
                    policies: ["p": basePolicy()],
                    jobs: kept
                        ? [
                            ReplicationJob(
                                api: .algolia, name: "products", policy: "p", usage: h.usage,
                                isReachable: { true }, urgency: { .none }, run: { _ in .completed([:]) })
                        ] : [])
                seen.withLock { $0.append(context.shouldStop) }
                return context.shouldStop ? .stopped([:]) : .completed([:])
            })
        scheduler.reconfigure(policies: ["p": basePolicy()], jobs: [job])
        scheduler.start()
        // Kept: the run was not told to stop, and its end is recorded in the kept schedule.
        #expect(seen.withLock { $0 } == [false])
        #expect(h.status["lastRunOutcome"] == "completed")
        #expect(h.status["running"] == false)
        keep.withLock { $0 = false }
        scheduler.reconfigure(policies: ["p": basePolicy()], jobs: [job])
        #expect(scheduler.trigger("algolia:products") == .started)
        // Dropped during its run: told to stop at its next checkpoint.
        #expect(seen.withLock { $0 } == [false, true])
        #expect(scheduler.jobIDs.isEmpty)
    }
}
