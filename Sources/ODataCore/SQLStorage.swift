import JSONCore

/// How a column (or a computed SQL value) represents the OData values of one type, and so how literals
/// compared with it are bound and which comparisons SQLite can do on it.
///
/// Promises: for `.native`, `.decimalKey`, `.durationKey` and `.enumValue`, SQLite's own comparison of two
/// values of the same encoding (numbers numerically, text and blobs bytewise) is OData's comparison of the
/// values they encode; the other encodings support only what their cases say.
public enum SQLValueEncoding: Sendable, Hashable {
    /// INTEGER, REAL, TEXT or BLOB whose order is the OData order (see ``ODataStorage`` for each type).
    case native
    /// `Edm.Decimal` as the exact, order-preserving text key of ``ODataStorage/decimalKey(_:)``.
    case decimalKey
    /// `Edm.Duration` (and V2 `Edm.Time`) as the decimal key of the signed number of seconds.
    case durationKey
    /// An enumeration member as its underlying integer value (flags combined).
    case enumValue
    /// An enumeration member as the member-name text the service sent (`Red` or `Red, Blue`): equality,
    /// `in` and `has` only; no ordering.
    case enumName
    /// `Edm.Decimal` as REAL: comparisons are exact only up to 15 significant digits.
    case real
    /// Text exactly as the service sent it (V1 durations): equality with the same spelling only; no
    /// ordering.
    case rawText
    /// A JSON scalar read with SQLite's JSON functions (`json_each`, `json_extract`) from the stored
    /// document: strings as TEXT, numbers as INTEGER or REAL, booleans as 1/0 — comparable only for types
    /// whose wire form orders like the value (see ``ODataStorage/jsonComparable(_:)``).
    case json
}

/// The storage layouts the translator knows.
///
/// Promises: `.mirrorV1` describes how `ODataGateway`'s mirror stores values today (decimals REAL,
/// durations as sent, enums as member names, date-time-offsets as UTC text ending in `Z`, times of day as
/// sent); `.exact` is ``ODataStorage``'s comparison-preserving layout.
public enum SQLStorageProfile: String, Sendable, Hashable, CaseIterable {
    case mirrorV1
    case exact

    /// The encoding of a stored column of `type` (an `Edm.*` primitive or an enumeration of `model`).
    public func encoding(of type: EdmTypeRef, in model: EdmModel?) -> SQLValueEncoding {
        let primitive = type.primitive ?? model?.primitiveType(of: type)
        if primitive == nil, let model, model.enumType(type) != nil {
            return self == .exact ? .enumValue : .enumName
        }
        switch primitive {
        case .decimal?: return self == .exact ? .decimalKey : .real
        case .duration?, .time?: return self == .exact ? .durationKey : .rawText
        default: return .native
        }
    }
}

/// The exact storage of OData primitive values in SQLite (profile ``SQLStorageProfile/exact``).
///
/// Promises, per type (column affinity, stored value):
/// - Boolean: INTEGER 0/1. Byte, SByte, Int16, Int32, Int64: INTEGER (Int64 also from the string form of
///   `IEEE754Compatible=true`, exactly).
/// - Single, Double: REAL; `INF`/`-INF` as infinities; `NaN` is stored as NULL (SQLite has no NaN).
/// - Decimal: TEXT ``decimalKey(_:)``, exact at any precision and ordered bytewise like the numbers; the
///   plain decimal follows the first space, so SQL reads it with ``decimalPlainSQL(_:)``.
/// - Duration (V4) and Time (V2): TEXT, the decimal key of the signed number of seconds.
/// - Date: TEXT `YYYY-MM-DD`. TimeOfDay: TEXT `hh:mm:ss[.f…]` without trailing fraction zeros.
/// - DateTimeOffset: TEXT, the instant in UTC `YYYY-MM-DDThh:mm:ss[.f…]` without trailing fraction zeros
///   and without `Z` (so that `…:00` sorts before `…:00.5`); V2 `/Date(ms±mmmm)/` converted. The offset
///   itself is not kept (the stored document has it). DateTime (V2): the same text for the local time.
/// - Guid: TEXT, lowercase. String: TEXT. Binary: BLOB (base64 or base64url decoded).
/// - Enumerations: INTEGER, the underlying value (member names and flag lists resolved).
/// - Stream, Untyped, geography and geometry: not stored in columns (``columnType(_:)`` is nil).
/// Years outside 0000–9999 do not order correctly as text; values that do not parse as their type are
/// stored as NULL, so no comparison matches them.
public enum ODataStorage {
    /// The column type (affinity) for values of `type`, nil when the type is not stored in a column.
    public static func columnType(_ type: EdmPrimitiveType) -> String? {
        switch type {
        case .boolean, .byte, .sbyte, .int16, .int32, .int64: return "INTEGER"
        case .single, .double: return "REAL"
        case .binary: return "BLOB"
        case .decimal, .duration, .time, .string, .guid, .date, .dateTime, .dateTimeOffset, .timeOfDay:
            return "TEXT"
        default: return nil
        }
    }

