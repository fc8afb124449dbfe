import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A mutex with a condition variable, for the few places that must block a thread until another
/// thread signals (worker queues, stream back-pressure). Everything else uses `Synchronization.Mutex`.
public final class ConditionLock: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let cond = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    /// Creates an unlocked lock.
    public init() {
        pthread_mutex_init(mutex, nil)
        var attr = pthread_condattr_t()
        pthread_condattr_init(&attr)
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC)
        pthread_cond_init(cond, &attr)
        pthread_condattr_destroy(&attr)
    }

    deinit {
        pthread_cond_destroy(cond)
        pthread_mutex_destroy(mutex)
        cond.deallocate()
        mutex.deallocate()
    }

    /// Acquires the lock.
    public func lock() { pthread_mutex_lock(mutex) }
    /// Releases the lock.
    public func unlock() { pthread_mutex_unlock(mutex) }

    /// Runs `body` with the lock held.
    @inline(__always)
    public func withLock<T>(_ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }

    /// Waits (the lock must be held) until signalled.
    public func wait() { pthread_cond_wait(cond, mutex) }

    /// Waits (the lock must be held) until signalled or until `deadline` (monotonic nanoseconds) passes.
    /// Returns false on timeout.
    @discardableResult
    public func wait(untilNanos deadline: UInt64) -> Bool {
        var ts = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
        return pthread_cond_timedwait(cond, mutex, &ts) == 0
    }

    /// Waits (the lock must be held) until `done()` holds or `deadline` (monotonic nanoseconds) passes;
    /// returns `done()`. Spurious wake-ups are absorbed here, so callers write no loop of their own.
    @discardableResult
    public func wait(until done: () -> Bool, deadline: UInt64) -> Bool {
        while !done() {
            if monotonicNanos() >= deadline { return false }
            wait(untilNanos: deadline)
        }
        return true
    }

    /// Wakes one waiter.
    public func signal() { pthread_cond_signal(cond) }
    /// Wakes every waiter.
    public func broadcast() { pthread_cond_broadcast(cond) }
}

/// A one-way stop flag that threads can wait on: ``sleep(for:)`` is a pause (a retry's backoff, a
/// scheduler's interval) that ends early, and for good, once ``stop()`` is called. This is how blocking
/// loops wait, instead of `usleep`/`Thread.sleep`, so that shutdown never waits out a backoff.
public final class StopSignal: Sendable {
    private let lock = ConditionLock()
    private let flag = Atomic<Bool>(false)

    /// Creates a signal that is not stopped.
    public init() {}

    /// Whether ``stop()`` was called.
    public var isStopped: Bool { flag.load(ordering: .acquiring) }

    /// Stops: every current and later ``sleep(for:)`` returns false at once.
    public func stop() {
        lock.withLock {
            flag.store(true, ordering: .releasing)
            lock.broadcast()
        }
    }

    /// Waits for `duration`; returns false (early) when the signal is, or becomes, stopped.
    @discardableResult
    public func sleep(for duration: Duration) -> Bool {
        let deadline = duration.fromNow
        return lock.withLock { !lock.wait(until: { isStopped }, deadline: deadline) }
    }

    /// Wakes sleepers without stopping, so that they re-check their own state (for loops that wait for
    /// either a time or an event).
    public func poke() { lock.withLock { lock.broadcast() } }

    /// Waits until `done()` holds (re-checked on each ``poke()``), the signal is stopped, or `duration`
    /// passes; returns `done()`.
    @discardableResult
    public func wait(for duration: Duration, until done: () -> Bool) -> Bool {
        let deadline = duration.fromNow
        return lock.withLock {
            lock.wait(until: { isStopped || done() }, deadline: deadline)
            return done()
        }
    }
}
