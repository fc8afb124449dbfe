import Foundation
import GatewaySupport
import HTTPCore
import JSONCore
import ODataCore
import Storage

/// The ErrorArchive and RequestQueue of one OData service as OData entity sets (SAP's property names for
/// the ErrorArchive): their CSDL in either version, and the SQL each set is read from.
///
/// Promises: nothing of a queued request's credentials (`authorization`) is exposed; user text reaches
/// SQL only as bound parameters (via ``ODataSQLTranslator``).
public enum ODataArchiveSets {
    /// The schema namespace.
    public static let namespace = "Mirrorgate"
    /// The entity sets served.
    public static let names = ["ErrorArchive", "RequestQueue", "EventLog"]

    struct Property {
        let name: String
        let type: String
        let nullable: Bool
    }

    /// `(entity set, entity type, properties)`; the first property is the key.
    static let sets: [(set: String, type: String, properties: [Property])] = [
        (
            "ErrorArchive", "ErrorArchiveEntry",
            [
                Property(name: "RequestID", type: "Edm.String", nullable: false),
                Property(name: "CustomTag", type: "Edm.String", nullable: true),
                Property(name: "HTTPStatusCode", type: "Edm.Int32", nullable: false),
                Property(name: "Code", type: "Edm.String", nullable: true),
                Property(name: "Message", type: "Edm.String", nullable: true),
                Property(name: "InnerError", type: "Edm.String", nullable: true),
                Property(name: "Domain", type: "Edm.String", nullable: true),
                Property(name: "RequestMethod", type: "Edm.String", nullable: false),
                Property(name: "RequestURL", type: "Edm.String", nullable: false),
                Property(name: "RequestBody", type: "Edm.String", nullable: true),
                Property(name: "EntitySet", type: "Edm.String", nullable: false),
                Property(name: "ArchivedAt", type: "Edm.String", nullable: false),
            ]
        ),
        (
            "RequestQueue", "RequestQueueEntry",
            [
                Property(name: "RequestID", type: "Edm.String", nullable: false),
                Property(name: "ID", type: "Edm.Int64", nullable: false),
                Property(name: "RequestMethod", type: "Edm.String", nullable: false),
                Property(name: "RequestURL", type: "Edm.String", nullable: false),
                Property(name: "EntitySet", type: "Edm.String", nullable: false),
                Property(name: "CreatedAt", type: "Edm.String", nullable: false),
                Property(name: "RequestBody", type: "Edm.String", nullable: true),
                Property(name: "CustomTag", type: "Edm.String", nullable: true),
                Property(name: "Held", type: "Edm.Boolean", nullable: false),
                Property(name: "HeldBy", type: "Edm.String", nullable: true),
            ]
        ),
        (
            "EventLog", "EventLogEntry",
            [
                Property(name: "ID", type: "Edm.Int64", nullable: false),
                Property(name: "Type", type: "Edm.String", nullable: false),
                Property(name: "Time", type: "Edm.String", nullable: false),
                Property(name: "Details", type: "Edm.String", nullable: true),
            ]
        ),
    ]

    /// The rows of each set (column names equal the property names, plus `AffectedEntity`).
    static func source(_ set: String) -> String {
        switch set {
        case "EventLog":
            return #"SELECT ID, Type, Time, Details, NULL AS AffectedEntity FROM "_mg_EventLog""#
        case "ErrorArchive":
            return
                #"SELECT RequestID, COALESCE(CustomTag, (SELECT tag FROM "_mg_customtag" c WHERE c.requestID = a.RequestID)) AS CustomTag, HTTPStatusCode, Code, Message, InnerError, Domain, RequestMethod, RequestURL, RequestBody, EntitySet, ArchivedAt, AffectedEntity FROM "_mg_ErrorArchive" a"#
        default:
            return
                #"SELECT requestID AS RequestID, id AS ID, method AS RequestMethod, url AS RequestURL, entitySet AS EntitySet, createdAt AS CreatedAt, CAST(body AS TEXT) AS RequestBody, (SELECT tag FROM "_mg_customtag" c WHERE c.requestID = q.requestID) AS CustomTag, CASE WHEN heldBy IS NULL THEN 0 ELSE 1 END AS Held, heldBy AS HeldBy, NULL AS AffectedEntity FROM "_mg_queue" q"#
        }
    }

    /// The default order of a set.
    static func defaultOrder(_ set: String) -> String {
        set == "ErrorArchive" ? #""t0"."ArchivedAt", "t0"."RequestID""# : #""t0"."ID""#
    }

