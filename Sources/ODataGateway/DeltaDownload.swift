import Foundation
import JSONCore
import ODataCore
import Storage

/// Delta downloads (issue 16 item 5): a defining request without `$expand` is read with
/// `Prefer: odata.track-changes`; when the upstream answers with a delta link (V4 `@odata.deltaLink`, SAP V2
/// `__delta` with `!deltatoken`) on its last page, the link is stored with the rows (same transaction) and the
/// next download reads only what changed: V4 added and changed entities and `@removed` /
/// `$deletedEntity` entries, V2 entities and tombstones (`__metadata.deleted`, `d.__deleted`). A `410` (the
/// link expired) or another refusal of the link (`4xx` but `401`/`403`/`408`/`429`) falls back to a full read;
/// a delta the mirror cannot apply exactly (link changes `$link`/`$deletedLink`, a removed entity without a
/// key) is refused the same way, never applied in part. Local changes still queued win over downloaded ones.
extension ODataDownloader {
    /// The header that asks for change tracking.
    static let trackChanges: (name: String, value: String) = ("Prefer", "odata.track-changes")

    /// The first page of a defining request asked with `Prefer: odata.track-changes` was refused with `status`.
    struct TrackingRefused: Error {
        var status: Int
    }

    /// What reading a delta link gave.
    enum DeltaFetch {
        /// The changes, and the delta link for the next download (nil when the upstream gave none).
        case changes([String: [MirrorEntity]], [MirrorRemoval], next: String?)
        /// The link cannot be used: why (the request is read in full instead).
        case refused(String)
    }

    /// Whether defining request `query` may be read by delta: not when it expands navigation (the
    /// upstream's delta would not say what changed in the expanded entities).
    static func tracksChanges(_ query: String) -> Bool {
        let q = query.lowercased()
        return !q.contains("$expand") && !q.contains("%24expand")
    }

    /// The delta link of a payload's page: V4 `@odata.deltaLink`, V2 `d.__delta`.
    static func deltaLink(in body: RawJSON) -> String? {
        if let v = body["@odata.deltaLink"]?.string, !v.isEmpty { return v }
        if let v = body["d"]?["__delta"]?.string, !v.isEmpty { return v }
        return nil
    }

    /// `Set(key)` named by an entity id or URL (`…/Items(3)`, `Items('a')`), nil when it names none.
    static func entityText(_ id: String, set: String) -> String? {
        var path = Substring(id)
        if let q = path.firstIndex(of: "?") { path = path[..<q] }
        var search = path.endIndex
        while let r = path.range(of: set + "(", options: .backwards, range: path.startIndex..<search) {
            let before = r.lowerBound == path.startIndex ? nil : path[path.index(before: r.lowerBound)]
            if before == nil || before == "/" {
                guard let inner = ODataKeyText.inner(path[path.index(r.lowerBound, offsetBy: set.count)...])
                else { return nil }
                return set + "(" + inner + ")"
            }
            search = r.lowerBound
        }
        return nil
    }

    /// A snapshot of the queue's entities now, and the check the download's transaction runs (so that a
    /// local write, or an upload, between the two is seen).
    func pendingChanges() throws -> (Database) throws -> MirrorPendingChanges {
        let before = try queue.pool.read { db in
            entities(of: try ODataRequestQueue.requests("ORDER BY id", in: db))
        }
        return { [self] db in
            let rows = try ODataRequestQueue.requests("ORDER BY id", in: db)
            let now = entities(of: rows)
            return MirrorPendingChanges(
                queued: !rows.isEmpty, entities: now.union(before), settled: before.subtracting(now))
        }
    }

