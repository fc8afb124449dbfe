/// A typed OData literal from a URL (key predicate, `$filter`, function parameter).
///
/// Promises: V2 and V4 spellings map to the same case (`datetime'2020-01-01T00:00'` and V4 bare
/// `2020-01-01T00:00:00Z` are both temporal; `guid'…'` and a bare GUID are `.guid`); decimals keep their
/// exact text (no binary rounding); GUIDs are lowercased; temporal texts are kept as written (validated);
/// `.string` holds the unescaped value (`''` → `'`).
public enum ODataLiteral: Sendable, Hashable {
    case null
    case boolean(Bool)
    /// An integer literal (`12`, `12L`); fits in `Int64`.
    case integer(Int64)
    /// A decimal literal as written without suffix (`1.5`, `1.5M` → `"1.5"`, `-0.25`).
    case decimal(String)
    /// A floating-point literal (`1e3`, `2.0d`, `1f`, `INF`, `NaN`).
    case double(Double)
    case string(String)
    case guid(String)
    /// `YYYY-MM-DD`.
    case date(String)
    /// A date-time without offset (V2 `datetime'…'`).
    case dateTime(String)
    /// A date-time with `Z` or `±hh:mm`.
    case dateTimeOffset(String)
    /// `hh:mm[:ss[.fffffff]]`.
    case timeOfDay(String)
    /// An ISO-8601 duration (`PT1H`, V2 `time'PT1H'`, V4 `duration'P1D'`).
    case duration(String)
    case binary([UInt8])
    /// An enumeration member (`Ns.Color'Red'`); `value` may be a comma-separated flag list or a number.
    case enumMember(type: String, value: String)

    /// Parses a complete literal; the whole text must be one literal.
    public static func parse(_ text: String, version: ODataVersion = .v4) throws(ODataError) -> ODataLiteral {
        let scalars = Array(text.unicodeScalars)
        guard
            let (literal, end) = try LiteralScanner.scan(
                scalars, at: 0, version: version, allowBareDuration: true)
        else {
            throw ODataError(.literal, "'\(text)' is not a valid literal", offset: 0)
        }
        guard end == scalars.count else {
            throw ODataError(.literal, "unexpected characters after the literal in '\(text)'", offset: end)
        }
        return literal
    }

    /// The literal as written in a URL (before percent-encoding) for `version`, such that
    /// ``parse(_:version:)`` reads it back as the same literal: strings quoted with `''` escaping, V2 typed
    /// prefixes and suffixes (`datetime'…'`, `guid'…'`, `X'…'`, `…M`, and `…L` when `type` is `Edm.Int64`),
    /// V4 bare dates, GUIDs and `duration'…'`; doubles always carry an exponent (or `INF`/`NaN`) so that
    /// they are not read back as decimals. V2 has no `Edm.Date`: a date prints as `datetime'…T00:00'`.
    public func urlText(version: ODataVersion = .v4, type: EdmPrimitiveType? = nil) -> String {
        let v2 = version == .v2
        switch self {
        case .null: return "null"
        case .boolean(let b): return b ? "true" : "false"
        case .integer(let v): return v2 && type == .int64 ? "\(v)L" : String(v)
        case .decimal(let text):
            return v2 || text.contains("e") || text.contains("E") ? text + "M" : text
        case .double(let d):
            if d.isNaN { return "NaN" }
            if d.isInfinite { return d < 0 ? "-INF" : "INF" }
            var text = "\(d)"
            if !text.contains("e") { text += "e0" }
            return v2 ? text + "d" : text
        case .string(let s): return "'" + s.replacingAll("'", with: "''") + "'"
        case .guid(let g): return v2 ? "guid'\(g)'" : g
        case .date(let d): return v2 ? "datetime'\(d)T00:00'" : d
        case .dateTime(let d): return v2 ? "datetime'\(d)'" : d
        case .dateTimeOffset(let d): return v2 ? "datetimeoffset'\(d)'" : d
        case .timeOfDay(let t): return v2 ? "time'\(t)'" : t
        case .duration(let d): return v2 ? "time'\(d)'" : "duration'\(d)'"
        case .binary(let bytes):
            if v2 {
                let hex = Array("0123456789ABCDEF".unicodeScalars)
                var out = "X'"
                for b in bytes {
                    out.unicodeScalars.append(hex[Int(b >> 4)])
                    out.unicodeScalars.append(hex[Int(b & 15)])
                }
                return out + "'"
            }
            return "binary'" + LiteralScanner.base64URL(bytes) + "'"
        case .enumMember(let type, let value): return type + "'" + value + "'"
        }
    }

