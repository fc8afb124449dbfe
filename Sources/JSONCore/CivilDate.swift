/// A date of the proleptic Gregorian calendar, converted to and from days since 1970-01-01 with Howard
/// Hinnant's civil-from-days algorithms: exact for every year an `Int` can count, no tables, no time zone,
/// no Foundation.
///
/// Promises: `CivilDate(daysSince1970: n).daysSince1970 == n` for every `n`; month is 1...12 and day
/// 1...31 for every date made from days.
public struct CivilDate: Sendable, Hashable {
    /// The year (1 BCE is 0, 2 BCE is -1).
    public var year: Int
    /// The month, 1...12.
    public var month: Int
    /// The day of the month, 1...31.
    public var day: Int

    /// A date from its parts (not validated: `daysSince1970` of 2026-02-30 is that of 2026-03-02).
    public init(year: Int, month: Int, day: Int) {
        self.year = year
        self.month = month
        self.day = day
    }

    /// The date `days` after (or before, when negative) 1970-01-01.
    public init(daysSince1970 days: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        day = doy - (153 * mp + 2) / 5 + 1
        month = mp < 10 ? mp + 3 : mp - 9
        year = yoe + era * 400 + (month <= 2 ? 1 : 0)
    }

    /// Days from 1970-01-01 to this date (negative before it).
    public var daysSince1970: Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    /// The day of the week, 0 = Sunday … 6 = Saturday.
    public var weekday: Int {
        let w = (daysSince1970 + 4) % 7
        return w < 0 ? w + 7 : w
    }

    /// The date and the time of day of `seconds` since 1970-01-01T00:00:00Z (negative ones too).
    public static func split(secondsSince1970 seconds: Int64) -> (date: CivilDate, secondOfDay: Int) {
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        return (CivilDate(daysSince1970: Int(days)), Int(seconds - days * 86_400))
    }

    /// `YYYY-MM-DD` (years padded to four digits).
    public var iso: String { Self.pad(year, 4) + "-" + Self.pad(month, 2) + "-" + Self.pad(day, 2) }

    /// `hh:mm:ss` of a second of the day (0..<86400).
    public static func clock(_ secondOfDay: Int) -> String {
        pad(secondOfDay / 3600, 2) + ":" + pad(secondOfDay / 60 % 60, 2) + ":" + pad(secondOfDay % 60, 2)
    }

    /// `value` in decimal, zero-padded to `width` digits (wider values keep all their digits; a negative
    /// value keeps its sign in front of the padding).
    public static func pad(_ value: some BinaryInteger, _ width: Int) -> String {
        let text = String(value.magnitude)
        let padded = String(repeating: "0", count: max(0, width - text.count)) + text
        return value < 0 ? "-" + padded : padded
    }
}
