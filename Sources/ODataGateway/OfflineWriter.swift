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
    /// Where the written entity is addressed: its entity set (`Products`), or for an entity contained in
    /// a parent the path of the containing navigation (`Orders(1)/Lines`).
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

/// The offline writer: applies a client's write to the mirror and appends it to the request queue in
/// one fsynced transaction (``ODataRequestQueue/append(_:)``), then answers as the client's version
/// expects. Single writes here (creates, also through a navigation and deep inserts, updates, replaces,
/// deletes, `@odata.bind`/`__metadata.uri` links), link changes (``applyLinkChange(_:segments:_:)``) and
/// `$batch` changesets (``batchResponse(to:)``).
///
/// Promises: a write is acknowledged only after its effect and its queue entry are on disk; a write
/// that cannot be applied leaves nothing behind (the transaction rolls back) and is answered with an
/// OData error; `If-Match` is checked against the version the mirror has; keys it mints are negative
/// integers or `local-…` strings, never reused; ETags it mints (`W/"mg-…"`) never go upstream. It may
/// touch the mirror (through ``MirrorWriter``), the queue and the local reader (to answer a create with
/// the stored entity); it never calls the upstream.
struct ODataOfflineWriter: ODataServicePart {
    let context: ODataServiceContext
    let reader: ODataLocalReader

    /// Blocking: applies a single-request write to the mirror and appends it to the queue in one fsynced
    /// transaction, then answers as the client's version expects.
    func response(to request: HTTPRequest) -> HTTPResponse {
        let version = self.version
        guard let m = mirror.model else {
            return ODataServiceError.response(
                503, code: "UpstreamUnavailable",
                "the upstream is unreachable and the service is not mirrored",
                version: version)
        }
        let (path, query) = mount.relative(request)
        let input = LocalWriteInput(
            method: request.odataMethod, path: path, query: query, body: request.body,
            headers: request.headers, gatewayRoot: mount.gatewayRoot(for: request))
        do {
            let outcome = try queue.append { db -> (QueuedRequest, LocalWriteOutcome) in
                try apply(MirrorWriter(db: db, model: m), input)
            }
            return answer(outcome, request: request)
        } catch let e as ODataServiceError {
            return e.response(version: version)
        } catch {
            return ODataServiceError.response(
                500, code: "InternalError", "the write could not be stored: \(error)", version: version)
        }
    }

    /// The answer to an applied write: a create reads the stored entity back (`201` with `Location`).
    /// Should that read fail, the write still stands: `204` with `Location`, no body (never a success
    /// status carrying an error).
    func answer(_ outcome: LocalWriteOutcome, request: HTTPRequest) -> HTTPResponse {
        if let createdKey = outcome.createdKey {
            let root = mount.gatewayRoot(for: request)
            var headers = request.headers
            headers.remove("Content-Type")
            var read = reader.response(
                to: HTTPRequest(
                    method: "GET", target: mount.path + outcome.set + createdKey, headers: headers))
            if read.status == 200 {
                read.status = 201
            } else {
                read = HTTPResponse(
                    status: 204, headers: ODataVersionHeaders.response(version, for: .empty), body: .bytes([])
                )
            }
            read.headers.set("Location", root + outcome.set + createdKey)
            if version == .v4 { read.headers.set("OData-EntityId", root + outcome.set + createdKey) }
            return read
        }
        var h = ODataVersionHeaders.response(version, for: .empty)
        if let etag = outcome.etag { h.set("ETag", etag) }
        return HTTPResponse(status: outcome.status, headers: h, body: .bytes([]))
    }

    /// Inside the queue's transaction: applies one write (create, create through a navigation, deep insert,
    /// update, delete, link change) to the mirror and returns the queue entry for it. Throws
    /// ``ODataServiceError`` when the write cannot be applied (nothing of it stays: the caller's
    /// transaction rolls back).
    func apply(_ w: MirrorWriter, _ input: LocalWriteInput) throws -> (QueuedRequest, LocalWriteOutcome) {
        let options = try ODataRequestOptions(headers: input.headers)
        var (queued, outcome) = try applyWrite(w, input)
        queued.transactionID = options.transactionID
        queued.nonMergeable = options.nonMergeable
        queued.removeAfterUpload = options.removeAfterUpload
        // The writer's credentials are kept (0600, never logged) only when they are replayed on upload.
        let keepCredentials = mirrorSettings.uploadCredentials == .client
        if keepCredentials {
            let credentials = WriterCredentials(
                authorization: input.headers["Authorization"], cookie: input.headers["Cookie"])
            let writer = ODataWriterIdentity.of(credentials)
            queued.writer = writer
            if queue.credentials.isHeld(writer) {
                // Behind the writer's requests that wait for credentials; its own may be the newer ones.
                queued.waitingFor = writer
                try queue.credentials.offerCredentials(credentials, writer: writer, in: w.db)
            }
        } else {
            queued.authorization = nil
        }
        try queue.recordExtras(
            input.headers, requestID: queued.requestID, keepCookie: keepCredentials, in: w.db)
        return (queued, outcome)
    }

