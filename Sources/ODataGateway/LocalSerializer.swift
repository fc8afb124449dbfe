import HTTPCore
import JSONCore
import ODataCore

/// Writes what a local read found (``LocalResult``) as the client's version expects: V4 JSON with the
/// requested metadata level and `IEEE754Compatible` (`@odata.context`, `@odata.count`, `@odata.nextLink`,
/// `@odata.etag`, …) or V2 verbose JSON (`{"d": …}`, `__metadata`, `__deferred`, `__count`, `__next`).
/// Pure: no SQL, no I/O.
struct ODataJSONSerializer {
    let m: MirrorModel
    let format: ODataFormat
    /// The gateway's service root as the client sees it.
    let root: String

    init(model: MirrorModel, format: ODataFormat, root: String) {
        self.m = model
        self.format = format
        self.root = root
    }

    var v2: Bool { format.version == .v2 }

    /// The answer for `result`.
    func render(_ result: LocalResult) -> LocalReadResponse {
        switch result {
        case .metadata(let bytes):
            return LocalReadResponse(status: 200, contentType: "application/xml", body: bytes)
        case .serviceDocument:
            return serviceDocument()
        case .count(let n):
            return LocalReadResponse(
                status: 200, contentType: "text/plain;charset=utf-8", body: Array(String(n).utf8))
        case .rawValue(let value):
            if case .null = value {
                return LocalReadResponse(status: 204, contentType: "text/plain", body: [])
            }
            let text: String
            switch value {
            case .string(let s): text = s
            case .number(let n): text = n
            case .bool(let b): text = b ? "true" : "false"
            default: text = value.serialized()
            }
            return LocalReadResponse(
                status: 200, contentType: "text/plain;charset=utf-8", body: Array(text.utf8))
        case .property(let name, let type, let value):
            if v2 { return json(.object([("d", .object([(name, value)]))])) }
            var body: [(String, RawJSON)] = []
            if format.metadata != .none {
                body.append(("@odata.context", .string(root + "$metadata#" + type.description)))
            }
            body.append(("value", convert(value, type: type.primitive)))
            return json(.object(body))
        case .entity(let e, let set, let options):
            var object = entityJSON(e, topLevel: true)
            if !v2, format.metadata != .none {
                object.insert(
                    (
                        "@odata.context",
                        .string(root + "$metadata#" + set + selectSuffix(options) + "/$entity")
                    ),
                    at: 0)
            }
            var response = json(v2 ? .object([("d", .object(object))]) : .object(object))
            response.etag = e.etag
            return response
        case .collection(let entries, let total, let next, let set, let options):
            let values = entries.map { RawJSON.object(entityJSON($0, topLevel: true)) }
            let context = "$metadata#" + set + selectSuffix(options)
            return feed(values, total: total, next: next, context: context)
        case .reference(let e):
            let id = root + e.set + keyPredicate(e)
            if v2 { return json(.object([("d", .object([("uri", .string(id))]))])) }
            var body: [(String, RawJSON)] = []
            if format.metadata != .none { body.append(("@odata.context", .string(root + "$metadata#$ref"))) }
            body.append(("@odata.id", .string(id)))
            return json(.object(body))
        case .references(let entries, let total, let next):
            let name = v2 ? "uri" : "@odata.id"
            let items = entries.map { RawJSON.object([(name, .string(root + $0.set + keyPredicate($0)))]) }
            return feed(items, total: total, next: next, context: "$metadata#Collection($ref)")
        }
    }

    /// A collection: V2 `{"d":{"results","__count","__next"}}`, V4 `{"@odata.context","@odata.count",
    /// "value","@odata.nextLink"}`.
    func feed(_ values: [RawJSON], total: Int?, next: String?, context: String) -> LocalReadResponse {
        if v2 {
            var d: [(String, RawJSON)] = [("results", .array(values))]
            if let total { d.append(("__count", .string(String(total)))) }
            if let next { d.append(("__next", .string(next))) }
            return json(.object([("d", .object(d))]))
        }
        var body: [(String, RawJSON)] = []
        if format.metadata != .none { body.append(("@odata.context", .string(root + context))) }
        if let total { body.append(("@odata.count", .number(String(total)))) }
        body.append(("value", .array(values)))
        if let next { body.append(("@odata.nextLink", .string(next))) }
        return json(.object(body))
    }

    func selectSuffix(_ options: ODataQueryOptions) -> String {
        guard let select = options.select, !select.isEmpty, !select.contains(where: \.isWildcard) else {
            return ""
        }
        return "(" + select.map { $0.path.joined(separator: "/") }.joined(separator: ",") + ")"
    }

    func json(_ value: RawJSON) -> LocalReadResponse {
        var out: [UInt8] = []
        out.reserveCapacity(1024)
        value.write(to: &out)
        let type: String
        if v2 {
            type = "application/json;charset=utf-8"
        } else {
            type =
                "application/json;odata.metadata=\(format.metadata.rawValue);odata.streaming=true;IEEE754Compatible=\(format.ieee754Compatible)"
        }
        return LocalReadResponse(status: 200, contentType: type, body: out)
    }

