#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Why a single value string was rejected (the caller adds file, line and key).
struct ValueError: Error {
    let message: String
    init(_ message: String) { self.message = message }
}

/// Parsers for the value syntaxes of the configuration file, usable on their own (e.g. for flags).
public enum ConfigSyntax {
    /// Parses a duration: a number with a unit `ns`, `us`, `ms`, `s`, `m`, `h` or `d`, optionally
    /// repeated (`1h30m`); decimals allowed (`1.5s`); `0` alone means zero.
    public static func duration(_ text: String) -> Duration? { try? parseDuration(text) }

    /// Parses a size: plain bytes (`1024`) or a number with `B`, `KB`, `MB`, `GB`, `TB` (powers of 1000)
    /// or `KiB`, `MiB`, `GiB`, `TiB` (powers of 1024); units are case-insensitive.
    public static func size(_ text: String) -> Int? { try? parseSize(text) }

    static func parseDuration(_ raw: String) throws(ValueError) -> Duration {
        let text = raw.trimmingSpaces()
        if text.isEmpty {
            throw ValueError("expected a duration such as 5s, 200ms or 24h, got an empty value")
        }
        if text.allSatisfy(\.isASCIIDigit) {
            if text.allSatisfy({ $0 == "0" }) { return .zero }
            throw ValueError("duration '\(text)' needs a unit (ms, s, m, h, d), e.g. '\(text)s'")
        }
        var total = Duration.zero
        var rest = Substring(text)
        while !rest.isEmpty {
            let number = rest.prefix { $0.isASCIIDigit || $0 == "." }
            rest = rest.dropFirst(number.count)
            let unit = rest.prefix { $0.isLetter }
            rest = rest.dropFirst(unit.count)
            guard !number.isEmpty, let value = Double(number), value.isFinite else {
                throw ValueError("expected a duration such as 5s, 200ms or 24h, got '\(text)'")
            }
            let nanosPerUnit: Double
            switch unit {
            case "ns": nanosPerUnit = 1
            case "us", "µs": nanosPerUnit = 1e3
            case "ms": nanosPerUnit = 1e6
            case "s": nanosPerUnit = 1e9
            case "m": nanosPerUnit = 60e9
            case "h": nanosPerUnit = 3600e9
            case "d": nanosPerUnit = 86400e9
            case "":
                throw ValueError("duration '\(text)' needs a unit (ms, s, m, h, d)")
            default:
                throw ValueError(
                    "unknown duration unit '\(unit)' in '\(text)' (use ns, us, ms, s, m, h or d)")
            }
            let nanos = value * nanosPerUnit
            guard nanos < 1e18 else { throw ValueError("duration '\(text)' is too large") }
            total += .nanoseconds(Int64(nanos.rounded()))
        }
        return total
    }

    static func parseSize(_ raw: String) throws(ValueError) -> Int {
        let text = raw.trimmingSpaces()
        let number = text.prefix { $0.isASCIIDigit || $0 == "." }
        let unit = text.dropFirst(number.count).trimmingSpaces().lowercased()
        guard !number.isEmpty, let value = Double(number), value.isFinite else {
            throw ValueError("expected a size such as 10MiB, 64KiB or 1024, got '\(text)'")
        }
        let multiplier: Double
        switch unit {
        case "", "b": multiplier = 1
        case "kb", "k": multiplier = 1e3
        case "mb": multiplier = 1e6
        case "gb": multiplier = 1e9
        case "tb": multiplier = 1e12
        case "kib": multiplier = 1024
        case "mib": multiplier = 1024 * 1024
        case "gib": multiplier = 1024 * 1024 * 1024
        case "tib": multiplier = 1024 * 1024 * 1024 * 1024
        default:
            throw ValueError("unknown size unit in '\(text)' (use B, KiB, MiB, GiB, KB, MB or GB)")
        }
        let bytes = (value * multiplier).rounded()
        guard bytes < 9e18 else { throw ValueError("size '\(text)' is too large") }
        return Int(bytes)
    }
}

/// A `host:port` to listen on: `127.0.0.1:8080`, `[::1]:8080`, `localhost:8080`, `0.0.0.0:80`.
public struct ListenAddress: Sendable, Hashable, CustomStringConvertible {
    /// Host without brackets (`::1` for `[::1]:8080`).
    public var host: String
    /// Port; 0 asks the system for a free port.
    public var port: UInt16

    public init(host: String, port: UInt16) {
        self.host = host
        self.port = port
    }

    /// Parses `HOST:PORT`, an IPv6 host in brackets. Returns `nil` when malformed.
    public init?(_ text: String) {
        guard let parsed = try? ListenAddress.parse(text) else { return nil }
        self = parsed
    }

