import Foundation
import HTTPCore
import JSONCore
import Logging
import ODataCore
import Storage

/// What a revert of the ErrorArchive removed.
public struct ErrorArchiveRevert: Sendable {
    /// ErrorArchive entries removed.
    public var archived = 0
    /// Held (or blocked) queued requests removed.
    public var held = 0
    /// Affected entities (`Set(key)`) restored from the upstream or removed from the mirror.
    public var entities: [String] = []
}

/// A revert cannot run while an upload of the same service runs (it would race the request in flight).
public struct ErrorArchiveBusy: Error, CustomStringConvertible {
    /// Why.
    public var description: String { "an upload is running; retry when it has finished" }
}

/// The error archive of one service: the ErrorArchive, RequestQueue and EventLog as OData entity sets
/// (under the mount when the upstream's model has no set of that name, and as a separate service with
/// its own `$metadata` at `/_mirrorgate/odata/{service}/`), and the revert that `DELETE
/// …/ErrorArchive('<RequestID>')` starts: the entries and the requests held behind them leave the queue
/// in one fsynced transaction, then the affected entities are restored from the upstream.
///
/// Promises: reads and reverts block their caller (run them on a worker); a revert never runs while an
/// upload runs (``ErrorArchiveBusy``) and keeps uploads from starting while it runs; nothing of a queued
/// request's credentials is exposed. It may touch the queue, the mirror (through ``MirrorWriter``), the
/// uploader (exclusivity, the upload after a revert) and the downloader (fetching entities back).
struct ODataErrorArchive: ODataServicePart {
    let context: ODataServiceContext
    let uploader: ODataUploader

    /// Whether a request under the mount addresses an archive set (`ErrorArchive…`, `RequestQueue…`,
    /// `EventLog…`) that the upstream's model does not define itself.
    func isArchivePath(_ path: String) -> Bool {
        guard let m = mirror.model else { return false }
        let first = String(path.prefix { $0 != "(" && $0 != "/" })
        return ODataArchiveSets.names.contains(first) && m.model.entitySet(named: first) == nil
    }

    func headers(_ contentType: String) -> HTTPHeaders {
        var h = ODataVersionHeaders.response(version, for: .data)
        h.set("Content-Type", contentType)
        return h
    }

