import Foundation
import GatewayConfig
import GatewaySupport
import HTTPCore
import JSONCore
import ODataCore
import Storage

/// What an applied local write needs to answer.
struct LocalWriteOutcome {
    var status: Int
    /// The entity set written.
    var set: String = ""
    /// For a create: the key predicate of the stored entity (`(-1)`).
    var createdKey: String?
    /// For an update: the entity's new (gateway-minted) ETag, when its set carries ETags.
    var etag: String? = nil
}

/// One write to apply locally: the parts of a client request that matter.
struct LocalWriteInput {
    /// The effective method (`X-HTTP-Method` applied).
    var method: String
    /// Path relative to the service root (percent-encoded, no leading `/`).
    var path: String
    /// Raw query.
    var query: String
    /// The body as the client sent it.
    var body: [UInt8]
    /// `Content-Type`, `Authorization`, `If-Match` of the request.
    var headers: HTTPHeaders
    /// The gateway root the client used.
    var gatewayRoot: String
}

extension ODataService {
    /// The effective method of a write (`X-HTTP-Method` on a POST tunnels MERGE/PATCH/PUT/DELETE).
    static func effectiveMethod(_ request: HTTPRequest) -> String {
        if request.method == "POST", let tunneled = request.headers["X-HTTP-Method"], !tunneled.isEmpty {
            return tunneled.uppercased()
        }
        return request.method.uppercased()
    }

    /// Blocking (on the pool): applies a single-request write to the mirror and appends it to the queue
    /// in one fsynced transaction, then answers as the client's version expects.
    func answerWriteLocally(_ request: HTTPRequest, _ responder: any Responder) {
        OriginResponder(inner: responder, origin: "local").respond(localWriteResponse(request))
        // Queued behind other requests (e.g. held ones) while the upstream answers: upload it now.
        if !settings.localFirst, forwarder.reachability.isReachable, queue.count > 0 {
            upload(completion: nil)
        }
    }

    func localWriteResponse(_ request: HTTPRequest) -> HTTPResponse {
        let version = self.version
        guard let m = mirror.model else {
            return ODataError.response(
                503, code: "UpstreamUnavailable",
                "the upstream is unreachable and the service is not mirrored",
                version: version)
        }
        let (path, query) = relative(request)
        let input = LocalWriteInput(
            method: Self.effectiveMethod(request), path: path, query: query, body: request.body,
            headers: request.headers, gatewayRoot: forwarder.urlMap(for: request).gatewayRoot)
        do {
            let outcome = try queue.append { db -> (QueuedRequest, LocalWriteOutcome) in
                try applyLocalWrite(db, model: m, input)
            }
            return writeAnswer(outcome, request: request)
        } catch let e as LocalReadError {
            return ODataError.response(e.status, code: e.code, e.message, version: version)
        } catch {
            return ODataError.response(
                500, code: "InternalError", "the write could not be stored: \(error)", version: version)
        }
    }

    /// The answer to an applied write: a create reads the stored entity back (`201` with `Location`).
    func writeAnswer(_ outcome: LocalWriteOutcome, request: HTTPRequest) -> HTTPResponse {
        if let createdKey = outcome.createdKey {
            let root = forwarder.urlMap(for: request).gatewayRoot
            var headers = request.headers
            headers.remove("Content-Type")
            var read = localResponse(
                HTTPRequest(
                    method: "GET", target: forwarder.settings.mount + outcome.set + createdKey,
                    headers: headers))
            read.status = 201
            read.headers.set("Location", root + outcome.set + createdKey)
            if version == .v4 { read.headers.set("OData-EntityId", root + outcome.set + createdKey) }
            return read
        }
        var h = HTTPHeaders()
        if version == .v4 { h.set("OData-Version", "4.0") } else { h.set("DataServiceVersion", "1.0") }
        if let etag = outcome.etag { h.set("ETag", etag) }
        return HTTPResponse(status: outcome.status, headers: h, body: .bytes([]))
    }