    /// The EDM type a literal has on its own (integers are `Edm.Int32` or `Edm.Int64` by magnitude).
    public var edmType: EdmPrimitiveType? {
        switch self {
        case .null, .enumMember: return nil
        case .boolean: return .boolean
        case .integer(let v): return Int32(exactly: v) != nil ? .int32 : .int64
        case .decimal: return .decimal
        case .double: return .double
        case .string: return .string
        case .guid: return .guid
        case .date: return .date
        case .dateTime: return .dateTime
        case .dateTimeOffset: return .dateTimeOffset
        case .timeOfDay: return .timeOfDay
        case .duration: return .duration
        case .binary: return .binary
        }
    }

    /// Whether this literal may stand for a value of `type` (numeric widening, V2/V4 temporal leniency,
    /// enums by member name or number). `null` conforms to everything; nullability is not checked here.
    public func conforms(to type: EdmTypeRef, in model: EdmModel? = nil) -> Bool {
        if case .null = self { return true }
        guard let primitive = type.primitive else {
            if let model, let enumType = model.enumTypes[model.resolveQualifiedName(type.name)] {
                switch self {
                case .enumMember(let t, let v):
                    return model.resolveQualifiedName(t) == enumType.qualifiedName
                        && v.split(separator: ",").allSatisfy { m in
                            enumType.value(of: String(m)) != nil || Int64(m) != nil
                        }
                case .string(let v): return enumType.value(of: v) != nil
                case .integer: return true
                default: return false
                }
            }
            return model == nil
        }
        switch (primitive, self) {
        case (.boolean, .boolean), (.string, .string), (.guid, .guid), (.binary, .binary),
            (.date, .date), (.duration, .duration), (.time, .duration), (.timeOfDay, .timeOfDay),
            (.dateTime, .dateTime), (.dateTimeOffset, .dateTimeOffset), (.dateTimeOffset, .dateTime),
            (.dateTime, .dateTimeOffset):
            return true
        case (.byte, .integer(let v)): return UInt8(exactly: v) != nil
        case (.sbyte, .integer(let v)): return Int8(exactly: v) != nil
        case (.int16, .integer(let v)): return Int16(exactly: v) != nil
        case (.int32, .integer(let v)): return Int32(exactly: v) != nil
        case (.int64, .integer): return true
        case (.decimal, .integer), (.decimal, .decimal), (.decimal, .double),
            (.double, .integer), (.double, .decimal), (.double, .double),
            (.single, .integer), (.single, .decimal), (.single, .double):
            return true
        default:
            return false
        }
    }
}

/// Scans literals inside larger texts (used by key predicates and `$filter`).
enum LiteralScanner {
    static let typedPrefixes: Set<String> = [
        "datetime", "datetimeoffset", "guid", "x", "binary", "time", "duration", "date", "timeofday",
    ]