    /// `$metadata`: V4 CSDL XML or V2 EDMX.
    public static func metadata(_ version: ODataVersion) -> String {
        var types = ""
        var container = ""
        for (set, type, properties) in sets {
            types += "<EntityType Name=\"\(type)\"><Key><PropertyRef Name=\"\(properties[0].name)\"/></Key>"
            for p in properties {
                types += "<Property Name=\"\(p.name)\" Type=\"\(p.type)\" Nullable=\"\(p.nullable)\"/>"
            }
            types += "</EntityType>"
            container += "<EntitySet Name=\"\(set)\" EntityType=\"\(namespace).\(type)\"/>"
        }
        switch version {
        case .v4:
            return """
                <?xml version="1.0" encoding="utf-8"?>
                <edmx:Edmx Version="4.0" xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx">\
                <edmx:DataServices><Schema Namespace="\(namespace)" xmlns="http://docs.oasis-open.org/odata/ns/edm">\
                \(types)<EntityContainer Name="Container">\(container)</EntityContainer></Schema>\
                </edmx:DataServices></edmx:Edmx>
                """
        case .v2:
            return """
                <?xml version="1.0" encoding="utf-8"?>
                <edmx:Edmx Version="1.0" xmlns:edmx="http://schemas.microsoft.com/ado/2007/06/edmx" \
                xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata">\
                <edmx:DataServices m:DataServiceVersion="2.0"><Schema Namespace="\(namespace)" \
                xmlns="http://schemas.microsoft.com/ado/2008/09/edm">\(types)<EntityContainer Name="Container" \
                m:IsDefaultEntityContainer="true">\(container)</EntityContainer></Schema></edmx:DataServices></edmx:Edmx>
                """
        }
    }

    /// The parsed model of ``metadata(_:)``.
    static func model(_ version: ODataVersion) throws(ODataCore.ODataError) -> EdmModel {
        try CSDLParser.parse(metadata(version))
    }

    /// One row as an entity in the version's JSON: V4 minimal metadata, V2 verbose with `__metadata`;
    /// `AffectedEntity` as a navigation link to `entityRoot` + the entity's local URL.
    static func entity(
        set: String, row: [String: SQLValue], select: Set<String>?, version: ODataVersion,
        serviceRoot: String,
        entityRoot: String
    ) -> JSON {
        guard let info = sets.first(where: { $0.set == set }) else { return .null }
        var o = JSONObject()
        let keyValue = row[info.properties[0].name] ?? .null
        let keyLiteral: String
        if let n = keyValue.int64, info.properties[0].type == "Edm.Int64" {
            keyLiteral = version == .v2 ? "\(n)L" : "\(n)"
        } else {
            keyLiteral = "'" + (keyValue.string ?? "").replacingOccurrences(of: "'", with: "''") + "'"
        }
        if version == .v2 {
            o["__metadata"] = [
                "uri": .string(serviceRoot + set + "(" + keyLiteral + ")"),
                "type": .string(namespace + "." + info.type),
            ]
        }
        for p in info.properties where select?.contains(p.name) ?? true {
            let v = row[p.name] ?? .null
            switch (p.type, v) {
            case (_, .null): o[p.name] = .null
            case ("Edm.Boolean", _): o[p.name] = .bool((v.int ?? 0) != 0)
            case ("Edm.Int32", _): o[p.name] = .int(v.int64 ?? 0)
            case ("Edm.Int64", _):
                o[p.name] = version == .v2 ? .string(String(v.int64 ?? 0)) : .int(v.int64 ?? 0)
            default: o[p.name] = v.string.map(JSON.string) ?? .null
            }
        }
        if let affected = row["AffectedEntity"]?.string, select?.contains("AffectedEntity") ?? true {
            if version == .v2 {
                o["AffectedEntity"] = ["__deferred": ["uri": .string(entityRoot + affected)]]
            } else {
                o["AffectedEntity@odata.navigationLink"] = .string(entityRoot + affected)
            }
        }
        return .object(o)
    }
}

extension ODataService {
    /// Under the mount: answers `ErrorArchive…`/`RequestQueue…` (reads, and `DELETE` of an ErrorArchive
    /// entry) when the upstream's model has no entity set of that name; false when the request is not one.
    func answerArchiveAtMount(_ request: HTTPRequest, _ responder: any Responder) -> Bool {
        guard let m = mirror.model else { return false }
        let (path, _) = relative(request)
        let first = String(path.prefix { $0 != "(" && $0 != "/" })
        guard ODataArchiveSets.names.contains(first), m.model.entitySet(named: first) == nil else {
            return false
        }
        let root = forwarder.urlMap(for: request).gatewayRoot
        pool.submit { [self] in
            OriginResponder(inner: responder, origin: "local").respond(
                archiveResponse(request, path: path, serviceRoot: root, entityRoot: root, isService: false))
        }
        return true
    }

    /// The separate service at `/_mirrorgate/odata/{service}/` (`path` relative to it): its service
    /// document, `$metadata`, the sets, and `DELETE ErrorArchive('<RequestID>')`; answered on the pool.
    public func answerArchiveService(
        _ request: HTTPRequest, path: String, serviceRoot: String, _ responder: any Responder
    ) {
        let entityRoot = forwarder.urlMap(for: request).gatewayRoot
        pool.submit { [self] in
            OriginResponder(inner: responder, origin: "local").respond(
                archiveResponse(
                    request, path: path, serviceRoot: serviceRoot, entityRoot: entityRoot, isService: true))
        }
    }