    /// Inside the queue's transaction: applies one write (create, create through a navigation, deep insert,
    /// update, delete) to the mirror and returns the queue entry for it. Throws ``LocalReadError`` when
    /// the write cannot be applied (nothing of it stays: the caller's transaction rolls back).
    func applyLocalWrite(_ db: Database, model m: MirrorModel, _ input: LocalWriteInput) throws -> (
        QueuedRequest, LocalWriteOutcome
    ) {
        var (queued, outcome) = try applyWrite(db, model: m, input)
        // The writer's credentials are kept (0600, never logged) only when they are replayed on upload.
        if settings.uploadCredentials != .client { queued.authorization = nil }
        try recordRequestExtras(input.headers, requestID: queued.requestID, in: db)
        return (queued, outcome)
    }

    private func applyWrite(_ db: Database, model m: MirrorModel, _ input: LocalWriteInput) throws -> (
        QueuedRequest, LocalWriteOutcome
    ) {
        let method = input.method
        let parsed: ODataResourcePath
        do { parsed = try ODataResourcePath.parse(input.path, model: m.model) } catch {
            throw LocalReadError(404, "NotFound", "\(error)")
        }
        var set: String?
        var type = ""
        var key: ODataKey?
        /// POST through a navigation: the parent's set, type, key and the navigation property.
        var parent: (set: String, type: String, key: ODataKey, nav: EdmNavigationProperty)?
        let segments = parsed.segments
        switch segments.count {
        case 1:
            if case .entitySet(let name, let t) = segments[0], method == "POST" {
                set = name
                type = t
            }
        case 2:
            if case .entitySet(let name, let t) = segments[0], case .key(let k) = segments[1],
                ["PUT", "PATCH", "MERGE", "DELETE"].contains(method)
            {
                set = name
                type = t
                key = k
            }
        case 3:
            if case .entitySet(let name, let t) = segments[0], case .key(let k) = segments[1],
                case .navigation(let navName, let target, true, let targetSet) = segments[2],
                method == "POST",
                let nav = m.model.navigationProperty(named: navName, in: t)
            {
                set = targetSet ?? m.layouts.values.first { $0.entityType == target }?.set.name
                type = target
                parent = (name, t, k, nav)
            }
        default: break
        }
        if set == nil, let link = try applyLinkChange(db, model: m, segments: segments, input) { return link }
        guard let set, let layout = m.layouts[set] else {
            throw LocalReadError(
                503, "UpstreamUnavailable",
                "the upstream is unreachable; only creates (of an entity set or through a navigation) and updates/deletes of one entity are queued offline"
            )
        }
        var members: [(String, RawJSON)] = []
        var nested: [(nav: EdmNavigationProperty, items: [[(String, RawJSON)]])] = []
        if method != "DELETE" {
            guard let body = try? RawJSON.parse(input.body) else {
                throw LocalReadError(400, "BadRequest", "the request body is not JSON")
            }
            var object = body
            if let d = body["d"], body.members?.count == 1 { object = d }
            guard let given = object.members else {
                throw LocalReadError(400, "BadRequest", "the body is not an object")
            }
            (members, nested) = try splitBody(db, model: m, type: type, given, allowNested: method == "POST")
        }
        let keyProperties = m.model.keyProperties(of: type)
        var queued = QueuedRequest(
            id: 0, entitySet: set, method: method,
            url: input.path + (input.query.isEmpty ? "" : "?" + input.query),
            body: input.body, contentType: input.headers["Content-Type"],
            authorization: input.headers["Authorization"], ifMatch: input.headers["If-Match"],
            localKey: nil, gatewayRoot: input.gatewayRoot, requestID: UUID().uuidString.lowercased(),
            firstSent: Self.imfDate(Date()), attempts: 0)
        if method == "POST" {
            if let parent {
                // The new entity belongs to the parent: its foreign key takes the parent's value.
                let parentLayout = m.layouts[parent.set]
                let parentRow = try parentLayout.flatMap {
                    try row(db, model: m, layout: $0, key: parent.key)
                }
                guard let parentRow else { throw LocalReadError(404, "NotFound", "no such entity") }
                for c in parent.nav.referentialConstraints {
                    if let v = parentRow.first(where: { $0.0 == c.property })?.1 {
                        Self.setMember(&members, c.referencedProperty, v)
                    }
                }
            }
            var created: [[String: String]] = []
            let (stored, minted) = try createEntity(
                db, model: m, layout: layout, members: members, nested: nested, record: &created)
            if minted { queued.localKey = Self.keyPredicate(stored, keyProperties, version: m.version) }
            if !created.isEmpty {
                queued.nested = RawJSON.array(
                    created.map {
                        .object($0.sorted { $0.key < $1.key }.map { ($0.key, RawJSON.string($0.value)) })
                    }
                ).serialized()
            }
            return (
                queued,
                LocalWriteOutcome(
                    status: 201, set: set,
                    createdKey: Self.keyPredicate(stored, keyProperties, version: m.version))
            )
        }
        guard let key else { throw LocalReadError(400, "BadRequest", "no key") }
        let o = try applyToMirror(
            db, model: m, layout: layout, method: method, key: key, members: members,
            keyProperties: keyProperties, clientIfMatch: input.headers["If-Match"], queued: &queued)
        return (queued, LocalWriteOutcome(status: o.status, set: set, createdKey: nil, etag: o.etag))
    }