    /// Reads the changes behind `link` (every page) for defining request `request`.
    func fetchDelta(_ request: ODataMirrorSettings.DefiningRequest, link: String) throws -> DeltaFetch {
        guard let m = mirror.model else { throw MirrorError("no $metadata") }
        let (set, type) = try definingTarget(request, model: m)
        var rows: [String: [MirrorEntity]] = [:]
        var links: [MirrorLinkRecord] = []
        var removed: [MirrorRemoval] = []
        var url: String? = absolute(link)
        var next: String?
        var pages = 0
        while let current = url {
            pages += 1
            guard pages <= 100_000 else { throw MirrorError("delta of \(request.name): too many pages") }
            let r = try upstreamGET(current, extraHeaders: [Self.trackChanges])
            if r.status == 410 { return .refused("the delta link expired (410)") }
            if (400..<500).contains(r.status), ![401, 403, 408, 429].contains(r.status) {
                return .refused("the upstream answered \(r.status) to the delta link")
            }
            guard r.status == 200 else {
                throw MirrorError(
                    "delta of \(request.name) answered \(r.status): \(String(decoding: r.body.prefix(300), as: UTF8.self))"
                )
            }
            let body: RawJSON
            do { body = try RawJSON.parse(r.body) } catch {
                throw MirrorError("delta of \(request.name): \(error)")
            }
            let (items, nextPage) = Self.entities(in: body)
            var all = items
            if let tombstones = body["d"]?["__deleted"]?.elements {
                all += tombstones.map { Self.markedDeleted($0) }
            }
            for item in all {
                guard let members = item.members else { continue }
                let context = item["@odata.context"]?.string ?? ""
                if context.contains("$link") || context.contains("$deletedLink")
                    || (item["source"] != nil && item["relationship"] != nil && item["target"] != nil)
                {
                    return .refused("the delta changes links ($link/$deletedLink), which are read in full")
                }
                if Self.isRemoval(item, context: context) {
                    let id =
                        item["@id"]?.string ?? item["@odata.id"]?.string ?? item["id"]?.string
                        ?? item["__metadata"]?["uri"]?.string ?? item["__metadata"]?["id"]?.string
                    var entity = id.flatMap { Self.entityText($0, set: set) }
                    if entity == nil, let layout = m.layouts[set] {
                        let keys = m.model.keyProperties(of: layout.entityType)
                        if !keys.isEmpty, keys.allSatisfy({ k in members.contains { $0.0 == k.name } }) {
                            entity = set + ODataKeyText.predicate(members, keys, version: m.version)
                        }
                    }
                    guard let entity, ODataKeyText.locate(entity, model: m) != nil else {
                        return .refused("the delta removes an entity it does not name by key")
                    }
                    removed.append(MirrorRemoval(set: set, entity: entity))
                    continue
                }
                Self.ingest(members, set: set, type: type, model: m, into: &rows, links: &links)
            }
            if !links.isEmpty {
                return .refused("the delta carries expanded links, which are read in full")
            }
            if let link = Self.deltaLink(in: body) { next = absolute(link) }
            url = nextPage.flatMap { $0.isEmpty ? nil : absolute($0) }
        }
        return .changes(rows, removed, next: next)
    }

    /// Whether a delta entry says its entity is gone: V4.01 `@removed`, V4.0 `$deletedEntity`, SAP V2
    /// `__metadata.deleted`.
    static func isRemoval(_ item: RawJSON, context: String) -> Bool {
        if item["@removed"] != nil || item["@odata.removed"] != nil { return true }
        if context.contains("$deletedEntity") { return true }
        if case .bool(true) = item["__metadata"]?["deleted"] { return true }
        return false
    }

    /// A V2 `d.__deleted` entry as a tombstone.
    static func markedDeleted(_ item: RawJSON) -> RawJSON {
        guard var members = item.members else { return item }
        members.append(("@removed", .object([("reason", .string("deleted"))])))
        return .object(members)
    }

    /// The entity set and type a defining request reads.
    func definingTarget(_ request: ODataMirrorSettings.DefiningRequest, model m: MirrorModel) throws -> (
        set: String, type: String
    ) {
        var pathPart = Substring(request.query)
        if let qi = pathPart.firstIndex(of: "?") { pathPart = pathPart[..<qi] }
        let path: ODataResourcePath
        do { path = try ODataResourcePath.parse(String(pathPart), model: m.model) } catch {
            throw MirrorError("defining request \(request.name): \(error)")
        }
        switch path.target {
        case .entityCollection(let t, let st), .entity(let t, let st):
            guard let name = st ?? m.layouts.values.first(where: { $0.entityType == t })?.set.name else {
                throw MirrorError("defining request \(request.name): no entity set for \(t)")
            }
            return (name, t)
        default: throw MirrorError("defining request \(request.name) does not read entities")
        }
    }
}