    func archiveHeaders(_ contentType: String) -> HTTPHeaders {
        var h = HTTPHeaders()
        h.set("Content-Type", contentType)
        if version == .v4 { h.set("OData-Version", "4.0") } else { h.set("DataServiceVersion", "2.0") }
        return h
    }

    /// Blocking: the answer to one request addressed to the archive sets.
    func archiveResponse(
        _ request: HTTPRequest, path: String, serviceRoot: String, entityRoot: String, isService: Bool
    ) -> HTTPResponse {
        let version = self.version
        func fail(_ status: Int, _ code: String, _ message: String) -> HTTPResponse {
            ODataError.response(status, code: code, message, version: version)
        }
        let json = version == .v4 ? "application/json;odata.metadata=minimal" : "application/json"
        let method = Self.effectiveMethod(request)
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
                    status: 200, headers: archiveHeaders(json), body: .bytes(Array(doc.serialized().utf8)))
            }
            return HTTPResponse(
                status: 200, headers: archiveHeaders("application/xml"),
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
                guard try revertErrorArchive(key) != nil else {
                    return fail(404, "NotFound", "no ErrorArchive entry with RequestID \(key)")
                }
            } catch let busy as ErrorArchiveBusy {
                return fail(409, "Conflict", busy.description)
            } catch {
                return fail(500, "InternalError", "the revert could not be stored: \(error)")
            }
            var h = HTTPHeaders()
            if version == .v4 { h.set("OData-Version", "4.0") } else { h.set("DataServiceVersion", "1.0") }
            return HTTPResponse(status: 204, headers: h)
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
        var whereSQL = SQLFragment("")
        var conditions: [SQLFragment] = []
        let translator = ODataSQLTranslator(
            mapping: ModelSQLMapping(model: model), model: model, rootEntityType: type)
        let parser = ODataFilterParser(model: model, entityType: type, version: version)
        var order = ODataArchiveSets.defaultOrder(set)
        do {
            if let filter = options.filter {
                conditions.append(try translator.translateFilter(try parser.parseFilter(filter)))
            }
            if let orderBy = options.orderBy {
                let fragment = try translator.translateOrderBy(try parser.parseOrderBy(orderBy))
                guard fragment.bindings.isEmpty else {
                    return fail(400, "BadRequest", "unsupported $orderby")
                }
                order = fragment.sql + ", " + order
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
        if !conditions.isEmpty {
            whereSQL = " WHERE " + SQLFragment.joined(conditions.map { "(" + $0 + ")" }, separator: " AND ")
        }
        let from = "FROM (" + ODataArchiveSets.source(set) + #") AS "t0""#
        let bindings = whereSQL.bindings.map(SQLValue.init)
        var select: Set<String>?
        if let items = options.select, !items.contains(where: \.isWildcard) {
            select = Set(items.compactMap(\.path.first))
        }
        do {
            let total = try mirror.pool.read { db in
                try db.scalar("SELECT COUNT(*) " + from + whereSQL.sql, bindings)?.int ?? 0
            }
            if countOnly {
                return HTTPResponse(
                    status: 200, headers: archiveHeaders("text/plain"),
                    body: .bytes(Array(String(total).utf8)))
            }
            var limit = ""
            var limitValues: [SQLValue] = []
            if key == nil, options.top != nil || options.skip != nil {
                limit = " LIMIT ? OFFSET ?"
                limitValues = [.integer(Int64(options.top ?? -1)), .integer(Int64(options.skip ?? 0))]
            }
            let rows = try mirror.pool.read { db in
                try db.query(
                    #"SELECT "t0".* "# + from + whereSQL.sql + " ORDER BY " + order + limit,
                    bindings + limitValues)
            }
            let names = Self.archiveColumns(set)
            let entities = rows.map { r in
                var dict: [String: SQLValue] = [:]
                for (i, n) in names.enumerated() { dict[n] = r[i] }
                return ODataArchiveSets.entity(
                    set: set, row: dict, select: select, version: version, serviceRoot: serviceRoot,
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
                status: 200, headers: archiveHeaders(json),
                body: .bytes(request.method == "HEAD" ? [] : Array(body.serialized().utf8)))
        } catch {
            return fail(500, "InternalError", "cannot read \(set): \(error)")
        }
    }

    /// The columns of ``ODataArchiveSets/source(_:)`` in order.
    static func archiveColumns(_ set: String) -> [String] {
        (ODataArchiveSets.sets.first { $0.set == set }?.properties.map(\.name) ?? []) + ["AffectedEntity"]
    }

    /// The If-Match an uploaded write gets when its client sent none (`uploadIfMatch`).
    func uploadIfMatch(mirrorETag: String?) -> String? {
        switch settings.uploadIfMatch {
        case .mirror: return mirrorETag ?? "*"
        case .star: return "*"
        case .omit: return nil
        }
    }
}