    /// The column value for a wire value of primitive `type` (V2 forms accepted whatever the version).
    public static func encode(_ value: RawJSON, as type: EdmPrimitiveType) -> SQLBinding {
        switch value {
        case .null, .array, .object: return .null
        case .bool(let b): return type == .boolean ? .integer(b ? 1 : 0) : .null
        case .number(let text), .string(let text):
            return encode(text: text, as: type)
        }
    }

    /// The column value of an enumeration: the underlying integer of a member name, flag list or number.
    public static func encode(_ value: RawJSON, as enumType: EdmEnumType) -> SQLBinding {
        switch value {
        case .number(let text), .string(let text):
            return enumType.value(ofLiteral: text).map(SQLBinding.integer) ?? .null
        default: return .null
        }
    }

    private static func encode(text: String, as type: EdmPrimitiveType) -> SQLBinding {
        switch type {
        case .boolean:
            return text == "true" ? .integer(1) : text == "false" ? .integer(0) : .null
        case .byte, .sbyte, .int16, .int32, .int64:
            if let v = Int64(text) { return .integer(v) }
            // An integral JSON number written with a fraction or exponent (`3.0`, `1e3`).
            if let d = Double(text), d.rounded() == d, let v = Int64(exactly: d) { return .integer(v) }
            return .null
        case .single, .double:
            switch text {
            case "INF", "Infinity": return .real(.infinity)
            case "-INF", "-Infinity": return .real(-.infinity)
            default: return Double(text).flatMap { $0.isNaN ? nil : SQLBinding.real($0) } ?? .null
            }
        case .decimal: return decimalKey(text).map(SQLBinding.text) ?? .null
        case .duration, .time: return durationKey(text).map(SQLBinding.text) ?? .null
        case .string: return .text(text)
        case .guid: return .text(text.lowercased())
        case .date: return LiteralScanner.temporalKind(text) == .date ? .text(text) : .null
        case .timeOfDay: return timeOfDay(text).map(SQLBinding.text) ?? .null
        case .dateTimeOffset: return instant(text).map(SQLBinding.text) ?? .null
        case .dateTime: return localDateTime(text).map(SQLBinding.text) ?? .null
        case .binary: return LiteralScanner.base64Bytes(text).map(SQLBinding.blob) ?? .null
        default: return .null
        }
    }

