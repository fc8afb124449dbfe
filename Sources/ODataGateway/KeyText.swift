import HTTPCore
import JSONCore
import ODataCore

/// Key predicates as text: how the gateway names an entity it created (`(-1)`, `('local-…')`), reads a
/// predicate back, and compares the entities two requests address. Pure functions of the model.
enum ODataKeyText {
    /// `(-1)`, `('a')`, `(A=1,B='x')` for the key values among `members`.
    static func predicate(_ members: [(String, RawJSON)], _ keys: [EdmProperty], version: ODataVersion)
        -> String
    {
        func literal(_ p: EdmProperty, _ v: RawJSON) -> String {
            switch v {
            case .number(let n):
                return p.type.primitive == .int64 && version == .v2 ? n + "L" : n
            case .string(let s):
                switch p.type.primitive {
                case .byte, .sbyte, .int16, .int32: return s
                case .int64: return version == .v2 ? s + "L" : s
                case .guid: return version == .v2 ? "guid'\(s)'" : s
                default:
                    return "'"
                        + FormCodec.percentEncode(s.replacingOccurrences(of: "'", with: "''"), keeping: .url)
                        + "'"
                }
            case .bool(let b): return b ? "true" : "false"
            default: return "null"
            }
        }
        let parts = keys.map { p in (p.name, members.first { $0.0 == p.name }?.1 ?? .null) }
        if parts.count == 1 { return "(" + literal(keys[0], parts[0].1) + ")" }
        return "(" + zip(keys, parts).map { "\($0.0.name)=" + literal($0.0, $0.1.1) }.joined(separator: ",")
            + ")"
    }

    /// The text between the parentheses at the start of `text` (`(…)`), honouring quoted strings.
    static func inner(_ text: Substring) -> String? {
        guard text.first == "(" else { return nil }
        var inQuote = false
        var i = text.index(after: text.startIndex)
        while i < text.endIndex {
            let c = text[i]
            if c == "'" { inQuote.toggle() }
            if c == ")", !inQuote { return String(text[text.index(after: text.startIndex)..<i]) }
            i = text.index(after: i)
        }
        return nil
    }

    /// `(42)` / `('x')` → the literal of a single-property key.
    static func literal(_ predicate: String, _ key: EdmProperty, _ version: ODataVersion) -> ODataLiteral? {
        guard predicate.hasPrefix("("), predicate.hasSuffix(")") else { return nil }
        var inner = String(predicate.dropFirst().dropLast())
        if inner.hasPrefix(key.name + "=") { inner = String(inner.dropFirst(key.name.count + 1)) }
        let decoded = inner.removingPercentEncoding ?? inner
        return try? ODataLiteral.parse(decoded, version: version)
    }

    /// `('abc')` → `abc`; nil for other predicates.
    static func unquote(_ predicate: String) -> String? {
        guard predicate.hasPrefix("('"), predicate.hasSuffix("')") else { return nil }
        return String(predicate.dropFirst(2).dropLast(2)).replacingOccurrences(of: "''", with: "'")
    }

    /// Whether a key predicate's text was minted by the gateway (`-1`, `'local-…'`).
    static func isLocal(_ inner: String) -> Bool { inner.hasPrefix("-") || inner.hasPrefix("'local-") }

    /// The mirror layout and parsed key of `Set(key)`, when the set is mirrored and the key parses.
    static func locate(_ entity: String, model m: MirrorModel) -> (layout: MirrorSetLayout, key: ODataKey)? {
        guard let open = entity.firstIndex(of: "("), let text = inner(entity[open...]),
            let layout = m.layouts[String(entity[..<open])],
            let key = try? ODataKey.parse(
                text.removingPercentEncoding ?? text, entityType: layout.entityType, model: m.model)
        else { return nil }
        return (layout, key)
    }

    /// A comparable form of `Set(key)`: key values typed by the model (so `(2)`, `(ProductID=2)` and
    /// `(%32)` compare equal); the text itself when it does not parse.
    static func canonical(_ entity: String, model: MirrorModel?) -> String {
        guard let open = entity.firstIndex(of: "("), let key = inner(entity[open...]), let m = model else {
            return entity
        }
        let set = String(entity[..<open])
        let decoded = key.removingPercentEncoding ?? key
        guard let layout = m.layouts[set],
            let parsed = try? ODataKey.parse(decoded, entityType: layout.entityType, model: m.model)
        else { return entity }
        return set + "|" + parsed.values.map { "\($0.name)=\($0.value)" }.joined(separator: ",")
    }
}

extension QueuedRequest {
    /// `Set(key)` (as the client addressed it, or the gateway-minted key of a create) of the entity this
    /// request changes; nil when it names none (e.g. a create whose key the server assigns).
    func affectedEntity(model: MirrorModel?) -> String? {
        if let local = localKey { return entitySet + local }
        var path = Substring(url)
        if let q = path.firstIndex(of: "?") { path = path[..<q] }
        if path.hasPrefix(entitySet + "("), let key = ODataKeyText.inner(path.dropFirst(entitySet.count)) {
            return entitySet + "(" + key + ")"
        }
        guard method == "POST", let m = model, let layout = m.layouts[entitySet],
            let json = try? RawJSON.parse(body)
        else { return nil }
        var object = json
        if let d = json["d"], json.members?.count == 1 { object = d }
        guard let members = object.members else { return nil }
        let keys = m.model.keyProperties(of: layout.entityType)
        guard !keys.isEmpty, keys.allSatisfy({ k in members.contains { $0.0 == k.name } }) else { return nil }
        return entitySet + ODataKeyText.predicate(members, keys, version: m.version)
    }
}

extension HTTPRequest {
    /// The effective method of an OData write (`X-HTTP-Method` on a POST tunnels MERGE/PATCH/PUT/DELETE).
    var odataMethod: String {
        if method == "POST", let tunneled = headers["X-HTTP-Method"], !tunneled.isEmpty {
            return tunneled.uppercased()
        }
        return method.uppercased()
    }
}

extension ODataLiteral {
    /// The JSON value of a key literal as an entity carries it (integers as numbers, other values as
    /// their text).
    var jsonValue: RawJSON {
        switch self {
        case .null: return .null
        case .boolean(let b): return .bool(b)
        case .integer(let i): return .number(String(i))
        case .decimal(let d): return .number(d)
        case .double(let d): return .number("\(d)")
        case .string(let s), .guid(let s), .date(let s), .dateTime(let s), .dateTimeOffset(let s),
            .timeOfDay(let s), .duration(let s):
            return .string(s)
        case .binary(let b): return ODataStorage.wireValue(.blob(b), type: nil, encoding: .native, model: nil)
        case .enumMember(_, let value): return .string(value)
        }
    }
}