    /// Scans one literal at `start`. Returns nil when the text there is not a literal (e.g. an identifier);
    /// throws when it starts like a literal but is malformed.
    static func scan(
        _ s: [Unicode.Scalar], at start: Int, version: ODataVersion, allowBareDuration: Bool
    ) throws(ODataError) -> (ODataLiteral, Int)? {
        guard start < s.count else { return nil }
        let c = s[start]
        if c == "'" {
            let (text, end) = try scanQuoted(s, at: start)
            return (.string(text), end)
        }
        if let (guid, end) = scanGUID(s, at: start) { return (.guid(guid), end) }
        if isDigit(c) || (c == "-" && start + 1 < s.count && (isDigit(s[start + 1]) || s[start + 1] == "I")) {
            if let temporal = try scanTemporal(s, at: start) { return temporal }
            return try scanNumber(s, at: start)
        }
        if isIdentifierStart(c) {
            var end = start
            while end < s.count, isIdentifierChar(s[end]) || s[end] == "." { end += 1 }
            let word = String(String.UnicodeScalarView(s[start..<end]))
            if end < s.count, s[end] == "'" {
                let (content, after) = try scanQuoted(s, at: end)
                return (try typed(prefix: word, content: content, version: version, offset: start), after)
            }
            switch word {
            case "true": return (.boolean(true), end)
            case "false": return (.boolean(false), end)
            case "null": return (.null, end)
            case "INF": return (.double(.infinity), end)
            case "NaN": return (.double(.nan), end)
            default: break
            }
            if allowBareDuration, isDuration(word) { return (.duration(word), end) }
            return nil
        }
        return nil
    }

    /// Scans `'…'` with `''` escaping; returns the unescaped content and the index after the closing quote.
    static func scanQuoted(_ s: [Unicode.Scalar], at start: Int) throws(ODataError) -> (String, Int) {
        var i = start + 1
        var out = String.UnicodeScalarView()
        while i < s.count {
            if s[i] == "'" {
                if i + 1 < s.count, s[i + 1] == "'" {
                    out.append("'")
                    i += 2
                    continue
                }
                return (String(out), i + 1)
            }
            out.append(s[i])
            i += 1
        }
        throw ODataError(.literal, "unterminated string literal", offset: start)
    }

    static func typed(prefix: String, content: String, version: ODataVersion, offset: Int) throws(ODataError)
        -> ODataLiteral
    {
        let invalid = ODataError(.literal, "invalid \(prefix) literal '\(content)'", offset: offset)
        switch prefix.lowercased() {
        case "datetime":
            guard let kind = temporalKind(content) else { throw invalid }
            switch kind {
            case .dateTime: return .dateTime(content)
            case .dateTimeOffset: return .dateTimeOffset(content)
            default: throw invalid
            }
        case "datetimeoffset":
            guard let kind = temporalKind(content), kind == .dateTimeOffset || kind == .dateTime else {
                throw invalid
            }
            return kind == .dateTimeOffset ? .dateTimeOffset(content) : .dateTime(content)
        case "date":
            guard temporalKind(content) == .date else { throw invalid }
            return .date(content)
        case "timeofday":
            guard temporalKind(content) == .timeOfDay else { throw invalid }
            return .timeOfDay(content)
        case "time":
            if isDuration(content) { return .duration(content) }
            if temporalKind(content) == .timeOfDay { return .timeOfDay(content) }
            throw invalid
        case "duration":
            guard isDuration(content) else { throw invalid }
            return .duration(content)
        case "guid":
            let scalars = Array(content.unicodeScalars)
            guard let (guid, end) = scanGUID(scalars, at: 0), end == scalars.count else { throw invalid }
            return .guid(guid)
        case "x":
            guard let bytes = hexBytes(content) else { throw invalid }
            return .binary(bytes)
        case "binary":
            if version == .v2, let bytes = hexBytes(content) { return .binary(bytes) }
            if let bytes = base64Bytes(content) { return .binary(bytes) }
            if let bytes = hexBytes(content) { return .binary(bytes) }
            throw invalid
        default:
            if prefix.contains(".") {
                guard !content.isEmpty else { throw invalid }
                return .enumMember(type: prefix, value: content)
            }
            throw ODataError(.literal, "unknown literal prefix '\(prefix)'", offset: offset)
        }
    }

