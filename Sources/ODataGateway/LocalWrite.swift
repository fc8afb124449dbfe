import Foundation
import GatewayConfig
import HTTPServer
import ODataCore
import Storage

/// What an applied local write needs to answer.
struct LocalWriteOutcome {
    var status: Int
    /// For a create: the key predicate of the stored entity (`(-1)`).
    var createdKey: String?
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
        func fail(_ status: Int, _ code: String, _ message: String) -> HTTPResponse {
            ODataError.response(status, code: code, message, version: version)
        }
        guard let m = mirror.model else {
            return fail(
                503, "UpstreamUnavailable", "the upstream is unreachable and the service is not mirrored")
        }
        let method = Self.effectiveMethod(request)
        let (path, query) = relative(request)
        let parsed: ODataResourcePath
        do { parsed = try ODataResourcePath.parse(path, model: m.model) } catch {
            return fail(404, "NotFound", "\(error)")
        }
        var set: String?
        var type = ""
        var key: ODataKey?
        switch parsed.segments.count {
        case 1:
            if case .entitySet(let name, let t) = parsed.segments[0], method == "POST" {
                set = name
                type = t
            }
        case 2:
            if case .entitySet(let name, let t) = parsed.segments[0], case .key(let k) = parsed.segments[1],
                ["PUT", "PATCH", "MERGE", "DELETE"].contains(method)
            {
                set = name
                type = t
                key = k
            }
        default: break
        }
        guard let set, let layout = m.layouts[set] else {
            return fail(
                503, "UpstreamUnavailable",
                "the upstream is unreachable; only creates of an entity set and updates/deletes of one entity are queued offline"
            )
        }
        var members: [(String, RawJSON)] = []
        if method != "DELETE" {
            guard let body = try? RawJSON.parse(request.body) else {
                return fail(400, "BadRequest", "the request body is not JSON")
            }
            var object = body
            if let d = body["d"], body.members?.count == 1 { object = d }
            guard let given = object.members else {
                return fail(400, "BadRequest", "the body is not an object")
            }
            let navigation = Set(m.model.navigationProperties(of: type).map(\.name))
            for (name, value) in given {
                if name == "__metadata" || name.hasPrefix("@") || name.contains("@")
                    || navigation.contains(name)
                {
                    continue
                }
                members.append((name, value))
            }
        }
        let keyProperties = m.model.keyProperties(of: type)
        var minted = false
        var queued = QueuedRequest(
            id: 0, entitySet: set, method: method, url: path + (query.isEmpty ? "" : "?" + query),
            body: request.body, contentType: request.headers["Content-Type"],
            authorization: settings.uploadCredentials == .client ? request.headers["Authorization"] : nil,
            ifMatch: request.headers["If-Match"],
            localKey: nil,
            gatewayRoot: forwarder.urlMap(for: request).gatewayRoot,
            requestID: UUID().uuidString.lowercased(),
            firstSent: Self.imfDate(Date()), attempts: 0)
        if method == "POST" {
            for p in keyProperties where !members.contains(where: { $0.0 == p.name }) {
                guard let prim = p.type.primitive else { continue }
                minted = true
                switch prim {
                case .byte, .sbyte, .int16, .int32, .int64:
                    members.append((p.name, .number(String(nextLocalInteger()))))
                case .guid:
                    members.append((p.name, .string(UUID().uuidString.lowercased())))
                default:
                    members.append((p.name, .string("local-" + UUID().uuidString.lowercased())))
                }
            }
            if minted {
                queued.localKey = Self.keyPredicate(members, keyProperties, version: version)
            }
        }
        do {
            let outcome = try queue.append { db -> (QueuedRequest, LocalWriteOutcome) in
                var entry = queued
                let o = try applyToMirror(
                    db, model: m, layout: layout, method: method, key: key, members: members,
                    keyProperties: keyProperties, clientIfMatch: request.headers["If-Match"], queued: &entry)
                try recordRequestExtras(request, requestID: entry.requestID, in: db)
                return (entry, o)
            }
            if let createdKey = outcome.createdKey {
                let root = forwarder.urlMap(for: request).gatewayRoot
                var headers = request.headers
                headers.remove("Content-Type")
                var read = localResponse(
                    HTTPRequest(
                        method: "GET", target: forwarder.settings.mount + set + createdKey, headers: headers))
                read.status = 201
                read.headers.set("Location", root + set + createdKey)
                if version == .v4 { read.headers.set("OData-EntityId", root + set + createdKey) }
                return read
            }
            var h = HTTPHeaders()
            if version == .v4 { h.set("OData-Version", "4.0") } else { h.set("DataServiceVersion", "1.0") }
            return HTTPResponse(status: outcome.status, headers: h, body: .bytes([]))
        } catch let e as LocalReadError {
            return fail(e.status, e.code, e.message)
        } catch {
            return fail(500, "InternalError", "the write could not be stored: \(error)")
        }
    }

    /// Applies one write inside the queue's transaction; fills in the queue entry's `If-Match`.
    private func applyToMirror(
        _ db: Database, model m: MirrorModel, layout: MirrorSetLayout, method: String, key: ODataKey?,
        members: [(String, RawJSON)], keyProperties: [EdmProperty], clientIfMatch: String?,
        queued: inout QueuedRequest
    ) throws -> LocalWriteOutcome {
        let table = q(layout.set.name)
        var whereSQL = ""
        var whereValues: [SQLValue] = []
        if let key {
            var parts: [String] = []
            for kv in key.values {
                let t = m.model.property(named: kv.name, in: layout.entityType)?.type
                parts.append("\(q(kv.name)) = ?")
                whereValues.append(writeValue(m.mapping.binding(for: kv.value, type: t)))
            }
            whereSQL = parts.joined(separator: " AND ")
        }
        func row(_ properties: [(String, RawJSON)]) -> [SQLValue] {
            layout.columns.map {
                ODataMirror.columnValue(ODataMirror.lookup(properties, $0.path), $0.type, m.version)
            }
        }
        switch method {
        case "POST":
            let names = [#""_json""#, #""_etag""#, #""_dr""#] + layout.columns.map { q($0.name) }
            let sql =
                "INSERT INTO \(table) (\(names.joined(separator: ", "))) VALUES ("
                + Array(repeating: "?", count: names.count).joined(separator: ", ") + ")"
            do {
                try db.run(
                    sql, [.text(RawJSON.object(members).serialized()), .null, .text("local")] + row(members))
            } catch {
                throw LocalReadError(409, "Conflict", "an entity with this key exists")
            }
            return LocalWriteOutcome(
                status: 201, createdKey: Self.keyPredicate(members, keyProperties, version: m.version))
        default:
            guard
                let existing = try db.query(
                    "SELECT \"_json\", \"_etag\" FROM \(table) WHERE \(whereSQL)", whereValues
                )
                .first
            else { throw LocalReadError(404, "NotFound", "no such entity") }
            if clientIfMatch == nil { queued.ifMatch = uploadIfMatch(mirrorETag: existing[1].string) }
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
                for (k, v) in members {
                    if let i = properties.firstIndex(where: { $0.0 == k }) {
                        properties[i].1 = v
                    } else {
                        properties.append((k, v))
                    }
                }
            }
            let sets = ([#""_json" = ?"#, #""_etag" = NULL"#] + layout.columns.map { "\(q($0.name)) = ?" })
                .joined(separator: ", ")
            try db.run(
                "UPDATE \(table) SET \(sets) WHERE \(whereSQL)",
                [.text(RawJSON.object(properties).serialized())] + row(properties) + whereValues)
            return LocalWriteOutcome(status: 204, createdKey: nil)
        }
    }

    /// The next gateway-minted integer key: negative, never reused (kept in `_mg_meta`).
    func nextLocalInteger() -> Int64 {
        let next =
            (try? mirror.pool.write { db -> Int64 in
                let current =
                    try db.scalar(#"SELECT value FROM "_mg_meta" WHERE key='localKeySeq'"#)?.string.flatMap {
                        Int64($0)
                    } ?? 0
                let n = current - 1
                try db.run(
                    #"INSERT OR REPLACE INTO "_mg_meta" (key, value) VALUES ('localKeySeq', ?)"#,
                    [.text(String(n))])
                return n
            }) ?? -Int64(Date().timeIntervalSince1970)
        return next
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
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.timeZone = TimeZone(identifier: "GMT")
        f.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return f.string(from: date)
    }
}

/// The storage value of a translator binding.
func writeValue(_ b: SQLBinding) -> SQLValue {
    switch b {
    case .null: return .null
    case .integer(let i): return .integer(i)
    case .real(let d): return .real(d)
    case .text(let t): return .text(t)
    case .blob(let b): return .blob(b)
    }
}