    /// The structural members of a body and its nested entities (deep insert); `Nav@odata.bind` and V2
    /// `{"__metadata": {"uri": …}}` links set the foreign key of a single-valued navigation.
    private func splitBody(
        _ db: Database, model m: MirrorModel, type: String, _ given: [(String, RawJSON)], allowNested: Bool
    ) throws -> ([(String, RawJSON)], [(nav: EdmNavigationProperty, items: [[(String, RawJSON)]])]) {
        var members: [(String, RawJSON)] = []
        var nested: [(nav: EdmNavigationProperty, items: [[(String, RawJSON)]])] = []
        var binds: [(EdmNavigationProperty, String)] = []
        for (name, value) in given {
            if name.hasSuffix("@odata.bind"),
                let nav = m.model.navigationProperty(
                    named: String(name.dropLast("@odata.bind".count)), in: type)
            {
                if let link = value.string { binds.append((nav, link)) }
                continue
            }
            if name == "__metadata" || name.hasPrefix("@") || name.contains("@") { continue }
            if let nav = m.model.navigationProperty(named: name, in: type) {
                var items: [RawJSON] = []
                if let a = value.elements {
                    items = a
                } else if let r = value["results"]?.elements {
                    items = r
                } else if value.members != nil, value["__deferred"] == nil {
                    items = [value]
                }
                var entities: [[(String, RawJSON)]] = []
                for item in items {
                    guard let o = item.members else { continue }
                    if o.count == 1, let uri = item["__metadata"]?["uri"]?.string {
                        if !nav.isCollection { binds.append((nav, uri)) }
                        continue
                    }
                    entities.append(o)
                }
                if !entities.isEmpty {
                    guard allowNested else {
                        throw LocalReadError(
                            400, "BadRequest", "nested entities are only accepted in a create (deep insert)")
                    }
                    nested.append((nav, entities))
                }
                continue
            }
            members.append((name, value))
        }
        for (nav, link) in binds where !nav.isCollection {
            let values = try linkedKeyValues(db, model: m, link: link)
            for c in nav.referentialConstraints {
                if let v = values.first(where: { $0.0 == c.referencedProperty })?.1 {
                    Self.setMember(&members, c.property, v)
                }
            }
        }
        return (members, nested)
    }

    /// The stored properties of the entity a link (`Customers('X')`, a URL under the service root) addresses.
    private func linkedKeyValues(_ db: Database, model m: MirrorModel, link: String) throws -> [(
        String, RawJSON
    )] {
        try linkedEntity(db, model: m, link: link).members
    }

    /// The entity a link addresses: its set's layout, key and stored properties.
    func linkedEntity(_ db: Database, model m: MirrorModel, link: String) throws -> (
        layout: MirrorSetLayout, key: ODataKey, members: [(String, RawJSON)]
    ) {
        var path = link
        if let r = path.range(of: forwarder.settings.mount) { path = String(path[r.upperBound...]) }
        while path.hasPrefix("/") { path = String(path.dropFirst()) }
        guard let parsed = try? ODataResourcePath.parse(path, model: m.model), parsed.segments.count == 2,
            case .entitySet(let set, _) = parsed.segments[0], case .key(let key) = parsed.segments[1],
            let layout = m.layouts[set]
        else { throw LocalReadError(400, "BadRequest", "cannot resolve the link '\(link)'") }
        guard let found = try row(db, model: m, layout: layout, key: key) else {
            throw LocalReadError(404, "NotFound", "the linked entity '\(link)' does not exist")
        }
        return (layout, key, found)
    }