    // MARK: Numbers

    static func scanNumber(_ s: [Unicode.Scalar], at start: Int) throws(ODataError) -> (ODataLiteral, Int) {
        var i = start
        if s[i] == "-" { i += 1 }
        if i + 2 < s.count, s[i] == "I", s[i + 1] == "N", s[i + 2] == "F" {
            return (.double(s[start] == "-" ? -.infinity : .infinity), i + 3)
        }
        let intStart = i
        while i < s.count, isDigit(s[i]) { i += 1 }
        guard i > intStart else { throw ODataError(.literal, "invalid number", offset: start) }
        var hasFraction = false
        var hasExponent = false
        if i + 1 < s.count, s[i] == ".", isDigit(s[i + 1]) {
            hasFraction = true
            i += 1
            while i < s.count, isDigit(s[i]) { i += 1 }
        }
        if i < s.count, s[i] == "e" || s[i] == "E" {
            var j = i + 1
            if j < s.count, s[j] == "+" || s[j] == "-" { j += 1 }
            if j < s.count, isDigit(s[j]) {
                hasExponent = true
                i = j
                while i < s.count, isDigit(s[i]) { i += 1 }
            }
        }
        let text = String(String.UnicodeScalarView(s[start..<i]))
        var suffix: Unicode.Scalar?
        if i < s.count, "LlMmDdFf".unicodeScalars.contains(s[i]) {
            suffix = s[i]
            i += 1
        }
        if i < s.count, isIdentifierChar(s[i]) {
            throw ODataError(.literal, "invalid number literal '\(text)\(String(s[i]))…'", offset: start)
        }
        switch suffix {
        case "L", "l":
            guard !hasFraction, !hasExponent, let v = Int64(text) else {
                throw ODataError(.literal, "'\(text)L' is not a valid Int64", offset: start)
            }
            return (.integer(v), i)
        case "M", "m":
            return (.decimal(text), i)
        case "D", "d", "F", "f":
            guard let v = Double(text) else { throw ODataError(.literal, "invalid number", offset: start) }
            return (.double(v), i)
        default:
            if hasExponent {
                guard let v = Double(text) else {
                    throw ODataError(.literal, "invalid number", offset: start)
                }
                return (.double(v), i)
            }
            if hasFraction { return (.decimal(text), i) }
            if let v = Int64(text) { return (.integer(v), i) }
            return (.decimal(text), i)
        }
    }

    // MARK: GUIDs

    static func scanGUID(_ s: [Unicode.Scalar], at start: Int) -> (String, Int)? {
        let groups = [8, 4, 4, 4, 12]
        var i = start
        for (index, length) in groups.enumerated() {
            for _ in 0..<length {
                guard i < s.count, isHex(s[i]) else { return nil }
                i += 1
            }
            if index < 4 {
                guard i < s.count, s[i] == "-" else { return nil }
                i += 1
            }
        }
        if i < s.count, isIdentifierChar(s[i]) || s[i] == "-" { return nil }
        return (String(String.UnicodeScalarView(s[start..<i])).lowercased(), i)
    }

    // MARK: Temporal values

    enum TemporalKind { case date, dateTime, dateTimeOffset, timeOfDay }