    /// Blocking: the answer to one request addressed to the archive sets.
    func response(
        _ request: HTTPRequest, path: String, serviceRoot: String, entityRoot: String, isService: Bool
    ) -> HTTPResponse {
        let version = self.version
        func fail(_ status: Int, _ code: String, _ message: String) -> HTTPResponse {
            ODataServiceError.response(status, code: code, message, version: version)
        }
        let json = version == .v4 ? "application/json;odata.metadata=minimal" : "application/json"
        let method = request.odataMethod
        let model: EdmModel
        do { model = try ODataArchiveSets.model(version) } catch {
            return fail(500, "InternalError", "\(error)")
        }
        if isService, path.isEmpty || path == "$metadata" || path == "%24metadata" {
            guard method == "GET" || method == "HEAD" else {
                return fail(405, "MethodNotAllowed", "method \(method) not allowed here")
            }
            if path.isEmpty {
                let doc: JSON
                if version == .v4 {
                    doc = [
                        "@odata.context": .string(serviceRoot + "$metadata"),
                        "value": .array(
                            ODataArchiveSets.names.map {
                                ["name": .string($0), "kind": "EntitySet", "url": .string($0)]
                            }),
                    ]
                } else {
                    doc = ["d": ["EntitySets": .array(ODataArchiveSets.names.map(JSON.string))]]
                }
                return HTTPResponse(
                    status: 200, headers: headers(json), body: .bytes(Array(doc.serialized().utf8)))
            }
            return HTTPResponse(
                status: 200, headers: headers("application/xml"),
                body: .bytes(Array(ODataArchiveSets.metadata(version).utf8)))
        }
        let parsed: ODataResourcePath
        do { parsed = try ODataResourcePath.parse(path, model: model) } catch {
            return fail(404, "NotFound", "\(error.message)")
        }
        guard case .entitySet(let set, let type) = parsed.segments.first else {
            return fail(404, "NotFound", "no resource \(path)")
        }
        var key: SQLValue?
        var countOnly = false
        for segment in parsed.segments.dropFirst() {
            switch segment {
            case .key(let k):
                switch k.values.first?.value {
                case .string(let s)?: key = .text(s)
                case .integer(let n)?: key = .integer(n)
                default: return fail(400, "BadRequest", "not a key of \(set)")
                }
            case .count where key == nil: countOnly = true
            default: return fail(404, "NotFound", "only the entity set, one entity and $count are served")
            }
        }
        if method == "DELETE" {
            guard set == "ErrorArchive", let key = key?.string else {
                return fail(405, "MethodNotAllowed", "only ErrorArchive entries can be deleted")
            }
            if let given = request.headers["X-CSRF-Token"], given != csrf.gatewayToken {
                var r = fail(403, "CSRFTokenRequired", "CSRF token validation failed")
                r.headers.set("X-CSRF-Token", "Required")
                return r
            }
            do {
                guard try revert(key) != nil else {
                    return fail(404, "NotFound", "no ErrorArchive entry with RequestID \(key)")
                }
            } catch let busy as ErrorArchiveBusy {
                return fail(409, "Conflict", busy.description)
            } catch {
                return fail(500, "InternalError", "the revert could not be stored: \(error)")
            }
            return HTTPResponse(status: 204, headers: ODataVersionHeaders.response(version, for: .empty))
        }
        guard method == "GET" || method == "HEAD" else {
            return fail(
                405, "MethodNotAllowed", "\(set) is read-only (DELETE of an ErrorArchive entry reverts)")
        }
        let options: ODataQueryOptions
        do {
            options = try ODataQueryOptions.parse(rawQuery: String(request.query ?? ""), version: version)
        } catch {
            return fail(400, "BadRequest", error.message)
        }
        var conditions: [SQLFragment] = []
        let translator = ODataSQLTranslator(
            mapping: ModelSQLMapping(model: model), model: model, rootEntityType: type)
        let parser = ODataFilterParser(model: model, entityType: type, version: version)
        var order: String?
        do {
            if let filter = options.filter {
                conditions.append(try translator.translateFilter(try parser.parseFilter(filter)))
            }
            if let orderBy = options.orderBy {
                let fragment = try translator.translateOrderBy(try parser.parseOrderBy(orderBy))
                guard fragment.bindings.isEmpty else {
                    return fail(400, "BadRequest", "unsupported $orderby")
                }
                order = fragment.sql
            }
        } catch {
            return fail(400, "BadRequest", error.message)
        }
        if let key {
            let column = ODataArchiveSets.sets.first { $0.set == set }?.properties[0].name ?? "RequestID"
            let binding: SQLBinding
            switch key {
            case .integer(let n): binding = .integer(n)
            default: binding = .text(key.string ?? "")
            }
            conditions.append(SQLFragment(#""t0"."# + q(column) + " = ?", [binding]))
        }
        let condition =
            conditions.isEmpty
            ? nil : SQLFragment.joined(conditions.map { "(" + $0 + ")" }, separator: " AND ")
        var select: Set<String>?
        if let items = options.select, !items.contains(where: \.isWildcard) {
            select = Set(items.compactMap(\.path.first))
        }
        do {
            let paged = key == nil && (options.top != nil || options.skip != nil)
            let (total, rows) = try queue.archiveRows(
                set, columns: ODataArchiveSets.columns(set), condition: condition, order: order,
                page: paged ? (options.top, options.skip) : nil)
            if countOnly {
                return HTTPResponse(
                    status: 200, headers: headers("text/plain"), body: .bytes(Array(String(total).utf8)))
            }
            let entities = rows.map { row in
                ODataArchiveSets.entity(
                    set: set, row: row, select: select, version: version, serviceRoot: serviceRoot,
                    entityRoot: entityRoot)
            }
            var body: JSON
            if key != nil {
                guard let only = entities.first, var o = only.objectValue else {
                    return fail(404, "NotFound", "no such \(set) entry")
                }
                if version == .v4 {
                    var withContext = JSONObject()
                    withContext["@odata.context"] = .string(serviceRoot + "$metadata#" + set + "/$entity")
                    for (k, v) in o { withContext[k] = v }
                    o = withContext
                    body = .object(o)
                } else {
                    body = ["d": .object(o)]
                }
            } else if version == .v4 {
                var o = JSONObject()
                o["@odata.context"] = .string(serviceRoot + "$metadata#" + set)
                if options.wantsCount { o["@odata.count"] = .int(Int64(total)) }
                o["value"] = .array(entities)
                body = .object(o)
            } else {
                var d = JSONObject()
                if options.wantsCount { d["__count"] = .string(String(total)) }
                d["results"] = .array(entities)
                body = ["d": .object(d)]
            }
            return HTTPResponse(
                status: 200, headers: headers(json),
                body: .bytes(request.method == "HEAD" ? [] : Array(body.serialized().utf8)))
        } catch {
            return fail(500, "InternalError", "cannot read \(set): \(error)")
        }
    }

    /// `DELETE …/ErrorArchive('<RequestID>')`: removes every ErrorArchive entry and every queued request
    /// held behind one (or changing an archived entity) in one fsynced transaction, then restores the
    /// affected entities in the mirror from the upstream (an entity created locally disappears). With
    /// `enableIndividualErrorArchiveDeletion`, only that entry and the requests depending on it (held
    /// behind it, or changing the same entity) go. Nil when
    /// no entry has that RequestID. Throws ``ErrorArchiveBusy`` while an upload runs (and keeps uploads
    /// from starting while it runs).
    func revert(_ requestID: String) throws -> ErrorArchiveRevert? {
        guard let revert = try uploader.exclusively({ try revertExclusively(requestID) }) else {
            throw ErrorArchiveBusy()
        }
        if revert != nil, uploader.reachability.isReachable {
            // What was not held goes up now, then the mirror is downloaded: a run, if the service's
            // policy allows.
            context.runs.request()
        }
        return revert
    }

    private func revertExclusively(_ requestID: String) throws -> ErrorArchiveRevert? {
        let individual = mirrorSettings.enableIndividualErrorArchiveDeletion
        let model = mirror.model
        let archivedEntities = try queue.archivedEntities().filter { !individual || $0.0 == requestID }
        let canonical = Set(archivedEntities.map { ODataKeyText.canonical($0.1, model: model) })
        let reverted = try queue.revert(requestID, individual: individual) { request, heldBy in
            let blocked =
                request.affectedEntity(model: model).map {
                    canonical.contains(ODataKeyText.canonical($0, model: model))
                }
                ?? false
            let held = individual ? heldBy == requestID : heldBy != nil
            return held || blocked
        }
        guard let (removed, archived) = reverted else { return nil }
        var revert = ErrorArchiveRevert(archived: archived, held: removed.count)
        queue.logEvent(
            "ErrorArchiveDeletion",
            details: [
                "RequestID": .string(requestID), "archived": .int(Int64(archived)),
                "held": .int(Int64(removed.count)),
            ])
        var seen = Set<String>()
        revert.entities = (archivedEntities.map(\.1) + removed.compactMap { $0.affectedEntity(model: model) })
            .filter { seen.insert(ODataKeyText.canonical($0, model: model)).inserted }
        for entity in revert.entities { restore(entity) }
        logger.info(
            "odata: ErrorArchive reverted",
            metadata: [
                "service": "\(settings.name)", "archived": "\(revert.archived)",
                "held": "\(revert.held)", "entities": "\(revert.entities.count)",
            ])
        return revert
    }

    /// Puts the upstream's version of `entity` (`Set(key)`) into the mirror, or removes the row when the
    /// upstream has none (404) or the key was minted locally; leaves it when the upstream cannot tell.
    func restore(_ entity: String) {
        guard let m = mirror.model, let open = entity.firstIndex(of: "("),
            let keyText = ODataKeyText.inner(entity[open...])
        else { return }
        let set = String(entity[..<open])
        guard let layout = m.layouts[set],
            let key = try? ODataKey.parse(
                keyText.removingPercentEncoding ?? keyText, entityType: layout.entityType, model: m.model)
        else { return }
        var fetched: MirrorEntity?
        if !ODataKeyText.isLocal(keyText) {
            switch uploader.downloader.fetchEntity(
                set + "(" + keyText + ")", set: set, type: layout.entityType)
            {
            case .found(let entity): fetched = entity
            case .gone: break
            case .unknown: return
            }
        }
        do {
            try mirror.write { w in
                if let fetched {
                    try w.store(layout, entity: fetched, scopeOfSet: true)
                } else {
                    try w.delete(layout, key: key)
                }
            }
        } catch {
            logger.error(
                "odata: cannot restore an entity after a revert",
                metadata: ["service": "\(settings.name)", "error": "\(error)"])
        }
    }
}