    static func parse(_ raw: String) throws(ValueError) -> ListenAddress {
        let text = raw.trimmingSpaces()
        let host: Substring
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else {
                throw ValueError("expected HOST:PORT such as 127.0.0.1:8080 or [::1]:8080, got '\(text)'")
            }
            host = text[text.index(after: text.startIndex)..<close]
            let after = text[text.index(after: close)...]
            guard after.hasPrefix(":") else {
                throw ValueError("expected a port after '[\(host)]', e.g. [\(host)]:8080")
            }
            portText = after.dropFirst()
            guard isIPv6(String(host)) else { throw ValueError("'\(host)' is not an IPv6 address") }
        } else {
            guard let colon = text.lastIndex(of: ":") else {
                throw ValueError("expected HOST:PORT such as 127.0.0.1:8080, got '\(text)' (no port)")
            }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
            if host.contains(":") {
                throw ValueError("an IPv6 address needs brackets: '[\(host)]:\(portText)'")
            }
            if host.allSatisfy({ $0.isASCIIDigit || $0 == "." }) && !isIPv4(String(host)) {
                throw ValueError("'\(host)' is not an IPv4 address")
            }
            if !host.allSatisfy({ $0.isASCIIDigit || $0.isASCIILetter || $0 == "." || $0 == "-" }) {
                throw ValueError("'\(host)' is not a valid host name")
            }
        }
        guard !host.isEmpty else { throw ValueError("missing host in '\(text)' (e.g. 127.0.0.1:8080)") }
        guard !portText.isEmpty, portText.allSatisfy(\.isASCIIDigit), let port = UInt16(portText) else {
            throw ValueError("invalid port '\(portText)' in '\(text)' (0-65535)")
        }
        return ListenAddress(host: String(host), port: port)
    }

    /// `true` for 127.0.0.0/8, `::1` and `localhost`.
    public var isLoopback: Bool {
        let h = host.lowercased()
        if h == "localhost" { return true }
        var v4 = in_addr()
        if inet_pton(AF_INET, h, &v4) == 1 {
            return h.split(separator: ".").first == "127"
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, h, &v6) == 1 {
            let bytes = withUnsafeBytes(of: &v6) { Array($0) }
            if bytes == [UInt8](repeating: 0, count: 15) + [1] { return true }
            // ::ffff:127.x.x.x
            if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xFF && bytes[11] == 0xFF
                && bytes[12] == 127
            {
                return true
            }
        }
        return false
    }

    /// `127.0.0.1:8080`, or `[::1]:8080` for IPv6.
    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    private static func isIPv4(_ s: String) -> Bool {
        var a = in_addr()
        return inet_pton(AF_INET, s, &a) == 1
    }

    private static func isIPv6(_ s: String) -> Bool {
        var a = in6_addr()
        return inet_pton(AF_INET6, s, &a) == 1
    }
}

/// A daily local-time window `HH:MM-HH:MM`; it may wrap past midnight (`22:00-06:00`).
public struct TimeWindow: Sendable, Hashable, CustomStringConvertible {
    /// Minutes after midnight, 0..<1440.
    public var startMinute: Int
    /// Minutes after midnight, 0..<1440; before `startMinute` when the window wraps.
    public var endMinute: Int

    public init(startMinute: Int, endMinute: Int) {
        self.startMinute = startMinute
        self.endMinute = endMinute
    }

    /// Parses `HH:MM-HH:MM`; `nil` when malformed or empty.
    public init?(_ text: String) {
        guard let w = try? TimeWindow.parse(text) else { return nil }
        self = w
    }

    static func parse(_ raw: String) throws(ValueError) -> TimeWindow {
        let text = raw.trimmingSpaces()
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        func minute(_ s: Substring) -> Int? {
            let hm = s.trimmingSpaces().split(separator: ":", omittingEmptySubsequences: false)
            guard hm.count == 2, hm[0].count == 2, hm[1].count == 2,
                let h = Int(hm[0]), let m = Int(hm[1]), (0..<24).contains(h), (0..<60).contains(m)
            else { return nil }
            return h * 60 + m
        }
        guard parts.count == 2, let start = minute(parts[0]), let end = minute(parts[1]) else {
            throw ValueError("expected a window \"HH:MM-HH:MM\" such as \"22:00-06:00\", got '\(text)'")
        }
        guard start != end else { throw ValueError("window '\(text)' is empty (start equals end)") }
        return TimeWindow(startMinute: start, endMinute: end)
    }

    /// Whether a minute of the day (0..<1440) falls inside the window (start inclusive, end exclusive).
    public func contains(minuteOfDay m: Int) -> Bool {
        startMinute < endMinute ? (m >= startMinute && m < endMinute) : (m >= startMinute || m < endMinute)
    }

    public var description: String {
        func f(_ m: Int) -> String {
            let h = m / 60
            let mm = m % 60
            return (h < 10 ? "0" : "") + "\(h):" + (mm < 10 ? "0" : "") + "\(mm)"
        }
        return "\(f(startMinute))-\(f(endMinute))"
    }
}

/// An arbitrary YAML value that is passed on as JSON (e.g. an Algolia query object).
public enum ConfigValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([ConfigValue])
    case object([String: ConfigValue])

    /// Compact JSON; object keys sorted so the text is stable.
    public var jsonString: String {
        var out = ""
        write(to: &out)
        return out
    }

    private func write(to out: inout String) {
        switch self {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .int(let i): out += String(i)
        case .double(let d): out += d.isFinite ? String(d) : "null"
        case .string(let s): ConfigValue.writeString(s, to: &out)
        case .array(let items):
            out += "["
            for (i, item) in items.enumerated() {
                if i > 0 { out += "," }
                item.write(to: &out)
            }
            out += "]"
        case .object(let members):
            out += "{"
            for (i, key) in members.keys.sorted().enumerated() {
                if i > 0 { out += "," }
                ConfigValue.writeString(key, to: &out)
                out += ":"
                members[key]!.write(to: &out)
            }
            out += "}"
        }
    }

    private static func writeString(_ s: String, to out: inout String) {
        out += "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 {
                    let hex = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        out += "\""
    }
}

extension Character {
    var isASCIIDigit: Bool { isASCII && isNumber }
    var isASCIILetter: Bool { isASCII && isLetter }
}

extension StringProtocol {
    func trimmingSpaces() -> String {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" { s = s.dropFirst() }
        while let l = s.last, l == " " || l == "\t" { s = s.dropLast() }
        return String(s)
    }
}