    private func applyWrite(_ w: MirrorWriter, _ input: LocalWriteInput) throws -> (
        QueuedRequest, LocalWriteOutcome
    ) {
        let m = w.model
        let method = input.method
        let parsed: ODataResourcePath
        do { parsed = try ODataResourcePath.parse(input.path, model: m.model) } catch {
            throw WriteChecks.pathError(input.path, model: m.model, error)
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
            if case .singleton(let name, let t) = segments[0], ["PUT", "PATCH", "MERGE"].contains(method),
                let layout = m.layouts[name]
            {
                // A singleton is its one stored row, addressed by that row's key.
                set = name
                type = t
                key = try w.onlyKey(layout)
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
                set =
                    nav.containsTarget
                    ? name + "/" + navName
                    : targetSet ?? m.layouts.values.first { $0.entityType == target }?.set.name
                type = target
                parent = (name, t, k, nav)
            }
        case 4:
            // `Orders(1)/Lines(2)`: a contained entity, addressed within its parent.
            if case .entitySet(let name, let t) = segments[0], case .key(let parentKey) = segments[1],
                case .navigation(let navName, let target, true, _) = segments[2],
                case .key(let k) = segments[3],
                ["PUT", "PATCH", "MERGE", "DELETE"].contains(method),
                m.model.navigationProperty(named: navName, in: t)?.containsTarget == true,
                let contained = m.layouts[name + "/" + navName], let container = contained.container
            {
                set = contained.set.name
                type = target
                key = ODataKey(
                    k.values
                        + container.parentKey.map { c in
                            ODataKeyValue(name: c.name, value: parentKey[c.path[0]] ?? .null)
                        })
            }
        default: break
        }
        if set == nil, let link = try applyLinkChange(w, segments: segments, input) { return link }
        guard let set, let layout = m.layouts[set] else {
            throw ODataServiceError(
                503, "UpstreamUnavailable",
                "the upstream is unreachable; only creates (of an entity set or through a navigation) and updates/deletes of one entity are queued offline"
            )
        }
        var members: [(String, RawJSON)] = []
        var nested: [(nav: EdmNavigationProperty, items: [[(String, RawJSON)]])] = []
        /// An Atom entry's V2 JSON form: what is applied to the mirror is what is uploaded.
        var uploadJSON: RawJSON?
        if method != "DELETE" {
            let contentType = (input.headers["Content-Type"] ?? "").lowercased()
            let body: RawJSON
            if contentType.contains("atom") || contentType.contains("xml") {
                // A V2 Atom entry (SAP Gateway's default format): read into its V2 JSON form.
                body = try ODataAtomBody.object(input.body, type: type, model: m)
                uploadJSON = body
            } else if let json = try? RawJSON.parse(input.body) {
                body = json
            } else {
                throw ODataServiceError(400, "BadRequest", "the request body is not JSON")
            }
            var object = body
            if let d = body["d"], body.members?.count == 1 { object = d }
            guard let given = object.members else {
                throw ODataServiceError(400, "BadRequest", "the body is not an object")
            }
            let split = try splitBody(w, type: type, given, allowNested: method == "POST")
            (members, nested) = (split.members, split.nested)
            // A create of a derived type (`@odata.type`, V2 `__metadata.type`) is stored as that type.
            if method == "POST" { type = split.type }
        }
        let keyProperties = m.model.keyProperties(of: type)
        var queued = QueuedRequest(
            id: 0, entitySet: set, method: method,
            url: input.path + (input.query.isEmpty ? "" : "?" + input.query),
            body: input.body, contentType: input.headers["Content-Type"],
            authorization: input.headers["Authorization"], ifMatch: input.headers["If-Match"],
            localKey: nil, gatewayRoot: input.gatewayRoot, requestID: UUID().uuidString.lowercased(),
            firstSent: Self.imfDate(Date()), attempts: 0)
        if let uploadJSON {
            // Uploaded as V2 JSON, which every V2 service (SAP Gateway included) accepts as it accepts Atom.
            queued.body = Array(uploadJSON.serialized().utf8)
            queued.contentType = "application/json"
        }
        if method == "POST" {
            /// The parent of a contained entity (`POST Orders(1)/Lines`).
            var container: [(String, RawJSON)]?
            if let parent {
                // The new entity belongs to the parent: its foreign key takes the parent's value.
                let parentLayout = m.layouts[parent.set]
                let parentRow = try parentLayout.flatMap { try w.entity($0, key: parent.key)?.members }
                guard let parentRow else { throw ODataServiceError(404, "NotFound", "no such entity") }
                if layout.container != nil { container = parentRow }
                for c in parent.nav.referentialConstraints {
                    if let v = parentRow.first(where: { $0.0 == c.property })?.1 {
                        Self.setMember(&members, c.referencedProperty, v)
                    }
                }
            }
            var created: [[String: String]] = []
            let (stored, minted) = try createEntity(
                w, layout: layout, type: type, members: members, nested: nested, record: &created,
                parent: container)
            if minted { queued.localKey = ODataKeyText.predicate(stored, keyProperties, version: m.version) }
            if !created.isEmpty {
                queued.nested = RawJSON.array(
                    created.map {
                        .object($0.sorted { $0.key < $1.key }.map { ($0.key, RawJSON.string($0.value)) })
                    }
                ).serialized()
            }
            // A contained entity has no address of its own: it is read back under its parent.
            let address =
                container != nil
                ? String(input.path.drop { $0 == "/" }.reversed().drop { $0 == "/" }.reversed()) : set
            return (
                queued,
                LocalWriteOutcome(
                    status: 201, set: address,
                    createdKey: ODataKeyText.predicate(stored, keyProperties, version: m.version))
            )
        }
        guard let key else { throw ODataServiceError(400, "BadRequest", "no key") }
        let o = try applyToMirror(
            w, layout: layout, method: method, key: key, members: members,
            keyProperties: keyProperties, clientIfMatch: input.headers["If-Match"], queued: &queued)
        return (queued, LocalWriteOutcome(status: o.status, set: set, createdKey: nil, etag: o.etag))
    }