    /// Scans a bare V4 date, date-time-offset or time-of-day.
    static func scanTemporal(_ s: [Unicode.Scalar], at start: Int) throws(ODataError) -> (ODataLiteral, Int)?
    {
        var i = start
        if s[i] == "-" { return nil }
        // time of day: hh:mm
        if i + 2 < s.count, isDigit(s[i]), isDigit(s[i + 1]), s[i + 2] == ":" {
            let end = scanTimeEnd(s, at: i)
            let text = String(String.UnicodeScalarView(s[start..<end]))
            guard temporalKind(text) == .timeOfDay else {
                throw ODataError(.literal, "invalid time of day '\(text)'", offset: start)
            }
            return (.timeOfDay(text), end)
        }
        var digits = 0
        while i < s.count, isDigit(s[i]) {
            i += 1
            digits += 1
        }
        guard digits >= 4, i < s.count, s[i] == "-", i + 1 < s.count, isDigit(s[i + 1]) else { return nil }
        // From here on it must be a date.
        var end = i
        while end < s.count, isDigit(s[end]) || s[end] == "-" { end += 1 }
        if end < s.count, s[end] == "T" || s[end] == "t" {
            end = scanTimeEnd(s, at: end + 1)
            if end < s.count, s[end] == "Z" || s[end] == "z" {
                end += 1
            } else if end < s.count, s[end] == "+" || s[end] == "-" {
                end += 1
                while end < s.count, isDigit(s[end]) || s[end] == ":" { end += 1 }
            }
        }
        let text = String(String.UnicodeScalarView(s[start..<end]))
        switch temporalKind(text) {
        case .date: return (.date(text), end)
        case .dateTimeOffset: return (.dateTimeOffset(text), end)
        case .dateTime: return (.dateTime(text), end)
        default: throw ODataError(.literal, "invalid date or date-time '\(text)'", offset: start)
        }
    }

    private static func scanTimeEnd(_ s: [Unicode.Scalar], at start: Int) -> Int {
        var i = start
        while i < s.count, isDigit(s[i]) || s[i] == ":" || s[i] == "." { i += 1 }
        return i
    }

    /// Classifies and validates an ISO-8601 date, date-time (with or without offset) or time of day.
    static func temporalKind(_ text: String) -> TemporalKind? {
        let s = Array(text.unicodeScalars)
        if let end = parseTime(s, at: 0), end == s.count { return .timeOfDay }
        guard let dateEnd = parseDate(s, at: 0) else { return nil }
        if dateEnd == s.count { return .date }
        guard s[dateEnd] == "T" || s[dateEnd] == "t", let timeEnd = parseTime(s, at: dateEnd + 1) else {
            return nil
        }
        if timeEnd == s.count { return .dateTime }
        if timeEnd + 1 == s.count, s[timeEnd] == "Z" || s[timeEnd] == "z" { return .dateTimeOffset }
        if s[timeEnd] == "+" || s[timeEnd] == "-", timeEnd + 6 == s.count,
            let h = twoDigits(s, timeEnd + 1), s[timeEnd + 3] == ":", let m = twoDigits(s, timeEnd + 4),
            h <= 23, m <= 59
        {
            return .dateTimeOffset
        }
        return nil
    }

    private static func twoDigits(_ s: [Unicode.Scalar], _ i: Int) -> Int? {
        guard i + 1 < s.count, isDigit(s[i]), isDigit(s[i + 1]) else { return nil }
        return Int(s[i].value - 48) * 10 + Int(s[i + 1].value - 48)
    }

    private static func parseDate(_ s: [Unicode.Scalar], at start: Int) -> Int? {
        var i = start
        var digits = 0
        while i < s.count, isDigit(s[i]) {
            i += 1
            digits += 1
        }
        guard digits >= 4, i < s.count, s[i] == "-", let month = twoDigits(s, i + 1), i + 3 < s.count,
            s[i + 3] == "-", let day = twoDigits(s, i + 4), (1...12).contains(month), (1...31).contains(day)
        else { return nil }
        return i + 6
    }

    private static func parseTime(_ s: [Unicode.Scalar], at start: Int) -> Int? {
        guard let h = twoDigits(s, start), start + 2 < s.count, s[start + 2] == ":",
            let m = twoDigits(s, start + 3),
            h <= 23, m <= 59
        else { return nil }
        var i = start + 5
        if i < s.count, s[i] == ":" {
            guard let sec = twoDigits(s, i + 1), sec <= 59 else { return nil }
            i += 3
            if i < s.count, s[i] == "." {
                var j = i + 1
                while j < s.count, isDigit(s[j]) { j += 1 }
                guard j > i + 1 else { return nil }
                i = j
            }
        }
        return i
    }