    /// The value to bind for `literal` compared with (or assigned to) a value of `type` stored with
    /// `encoding` under `profile`; `model` resolves enumeration members and type definitions. Under
    /// `.mirrorV1` (except for JSON values) this is ``SQLDefaults/binding(for:type:)``.
    public static func bind(
        _ literal: ODataLiteral, type: EdmTypeRef?, encoding: SQLValueEncoding, profile: SQLStorageProfile,
        model: EdmModel?
    ) -> SQLBinding {
        let primitive = type.flatMap { model?.primitiveType(of: $0) ?? $0.primitive }
        if profile == .mirrorV1 && encoding != .json {
            return SQLDefaults.binding(
                for: literal, type: primitive.map { EdmTypeRef(name: $0.rawValue) } ?? type)
        }
        switch encoding {
        case .decimalKey:
            switch literal {
            case .integer(let v): return decimalKey(String(v)).map(SQLBinding.text) ?? .null
            case .decimal(let text): return decimalKey(text).map(SQLBinding.text) ?? .null
            case .double(let d): return decimalKey(d.isFinite ? "\(d)" : "x").map(SQLBinding.text) ?? .null
            default: break
            }
        case .durationKey:
            if case .duration(let text) = literal { return durationKey(text).map(SQLBinding.text) ?? .null }
            if case .timeOfDay(let text) = literal, let t = timeOfDay(text) {
                // V2 `time'13:20:00'` against an `Edm.Time` (a duration since midnight).
                let parts = t.split(separator: ":")
                let whole = Int64(parts[0])! * 3600 + Int64(parts[1])! * 60
                let seconds = parts[2].split(separator: ".")
                let fraction = seconds.count == 2 ? "." + seconds[1] : ""
                return decimalKey(String(whole + Int64(seconds[0])!) + fraction).map(SQLBinding.text) ?? .null
            }
        case .enumValue:
            if let model, let type, let enumType = model.enumType(type) {
                switch literal {
                case .enumMember(_, let value), .string(let value):
                    return enumType.value(ofLiteral: value).map(SQLBinding.integer) ?? .null
                case .integer(let v): return .integer(v)
                default: break
                }
            }
        case .json:
            switch literal {
            case .guid(let g): return .text(g)
            case .enumMember(_, let value): return .text(value)
            case .decimal(let text): return Double(text).map(SQLBinding.real) ?? .null
            case .dateTimeOffset(let text), .dateTime(let text), .timeOfDay(let text), .duration(let text),
                .date(let text):
                return .text(text)
            default: break
            }
        default:
            break
        }
        if encoding == .native {
            switch (literal, primitive) {
            case (.dateTimeOffset(let d), .dateTimeOffset?), (.dateTime(let d), .dateTimeOffset?):
                let withOffset = LiteralScanner.temporalKind(d) == .dateTime ? d + "Z" : d
                return instant(withOffset).map(SQLBinding.text) ?? .null
            case (.dateTime(let d), .dateTime?), (.dateTimeOffset(let d), .dateTime?):
                return localDateTime(d).map(SQLBinding.text) ?? .null
            case (.timeOfDay(let t), .timeOfDay?): return timeOfDay(t).map(SQLBinding.text) ?? .null
            case (.date(let d), .dateTimeOffset?): return .text(d + "T00:00:00")
            default: break
            }
        }
        return SQLDefaults.binding(for: literal, type: type)
    }

    // MARK: Decimal keys

    /// The order-preserving key of a decimal number written `[-]digits[.digits][e[±]digits]` (also `+`
    /// and leading zeros), or nil when the text is not such a number or its exponent is beyond ±400000.
    ///
    /// Zero is `1 0`. A positive value 0.d₁d₂…dₙ × 10^E (d₁ ≠ 0, dₙ ≠ 0) is `2`, E + 500000 in six digits,
    /// the digits, a space and the plain decimal; a negative one is `0`, 500000 − E in six digits, the
    /// nines' complements of the digits, `~`, a space and the plain decimal. Bytewise order of keys is
    /// numeric order; equal numbers (`1.5`, `1.50`, `15e-1`) have equal keys.
    public static func decimalKey(_ text: String) -> String? {
        guard let d = DecimalParts(text) else { return nil }
        if d.digits.isEmpty { return "1 0" }
        let exponent = d.exponent
        guard exponent > -400_000, exponent < 400_000 else { return nil }
        if d.negative {
            let complement = String(d.digits.map { Character(String(9 - Int($0.asciiValue! - 48))) })
            return "0" + pad(500_000 - exponent, 6) + complement + "~ " + d.plain
        }
        return "2" + pad(500_000 + exponent, 6) + d.digits + " " + d.plain
    }

    /// The plain decimal text a key holds (`-12.5`), or nil when `key` is not a decimal key.
    public static func decimal(fromKey key: String) -> String? {
        guard let space = key.firstIndex(of: " ") else { return nil }
        return String(key[key.index(after: space)...])
    }

    /// SQL reading the number a decimal key column holds as REAL (for arithmetic and averages).
    public static func decimalRealSQL(_ key: SQLFragment) -> SQLFragment {
        "CAST(" + decimalPlainSQL(key) + " AS REAL)"
    }