    /// The structural members of a body and its nested entities (deep insert); `Nav@odata.bind` and V2
    /// `{"__metadata": {"uri": …}}` links set the foreign key of a single-valued navigation. `type` of the
    /// result is the one the body declares (`@odata.type`, V2 `__metadata.type`: `type` or a type derived
    /// from it). Throws `400` for a link to no navigation property or a link that is not a URL.
    private func splitBody(
        _ w: MirrorWriter, type declaredBase: String, _ given: [(String, RawJSON)], allowNested: Bool
    ) throws -> (
        type: String, members: [(String, RawJSON)],
        nested: [(nav: EdmNavigationProperty, items: [[(String, RawJSON)]])]
    ) {
        let m = w.model
        let type: String
        do {
            type = try ODataPayloadValidator(model: m.model).declaredType(of: given, base: declaredBase)
        } catch { throw ODataServiceError(payload: error) }
        var members: [(String, RawJSON)] = []
        var nested: [(nav: EdmNavigationProperty, items: [[(String, RawJSON)]])] = []
        var binds: [(EdmNavigationProperty, String)] = []
        for (name, value) in given {
            if name.hasSuffix("@odata.bind") {
                let navName = String(name.dropLast("@odata.bind".count))
                guard let nav = m.model.navigationProperty(named: navName, in: type) else {
                    throw ODataServiceError(
                        400, "BadRequest", "'\(navName)' is not a navigation property of '\(type)'",
                        target: name)
                }
                if let link = value.string, !nav.isCollection {
                    binds.append((nav, link))
                } else if nav.isCollection, let links = value.elements, links.allSatisfy({ $0.string != nil })
                {
                    // Links of a collection navigation: kept in the queued body, not in the mirror's rows;
                    // what link tables said about the entities bound is forgotten.
                    for link in links.compactMap(\.string) {
                        try forgetLinks(w, changing: nav, in: type, boundTo: link, collection: true)
                    }
                } else {
                    throw ODataServiceError(
                        400, "BadRequest",
                        "'\(name)' must be \(nav.isCollection ? "an array of entity URLs" : "an entity URL")",
                        target: name)
                }
                continue
            }
            if name == "__metadata" || name.hasPrefix("@") || name.contains("@") { continue }
            if let nav = m.model.navigationProperty(named: name, in: type) {
                let items = value.navigationItems
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
                        throw ODataServiceError(
                            400, "BadRequest", "nested entities are only accepted in a create (deep insert)")
                    }
                    nested.append((nav, entities))
                }
                continue
            }
            members.append((name, value))
        }
        // The client's own values, before links and parents set foreign keys (a create is checked whole
        // again when it is stored).
        try WriteChecks.check(members, ofType: type, model: m.model, for: .update)
        for (nav, link) in binds where !nav.isCollection {
            try forgetLinks(w, changing: nav, in: type, boundTo: link, collection: false)
            let values = try linkedKeyValues(w, link: link)
            for c in nav.referentialConstraints {
                if let v = values.first(where: { $0.0 == c.referencedProperty })?.1 {
                    Self.setMember(&members, c.property, v)
                }
            }
        }
        return (type, members, nested)
    }

    /// An offline bind of `nav` (a navigation of `type` without referential constraint) to the entity
    /// `link` addresses changes links the link tables may record: the bound entity's partner list
    /// (single-valued bind: the list gains an entity) or partner link (collection bind: the entity moves
    /// to another owner, and leaves its old owner's list) is forgotten, so that the mirror answers 501 for
    /// it rather than links it no longer knows.
    private func forgetLinks(
        _ w: MirrorWriter, changing nav: EdmNavigationProperty, in type: String, boundTo link: String,
        collection: Bool
    ) throws {
        let m = w.model
        guard nav.referentialConstraints.isEmpty, let partner = nav.partner,
            let bound = try? linkedEntity(w, link: link), let back = m.links[bound.layout.set.name]?[partner],
            let key = ODataMirror.linkKey(bound.members, back.sourceKey)
        else { return }
        try ODataMirror.forgetLinks(w.db, back, key: key, asTarget: false)
        if collection, let forward = m.links[back.targetSet]?[nav.name] {
            try ODataMirror.forgetLinks(w.db, forward, key: key, asTarget: true)
        }
    }

    /// The stored properties of the entity a link (`Customers('X')`, a URL under the service root) addresses.
    private func linkedKeyValues(_ w: MirrorWriter, link: String) throws -> [(
        String, RawJSON
    )] {
        try linkedEntity(w, link: link).members
    }

    /// The entity a link addresses: its set's layout, key and stored properties.
    func linkedEntity(_ w: MirrorWriter, link: String) throws -> (
        layout: MirrorSetLayout, key: ODataKey, members: [(String, RawJSON)]
    ) {
        let m = w.model
        var path = link
        if let r = path.range(of: settings.mount) { path = String(path[r.upperBound...]) }
        while path.hasPrefix("/") { path = String(path.dropFirst()) }
        guard let parsed = try? ODataResourcePath.parse(path, model: m.model), parsed.segments.count == 2,
            case .entitySet(let set, _) = parsed.segments[0], case .key(let key) = parsed.segments[1],
            let layout = m.layouts[set]
        else { throw ODataServiceError(400, "BadRequest", "cannot resolve the link '\(link)'") }
        guard let found = try w.entity(layout, key: key)?.members else {
            throw ODataServiceError(404, "NotFound", "the linked entity '\(link)' does not exist")
        }
        return (layout, key, found)
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
        _ w: MirrorWriter, layout: MirrorSetLayout, type: String, members given: [(String, RawJSON)],
        nested: [(nav: EdmNavigationProperty, items: [[(String, RawJSON)]])],
        record: inout [[String: String]], parent: [(String, RawJSON)]? = nil, depth: Int = 0
    ) throws -> ([(String, RawJSON)], Bool) {
        let m = w.model
        guard depth < 8 else { throw ODataServiceError(400, "BadRequest", "deep insert nested too deeply") }
        var members = given
        let keyProperties = m.model.keyProperties(of: layout.entityType)
        var principals: [(EdmNavigationProperty, [(String, RawJSON)], MirrorSetLayout, Int)] = []
        var dependents: [(EdmNavigationProperty, [(String, RawJSON)], MirrorSetLayout, Int)] = []
        for (nav, items) in nested {
            guard
                let targetLayout = (nav.containsTarget ? m.layouts[layout.set.name + "/" + nav.name] : nil)
                    ?? m.model.targetEntitySet(from: layout.set, navigationPath: nav.name)
                    .flatMap({
                        m.layouts[$0.name]
                    }) ?? m.layouts.values.first(where: { $0.entityType == nav.target })
            else {
                throw ODataServiceError(400, "BadRequest", "no entity set for the navigation '\(nav.name)'")
            }
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
            let inner = try splitBody(w, type: target.entityType, item, allowNested: true)
            let (stored, minted) = try createEntity(
                w, layout: target, type: inner.type, members: inner.members, nested: inner.nested,
                record: &record, depth: depth + 1)
            if minted, depth == 0 { record.append(Self.nestedRecord(m, target, nav, index, stored)) }
            for c in nav.referentialConstraints {
                if let v = stored.first(where: { $0.0 == c.referencedProperty })?.1 {
                    Self.setMember(&members, c.property, v)
                }
            }
        }
        var mintedKeys: Set<String> = []
        for p in keyProperties where !members.contains(where: { $0.0 == p.name }) {
            guard let prim = p.type.primitive else { continue }
            mintedKeys.insert(p.name)
            switch prim {
            case .byte, .sbyte, .int16, .int32, .int64:
                members.append((p.name, .number(String(try w.mintLocalInteger()))))
            case .guid:
                members.append((p.name, .string(UUID().uuidString.lowercased())))
            default:
                members.append((p.name, .string("local-" + UUID().uuidString.lowercased())))
            }
        }
        // The whole new entity as the upstream will see it (foreign keys set); the keys minted here are
        // placeholders the upstream replaces (a `local-…` string may exceed the key's MaxLength): not checked.
        try WriteChecks.check(
            members.filter { !mintedKeys.contains($0.0) }, ofType: type, model: m.model, for: .create,
            exempt: mintedKeys)
        try insert(w, layout: layout, members: members, parent: parent, type: type)
        var linked: [String: (nav: EdmNavigationProperty, children: [[(String, RawJSON)]])] = [:]
        for (nav, item, target, index) in dependents {
            var inner = try splitBody(w, type: target.entityType, item, allowNested: true)
            for c in nav.referentialConstraints {
                if let v = members.first(where: { $0.0 == c.property })?.1 {
                    Self.setMember(&inner.members, c.referencedProperty, v)
                }
            }
            let (stored, innerMinted) = try createEntity(
                w, layout: target, type: inner.type, members: inner.members, nested: inner.nested,
                record: &record, parent: target.container != nil ? members : nil, depth: depth + 1)
            if innerMinted, depth == 0 { record.append(Self.nestedRecord(m, target, nav, index, stored)) }
            if m.links[layout.set.name]?[nav.name] != nil {
                linked[nav.name, default: (nav: nav, children: [])].children.append(stored)
            }
        }
        // Links the gateway made itself: the new entity's link-table navigations given in the deep insert
        // are all its links (it is new), and each new nested entity's partner link leads back to it.
        for (name, entry) in linked.sorted(by: { $0.key < $1.key }) {
            guard let link = m.links[layout.set.name]?[name] else { continue }
            var records = ODataMirror.linkRecords(
                model: m, set: layout.set.name, properties: members, navigation: name, related: entry.children
            )
            if !link.isCollection, let partner = entry.nav.partner, m.links[link.targetSet]?[partner] != nil {
                for child in entry.children {
                    records += ODataMirror.linkRecords(
                        model: m, set: link.targetSet, properties: child, navigation: partner,
                        related: [members])
                }
            }
            try ODataMirror.addLinks(w.db, m, scope: MirrorWriter.createdScope, links: records)
        }
        return (members, !mintedKeys.isEmpty)
    }

    /// What the queue entry of a deep insert records of one nested entity created with a minted key:
    /// `set`, `nav`, `index` (position under the navigation property) and `key`.
    static func nestedRecord(
        _ m: MirrorModel, _ target: MirrorSetLayout, _ nav: EdmNavigationProperty, _ index: Int,
        _ stored: [(String, RawJSON)]
    ) -> [String: String] {
        [
            "set": target.set.name, "nav": nav.name, "index": String(index),
            "key": ODataKeyText.predicate(
                stored, m.model.keyProperties(of: target.entityType), version: m.version),
        ]
    }

    private func insert(
        _ w: MirrorWriter, layout: MirrorSetLayout, members: [(String, RawJSON)],
        parent: [(String, RawJSON)]? = nil,
        type: String? = nil
    ) throws {
        let etag = try w.usesETags(layout) ? Self.mintETag() : nil
        do {
            try w.insert(layout, members: members, etag: etag, parent: parent, type: type)
        } catch {
            throw ODataServiceError(409, "Conflict", "an entity with this key exists in \(layout.set.name)")
        }
    }

    /// Applies an update or delete inside the queue's transaction; fills in the queue entry's `If-Match`.
    func applyToMirror(
        _ w: MirrorWriter, layout: MirrorSetLayout, method: String, key: ODataKey,
        members: [(String, RawJSON)], keyProperties: [EdmProperty], clientIfMatch: String?,
        queued: inout QueuedRequest
    ) throws -> LocalWriteOutcome {
        guard let existing = try w.entity(layout, key: key) else {
            // Outside what the mirror holds: see ``acceptUnknown(_:layout:method:key:members:queued:)``.
            return try acceptUnknown(
                w, layout: layout, method: method, key: key, members: members, queued: &queued)
        }
        let current = existing.etag
        if let given = clientIfMatch, given != Self.noIfMatch {
            // The client's precondition holds against the version the mirror has (`*` always does); a
            // version the mirror cannot name (a set without ETags) is not checked.
            if let current, !Self.ifMatch(given, allows: current) {
                throw ODataServiceError(
                    412, "PreconditionFailed",
                    "If-Match does not match the entity's current ETag (\(current))")
            }
            // An ETag the gateway minted means nothing upstream: upload as for a write without If-Match.
            if Self.isMintedETag(given) { queued.ifMatch = uploadIfMatch(mirrorETag: nil) }
        } else if clientIfMatch == nil {
            queued.ifMatch = uploadIfMatch(mirrorETag: Self.isMintedETag(current) ? nil : current)
        }
        if method == "DELETE" {
            try w.delete(layout, key: key)
            return LocalWriteOutcome(status: 204, createdKey: nil)
        }
        let old = existing.members
        for p in keyProperties {
            guard let given = members.first(where: { $0.0 == p.name })?.1, let prim = p.type.primitive,
                let stored = old.first(where: { $0.0 == p.name })?.1
            else { continue }
            if ODataStorage.encode(given, as: prim) != ODataStorage.encode(stored, as: prim) {
                throw ODataServiceError(
                    400, "BadRequest", "the key property '\(p.name)' cannot be changed", target: p.name)
            }
        }
        var properties: [(String, RawJSON)] = []
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
        try w.update(layout, key: key, members: properties, etag: etag)
        return LocalWriteOutcome(status: 204, createdKey: nil, etag: etag)
    }

    /// The rule for writes to an entity the mirror does not hold (SAP's offline store does the same for
    /// requests outside its defining requests): when a defining request reads the whole entity set, the
    /// entity did not exist upstream at the last download either, and the answer is the upstream's, 404;
    /// otherwise the write is accepted and queued like any other (the upstream decides at upload), and is
    /// readable afterwards: an update stores the key and the given properties as a local row (a `PUT`
    /// its whole body), a delete removes nothing. The queued request carries no ETag of the mirror's
    /// (`uploadIfMatch` decides, as for a write without one).
    func acceptUnknown(
        _ w: MirrorWriter, layout: MirrorSetLayout, method: String, key: ODataKey,
        members: [(String, RawJSON)],
        queued: inout QueuedRequest
    ) throws -> LocalWriteOutcome {
        if try w.holdsWholeSet(layout.set.name) {
            throw ODataServiceError(404, "NotFound", "no such entity")
        }
        if queued.ifMatch == nil { queued.ifMatch = uploadIfMatch(mirrorETag: nil) }
        if method == "DELETE" { return LocalWriteOutcome(status: 204, createdKey: nil) }
        var properties = members
        for kv in key.values
        where !kv.name.hasPrefix("_p_") && !properties.contains(where: { $0.0 == kv.name }) {
            properties.append((kv.name, kv.value.jsonValue))
        }
        let parent = layout.container.map { c in
            c.parentKey.map { ($0.path[0], key[$0.name]?.jsonValue ?? .null) }
        }
        // Not created offline: what the entity contains upstream stays unknown (`unknownScope`).
        try w.insert(layout, members: properties, etag: nil, parent: parent, scope: MirrorWriter.unknownScope)
        return LocalWriteOutcome(status: 204, createdKey: nil)
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

    /// The If-Match an uploaded write gets when its client sent none (`uploadIfMatch`).
    func uploadIfMatch(mirrorETag: String?) -> String? {
        switch mirrorSettings.uploadIfMatch {
        case .mirror: return mirrorETag ?? "*"
        case .star: return "*"
        case .omit: return nil
        }
    }

    /// An IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`).
    static func imfDate(_ date: Date) -> String {
        Timestamps.imfDate(secondsSince1970: date.timeIntervalSince1970)
    }
}
