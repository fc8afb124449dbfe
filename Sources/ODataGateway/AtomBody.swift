import Foundation
import FoundationXML
import JSONCore
import ODataCore

/// Reads an OData V2 Atom entry (a write's body, `Content-Type: application/atom+xml`) into the V2 JSON
/// object the offline writer applies: `m:properties` (in `content`, or directly in the entry for media
/// entities) become members typed by the model as SAP Gateway's V2 JSON writes them (Int32/Int16/Byte and
/// Double numbers, Int64/Decimal as strings, Boolean, `Edm.DateTime`/`DateTimeOffset` as `/Date(ms)/`,
/// `m:null="true"` as null, complex values as objects); `link` elements whose `href` names an entity bind
/// a navigation (`{"__metadata":{"uri":…}}`) and `m:inline` entries or feeds nest entities (deep insert).
/// Parsed with FoundationXML (libxml2), strictly: a body that is not well-formed XML, declares a DTD or
/// is not an Atom entry throws a 400.
enum ODataAtomBody {
    static func object(_ body: [UInt8], type: String, model m: MirrorModel) throws(ODataServiceError)
        -> RawJSON
    {
        let data = Data(body)
        // DTDs (and so entity declarations) are refused: an entry never needs one, and refusing them
        // rules out entity expansion and external entities before any DOM parser sees the body.
        if data.range(of: Data("<!DOCTYPE".utf8)) != nil || data.range(of: Data("<!ENTITY".utf8)) != nil {
            throw ODataServiceError(
                400, "BadRequest", "the request body declares a DTD, which is not accepted")
        }
        // XMLDocument parses in libxml2's recovery mode, so well-formedness is checked strictly first.
        let check = XMLParser(data: data)
        check.shouldResolveExternalEntities = false
        // (swift-corelibs' `parse()` answers true after a fatal error; `parserError` tells.)
        guard check.parse(), check.parserError == nil else {
            throw ODataServiceError(
                400, "BadRequest", "the request body is not well-formed XML (line \(check.lineNumber))")
        }
        let document: XMLDocument
        do {
            document = try XMLDocument(
                data: data, options: [.nodeLoadExternalEntitiesNever, .nodePreserveWhitespace])
        } catch {
            throw ODataServiceError(400, "BadRequest", "the request body is not well-formed XML")
        }
        guard let entry = document.rootElement(), local(entry) == "entry" else {
            throw ODataServiceError(400, "BadRequest", "the request body is not an Atom entry")
        }
        return .object(try members(entry, type: type, model: m, depth: 0))
    }

    static func local(_ node: XMLNode) -> String { node.localName ?? node.name ?? "" }

    static func elements(_ node: XMLElement) -> [XMLElement] {
        (node.children ?? []).compactMap { $0 as? XMLElement }
    }

    static func members(
        _ entry: XMLElement, type: String, model m: MirrorModel, depth: Int
    ) throws(ODataServiceError) -> [(String, RawJSON)] {
        var out: [(String, RawJSON)] = []
        var entityType = type
        for child in elements(entry) where local(child) == "category" {
            if let term = child.attribute(forName: "term")?.stringValue,
                let derived = m.wireType(term, base: type)
            {
                entityType = derived
                out.append(("__metadata", .object([("type", .string(derived))])))
            }
        }
        var properties: [XMLElement] = []
        for child in elements(entry) {
            switch local(child) {
            case "content": properties += elements(child).filter { local($0) == "properties" }
            case "properties": properties.append(child)
            default: break
            }
        }
        for container in properties {
            for p in elements(container) {
                let name = local(p)
                out.append(
                    (name, value(p, type: m.model.property(named: name, in: entityType)?.type, model: m)))
            }
        }
        for link in elements(entry) where local(link) == "link" {
            guard let rel = link.attribute(forName: "rel")?.stringValue,
                rel.hasPrefix(ODataAtomSerializer.related)
            else { continue }
            let name = String(rel.dropFirst(ODataAtomSerializer.related.count))
            guard let nav = m.model.navigationProperty(named: name, in: entityType) else { continue }
            if let inline = elements(link).first(where: { local($0) == "inline" }) {
                guard depth < 8 else {
                    throw ODataServiceError(400, "BadRequest", "inline entries are nested more than 8 deep")
                }
                var nested: [RawJSON] = []
                for node in elements(inline) {
                    let entries =
                        local(node) == "feed" ? elements(node).filter { local($0) == "entry" } : [node]
                    for e in entries where local(e) == "entry" {
                        nested.append(.object(try members(e, type: nav.target, model: m, depth: depth + 1)))
                    }
                }
                out.append(
                    (name, nav.isCollection ? .object([("results", .array(nested))]) : nested.first ?? .null))
            } else if let href = link.attribute(forName: "href")?.stringValue, !href.isEmpty {
                out.append((name, .object([("__metadata", .object([("uri", .string(href))]))])))
            }
        }
        return out
    }

    /// One `d:Name` element as a V2 JSON value of its declared type.
    static func value(_ node: XMLElement, type: EdmTypeRef?, model m: MirrorModel) -> RawJSON {
        if node.attributes?.contains(where: { local($0) == "null" && $0.stringValue == "true" }) == true {
            return .null
        }
        let children = elements(node)
        if !children.isEmpty {
            let complex = type.flatMap { m.model.structuredType($0.name) }
            return .object(
                children.map { c in
                    let inner = complex.flatMap {
                        m.model.property(named: local(c), in: $0.qualifiedName)?.type
                    }
                    return (local(c), value(c, type: inner, model: m))
                })
        }
        let text = node.stringValue ?? ""
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
