import Foundation
import GatewaySupport
import HTTPCore
import JSONCore
import ODataCore
import Storage
import Upstream

/// Passes a forwarded write's response through and, when it is a 2xx, has the mirror brought up to date
/// for the entity it changed (after the client has its answer; see ``ODataService/reflectForwardedWrite(_:location:)``).
struct ReflectingResponder: Responder {
    let inner: any Responder
    let reflect: @Sendable (_ location: String?) -> Void

    @discardableResult func respond(_ response: HTTPResponse) -> Bool {
        let location = response.headers["Location"] ?? response.headers["OData-EntityId"]
        let sent = inner.respond(response)
        if (200..<300).contains(response.status) { reflect(location) }
        return sent
    }
}

extension ODataService {
    /// Blocking (on the pool): after a single write that the upstream accepted while forwarded, makes the
    /// mirror hold what the upstream now holds for that entity, so that reads answered locally later (the
    /// upstream gone, or `localFirst`) see the write without waiting for the next download. A delete
    /// removes the row; a create, update or replace fetches the entity from the upstream (with the writer's
    /// credentials) and stores it as the upstream serves it (its ETag included). Best effort: when the
    /// entity cannot be fetched the next download brings the mirror up to date.
    func reflectForwardedWrite(_ request: HTTPRequest, location: String?) {
        guard let m = mirror.model else { return }
        let method = Self.effectiveMethod(request)
        let (path, _) = relative(request)
        guard let parsed = try? ODataResourcePath.parse(path, model: m.model) else { return }
        let set: String
        let type: String
        let entityPath: String
        switch (method, parsed.segments.first, parsed.segments.count) {
        case ("POST", .entitySet(let name, let t)?, 1):
            // The created entity's address: the last `Set(…)` of the Location the upstream gave.
            guard let location, let r = location.range(of: name + "(", options: .backwards) else { return }
            set = name
            type = t
            entityPath = String(location[r.lowerBound...])
        case ("PUT", .entitySet(let name, let t)?, 2), ("PATCH", .entitySet(let name, let t)?, 2),
            ("MERGE", .entitySet(let name, let t)?, 2), ("DELETE", .entitySet(let name, let t)?, 2):
            guard case .key = parsed.segments[1] else { return }
            set = name
            type = t
            entityPath = path
        default:
            return
        }
        guard let layout = m.layouts[set] else { return }
        if method == "DELETE" {
            guard case .key(let key) = parsed.segments[1] else { return }
            deleteMirrored(set: set, layout: layout, key: key, model: m)
            return
        }
        var extra: [(name: String, value: String)] = []
        if let auth = request.headers["Authorization"] { extra.append(("Authorization", auth)) }
        guard
            let response = try? upstreamGET(
                forwarder.settings.upstream + entityPath, extraHeaders: extra),
            response.status == 200, let body = try? RawJSON.parse(response.body)
        else { return }
        var object = body
        if let d = body["d"], body.members?.count == 1 { object = d }
        guard let members = object.members else { return }
        var rows: [String: [MirrorEntity]] = [:]
        Self.ingest(members, set: set, type: type, model: m, into: &rows)
        guard var entity = rows[set]?.last else { return }
        if entity.etag == nil {
            entity.etag = response.headers.first { $0.name.lowercased() == "etag" }?.value
        }
        do {
            try mirror.upsert(set: set, layout: layout, entity: entity)
        } catch {
            logger.debug("odata: mirror not updated after a forwarded write", metadata: ["error": "\(error)"])
        }
    }

    private func deleteMirrored(set: String, layout: MirrorSetLayout, key: ODataKey, model m: MirrorModel) {
        let (whereSQL, values) = m.keyPredicate(key, in: layout)
        _ = try? mirror.pool.write { db in
            try db.run("DELETE FROM \(q(set)) WHERE " + whereSQL, values)
        }
    }
}

extension ODataMirror {
    /// Stores one entity of `set` as the upstream serves it, replacing the row with the same key; the row
    /// keeps the defining request it came from (so the next download of that request replaces it), or is
    /// marked as written through the gateway (`local`) when it is new.
    func upsert(set: String, layout: MirrorSetLayout, entity: MirrorEntity) throws {
        guard let m = model else { throw MirrorError("no $metadata") }
        let keys = layout.key
        let keyValues = keys.map { k in
            layout.columns.first { $0.name == k }.map {
                Self.columnValue(Self.lookup(entity.properties, $0.path), $0.type, m.version)
            } ?? .null
        }
        let names = [#""_json""#, #""_etag""#, #""_dr""#] + layout.columns.map { q($0.name) }
        try pool.write { db in
            try db.transaction {
                let whereSQL = keys.map { "\(q($0)) = ?" }.joined(separator: " AND ")
                let scope =
                    try db.scalar("SELECT \"_dr\" FROM \(q(set)) WHERE \(whereSQL)", keyValues)?.string
                    ?? "local"
                var values: [SQLValue] = [
                    .text(RawJSON.object(entity.properties).serialized()), SQLValue(entity.etag),
                    .text(scope),
                ]
                for c in layout.columns {
                    values.append(Self.columnValue(Self.lookup(entity.properties, c.path), c.type, m.version))
                }
                try db.run(
                    "INSERT OR REPLACE INTO \(q(set)) (\(names.joined(separator: ", "))) VALUES ("
                        + Array(repeating: "?", count: names.count).joined(separator: ", ") + ")", values)
            }
        }
    }
}
