import Foundation
import GatewayConfig
import JSONCore
import Synchronization
import Testing

@testable import Replication

/// A clock moved by hand: wall time and the monotonic count move together.
final class ManualClock: ReplicationClock {
    private let time = Mutex<(Date, UInt64)>((Date(timeIntervalSince1970: 1_800_000_000), 1_000_000_000))
    var now: Date { time.withLock { $0.0 } }
    var uptimeNanos: UInt64 { time.withLock { $0.1 } }
    func advance(_ d: Duration) {
        time.withLock { t in
            t.0 = t.0.addingTimeInterval(d.seconds)
            t.1 += d.nanoseconds
        }
    }
    func set(_ date: Date) { time.withLock { $0.0 = date } }
}

let utc: Calendar = {
    var c = Calendar(identifier: .gregorian)
    c.timeZone = TimeZone(identifier: "UTC")!
    return c
}()

func policy(_ edit: (inout PolicyConfig) -> Void = { _ in }) -> ReplicationPolicy {
    var c = PolicyConfig(
        activeInterval: .seconds(300), idleInterval: .seconds(86400), activeWindow: .seconds(120),
        retry: RetryConfig(initial: .seconds(10), max: .seconds(600)))
    edit(&c)
    return ReplicationPolicy(name: "p", config: c)
}

