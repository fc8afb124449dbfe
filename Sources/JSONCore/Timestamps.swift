/// The two timestamp formats the gateway writes, built from ``CivilDate`` with no formatter objects:
/// Foundation's `DateFormatter` and `ISO8601DateFormatter` create an ICU formatter per instance, which
/// cost about a third of an acknowledged offline write's CPU.
///
/// Promises: always UTC; RFC 3339 with exactly three fractional digits (`2026-11-22T05:00:00.000Z`);
/// IMF-fixdate as HTTP uses it (`Sun, 06 Nov 1994 08:49:37 GMT`). Seconds are POSIX seconds since 1970.
public enum Timestamps {
    /// RFC 3339 with milliseconds, UTC.
    public static func rfc3339(secondsSince1970 t: Double) -> String {
        var millis = Int64((t * 1000).rounded(.down))
        var seconds = millis / 1000
        millis -= seconds * 1000
        if millis < 0 {
            millis += 1000
            seconds -= 1
        }
        let (date, clock) = CivilDate.split(secondsSince1970: seconds)
        var out = [UInt8]()
        out.reserveCapacity(24)
        append(&out, date.year, 4)
        out.append(UInt8(ascii: "-"))
        append(&out, date.month, 2)
        out.append(UInt8(ascii: "-"))
        append(&out, date.day, 2)
        out.append(UInt8(ascii: "T"))
        appendClock(&out, clock)
        out.append(UInt8(ascii: "."))
        append(&out, Int(millis), 3)
        out.append(UInt8(ascii: "Z"))
        return String(decoding: out, as: UTF8.self)
    }

    /// IMF-fixdate (RFC 9110 §5.6.7), whole seconds.
    public static func imfDate(secondsSince1970 t: Double) -> String {
        let (date, clock) = CivilDate.split(secondsSince1970: Int64(t.rounded(.down)))
        let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        var out = [UInt8]()
        out.reserveCapacity(29)
        out.append(contentsOf: days[date.weekday].utf8)
        out.append(contentsOf: ", ".utf8)
        append(&out, date.day, 2)
        out.append(UInt8(ascii: " "))
        out.append(contentsOf: months[date.month - 1].utf8)
        out.append(UInt8(ascii: " "))
        append(&out, date.year, 4)
        out.append(UInt8(ascii: " "))
        appendClock(&out, clock)
        out.append(contentsOf: " GMT".utf8)
        return String(decoding: out, as: UTF8.self)
    }

    private static func appendClock(_ out: inout [UInt8], _ secondOfDay: Int) {
        append(&out, secondOfDay / 3600, 2)
        out.append(UInt8(ascii: ":"))
        append(&out, secondOfDay / 60 % 60, 2)
        out.append(UInt8(ascii: ":"))
        append(&out, secondOfDay % 60, 2)
    }

    /// `value` in decimal, zero-padded to `width` digits (wider values keep all their digits).
    private static func append(_ out: inout [UInt8], _ value: Int, _ width: Int) {
        var digits = [UInt8]()
        var v = value
        repeat {
            digits.append(UInt8(48 + v % 10))
            v /= 10
        } while v > 0
        if digits.count < width { out.append(contentsOf: repeatElement(48, count: width - digits.count)) }
        out.append(contentsOf: digits.reversed())
    }
}
