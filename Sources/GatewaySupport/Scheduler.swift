import Foundation
import Synchronization

/// Work scheduled on a ``Scheduler``: cancel it, and it will not run (if it has not started yet).
public final class ScheduledWork: Sendable {
    fileprivate let cancelled = Atomic<Bool>(false)
    fileprivate let work: @Sendable () -> Void
    fileprivate let interval: UInt64?

    fileprivate init(interval: UInt64?, work: @escaping @Sendable () -> Void) {
        self.interval = interval
        self.work = work
    }

    /// Cancels the work; a repeating one does not run again. Idempotent, callable from any thread.
    public func cancel() { cancelled.store(true, ordering: .releasing) }

    /// Whether ``cancel()`` was called.
    public var isCancelled: Bool { cancelled.load(ordering: .acquiring) }
}

/// The gateway's one timer facility: work to run once after a delay, or repeatedly at an interval, on
/// one timer thread shared by every module (no polling loops, no ad-hoc dispatch timers). Work runs on
/// that thread in deadline order and must not block: it answers, flips state, or hands blocking work to
/// a ``WorkerPool`` or a thread of its own.
///
/// Promises: work never runs before its deadline; cancelled work does not start; a repeating work's
/// runs never overlap (the next deadline is counted from the end of a run).
public final class Scheduler: @unchecked Sendable {
    /// The process-wide scheduler, started on first use.
    public static let shared = Scheduler(name: "mg-timer")

    private struct Entry {
        var deadline: UInt64
        var sequence: UInt64
        var work: ScheduledWork
    }

    private struct State {
        var heap: [Entry] = []
        var sequence: UInt64 = 0
        var started = false
    }

    private let lock = ConditionLock()
    private var state = State()  // guarded by `lock`
    private let name: String

    /// Creates a scheduler whose thread is named `name` (started on first use).
    public init(name: String) { self.name = name }

    /// Runs `work` once, `delay` from now.
    @discardableResult
    public func schedule(after delay: Duration, _ work: @escaping @Sendable () -> Void) -> ScheduledWork {
        let item = ScheduledWork(interval: nil, work: work)
        enqueue(item, at: delay.fromNow)
        return item
    }

    /// Runs `work` every `interval` (the first run one interval from now) until cancelled.
    @discardableResult
    public func repeating(every interval: Duration, _ work: @escaping @Sendable () -> Void) -> ScheduledWork {
        let step = max(1, interval.nanoseconds)
        let item = ScheduledWork(interval: step, work: work)
        enqueue(item, at: monotonicNanos() &+ step)
        return item
    }

    /// Number of pending items (cancelled ones included until their deadline); for tests.
    public var pending: Int { lock.withLock { state.heap.count } }

    private func enqueue(_ work: ScheduledWork, at deadline: UInt64) {
        let start: Bool = lock.withLock {
            state.sequence += 1
            push(Entry(deadline: deadline, sequence: state.sequence, work: work))
            lock.signal()
            if state.started { return false }
            state.started = true
            return true
        }
        if start {
            let thread = Thread { [self] in self.loop() }
            thread.name = name
            thread.start()
        }
    }

    private func loop() {
        while true {
            let due: Entry = lock.withLock {
                while true {
                    guard let first = state.heap.first else {
                        lock.wait()
                        continue
                    }
                    if first.work.isCancelled {
                        _ = pop()
                        continue
                    }
                    if monotonicNanos() >= first.deadline { return pop() }
                    lock.wait(untilNanos: first.deadline)
                }
            }
            due.work.work()
            if let interval = due.work.interval, !due.work.isCancelled {
                lock.withLock {
                    state.sequence += 1
                    push(
                        Entry(
                            deadline: monotonicNanos() &+ interval, sequence: state.sequence, work: due.work))
                }
            }
        }
    }

    // MARK: binary min-heap on (deadline, sequence); the lock is held

    private static func before(_ a: Entry, _ b: Entry) -> Bool {
        a.deadline != b.deadline ? a.deadline < b.deadline : a.sequence < b.sequence
    }

    private func push(_ entry: Entry) {
        state.heap.append(entry)
        var i = state.heap.count - 1
        while i > 0 {
            let parent = (i - 1) / 2
            guard Self.before(state.heap[i], state.heap[parent]) else { break }
            state.heap.swapAt(i, parent)
            i = parent
        }
    }

    private func pop() -> Entry {
        let top = state.heap[0]
        let last = state.heap.removeLast()
        if !state.heap.isEmpty {
            state.heap[0] = last
            var i = 0
            let n = state.heap.count
            while true {
                let l = 2 * i + 1
                let r = l + 1
                var m = i
                if l < n, Self.before(state.heap[l], state.heap[m]) { m = l }
                if r < n, Self.before(state.heap[r], state.heap[m]) { m = r }
                if m == i { break }
                state.heap.swapAt(i, m)
                i = m
            }
        }
        return top
    }
}
