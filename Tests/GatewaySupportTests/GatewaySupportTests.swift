import Glibc
import Synchronization
import Testing

@testable import GatewaySupport

/// Collects values from several threads; `wait` blocks (bounded) until `count` arrived.
final class Arrivals: @unchecked Sendable {
    private let lock = ConditionLock()
    private var values: [Int] = []

    func add(_ v: Int) {
        lock.withLock {
            values.append(v)
            lock.broadcast()
        }
    }

    func wait(count: Int, timeout: Duration = .seconds(10)) -> [Int] {
        let deadline = timeout.fromNow
        return lock.withLock {
            lock.wait(until: { values.count >= count }, deadline: deadline)
            return values
        }
    }
}

@Suite struct DurationTests {
    @Test func conversionsSaturateAtZeroAndKeepFractions() {
        #expect(Duration.milliseconds(1500).nanoseconds == 1_500_000_000)
        #expect(Duration.milliseconds(1500).milliseconds == 1500)
        #expect(Duration.milliseconds(1500).seconds == 1.5)
        #expect(Duration.microseconds(2500).milliseconds == 2)
        #expect(Duration.seconds(-3).nanoseconds == 0)
        #expect(Duration.seconds(-3).milliseconds == 0)
        #expect(Duration.seconds(-3).seconds == -3)
        let before = monotonicNanos()
        #expect(Duration.seconds(5).fromNow >= before + 5_000_000_000)
    }
}

@Suite struct SchedulerTests {
    @Test func runsWorkInDeadlineOrderAndSkipsCancelledWork() {
        let scheduler = Scheduler(name: "test-timer")
        let arrivals = Arrivals()
        scheduler.schedule(after: .milliseconds(60)) { arrivals.add(3) }
        let cancelled = scheduler.schedule(after: .milliseconds(20)) { arrivals.add(99) }
        scheduler.schedule(after: .milliseconds(40)) { arrivals.add(2) }
        scheduler.schedule(after: .zero) { arrivals.add(1) }
        cancelled.cancel()
        #expect(cancelled.isCancelled)
        // A last item after all the others: once it ran, the cancelled one had its chance.
        scheduler.schedule(after: .milliseconds(120)) { arrivals.add(4) }
        #expect(arrivals.wait(count: 4) == [1, 2, 3, 4])
    }

    @Test func repeatingWorkRunsUntilCancelledAndNeverOverlaps() {
        let scheduler = Scheduler(name: "test-repeat")
        let arrivals = Arrivals()
        let running = Atomic<Int>(0)
        let overlapped = Atomic<Bool>(false)
        let counter = Atomic<Int>(0)
        let work = scheduler.repeating(every: .milliseconds(5)) {
            if running.add(1, ordering: .relaxed).newValue > 1 { overlapped.store(true, ordering: .relaxed) }
            arrivals.add(counter.add(1, ordering: .relaxed).newValue)
            running.subtract(1, ordering: .relaxed)
        }
        #expect(arrivals.wait(count: 3).prefix(3) == [1, 2, 3])
        work.cancel()
        // After cancel, at most the run in progress completes; a later one-shot proves the thread moved on.
        let seen = counter.load(ordering: .relaxed)
        let marker = Arrivals()
        scheduler.schedule(after: .milliseconds(30)) { marker.add(0) }
        #expect(marker.wait(count: 1) == [0])
        let after = counter.load(ordering: .relaxed)
        #expect(after <= seen + 1)
        let overlap = overlapped.load(ordering: .relaxed)
        #expect(!overlap)
    }
}

@Suite struct StopSignalTests {
    @Test func stopEndsASleepAndEveryLaterOne() {
        let signal = StopSignal()
        let pool = WorkerPool(threads: 1, name: "test-stop")
        defer { pool.shutdown() }
        let result = Arrivals()
        pool.submit { result.add(signal.sleep(for: .seconds(60)) ? 1 : 0) }
        signal.stop()
        #expect(result.wait(count: 1) == [0])
        #expect(signal.isStopped)
        #expect(signal.sleep(for: .seconds(60)) == false)
    }

    @Test func sleepRunsItsCourseWithoutStop() {
        let signal = StopSignal()
        #expect(signal.sleep(for: .milliseconds(1)))
        #expect(!signal.isStopped)
    }

    @Test func pokeWakesAWaitWhoseConditionBecameTrue() {
        let signal = StopSignal()
        let flag = Atomic<Bool>(false)
        let pool = WorkerPool(threads: 1, name: "test-poke")
        defer { pool.shutdown() }
        let result = Arrivals()
        pool.submit {
            result.add(signal.wait(for: .seconds(60), until: { flag.load(ordering: .acquiring) }) ? 1 : 0)
        }
        flag.store(true, ordering: .releasing)
        signal.poke()
        #expect(result.wait(count: 1) == [1])
    }
}

@Suite struct WorkerPoolTests {
    @Test func runsEverySubmittedJobAndDropsJobsAfterShutdown() {
        let pool = WorkerPool(threads: 3, name: "test-pool")
        let arrivals = Arrivals()
        for i in 0..<50 { pool.submit { arrivals.add(i) } }
        #expect(arrivals.wait(count: 50).sorted() == Array(0..<50))
        pool.shutdown()
        pool.submit { arrivals.add(1000) }
        #expect(pool.queued == 0)
    }

    /// Issue 23: a job's captures (a request and its body) were kept until about a thousand later jobs
    /// had run; each is released once its job ran.
    @Test func aJobsCapturesAreReleasedOnceItRan() {
        final class Payload: Sendable {}
        let pool = WorkerPool(threads: 1, name: "test-release")
        defer { pool.shutdown() }
        let arrivals = Arrivals()
        weak var released: Payload?
        do {
            let payload = Payload()
            released = payload
            pool.submit { withExtendedLifetime(payload) { arrivals.add(1) } }
            pool.submit { arrivals.add(2) }  // a later job, so the queue is not simply emptied
        }
        #expect(arrivals.wait(count: 2) == [1, 2])
        var gone = false
        for _ in 0..<200 where !gone {
            gone = released == nil
            if !gone { usleep(5000) }
        }
        #expect(gone, "the job's payload outlived the job")
    }
}