    /// SQL reading the plain decimal text a decimal key column holds.
    public static func decimalPlainSQL(_ key: SQLFragment) -> SQLFragment {
        "substr(" + key + ", instr(" + key + ", ' ') + 1)"
    }

    // MARK: Durations

    /// The decimal key of the seconds of an ISO 8601 duration `[-]P[nD][T[nH][nM][n[.n]S]]` (weeks
    /// allowed; years and months are not durations of fixed length: nil).
    public static func durationKey(_ text: String) -> String? {
        guard let seconds = durationSeconds(text) else { return nil }
        return decimalKey(seconds)
    }

    /// The seconds of an ISO 8601 duration as a plain decimal (`-93600.5`), nil when not a day-time
    /// duration.
    public static func durationSeconds(_ text: String) -> String? {
        var s = Substring(text)
        var negative = false
        if s.hasPrefix("-") {
            negative = true
            s = s.dropFirst()
        } else if s.hasPrefix("+") {
            s = s.dropFirst()
        }
        guard s.hasPrefix("P") else { return nil }
        s = s.dropFirst()
        var whole: Int64 = 0
        var fraction = ""
        var number = ""
        var inTime = false
        var sawComponent = false
        var rank = 0
        for c in s {
            if c == "T" {
                guard !inTime, number.isEmpty else { return nil }
                inTime = true
                sawComponent = false
                continue
            }
            if c.isASCII, c.isNumber || c == "." {
                number.append(c)
                continue
            }
            guard !number.isEmpty else { return nil }
            let factor: Int64
            let order: Int
            switch (c, inTime) {
            case ("W", false): (factor, order) = (604_800, 1)
            case ("D", false): (factor, order) = (86_400, 2)
            case ("H", true): (factor, order) = (3_600, 3)
            case ("M", true): (factor, order) = (60, 4)
            case ("S", true): (factor, order) = (1, 5)
            default: return nil
            }
            guard order > rank else { return nil }
            rank = order
            let parts = number.split(separator: ".", omittingEmptySubsequences: false)
            guard parts.count <= 2, let integral = Int64(parts[0]), parts.count == 1 || factor == 1,
                parts.count == 1 || (!parts[1].isEmpty && parts[1].allSatisfy(\.isNumber))
            else { return nil }
            let (product, o1) = integral.multipliedReportingOverflow(by: factor)
            let (sum, o2) = whole.addingReportingOverflow(product)
            guard !o1, !o2 else { return nil }
            whole = sum
            if parts.count == 2 { fraction = String(parts[1]) }
            number = ""
            sawComponent = true
        }
        guard sawComponent, number.isEmpty else { return nil }
        while fraction.hasSuffix("0") { fraction.removeLast() }
        let magnitude = String(whole) + (fraction.isEmpty ? "" : "." + fraction)
        return negative && magnitude != "0" ? "-" + magnitude : magnitude
    }

    /// The canonical ISO 8601 duration of a number of seconds (`93600.5` → `P1DT2H0.5S`), `PT0S` for
    /// zero.
    public static func duration(fromSeconds seconds: String) -> String? {
        guard let d = DecimalParts(seconds) else { return nil }
        let plain = d.plain.hasPrefix("-") ? String(d.plain.dropFirst()) : d.plain
        let parts = plain.split(separator: ".", maxSplits: 1)
        guard let whole = Int64(parts[0]) else { return nil }
        let fraction = parts.count == 2 ? "." + parts[1] : ""
        let days = whole / 86_400
        let hours = whole % 86_400 / 3_600
        let minutes = whole % 3_600 / 60
        let secs = whole % 60
        var out = d.negative ? "-P" : "P"
        if days > 0 { out += "\(days)D" }
        var time = ""
        if hours > 0 { time += "\(hours)H" }
        if minutes > 0 { time += "\(minutes)M" }
        if secs > 0 || !fraction.isEmpty { time += "\(secs)\(fraction)S" }
        if !time.isEmpty { out += "T" + time }
        if out == "P" || out == "-P" { return "PT0S" }
        return out
    }

    // MARK: Dates and times