    /// `[-]P[nD][T[nH][nM][n[.n]S]]` (also years/months for V2 `time'…'` leniency).
    static func isDuration(_ text: String) -> Bool {
        var s = Substring(text)
        if s.hasPrefix("-") { s = s.dropFirst() }
        guard s.hasPrefix("P") else { return false }
        s = s.dropFirst()
        var sawComponent = false
        var inTime = false
        var number = ""
        for c in s {
            if c == "T" {
                guard !inTime, number.isEmpty else { return false }
                inTime = true
            } else if c.isASCII, c.isNumber || c == "." {
                number.append(c)
            } else if "YMWD".contains(c) && !inTime || "HMS".contains(c) && inTime {
                guard !number.isEmpty, number.first != ".", number.last != ".",
                    number.filter({ $0 == "." }).count <= (c == "S" ? 1 : 0)
                else { return false }
                number = ""
                sawComponent = true
            } else {
                return false
            }
        }
        return sawComponent && number.isEmpty
    }

    // MARK: Binary

    static func hexBytes(_ text: String) -> [UInt8]? {
        let s = Array(text.utf8)
        guard s.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(s.count / 2)
        var i = 0
        while i < s.count {
            guard let h = hexValue(s[i]), let l = hexValue(s[i + 1]) else { return nil }
            out.append(h << 4 | l)
            i += 2
        }
        return out
    }

    static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case 48...57: return c - 48
        case 65...70: return c - 55
        case 97...102: return c - 87
        default: return nil
        }
    }

    /// Base64url without padding.
    static func base64URL(_ bytes: [UInt8]) -> String {
        let alphabet = Array(
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".unicodeScalars)
        var out = String.UnicodeScalarView()
        var i = 0
        while i < bytes.count {
            let chunk = bytes[i..<min(i + 3, bytes.count)]
            let b = Array(chunk) + Array(repeating: 0, count: 3 - chunk.count)
            let n = UInt32(b[0]) << 16 | UInt32(b[1]) << 8 | UInt32(b[2])
            for k in 0...chunk.count { out.append(alphabet[Int(n >> (18 - 6 * UInt32(k)) & 63)]) }
            i += 3
        }
        return String(out)
    }

    /// Base64 or base64url, padding optional.
    static func base64Bytes(_ text: String) -> [UInt8]? {
        var values: [UInt8] = []
        for c in text.utf8 {
            switch c {
            case 65...90: values.append(c - 65)
            case 97...122: values.append(c - 71)
            case 48...57: values.append(c + 4)
            case 43, 45: values.append(62)
            case 47, 95: values.append(63)
            case 61: continue
            default: return nil
            }
        }
        guard values.count % 4 != 1 else { return nil }
        var out: [UInt8] = []
        var i = 0
        while i < values.count {
            let chunk = values[i..<min(i + 4, values.count)].map { UInt32($0) }
            let padded = chunk + Array(repeating: 0, count: 4 - chunk.count)
            let n = padded[0] << 18 | padded[1] << 12 | padded[2] << 6 | padded[3]
            let bytes = [UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF)]
            out.append(contentsOf: bytes.prefix(chunk.count - 1))
            i += 4
        }
        return out
    }

    // MARK: Character classes

    static func isDigit(_ c: Unicode.Scalar) -> Bool { c.value >= 48 && c.value <= 57 }
    static func isHex(_ c: Unicode.Scalar) -> Bool {
        isDigit(c) || (c.value >= 65 && c.value <= 70) || (c.value >= 97 && c.value <= 102)
    }
    static func isIdentifierStart(_ c: Unicode.Scalar) -> Bool {
        c == "_" || c.properties.isAlphabetic
    }
    static func isIdentifierChar(_ c: Unicode.Scalar) -> Bool {
        isIdentifierStart(c) || isDigit(c) || c.properties.numericType != nil
    }
}