@Suite struct PlannerTests {
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)  // 2027-01-15T08:00:00Z

    func plan(
        _ r: ScheduleRecord, _ p: ReplicationPolicy = policy(), at now: Date, inUse: Bool = false,
        reachable: Bool = true, paused: Bool = false, urgency: ReplicationUrgency = .none,
        woken: Bool = false,
        cap: Duration? = nil, requested: Bool = false
    ) -> SchedulePlan {
        SchedulePlanner.plan(
            r, p,
            .init(
                now: now, inUse: inUse, reachable: reachable, paused: paused, urgency: urgency, woken: woken,
                activeIntervalCap: cap, requested: requested), calendar: utc)
    }

    var synced: ScheduleRecord {
        var r = ScheduleRecord()
        r.lastEnd = t0
        r.lastSuccess = t0
        r.lastOutcome = "completed"
        return r
    }

    @Test func neverRunIsDueAtOnce() {
        #expect(plan(ScheduleRecord(), at: t0) == .start(t0))
    }

    @Test func idleWaitsTheIdleIntervalAndInUseTheActiveOne() {
        let later = t0.addingTimeInterval(600)
        #expect(plan(synced, at: later) == .wait(t0.addingTimeInterval(86400), .interval))
        // Becoming in use after a long idle period: the active interval has long passed, so at once.
        #expect(plan(synced, at: later, inUse: true) == .start(later))
        let soon = t0.addingTimeInterval(60)
        #expect(plan(synced, at: soon, inUse: true) == .wait(t0.addingTimeInterval(300), .interval))
    }

    @Test func delayBetweenSyncsCapsTheActiveInterval() {
        let soon = t0.addingTimeInterval(60)
        #expect(
            plan(synced, at: soon, inUse: true, cap: .seconds(120))
                == .wait(t0.addingTimeInterval(120), .interval))
        #expect(
            plan(synced, at: soon, inUse: true, cap: .seconds(3600))
                == .wait(t0.addingTimeInterval(300), .interval))
    }

    @Test func jitterDelaysTheScheduledRun() {
        var r = synced
        r.jitter = 42
        #expect(plan(r, at: t0, inUse: true) == .wait(t0.addingTimeInterval(342), .interval))
    }

    @Test func aFailedRunWaitsForItsRetryTime() {
        var r = synced
        r.failures = 2
        r.retryAt = t0.addingTimeInterval(20)
        #expect(
            plan(r, at: t0.addingTimeInterval(5), inUse: true, urgency: .required)
                == .wait(r.retryAt, .backoff))
        #expect(plan(r, at: t0.addingTimeInterval(20)) == .start(t0.addingTimeInterval(20)))
    }

    @Test func aRunStoppedAtItsBudgetContinuesAtTheNextScheduledTime() {
        var r = synced
        r.resume = .budget
        #expect(
            plan(r, at: t0.addingTimeInterval(1), inUse: true) == .wait(t0.addingTimeInterval(300), .interval)
        )
        r.resume = .now  // interrupted (pause, shutdown, crash): at once
        #expect(plan(r, at: t0.addingTimeInterval(1)) == .start(t0.addingTimeInterval(1)))
    }

    @Test func aBudgetWaitsForTheIntervalEvenForAFirstSyncOrPendingWork() {
        // A first sync (never succeeded) stopped at its budget.
        var r = ScheduleRecord()
        r.lastStart = t0.addingTimeInterval(-1)
        r.lastEnd = t0
        r.resume = .budget
        let soon = t0.addingTimeInterval(0.001)
        let next = t0.addingTimeInterval(300)
        #expect(plan(r, at: soon, inUse: true, urgency: .required) == .wait(next, .interval))
        #expect(plan(r, at: soon, inUse: true, urgency: .pending, woken: true) == .wait(next, .interval))
        #expect(plan(r, at: soon, inUse: true, requested: true) == .wait(next, .interval))
        #expect(plan(r, at: next, inUse: true, urgency: .required) == .start(next))
        // Idle: the idle interval.
        #expect(plan(r, at: soon, urgency: .required) == .wait(t0.addingTimeInterval(86400), .interval))
    }

    @Test func pendingWorkRunsWhenWokenOnly() {
        let soon = t0.addingTimeInterval(1)
        #expect(plan(synced, at: soon, urgency: .pending).startNow == false)
        #expect(plan(synced, at: soon, urgency: .pending, woken: true) == .start(soon))
        #expect(plan(synced, at: soon, urgency: .required) == .start(soon))
    }

    @Test func pausedAndUnreachableWait() {
        #expect(plan(ScheduleRecord(), at: t0, paused: true) == .wait(nil, .paused))
        #expect(plan(ScheduleRecord(), at: t0, reachable: false) == .wait(nil, .unreachable))
        let anyway = policy { $0.onlyWhenReachable = false }
        #expect(plan(ScheduleRecord(), anyway, at: t0, reachable: false) == .start(t0))
    }

    @Test func windowsCrossingMidnightGateTheStart() {
        let night = policy { $0.windows = [TimeWindow("22:00-06:00")!, TimeWindow("12:00-12:30")!] }
        // 08:00 UTC: outside both; the next opening is 12:00.
        let p = plan(ScheduleRecord(), night, at: t0)
        #expect(p == .wait(t0.addingTimeInterval(4 * 3600), .window))
        // 12:10 and 23:30 and 05:59 are inside.
        for offset in [4 * 3600 + 600, 15 * 3600 + 1800, 21 * 3600 + 3540] {
            let at = t0.addingTimeInterval(Double(offset))
            #expect(plan(ScheduleRecord(), night, at: at) == .start(at))
        }
        // 06:00 is outside again (the end is exclusive); next opening 12:00 the same day.
        let six = t0.addingTimeInterval(22 * 3600)
        #expect(plan(ScheduleRecord(), night, at: six) == .wait(six.addingTimeInterval(6 * 3600), .window))
    }

    @Test func aRefusedConditionIsAskedAgainLater() {
        var r = synced
        r.refusals = 1
        r.recheckAt = t0.addingTimeInterval(700)
        #expect(plan(r, at: t0.addingTimeInterval(400), inUse: true) == .wait(r.recheckAt, .condition))
    }

    @Test func backoffDoublesUpToTheMaximum() {
        let p = policy()
        #expect(p.backoff(attempt: 1, factor: 1) == .seconds(10))
        #expect(p.backoff(attempt: 3, factor: 1) == .seconds(40))
        #expect(p.backoff(attempt: 30, factor: 1) == .seconds(600))
        #expect(p.backoff(attempt: 3, factor: 0.5) == .seconds(20))
    }
}
