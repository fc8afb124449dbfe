import Foundation
import GatewayConfig
import GatewaySupport

/// A replication policy in force (`policies.NAME`, SPEC §6), with the arithmetic of its schedule: the
/// interval in use or idle, the retry backoff, and the local-time windows.
public struct ReplicationPolicy: Sendable, Equatable {
    /// The policy's name in the configuration.
    public var name: String
    /// The configured keys.
    public var config: PolicyConfig

    /// The policy `name` with `config`.
    public init(name: String, config: PolicyConfig) {
        self.name = name
        self.config = config
    }

    /// The time between runs: `activeInterval` while in use (never more than `cap`, Algolia's
    /// `delayBetweenSyncs`), `idleInterval` otherwise.
    public func interval(inUse: Bool, cap: Duration? = nil) -> Duration {
        guard inUse else { return config.idleInterval }
        return cap.map { min($0, config.activeInterval) } ?? config.activeInterval
    }

    /// The pause after the `attempt`-th consecutive failure (1-based): `retry.initial` doubled per
    /// attempt, at most `retry.max`, times `factor` (the jitter, drawn in 0.5...1).
    public func backoff(attempt: Int, factor: Double) -> Duration {
        let initial = config.retry.initial.seconds
        let exponent = Double(max(0, min(attempt - 1, 40)))
        let seconds = min(config.retry.max.seconds, initial * pow(2, exponent))
        return .milliseconds(Int64(seconds * factor * 1000))
    }

    /// Whether `date` falls inside a window (always, without windows), in `calendar`'s time zone.
    public func isInsideWindow(_ date: Date, calendar: Calendar) -> Bool {
        guard !config.windows.isEmpty else { return true }
        let minute = Self.minuteOfDay(date, calendar)
        return config.windows.contains { $0.contains(minuteOfDay: minute) }
    }

    /// The first minute at or after `date` when a window opens (nil without windows).
    public func nextWindowOpening(after date: Date, calendar: Calendar) -> Date? {
        guard !config.windows.isEmpty else { return nil }
        let start = calendar.dateInterval(of: .minute, for: date)?.start ?? date
        // A window opens within a day; 1441 steps of a minute cover every case, including a day of a
        // clock change.
        for step in 1...(24 * 60 + 1) {
            let candidate = start.addingTimeInterval(Double(step) * 60)
            if isInsideWindow(candidate, calendar: calendar) { return candidate }
        }
        return nil
    }

    static func minuteOfDay(_ date: Date, _ calendar: Calendar) -> Int {
        let c = calendar.dateComponents([.hour, .minute], from: date)
        return (c.hour ?? 0) * 60 + (c.minute ?? 0)
    }
}
