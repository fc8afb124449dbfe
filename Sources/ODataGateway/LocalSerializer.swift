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
        case .property(let name, let type, let value, let context):
            if v2 { return json(.object([("d", .object([(name, value)]))])) }
            var body: [(String, RawJSON)] = []
            if format.metadata != .none {
                body.append(("@odata.context", .string(root + "$metadata#" + (context ?? type.description))))
            }
            if !type.isCollection, let complex = m.model.structuredType(type.name), !complex.isEntity {
                // A complex value is the body itself (null: 204, as upstreams answer).
                guard value.members != nil else {
                    return LocalReadResponse(status: 204, contentType: "text/plain", body: [])
                }
                // Full metadata names the complex type (`@odata.type`) and its members' types.
                let written = format.metadata == .full ? annotated(value, type) : value
                body += written.members ?? []
                return json(.object(body))
            }
            body.append(("value", convert(value, type: m.model.primitiveType(of: type))))
            return json(.object(body))
        case .entity(let e, let set, let options, let context):
            if let name = unknownDynamicType([e]) { return unknownTypeResponse(name) }
            var object = entityJSON(e, topLevel: true)
            if !v2, format.metadata != .none {
                // An entity of a type derived from the type its path declares names it as a cast
                // (`People/Shop.Model.Employee/$entity`), as the context URL rules require.
                let declared =
                    e.expectedType.isEmpty ? (m.layouts[set]?.entityType ?? e.entityType) : e.expectedType
                let cast = e.entityType != declared ? "/" + e.entityType : ""
                var fragment = set + cast + selectSuffix(options) + "/$entity"
                if let context {
                    fragment =
                        context.hasSuffix("/$entity")
                        ? context.dropLast("/$entity".count) + cast + selectSuffix(options) + "/$entity"
                        : context + selectSuffix(options)
                }
                object.insert(("@odata.context", .string(root + "$metadata#" + fragment)), at: 0)
            }
            var response = json(v2 ? .object([("d", .object(object))]) : .object(object))
            response.etag = e.etag
            return response
        case .collection(let entries, let total, let next, let set, let options, let context):
            if let name = unknownDynamicType(entries) { return unknownTypeResponse(name) }
            let values = entries.map { RawJSON.object(entityJSON($0, topLevel: true)) }
            let fragment = options.apply != nil ? (context ?? set) : (context ?? set) + selectSuffix(options)
            return feed(values, total: total, next: next, context: "$metadata#" + fragment)
        case .reference(let e):
            let id = entityID(e)
            if v2 { return json(.object([("d", .object([("uri", .string(id))]))])) }
            var body: [(String, RawJSON)] = []
            if format.metadata != .none { body.append(("@odata.context", .string(root + "$metadata#$ref"))) }
            body.append(("@odata.id", .string(id)))
            return json(.object(body))
        case .references(let entries, let total, let next):
            let name = v2 ? "uri" : "@odata.id"
            let items = entries.map { RawJSON.object([(name, .string(entityID($0)))]) }
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

    /// The select list of a context URL: `(Name,Customer(Country))` for `$select` and `$expand` (an
    /// expanded navigation is listed, with its own nested list), `""` without either.
    func selectSuffix(_ options: ODataQueryOptions) -> String {
        Self.contextList(select: options.select, expand: options.expand).map { "(" + $0 + ")" } ?? ""
    }

    static func contextList(select: [ODataSelectItem]?, expand: [ODataExpandItem]?) -> String? {
        var items: [String] = []
        if let select, !select.contains(where: \.isWildcard) {
            items += select.map { $0.path.joined(separator: "/") }
        }
        for item in expand ?? [] where !item.isWildcard {
            let nested = contextList(select: item.select, expand: item.expand)
            items.append(item.path.joined(separator: "/") + (nested.map { "(" + $0 + ")" } ?? ""))
        }
        return items.isEmpty ? nil : items.joined(separator: ",")
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

    /// The entity's id: `Set(key)`, a singleton's name.
    func entityID(_ e: LocalEntry) -> String { Self.id(e, model: m, root: root) }

    /// The id of `e` under `root` (V2 key predicates: the model's version).
    static func id(_ e: LocalEntry, model: MirrorModel, root: String) -> String {
        let layout = model.layouts[e.set]
        if layout?.set.isSingleton == true { return root + e.set }
        let serializer = ODataJSONSerializer(
            model: model, format: ODataFormat(version: model.version), root: root)
        if let container = layout?.container, let parentLayout = model.layouts[container.parentSet] {
            // `Orders(2)/Lines(1)`: the parent's id from the row's `_p_` columns.
            let parentProperties: [(String, RawJSON)] = container.parentKey.map { c in
                let value = ODataStorage.wireValue(
                    SQLBinding(e.row[c.name] ?? .null), type: EdmTypeRef(name: c.type.rawValue),
                    encoding: model.mapping.profile.encoding(
                        of: EdmTypeRef(name: c.type.rawValue), in: model.model),
                    model: model.model)
                return (c.path[0], value)
            }
            let parent = LocalEntry(
                set: container.parentSet, entityType: parentLayout.entityType, properties: parentProperties,
                etag: nil, row: e.row)
            let parentID = id(parent, model: model, root: root)
            return parentID + "/" + container.navigation
                + (container.isCollection ? serializer.keyPredicate(e) : "")
        }
        return root + e.set + serializer.keyPredicate(e)
    }

    func entityJSON(_ e: LocalEntry, topLevel: Bool) -> [(String, RawJSON)] {
        var out: [(String, RawJSON)] = []
        let info = m.types[e.entityType]
        if e.aggregated {
            // An aggregated `$apply` row: no identity (V4 `@odata.id: null`), only its columns.
            if !v2, format.metadata != .none { out.append(("@odata.id", .null)) }
            for (name, value) in e.properties {
                let type = e.columnTypes[name] ?? info?.primitives[name]
                // Full metadata names the type JSON does not tell (`#Int64`, `#Decimal`, …).
                if !v2, format.metadata == .full, let type,
                    let annotation = Self.typeAnnotation(EdmTypeRef(name: type.rawValue))
                {
                    out.append((name + "@odata.type", .string(annotation)))
                }
                out.append((name, convert(value, type: type)))
            }
            return out
        }
        let id = entityID(e)
        let qualified = info?.qualifiedName ?? e.entityType
        if v2 {
            var meta: [(String, RawJSON)] = [
                ("id", .string(id)), ("uri", .string(id)), ("type", .string(qualified)),
            ]
            if let etag = e.etag { meta.append(("etag", .string(etag))) }
            out.append(("__metadata", .object(meta)))
        } else {
            let derived = !e.expectedType.isEmpty && e.expectedType != qualified
            if format.metadata == .full || (format.metadata == .minimal && derived) {
                out.append(("@odata.type", .string("#" + qualified)))
            }
            if format.metadata == .full { out.append(("@odata.id", .string(id))) }
            if let etag = e.etag, format.metadata != .none { out.append(("@odata.etag", .string(etag))) }
            if format.metadata == .full { out.append(("@odata.editLink", .string(id))) }
        }
        let full = !v2 && format.metadata == .full
        let declared = full ? declaredTypes(of: e.entityType) : [:]
        for (name, value) in e.properties where e.selected?.contains(name) ?? true {
            let type = info?.primitives[name] ?? e.columnTypes[name]
            if full, declared[name] == nil, let t = e.columnTypes[name],
                let annotation = Self.typeAnnotation(EdmTypeRef(name: t.rawValue))
            {
                out.append((name + "@odata.type", .string(annotation)))
            }
            if full, let ref = declared[name] {
                if let t = Self.typeAnnotation(ref) { out.append((name + "@odata.type", .string(t))) }
                out.append((name, annotated(convert(value, type: type), ref)))
                continue
            }
            out.append((name, convert(value, type: type)))
        }
        if full {
            // Full metadata names every navigation property's links (after the structural ones).
            let navs = info?.navigationNames ?? m.model.navigationProperties(of: e.entityType).map(\.name)
            let expandedNavs = Set(e.expanded.map(\.0))
            for nav in navs where !expandedNavs.contains(nav) {
                out.append((nav + "@odata.navigationLink", .string(id + "/" + nav)))
                out.append((nav + "@odata.associationLink", .string(id + "/" + nav + "/$ref")))
            }
        }
        let expandedNames = Set(e.expanded.map(\.0))
        if v2 {
            let navs = info?.navigationNames ?? m.model.navigationProperties(of: e.entityType).map(\.name)
            for nav in navs where !expandedNames.contains(nav) && (e.selected?.contains(nav) ?? true) {
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
                    navigationLinks(name, id: id, into: &out)
                    out.append((name, items))
                }
            case .one(let entry):
                if !v2 { navigationLinks(name, id: id, into: &out) }
                out.append((name, entry.map { .object(entityJSON($0, topLevel: false)) } ?? .null))
            }
        }
        return out
    }

    /// 501: the type full metadata would name for dynamic property `name` is not known offline.
    func unknownTypeResponse(_ name: String) -> LocalReadResponse {
        let error = RawJSON.object([
            (
                "error",
                .object([
                    ("code", .string("NotImplemented")),
                    (
                        "message",
                        .string(
                            "odata.metadata=full names the type of dynamic property '\(name)', which the mirror "
                                + "does not know (ask with odata.metadata=minimal)")
                    ),
                ])
            )
        ])
        var response = json(error)
        response.status = 501
        return response
    }

    /// Full metadata: `Nav@odata.navigationLink` and `Nav@odata.associationLink` of `id`.
    func navigationLinks(_ nav: String, id: String, into out: inout [(String, RawJSON)]) {
        guard format.metadata == .full else { return }
        out.append((nav + "@odata.navigationLink", .string(id + "/" + nav)))
        out.append((nav + "@odata.associationLink", .string(id + "/" + nav + "/$ref")))
    }

    /// The declared type of each structural property of `type` (inherited ones included).
    func declaredTypes(of type: String) -> [String: EdmTypeRef] {
        Dictionary(m.model.properties(of: type).map { ($0.name, $0.type) }, uniquingKeysWith: { a, _ in a })
    }

    /// Full metadata's `@odata.type` of a value of `ref`: nil for the types JSON tells by itself (`String`,
    /// `Boolean`, `Double`), the unqualified name of other primitives (`#Int32`), the qualified name of
    /// enumeration and complex types, `#Collection(…)` of a collection.
    static func typeAnnotation(_ ref: EdmTypeRef) -> String? {
        let short = ref.name.hasPrefix("Edm.") ? String(ref.name.dropFirst(4)) : ref.name
        if ref.isCollection { return "#Collection(" + short + ")" }
        if ["Edm.String", "Edm.Boolean", "Edm.Double"].contains(ref.name) { return nil }
        return "#" + short
    }

    /// A complex value (or collection of them) of `ref` with full metadata's `@odata.type` on each object
    /// and on its own properties.
    func annotated(_ value: RawJSON, _ ref: EdmTypeRef) -> RawJSON {
        if ref.isCollection {
            guard case .array(let items) = value else { return value }
            return .array(items.map { annotated($0, EdmTypeRef(name: ref.name)) })
        }
        guard let complex = m.model.structuredType(ref.name), !complex.isEntity, let members = value.members
        else { return value }
        let given = members.first { $0.0 == "@odata.type" }?.1.string.map { String($0.dropFirst()) }
        let type = given.flatMap { m.model.structuredType($0) } ?? complex
        var out: [(String, RawJSON)] = [("@odata.type", .string("#" + type.qualifiedName))]
        let declared = declaredTypes(of: type.qualifiedName)
        for (name, v) in members where name != "@odata.type" {
            if let r = declared[name] {
                if let t = Self.typeAnnotation(r) { out.append((name + "@odata.type", .string(t))) }
                out.append((name, annotated(convert(v, type: m.model.primitiveType(of: r)), r)))
            } else {
                out.append((name, v))
            }
        }
        return .object(out)
    }

    /// Full metadata names the type of a dynamic (open type) property holding a number, which the mirror,
    /// downloaded with minimal metadata, does not know: the name of the first such property in `entries`.
    func unknownDynamicType(_ entries: [LocalEntry]) -> String? {
        guard !v2, format.metadata == .full else { return nil }
        for e in entries {
            let declared = declaredTypes(of: e.entityType)
            // Computed and aggregated columns are typed by their expression (`columnTypes`).
            for (name, value) in e.properties
            where declared[name] == nil && e.columnTypes[name] == nil && !name.contains("@") {
                if case .number = value { return name }
            }
            for (_, x) in e.expanded {
                switch x {
                case .many(let nested, _): if let n = unknownDynamicType(nested) { return n }
                case .one(let one): if let one, let n = unknownDynamicType([one]) { return n }
                }
            }
        }
        return nil
    }
}