    /// The stored `_json` members of the entity with `key`, if any.
    func row(_ db: Database, model m: MirrorModel, layout: MirrorSetLayout, key: ODataKey) throws -> [(
        String, RawJSON
    )]? {
        let (whereSQL, values) = m.keyPredicate(key, in: layout)
        guard
            let r = try db.query(
                "SELECT \"_json\" FROM \(q(layout.set.name)) WHERE \(whereSQL)",
                values
            ).first
        else { return nil }
        return (try? RawJSON.parse(r[0].string ?? "{}"))?.members ?? []
    }

    static func setMember(_ members: inout [(String, RawJSON)], _ name: String, _ value: RawJSON) {
        if let i = members.firstIndex(where: { $0.0 == name }) {
            members[i].1 = value
        } else {
            members.append((name, value))
        }
    }

    /// Stores one new entity (minting missing keys) and its nested entities, with foreign keys set by the
    /// navigations' referential constraints; returns the stored members and whether a key was minted.
    /// `record` collects the nested entities created (`set`, `key`, `nav`, `index`).
    private func createEntity(
        _ db: Database, model m: MirrorModel, layout: MirrorSetLayout, members given: [(String, RawJSON)],
        nested: [(nav: EdmNavigationProperty, items: [[(String, RawJSON)]])],
        record: inout [[String: String]],
        depth: Int = 0
    ) throws -> ([(String, RawJSON)], Bool) {
        guard depth < 8 else { throw LocalReadError(400, "BadRequest", "deep insert nested too deeply") }
        var members = given
        let keyProperties = m.model.keyProperties(of: layout.entityType)
        var principals: [(EdmNavigationProperty, [(String, RawJSON)], MirrorSetLayout, Int)] = []
        var dependents: [(EdmNavigationProperty, [(String, RawJSON)], MirrorSetLayout, Int)] = []
        for (nav, items) in nested {
            guard
                let targetLayout = m.model.targetEntitySet(from: layout.set, navigationPath: nav.name)
                    .flatMap({
                        m.layouts[$0.name]
                    }) ?? m.layouts.values.first(where: { $0.entityType == nav.target })
            else { throw LocalReadError(400, "BadRequest", "no entity set for the navigation '\(nav.name)'") }
            // The side whose constraint properties are its key is the principal.
            let keyNames = Set(keyProperties.map(\.name))
            let sourceIsPrincipal =
                nav.referentialConstraints.isEmpty
                || nav.referentialConstraints.allSatisfy { keyNames.contains($0.property) }
            for (i, item) in items.enumerated() {
                if sourceIsPrincipal {
                    dependents.append((nav, item, targetLayout, i))
                } else {
                    principals.append((nav, item, targetLayout, i))
                }
            }
        }
        for (nav, item, target, index) in principals {
            let (inner, innerNested) = try splitBody(
                db, model: m, type: target.entityType, item, allowNested: true)
            let (stored, minted) = try createEntity(
                db, model: m, layout: target, members: inner, nested: innerNested, record: &record,
                depth: depth + 1)
            if minted, depth == 0 {
                record.append([
                    "set": target.set.name, "nav": nav.name, "index": String(index),
                    "key": Self.keyPredicate(
                        stored, m.model.keyProperties(of: target.entityType), version: m.version),
                ])
            }
            for c in nav.referentialConstraints {
                if let v = stored.first(where: { $0.0 == c.referencedProperty })?.1 {
                    Self.setMember(&members, c.property, v)
                }
            }
        }
        var minted = false
        for p in keyProperties where !members.contains(where: { $0.0 == p.name }) {
            guard let prim = p.type.primitive else { continue }
            minted = true
            switch prim {
            case .byte, .sbyte, .int16, .int32, .int64:
                members.append((p.name, .number(String(try mintLocalInteger(db)))))
            case .guid:
                members.append((p.name, .string(UUID().uuidString.lowercased())))
            default:
                members.append((p.name, .string("local-" + UUID().uuidString.lowercased())))
            }
        }
        try insert(db, model: m, layout: layout, members: members)
        for (nav, item, target, index) in dependents {
            var (inner, innerNested) = try splitBody(
                db, model: m, type: target.entityType, item, allowNested: true)
            for c in nav.referentialConstraints {
                if let v = members.first(where: { $0.0 == c.property })?.1 {
                    Self.setMember(&inner, c.referencedProperty, v)
                }
            }
            let (stored, innerMinted) = try createEntity(
                db, model: m, layout: target, members: inner, nested: innerNested, record: &record,
                depth: depth + 1)
            if innerMinted, depth == 0 {
                record.append([
                    "set": target.set.name, "nav": nav.name, "index": String(index),
                    "key": Self.keyPredicate(
                        stored, m.model.keyProperties(of: target.entityType), version: m.version),
                ])
            }
        }
        return (members, minted)
    }