    func serviceDocument() -> LocalReadResponse {
        let sets = m.model.entitySets.filter { !$0.isSingleton }
        if v2 {
            return json(.object([("d", .object([("EntitySets", .array(sets.map { .string($0.name) }))]))]))
        }
        var items: [RawJSON] = sets.map {
            .object([("name", .string($0.name)), ("kind", .string("EntitySet")), ("url", .string($0.name))])
        }
        items += m.model.entitySets.filter(\.isSingleton).map {
            .object([("name", .string($0.name)), ("kind", .string("Singleton")), ("url", .string($0.name))])
        }
        return json(.object([("@odata.context", .string(root + "$metadata")), ("value", .array(items))]))
    }

    func keyPredicate(_ e: LocalEntry) -> String {
        let keys = m.types[e.entityType]?.keyProperties ?? m.model.keyProperties(of: e.entityType)
        func literal(_ p: EdmProperty) -> String {
            let v = e.properties.first { $0.0 == p.name }?.1 ?? .null
            switch v {
            case .string(let s):
                switch p.type.primitive {
                case .guid?: return v2 ? "guid'\(s)'" : s
                case .int64?: return v2 ? s + "L" : s
                case .decimal?: return v2 ? s + "M" : s
                case .int16?, .int32?, .byte?, .sbyte?: return s
                case .dateTime?:
                    if let ms = ODataStorage.v2Date(s) {
                        return "datetime'\(MirrorColumn.isoFromMillis(ms.millis, utc: false))'"
                    }
                    return "datetime'\(s)'"
                case .dateTimeOffset?:
                    if v2 {
                        if let ms = ODataStorage.v2Date(s) {
                            return "datetimeoffset'\(MirrorColumn.isoFromMillis(ms.millis, utc: true))'"
                        }
                        return "datetimeoffset'\(s)'"
                    }
                    return s
                case .date?, .timeOfDay?: return s
                default:
                    return "'" + s.replacingOccurrences(of: "'", with: "''") + "'"
                }
            case .number(let n):
                if v2, p.type.primitive == .int64 { return n + "L" }
                return n
            case .bool(let b): return b ? "true" : "false"
            default: return "null"
            }
        }
        if keys.count == 1 {
            return "(" + FormCodec.percentEncode(literal(keys[0]), keeping: .pathSegment) + ")"
        }
        return "("
            + keys.map { $0.name + "=" + FormCodec.percentEncode(literal($0), keeping: .pathSegment) }.joined(
                separator: ",") + ")"
    }

    func convert(_ value: RawJSON, type: EdmPrimitiveType?) -> RawJSON {
        if !v2, format.ieee754Compatible, case .number(let n) = value, type == .int64 || type == .decimal {
            return .string(n)
        }
        if !v2, !format.ieee754Compatible, case .string(let s) = value, type == .int64 || type == .decimal,
            Double(s) != nil
        {
            return .number(s)
        }
        return value
    }

    func entityJSON(_ e: LocalEntry, topLevel: Bool) -> [(String, RawJSON)] {
        var out: [(String, RawJSON)] = []
        let id = root + e.set + keyPredicate(e)
        let info = m.types[e.entityType]
        let qualified = info?.qualifiedName ?? e.entityType
        if v2 {
            var meta: [(String, RawJSON)] = [
                ("id", .string(id)), ("uri", .string(id)), ("type", .string(qualified)),
            ]
            if let etag = e.etag { meta.append(("etag", .string(etag))) }
            out.append(("__metadata", .object(meta)))
        } else {
            if format.metadata == .full {
                out.append(("@odata.type", .string("#" + qualified)))
                out.append(("@odata.id", .string(id)))
            }
            if let etag = e.etag, format.metadata != .none { out.append(("@odata.etag", .string(etag))) }
            if format.metadata == .full { out.append(("@odata.editLink", .string(id))) }
        }
        for (name, value) in e.properties {
            let type = info?.primitives[name]
            out.append((name, convert(value, type: type)))
        }
        let expandedNames = Set(e.expanded.map(\.0))
        if v2 {
            let navs = info?.navigationNames ?? m.model.navigationProperties(of: e.entityType).map(\.name)
            for nav in navs where !expandedNames.contains(nav) {
                out.append((nav, .object([("__deferred", .object([("uri", .string(id + "/" + nav))]))])))
            }
        }
        for (name, x) in e.expanded {
            switch x {
            case .many(let entries, let count):
                let items = RawJSON.array(entries.map { .object(entityJSON($0, topLevel: false)) })
                if v2 {
                    var o: [(String, RawJSON)] = [("results", items)]
                    if let count { o.append(("__count", .string(String(count)))) }
                    out.append((name, .object(o)))
                } else {
                    if let count { out.append((name + "@odata.count", .number(String(count)))) }
                    out.append((name, items))
                }
            case .one(let entry):
                out.append((name, entry.map { .object(entityJSON($0, topLevel: false)) } ?? .null))
            }
        }
        return out
    }
}
