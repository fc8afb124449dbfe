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

    /// Wakes one waiter.
    public func signal() { pthread_cond_signal(cond) }
    /// Wakes every waiter.
    public func broadcast() { pthread_cond_broadcast(cond) }
}

/// Monotonic clock in nanoseconds, the one time base of deadlines in the server.
@inline(__always)
public func monotonicNanos() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

extension Duration {
    /// The duration in whole nanoseconds, saturating at zero.
    public var nanoseconds: UInt64 {
        let (s, a) = components
        if s < 0 { return 0 }
        return UInt64(s) * 1_000_000_000 + UInt64(a / 1_000_000_000)
    }
}