    /// `hh:mm[:ss[.f…]]` as `hh:mm:ss[.f…]` without trailing fraction zeros.
    public static func timeOfDay(_ text: String) -> String? {
        guard LiteralScanner.temporalKind(text) == .timeOfDay else { return nil }
        var t = text.count == 5 ? text + ":00" : text
        t = stripFraction(t)
        return t
    }

    /// A date-time with `Z` or an offset (or V2 `/Date(ms±mmmm)/`) as the UTC instant
    /// `YYYY-MM-DDThh:mm:ss[.f…]` (no `Z`, no trailing fraction zeros).
    public static func instant(_ text: String) -> String? {
        if let (ms, _) = v2Date(text) { return stripFraction(dateTimeText(millis: ms)) }
        guard LiteralScanner.temporalKind(text) == .dateTimeOffset,
            let utc = SQLDefaults.normalizeDateTimeOffset(text)
        else { return nil }
        return stripFraction(String(utc.dropLast()))
    }

    /// A date-time without offset (or V2 `/Date(ms)/`) as `YYYY-MM-DDThh:mm:ss[.f…]`.
    public static func localDateTime(_ text: String) -> String? {
        if let (ms, offset) = v2Date(text) {
            return stripFraction(dateTimeText(millis: ms + offset * 60_000))
        }
        switch LiteralScanner.temporalKind(text) {
        case .dateTime: return stripFraction(SQLDefaults.normalizeDateTime(text))
        case .dateTimeOffset:
            // A V2 service may send an offset for a DateTime; the local time is the text before it.
            let end = text.hasSuffix("Z") || text.hasSuffix("z") ? text.count - 1 : text.count - 6
            return stripFraction(SQLDefaults.normalizeDateTime(String(text.prefix(end))))
        case .date: return text + "T00:00:00"
        default: return nil
        }
    }

    /// `/Date(1754611200000)/` or `/Date(1754611200000+0060)/` → milliseconds (UTC) and offset minutes.
    public static func v2Date(_ s: String) -> (millis: Int64, offsetMinutes: Int64)? {
        guard s.hasPrefix("/Date("), s.hasSuffix(")/") else { return nil }
        let inner = s.dropFirst(6).dropLast(2)
        var digits = inner
        var offset: Int64 = 0
        if let i = inner.dropFirst().firstIndex(where: { $0 == "+" || $0 == "-" }) {
            digits = inner[..<i]
            guard let o = Int64(inner[inner.index(after: i)...]) else { return nil }
            offset = inner[i] == "-" ? -o : o
        }
        guard let ms = Int64(digits) else { return nil }
        return (ms, offset)
    }

    /// `YYYY-MM-DDThh:mm:ss.fff` for milliseconds since 1970 (UTC).
    static func dateTimeText(millis: Int64) -> String {
        let seconds = millis >= 0 ? millis / 1000 : (millis - 999) / 1000
        let (date, secondOfDay) = CivilDate.split(secondsSince1970: seconds)
        return date.iso + "T" + CivilDate.clock(secondOfDay) + "." + CivilDate.pad(millis - seconds * 1000, 3)
    }

    /// Removes trailing zeros of a fraction (and a bare `.`) at the end of a time text.
    static func stripFraction(_ text: String) -> String {
        guard let dot = text.lastIndex(of: "."), text[text.index(after: dot)...].allSatisfy(\.isNumber)
        else { return text }
        var t = text
        while t.hasSuffix("0") && t.index(before: t.endIndex) > dot { t.removeLast() }
        if t.hasSuffix(".") { t.removeLast() }
        return t
    }

    // MARK: Wire values back from columns

