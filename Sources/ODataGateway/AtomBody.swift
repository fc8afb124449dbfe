import JSONCore
import ODataCore

/// Reads an OData V2 Atom entry (a write's body, `Content-Type: application/atom+xml`) into the V2 JSON
/// object the offline writer applies: `m:properties` (in `content`, or directly in the entry for media
/// entities) become members typed by the model as SAP Gateway's V2 JSON writes them (Int32/Int16/Byte and
/// Double numbers, Int64/Decimal as strings, Boolean, `Edm.DateTime`/`DateTimeOffset` as `/Date(ms)/`,
/// `m:null="true"` as null, complex values as objects); `link` elements whose `href` names an entity bind
/// a navigation (`{"__metadata":{"uri":…}}`) and `m:inline` entries or feeds nest entities (deep insert).
/// Parsed by ``SafeXML`` (libxml2's reader, no DTD, no entities, bounded by ``SafeXML/Limits/requestBody``):
/// a body that is empty, not well-formed XML, declares a DTD, passes a bound or is not an Atom entry throws
/// a 400.
enum ODataAtomBody {
    /// The bounds of an Atom body (``SafeXML/Limits/requestBody``).
    static let limits = SafeXML.Limits.requestBody

    static func object(_ body: [UInt8], type: String, model m: MirrorModel) throws(ODataServiceError)
        -> RawJSON
    {
        let entry: Node
        do {
            entry = try SafeXML.parse(body, limits: limits)
        } catch {
            throw ODataServiceError(400, "BadRequest", "the request body is refused: \(error.message)")
        }
        guard entry.local == "entry" else {
            throw ODataServiceError(400, "BadRequest", "the request body is not an Atom entry")
        }
        return .object(try members(entry, type: type, model: m, depth: 0))
    }

    typealias Node = SafeXML.Element

    static func members(
        _ entry: Node, type: String, model m: MirrorModel, depth: Int
    ) throws(ODataServiceError) -> [(String, RawJSON)] {
        var out: [(String, RawJSON)] = []
        var entityType = type
        for child in entry.children where child.local == "category" {
            if let term = child.attributes["term"], let derived = m.wireType(term, base: type) {
                entityType = derived
                out.append(("__metadata", .object([("type", .string(derived))])))
            }
        }
        var properties: [Node] = []
        for child in entry.children {
            switch child.local {
            case "content": properties += child.children(local: "properties")
            case "properties": properties.append(child)
            default: break
            }
        }
        for container in properties {
            for p in container.children {
                let name = p.local
                out.append(
                    (name, value(p, type: m.model.property(named: name, in: entityType)?.type, model: m)))
            }
        }
        for link in entry.children where link.local == "link" {
            guard let rel = link.attributes["rel"], rel.hasPrefix(ODataAtomSerializer.related) else {
                continue
            }
            let name = String(rel.dropFirst(ODataAtomSerializer.related.count))
            guard let nav = m.model.navigationProperty(named: name, in: entityType) else { continue }
            if let inline = link.children.first(where: { $0.local == "inline" }) {
                guard depth < 8 else {
                    throw ODataServiceError(400, "BadRequest", "inline entries are nested more than 8 deep")
                }
                var nested: [RawJSON] = []
                for node in inline.children {
                    let entries = node.local == "feed" ? node.children(local: "entry") : [node]
                    for e in entries where e.local == "entry" {
                        nested.append(.object(try members(e, type: nav.target, model: m, depth: depth + 1)))
                    }
                }
                out.append(
                    (name, nav.isCollection ? .object([("results", .array(nested))]) : nested.first ?? .null))
            } else if let href = link.attributes["href"], !href.isEmpty {
                out.append((name, .object([("__metadata", .object([("uri", .string(href))]))])))
            }
        }
        return out
    }

    /// One `d:Name` element as a V2 JSON value of its declared type.
    static func value(_ node: Node, type: EdmTypeRef?, model m: MirrorModel) -> RawJSON {
        if node.attributes.contains(where: {
            $0.key.split(separator: ":").last == "null" && $0.value == "true"
        }) {
            return .null
        }
        let children = node.children
        if !children.isEmpty {
            let complex = type.flatMap { m.model.structuredType($0.name) }
            return .object(
                children.map { c in
                    let inner = complex.flatMap {
                        m.model.property(named: c.local, in: $0.qualifiedName)?.type
                    }
                    return (c.local, value(c, type: inner, model: m))
                })
        }
        let text = node.text
        switch type.flatMap({ m.model.primitiveType(of: $0) }) {
        case .boolean?: return .bool(text == "true" || text == "1")
        case .byte?, .sbyte?, .int16?, .int32?, .single?, .double?:
            return Double(text) != nil ? .number(text) : .string(text)
        case .dateTime?:
            return ODataStorage.localDateTime(text).flatMap(millis).map { .string("/Date(\($0))/") }
                ?? .string(text)
        case .dateTimeOffset?:
            return ODataStorage.instant(text).flatMap(millis).map { .string("/Date(\($0)+0000)/") }
                ?? .string(text)
        default: return .string(text)
        }
    }

    /// Milliseconds since 1970 of `YYYY-MM-DDThh:mm:ss[.f…]` (UTC).
    static func millis(_ text: String) -> Int64? {
        let parts = text.split(separator: "T")
        guard parts.count == 2 else { return nil }
        let date = parts[0].split(separator: "-").compactMap { Int($0) }
        let clock = parts[1].split(separator: ":")
        guard date.count == 3, clock.count == 3, let h = Int64(clock[0]), let mi = Int64(clock[1]) else {
            return nil
        }
        let seconds = clock[2].split(separator: ".")
        guard let s = Int64(seconds[0]) else { return nil }
        var ms: Int64 = 0
        if seconds.count == 2 { ms = Int64(String((seconds[1] + "000").prefix(3))) ?? 0 }
        let days = Int64(CivilDate(year: date[0], month: date[1], day: date[2]).daysSince1970)
        return ((days * 86_400 + h * 3_600 + mi * 60 + s) * 1000) + ms
    }
}
