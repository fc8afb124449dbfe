#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Monotonic clock in nanoseconds, the one time base of deadlines in the gateway (the server's request
/// deadlines, stream deadlines, scheduled work, condition waits).
@inline(__always)
public func monotonicNanos() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// The one set of `Duration` conversions of the gateway. Negative durations saturate at zero in the
/// integral forms, so that a deadline computed from one is never in the past by wrap-around.
extension Duration {
    /// The duration in whole nanoseconds, saturating at zero.
    public var nanoseconds: UInt64 {
        let (s, a) = components
        if s < 0 { return 0 }
        return UInt64(s) * 1_000_000_000 + UInt64(a / 1_000_000_000)
    }

    /// The duration in whole milliseconds, saturating at zero.
    public var milliseconds: Int64 {
        let (s, a) = components
        if s < 0 { return 0 }
        return s * 1000 + a / 1_000_000_000_000_000
    }

    /// The duration in seconds, as a Double (negative stays negative).
    public var seconds: Double {
        let (s, a) = components
        return Double(s) + Double(a) / 1e18
    }

    /// The monotonic instant (see ``monotonicNanos()``) this long from now.
    public var fromNow: UInt64 { monotonicNanos() &+ nanoseconds }
}
