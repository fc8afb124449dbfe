import HTTPCore
import JSONCore
import ODataCore

/// Passes a forwarded write's response through and, when it is a 2xx, has the mirror brought up to date
/// for the entity it changed (after the client has its answer; see
/// ``ODataRouter/reflectForwardedWrite(_:location:)``).
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

extension ODataRouter {
    /// Blocking (on the pool): after a single write that the upstream accepted while forwarded, makes the
    /// mirror hold what the upstream now holds for that entity, so that reads answered locally later (the
    /// upstream gone, or `localFirst`) see the write without waiting for the next download. A delete
    /// removes the row; a create, update or replace fetches the entity from the upstream (with the writer's
    /// credentials) and stores it as the upstream serves it (its ETag included) — or, with
    /// `OfflineOData.RemoveAfterUpload: true`, removes it. Best effort: when the entity cannot be fetched
    /// the next download brings the mirror up to date.
    func reflectForwardedWrite(_ request: HTTPRequest, location: String?) {
        guard let m = mirror.model else { return }
        let method = request.odataMethod
        let (path, _) = mount.relative(request)
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
        do {
            // `OfflineOData.RemoveAfterUpload: true`: the entity is not kept in the mirror (nor a stale copy).
            let removed = (try? ODataRequestOptions(headers: request.headers))?.removeAfterUpload ?? false
            if method == "DELETE" || removed {
                if removed, method == "POST" {
                    if let (layout, key) = ODataKeyText.locate(entityPath, model: m) {
                        try mirror.write { w in try w.delete(layout, key: key) }
                    }
                    return
                }
                guard case .key(let key) = parsed.segments[1] else { return }
                try mirror.write { w in try w.delete(layout, key: key) }
                return
            }
            var extra: [(name: String, value: String)] = []
            if let auth = request.headers["Authorization"] { extra.append(("Authorization", auth)) }
            guard
                case .found(let entity) = downloader.fetchEntity(
                    entityPath, set: set, type: type, extraHeaders: extra)
            else { return }
            try mirror.write { w in try w.store(layout, entity: entity, scopeOfSet: false) }
        } catch {
            logger.debug("odata: mirror not updated after a forwarded write", metadata: ["error": "\(error)"])
        }
    }
}