    /// The JSON scalar for a column value of primitive `type` stored in `encoding` (used for values the
    /// database computes, e.g. `$apply` group keys and aggregates): decimal keys become numbers, duration
    /// keys `duration` text, UTC instants gain `Z`, integers and reals numbers, blobs base64url.
    public static func wireValue(
        _ value: SQLBinding, type: EdmTypeRef?, encoding: SQLValueEncoding, model: EdmModel?
    )
        -> RawJSON
    {
        let primitive = type.flatMap { model?.primitiveType(of: $0) ?? $0.primitive }
        switch value {
        case .null: return .null
        case .integer(let i):
            if let model, let type, let e = model.enumType(type), encoding == .enumValue {
                return .string(e.names(for: i))
            }
            if primitive == .boolean { return .bool(i != 0) }
            return .number(String(i))
        case .real(let d):
            if d.isInfinite { return .string(d < 0 ? "-INF" : "INF") }
            if d == d.rounded(), abs(d) < 1e15 { return .number(String(Int64(d))) }
            return .number("\(d)")
        case .text(let t):
            switch encoding {
            case .decimalKey: return decimal(fromKey: t).map(RawJSON.number) ?? .null
            case .durationKey:
                return decimal(fromKey: t).flatMap(duration(fromSeconds:)).map(RawJSON.string) ?? .null
            default: break
            }
            if primitive == .dateTimeOffset, !t.hasSuffix("Z") { return .string(t + "Z") }
            return .string(t)
        case .blob(let b): return .string(LiteralScanner.base64URL(b))
        }
    }

    /// Whether values of `type` read from JSON (``SQLValueEncoding/json``) compare like the values:
    /// strings, booleans, integers, doubles, GUIDs (lowercased by the translator), dates and enumeration
    /// names; not decimals (JSON numbers lose digits), date-times with offsets, durations or binaries.
    public static func jsonComparable(_ type: EdmPrimitiveType?) -> Bool {
        guard let type else { return true }
        switch type {
        case .string, .boolean, .byte, .sbyte, .int16, .int32, .int64, .single, .double, .guid, .date:
            return true
        default: return false
        }
    }

    static func pad(_ v: Int, _ width: Int) -> String {
        let text = String(v)
        return String(repeating: "0", count: max(0, width - text.count)) + text
    }
}

/// A decimal number split into sign, significant digits and exponent: value = 0.digits × 10^exponent.
struct DecimalParts {
    var negative: Bool
    /// Significant digits without leading or trailing zeros; empty for zero.
    var digits: String
    var exponent: Int

    init?(_ text: String) {
        var s = Substring(text)
        negative = false
        if s.hasPrefix("-") {
            negative = true
            s = s.dropFirst()
        } else if s.hasPrefix("+") {
            s = s.dropFirst()
        }
        var mantissa = s
        var exp = 0
        if let e = s.firstIndex(where: { $0 == "e" || $0 == "E" }) {
            mantissa = s[..<e]
            var expText = s[s.index(after: e)...]
            if expText.hasPrefix("+") { expText = expText.dropFirst() }
            guard let v = Int(expText), v > -1_000_000, v < 1_000_000 else { return nil }
            exp = v
        }
        let parts = mantissa.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count <= 2, !(parts[0].isEmpty && (parts.count == 1 || parts[1].isEmpty)),
            parts.allSatisfy({ $0.allSatisfy { $0.isASCII && $0.isNumber } })
        else { return nil }
        let integral = parts[0]
        let fraction = parts.count == 2 ? parts[1] : ""
        var all = Array(integral + fraction)
        var pointPosition = integral.count + exp
        while let first = all.first, first == "0" {
            all.removeFirst()
            pointPosition -= 1
        }
        while let last = all.last, last == "0" { all.removeLast() }
        digits = String(all)
        exponent = digits.isEmpty ? 0 : pointPosition
        if digits.isEmpty { negative = false }
    }

    /// The number as a plain decimal without exponent (`-0.0012`, `1500`), or with an exponent when
    /// that would be longer than 60 characters (`1.5e+100`).
    var plain: String {
        if digits.isEmpty { return "0" }
        let sign = negative ? "-" : ""
        if exponent > 60 || exponent < -60 {
            let rest = digits.dropFirst()
            return sign + String(digits.prefix(1)) + (rest.isEmpty ? "" : "." + rest) + "e"
                + String(exponent - 1)
        }
        if exponent <= 0 { return sign + "0." + String(repeating: "0", count: -exponent) + digits }
        if exponent >= digits.count {
            return sign + digits + String(repeating: "0", count: exponent - digits.count)
        }
        let point = digits.index(digits.startIndex, offsetBy: exponent)
        return sign + digits[..<point] + "." + digits[point...]
    }
}
