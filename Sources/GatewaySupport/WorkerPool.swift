import Foundation

/// A fixed set of threads that run blocking work (upstream transfers, SQLite writes) off the
/// libmicrohttpd polling thread. The queue is bounded in practice by the server's connection limit:
/// each connection has at most one request in flight.
public final class WorkerPool: @unchecked Sendable {
    private let lock = ConditionLock()
    private var jobs: [@Sendable () -> Void] = []
    private var head = 0
    private var stopping = false
    private var threads: [Thread] = []
    private let running = ConditionLock()
    private var live = 0
    /// What a taken job's slot holds until the queue is compacted.
    private static let done: @Sendable () -> Void = {}

    /// Starts `count` threads named `name-N`.
    public init(threads count: Int, name: String, stackSize: Int = 1 << 20) {
        for i in 0..<max(1, count) {
            let thread = Thread { [self] in self.loop() }
            thread.name = "\(name)-\(i)"
            thread.stackSize = stackSize
            threads.append(thread)
        }
        live = threads.count
        for thread in threads { thread.start() }
    }

    /// Queues `job`; it runs on one of the pool's threads. Jobs submitted after `shutdown` are dropped.
    public func submit(_ job: @escaping @Sendable () -> Void) {
        lock.withLock {
            guard !stopping else { return }
            jobs.append(job)
            lock.signal()
        }
    }

    /// Number of jobs waiting for a thread.
    public var queued: Int { lock.withLock { jobs.count - head } }

    /// Lets queued jobs finish, then stops the threads; waits at most `timeoutNanos`.
    public func shutdown(timeoutNanos: UInt64 = 5_000_000_000) {
        lock.withLock {
            stopping = true
            lock.broadcast()
        }
        let deadline = monotonicNanos() + timeoutNanos
        running.withLock {
            while live > 0 {
                if !running.wait(untilNanos: deadline) && monotonicNanos() >= deadline { break }
            }
        }
    }

    private func loop() {
        while true {
            var job: (@Sendable () -> Void)?
            lock.withLock {
                while head == jobs.count && !stopping { lock.wait() }
                if head < jobs.count {
                    job = jobs[head]
                    // Release the slot at once: a job's closure holds what it captured (a request and
                    // its body), which must not outlive the job until the queue is next compacted.
                    jobs[head] = Self.done
                    head += 1
                    if head == jobs.count {
                        jobs.removeAll(keepingCapacity: jobs.count <= 1024)
                        head = 0
                    } else if head > 1024 && head * 2 > jobs.count {
                        jobs.removeFirst(head)
                        head = 0
                    }
                }
            }
            guard let job else { break }
            job()
        }
        running.withLock {
            live -= 1
            running.broadcast()
        }
    }
}