    private func insert(
        _ db: Database, model m: MirrorModel, layout: MirrorSetLayout, members: [(String, RawJSON)]
    )
        throws
    {
        let names = [#""_json""#, #""_etag""#, #""_dr""#] + layout.columns.map { q($0.name) }
        let sql =
            "INSERT INTO \(q(layout.set.name)) (\(names.joined(separator: ", "))) VALUES ("
            + Array(repeating: "?", count: names.count).joined(separator: ", ") + ")"
        let values =
            layout.columns.map {
                ODataMirror.columnValue(ODataMirror.lookup(members, $0.path), $0.type, m.version)
            }
        let etag: SQLValue = try usesETags(db, model: m, layout: layout) ? .text(Self.mintETag()) : .null
        do {
            try db.run(sql, [.text(RawJSON.object(members).serialized()), etag, .text("local")] + values)
        } catch {
            throw LocalReadError(409, "Conflict", "an entity with this key exists in \(layout.set.name)")
        }
    }

    /// Applies an update or delete inside the queue's transaction; fills in the queue entry's `If-Match`.
    func applyToMirror(
        _ db: Database, model m: MirrorModel, layout: MirrorSetLayout, method: String, key: ODataKey,
        members: [(String, RawJSON)], keyProperties: [EdmProperty], clientIfMatch: String?,
        queued: inout QueuedRequest
    ) throws -> LocalWriteOutcome {
        let table = q(layout.set.name)
        let (whereSQL, whereValues) = m.keyPredicate(key, in: layout)
        func row(_ properties: [(String, RawJSON)]) -> [SQLValue] {
            layout.columns.map {
                ODataMirror.columnValue(ODataMirror.lookup(properties, $0.path), $0.type, m.version)
            }
        }
        guard
            let existing = try db.query(
                "SELECT \"_json\", \"_etag\" FROM \(table) WHERE \(whereSQL)", whereValues
            )
            .first
        else { throw LocalReadError(404, "NotFound", "no such entity") }
        let current = existing[1].string
        if let given = clientIfMatch, given != Self.noIfMatch {
            // The client's precondition holds against the version the mirror has (`*` always does); a
            // version the mirror cannot name (a set without ETags) is not checked.
            if let current, !Self.ifMatch(given, allows: current) {
                throw LocalReadError(
                    412, "PreconditionFailed",
                    "If-Match does not match the entity's current ETag (\(current))")
            }
            // An ETag the gateway minted means nothing upstream: upload as for a write without If-Match.
            if Self.isMintedETag(given) { queued.ifMatch = uploadIfMatch(mirrorETag: nil) }
        } else if clientIfMatch == nil {
            queued.ifMatch = uploadIfMatch(mirrorETag: Self.isMintedETag(current) ? nil : current)
        }
        if method == "DELETE" {
            try db.run("DELETE FROM \(table) WHERE \(whereSQL)", whereValues)
            return LocalWriteOutcome(status: 204, createdKey: nil)
        }
        var properties: [(String, RawJSON)] = []
        let old = (try? RawJSON.parse(existing[0].string ?? "{}"))?.members ?? []
        if method == "PUT" {
            properties = old.filter { p in keyProperties.contains { $0.name == p.0 } }
            for (k, v) in members where !properties.contains(where: { $0.0 == k }) {
                properties.append((k, v))
            }
        } else {
            properties = old
            for (k, v) in members { Self.setMember(&properties, k, v) }
        }
        // A new version: a new ETag when the set carries them (the upstream's comes with the next download).
        let etag = current == nil ? nil : Self.mintETag()
        let sets = ([#""_json" = ?"#, #""_etag" = ?"#] + layout.columns.map { "\(q($0.name)) = ?" })
            .joined(separator: ", ")
        try db.run(
            "UPDATE \(table) SET \(sets) WHERE \(whereSQL)",
            [.text(RawJSON.object(properties).serialized()), SQLValue(etag)] + row(properties) + whereValues)
        return LocalWriteOutcome(status: 204, createdKey: nil, etag: etag)
    }

    /// `clientIfMatch` of an internal change that carries no precondition of a client (a link change's
    /// effect on the other entity).
    static let noIfMatch = "-"

    /// A gateway-minted weak ETag (`W/"mg-…"`) for an entity changed locally: clients that send `If-Match`
    /// keep working offline; it is never sent upstream.
    static func mintETag() -> String { "W/\"mg-" + UUID().uuidString.lowercased() + "\"" }

    static func isMintedETag(_ etag: String?) -> Bool { etag?.hasPrefix("W/\"mg-") == true }

    /// Whether an `If-Match` value (`*` or a list of entity tags) allows the current `etag`.
    static func ifMatch(_ header: String, allows etag: String) -> Bool {
        var tags: [Substring] = []
        var start = header.startIndex
        var quoted = false
        for i in header.indices {
            if header[i] == "\"" { quoted.toggle() }
            if header[i] == ",", !quoted {
                tags.append(header[start..<i])
                start = header.index(after: i)
            }
        }
        tags.append(header[start...])
        return tags.contains { t in
            let tag = t.trimmingCharacters(in: .whitespaces)
            return tag == "*" || tag == etag
        }
    }

    /// Whether `layout`'s entities carry ETags: the model names concurrency properties, or stored rows
    /// have ETags (looking at a few rows only: the set's downloaded rows come first).
    func usesETags(_ db: Database, model m: MirrorModel, layout: MirrorSetLayout) throws -> Bool {
        if !m.model.concurrencyProperties(of: layout.entityType).isEmpty { return true }
        return try db.scalar(
            "SELECT 1 FROM (SELECT \"_etag\" AS e FROM \(q(layout.set.name)) LIMIT 64) WHERE e IS NOT NULL LIMIT 1"
        ) != nil
    }

    /// The next gateway-minted integer key inside `db`'s transaction: negative, never reused.
    func mintLocalInteger(_ db: Database) throws -> Int64 {
        let current =
            try db.scalar(#"SELECT value FROM "_mg_meta" WHERE key='localKeySeq'"#)?.string.flatMap {
                Int64($0)
            } ?? 0
        let n = current - 1
        try db.run(
            #"INSERT OR REPLACE INTO "_mg_meta" (key, value) VALUES ('localKeySeq', ?)"#, [.text(String(n))])
        return n
    }

    /// `(-1)`, `('a')`, `(A=1,B='x')` for the key values among `members`.
    static func keyPredicate(_ members: [(String, RawJSON)], _ keys: [EdmProperty], version: ODataVersion)
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
                    return "'" + ODataService.encodeQuery(s.replacingOccurrences(of: "'", with: "''")) + "'"
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

    /// An IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`).
    static func imfDate(_ date: Date) -> String {
        Timestamps.imfDate(secondsSince1970: date.timeIntervalSince1970)
    }
}

/// The one conversion between the translator's bindings (ODataCore knows no storage) and storage values.
extension SQLValue {
    /// The storage value of a translator binding.
    init(_ binding: SQLBinding) {
        switch binding {
        case .null: self = .null
        case .integer(let i): self = .integer(i)
        case .real(let d): self = .real(d)
        case .text(let t): self = .text(t)
        case .blob(let b): self = .blob(b)
        }
    }
}

extension SQLBinding {
    /// The translator binding of a storage value.
    init(_ value: SQLValue) {
        switch value {
        case .null: self = .null
        case .integer(let i): self = .integer(i)
        case .real(let d): self = .real(d)
        case .text(let t): self = .text(t)
        case .blob(let b): self = .blob(b)
        }
    }
}
