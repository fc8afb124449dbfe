import Foundation
import GatewaySupport
import HTTPCore
import JSONCore
import ODataCore
import Storage

/// One request inside a `$batch`: a read or a change.
struct BatchPart: Sendable, Equatable {
    /// Method of the request line (or JSON `method`), upper-cased.
    var method: String
    /// URL as written (relative to the service root, absolute path or absolute URL, or `$1…`).
    var url: String
    /// The request's own headers.
    var headers: [String: String]
    /// The body (empty when none).
    var body: [UInt8]
    /// `Content-ID` (multipart) or `id` (JSON).
    var contentID: String?
    /// JSON `dependsOn`.
    var dependsOn: [String] = []

    static func == (a: BatchPart, b: BatchPart) -> Bool {
        a.method == b.method && a.url == b.url && a.headers == b.headers && a.body == b.body
            && a.contentID == b.contentID && a.dependsOn == b.dependsOn
    }
}

/// One top-level item of a `$batch`: a request outside any changeset, or a changeset (multipart) /
/// atomicity group (JSON).
enum BatchItem: Sendable, Equatable {
    case single(BatchPart)
    case changeset([BatchPart], group: String?)
}

/// Parsing of `$batch` request bodies with changesets (multipart V2/V4, JSON V4), `Content-ID`
/// references, and the multipart writing of changesets for the upload.
///
/// Promises: a malformed body gives ``LocalBatch/Failure/malformed(_:)``, never a crash; reads inside a
/// changeset are refused as malformed (OData allows only changes there); references `$N` resolve only to
/// Content-IDs of earlier requests of the same changeset (or, in JSON, of any earlier request).
enum BatchChanges {
    /// The items of a multipart batch.
    static func multipart(_ body: [UInt8], contentType: String) throws(LocalBatch.Failure) -> [BatchItem] {
        guard let b = LocalBatch.boundary(contentType) else {
            throw .malformed("multipart batch without a boundary")
        }
        var items: [BatchItem] = []
        for part in LocalBatch.parts(body, boundary: b) {
            let (head, inner) = splitPart(part)
            let mime = headerMap(head)
            let partType = mime["content-type"] ?? ""
            if partType.lowercased().hasPrefix("multipart/mixed") {
                guard let cb = LocalBatch.boundary(partType) else {
                    throw .malformed("changeset without a boundary")
                }
                var requests: [BatchPart] = []
                for p in LocalBatch.parts(Array(inner.utf8), boundary: cb) {
                    let (h, r) = splitPart(p)
                    let request = try httpRequest(r, mime: headerMap(h))
                    if request.method == "GET" { throw .malformed("a changeset may not contain a GET") }
                    requests.append(request)
                }
                items.append(.changeset(requests, group: nil))
            } else {
                items.append(.single(try httpRequest(inner, mime: mime)))
            }
        }
        return items
    }

    /// A part's MIME headers and content (a part that starts with an empty line has no headers).
    static func splitPart(_ part: [UInt8]) -> (head: [String], body: String) {
        let text = String(decoding: part, as: UTF8.self)
        if text.hasPrefix("\r\n") || text.hasPrefix("\n") { return ([], String(text.dropFirst())) }
        return LocalBatch.splitHead(text)
    }

    /// `name: value` lines, names lower-cased.
    static func headerMap(_ lines: [String]) -> [String: String] {
        var map: [String: String] = [:]
        for line in lines {
            guard let c = line.firstIndex(of: ":") else { continue }
            map[line[..<c].trimmingCharacters(in: .whitespaces).lowercased()] =
                line[line.index(after: c)...].trimmingCharacters(in: .whitespaces)
        }
        return map
    }

    /// One `application/http` request: request line, headers, body.
    static func httpRequest(_ text: String, mime: [String: String]) throws(LocalBatch.Failure) -> BatchPart {
        var trimmed = Substring(text)
        while trimmed.first == "\n" || trimmed.first == "\r\n" || trimmed.first == "\r" {
            trimmed = trimmed.dropFirst()
        }
        let (head, body) = LocalBatch.splitHead(String(trimmed))
        guard let line = head.first else { throw .malformed("empty batch part") }
        let words = line.split(separator: " ")
        guard words.count >= 2 else { throw .malformed("bad request line '\(line.prefix(80))'") }
        let headers = headerMap(Array(head.dropFirst()))
        let payload = body.trimmingCharacters(in: .whitespacesAndNewlines)
        return BatchPart(
            method: words[0].uppercased(), url: String(words[1]), headers: headers, body: Array(payload.utf8),
            contentID: mime["content-id"] ?? headers["content-id"])
    }

    /// The items of a V4 JSON batch: consecutive requests with the same `atomicityGroup` form one changeset.
    static func json(_ body: [UInt8]) throws(LocalBatch.Failure) -> [BatchItem] {
        guard let json = try? RawJSON.parse(body), let requests = json["requests"]?.elements else {
            throw .malformed("a JSON batch needs a \"requests\" array")
        }
        var items: [BatchItem] = []
        var seenGroups = Set<String>()
        for r in requests {
            guard let method = r["method"]?.string, let url = r["url"]?.string else {
                throw .malformed("each batch request needs method and url")
            }
            var headers: [String: String] = [:]
            for (k, v) in r["headers"]?.members ?? [] { if let s = v.string { headers[k.lowercased()] = s } }
            var payload: [UInt8] = []
            if let b = r["body"], b != .null {
                if case .string(let s) = b, !(headers["content-type"] ?? "").contains("json") {
                    payload = Array(s.utf8)
                } else {
                    b.write(to: &payload)
                }
                if headers["content-type"] == nil { headers["content-type"] = "application/json" }
            }
            let part = BatchPart(
                method: method.uppercased(), url: url, headers: headers, body: payload,
                contentID: r["id"]?.string,
                dependsOn: (r["dependsOn"]?.elements ?? []).compactMap(\.string))
            if let group = r["atomicityGroup"]?.string {
                if part.method == "GET" { throw .malformed("an atomicity group may not contain a GET") }
                if case .changeset(var parts, let g)? = items.last, g == group {
                    parts.append(part)
                    items[items.count - 1] = .changeset(parts, group: group)
                } else {
                    guard !seenGroups.contains(group) else {
                        throw .malformed("the requests of atomicity group '\(group)' must be adjacent")
                    }
                    seenGroups.insert(group)
                    items.append(.changeset([part], group: group))
                }
            } else {
                items.append(.single(part))
            }
        }
        return items
    }

    /// Whether any item changes data.
    static func hasChanges(_ items: [BatchItem]) -> Bool {
        items.contains {
            switch $0 {
            case .changeset: return true
            case .single(let p): return p.method != "GET"
            }
        }
    }

    /// `$1` / `$1/Orders` → the URL Content-ID `1` stands for plus the rest; other URLs unchanged.
    static func resolveURL(_ url: String, _ references: [String: String]) -> String {
        guard url.hasPrefix("$") else { return url }
        let rest = url.dropFirst()
        let id = rest.prefix { $0 != "/" && $0 != "?" }
        guard let target = references[String(id)] else { return url }
        return target + rest.dropFirst(id.count)
    }

    /// A JSON body with `$N` references in link values (`…@odata.bind`, `__metadata.uri`) replaced.
    static func resolveBody(_ body: [UInt8], _ references: [String: String]) -> [UInt8] {
        guard !references.isEmpty, body.contains(36), let json = try? RawJSON.parse(body) else { return body }
        func link(_ v: RawJSON) -> RawJSON {
            switch v {
            case .string(let s): return .string(resolveURL(s, references))
            case .array(let a): return .array(a.map(link))
            default: return v
            }
        }
        func walk(_ v: RawJSON) -> RawJSON {
            switch v {
            case .object(let members):
                return .object(
                    members.map { name, value in
                        if name.hasSuffix("@odata.bind") || name == "uri" { return (name, link(value)) }
                        return (name, walk(value))
                    })
            case .array(let a): return .array(a.map(walk))
            default: return v
            }
        }
        var out: [UInt8] = []
        walk(json).write(to: &out)
        return out
    }

    /// A multipart `$batch` body with one changeset holding `parts` (each with its `Content-ID`).
    static func changesetBody(
        _ parts: [(
            method: String, url: String, headers: [(String, String)], body: [UInt8], contentID: String
        )],
        boundary: String, changesetBoundary: String
    ) -> [UInt8] {
        var out = "--\(boundary)\r\nContent-Type: multipart/mixed; boundary=\(changesetBoundary)\r\n\r\n"
        for p in parts {
            out += "--\(changesetBoundary)\r\nContent-Type: application/http\r\n"
            out += "Content-Transfer-Encoding: binary\r\nContent-ID: \(p.contentID)\r\n\r\n"
            out += "\(p.method) \(p.url) HTTP/1.1\r\n"
            for (k, v) in p.headers { out += "\(k): \(v)\r\n" }
            if !p.body.isEmpty { out += "Content-Length: \(p.body.count)\r\n" }
            out += "\r\n" + String(decoding: p.body, as: UTF8.self) + "\r\n"
        }
        out += "--\(changesetBoundary)--\r\n--\(boundary)--\r\n"
        return Array(out.utf8)
    }

    /// One response inside a multipart batch response.
    struct PartResponse: Sendable {
        var status: Int
        var headers: [String: String]
        var body: [UInt8]
    }

    /// The responses of a multipart batch response: each top-level item either a changeset (its part
    /// responses) or one response (a failed changeset, or a request outside changesets).
    static func responses(_ body: [UInt8], contentType: String) -> [[PartResponse]]? {
        guard let b = LocalBatch.boundary(contentType) else { return nil }
        var items: [[PartResponse]] = []
        for part in LocalBatch.parts(body, boundary: b) {
            let (head, inner) = LocalBatch.splitHead(String(decoding: part, as: UTF8.self))
            let type = headerMap(head)["content-type"] ?? ""
            if type.lowercased().hasPrefix("multipart/mixed"), let cb = LocalBatch.boundary(type) {
                items.append(
                    LocalBatch.parts(Array(inner.utf8), boundary: cb).compactMap { p in
                        let (mime, http) = splitPart(p)
                        guard var r = httpResponse(http) else { return nil }
                        if let id = headerMap(mime)["content-id"] { r.headers["content-id"] = id }
                        return r
                    })
            } else if let r = httpResponse(inner) {
                items.append([r])
            }
        }
        return items
    }

    static func httpResponse(_ text: String) -> PartResponse? {
        var trimmed = Substring(text)
        while trimmed.first == "\n" || trimmed.first == "\r\n" { trimmed = trimmed.dropFirst() }
        let (head, body) = LocalBatch.splitHead(String(trimmed))
        guard let line = head.first else { return nil }
        let words = line.split(separator: " ")
        guard words.count >= 2, let status = Int(words[1]) else { return nil }
        return PartResponse(
            status: status, headers: headerMap(Array(head.dropFirst())),
            body: Array(body.trimmingCharacters(in: .whitespacesAndNewlines).utf8))
    }
}

extension ODataService {
    /// Whether a `$batch` request changes data (parsed; malformed ones count as not changing).
    func batchHasChanges(_ request: HTTPRequest) -> Bool {
        let contentType = request.headers["Content-Type"] ?? ""
        let items =
            contentType.lowercased().hasPrefix("application/json")
            ? try? BatchChanges.json(request.body)
            : try? BatchChanges.multipart(request.body, contentType: contentType)
        return items.map(BatchChanges.hasChanges) ?? false
    }

    /// Blocking: a `$batch` with changes answered locally: each changeset applied to the mirror and
    /// queued in one transaction (all or nothing), reads answered from the mirror, in order.
    func batchWriteResponse(_ request: HTTPRequest) -> HTTPResponse {
        let version = self.version
        let contentType = request.headers["Content-Type"] ?? ""
        let isJSON = contentType.lowercased().hasPrefix("application/json")
        let items: [BatchItem]
        do {
            items =
                isJSON
                ? try BatchChanges.json(request.body)
                : try BatchChanges.multipart(request.body, contentType: contentType)
        } catch {
            if case .malformed(let why) = error {
                return ODataError.response(
                    400, code: "BadRequest", "invalid $batch: \(why)", version: version)
            }
            return ODataError.response(400, code: "BadRequest", "invalid $batch", version: version)
        }
        guard let m = mirror.model else {
            return ODataError.response(
                503, code: "UpstreamUnavailable",
                "the upstream is unreachable and the service is not mirrored",
                version: version)
        }
        let gatewayRoot = forwarder.urlMap(for: request).gatewayRoot
        let mount = forwarder.settings.mount
        var references: [String: String] = [:]
        var failed = Set<String>()
        /// Per item: responses with their ids (one for a failed changeset).
        var answers: [(changeset: Bool, parts: [(id: String?, response: HTTPResponse)])] = []
        for item in items {
            switch item {
            case .single(let part):
                if part.dependsOn.contains(where: failed.contains) {
                    if let id = part.contentID { failed.insert(id) }
                    answers.append(
                        (false, [(part.contentID, failedDependency(version))]))
                    continue
                }
                if part.method == "GET" {
                    let read = BatchRead(
                        id: part.contentID, method: "GET", url: BatchChanges.resolveURL(part.url, references),
                        headers: part.headers.map { ($0.key, $0.value) })
                    let r = localResponse(
                        .batchPart(read, outer: request, mount: mount, gatewayRoot: gatewayRoot))
                    if r.status >= 400, let id = part.contentID { failed.insert(id) }
                    answers.append((false, [(part.contentID, r)]))
                    continue
                }
                let result = applyChangeset([part], model: m, request: request, references: &references)
                if result.count == 1, result[0].response.status >= 400, let id = part.contentID {
                    failed.insert(id)
                }
                answers.append((false, result))
            case .changeset(let parts, let group):
                if parts.contains(where: { $0.dependsOn.contains(where: failed.contains) }) {
                    for p in parts { if let id = p.contentID { failed.insert(id) } }
                    if let group { failed.insert(group) }
                    answers.append((true, [(parts.first?.contentID, failedDependency(version))]))
                    continue
                }
                let result = applyChangeset(parts, model: m, request: request, references: &references)
                if result.count == 1, result[0].response.status >= 400 {
                    for p in parts { if let id = p.contentID { failed.insert(id) } }
                    if let group { failed.insert(group) }
                }
                answers.append((true, result))
            }
        }
        return serializeBatch(answers, json: isJSON, items: items)
    }

    private func failedDependency(_ version: ODataVersion) -> HTTPResponse {
        ODataError.response(
            424, code: "FailedDependency", "a request this one depends on failed", version: version)
    }

    /// Applies the requests of one changeset to the mirror and queues them, in one transaction; the
    /// responses per request, or one error response when any of them failed (nothing applied or queued).
    func applyChangeset(
        _ parts: [BatchPart], model m: MirrorModel, request: HTTPRequest, references: inout [String: String]
    ) -> [(id: String?, response: HTTPResponse)] {
        let gatewayRoot = forwarder.urlMap(for: request).gatewayRoot
        let mount = forwarder.settings.mount
        let changesetID = parts.count > 1 ? UUID().uuidString.lowercased() : nil
        var local = references
        do {
            let outcomes = try queue.appendAll { db -> ([QueuedRequest], [LocalWriteOutcome]) in
                var entries: [QueuedRequest] = []
                var outcomes: [LocalWriteOutcome] = []
                for (index, part) in parts.enumerated() {
                    let url = BatchChanges.resolveURL(part.url, local)
                    let read = BatchRead(id: nil, method: part.method, url: url, headers: [])
                    let target = HTTPRequest.batchPart(
                        read, outer: request, mount: mount, gatewayRoot: gatewayRoot
                    )
                    .target
                    var relativeTarget = Substring(target.dropFirst(mount.count))
                    var query = ""
                    if let qi = relativeTarget.firstIndex(of: "?") {
                        query = String(relativeTarget[relativeTarget.index(after: qi)...])
                        relativeTarget = relativeTarget[..<qi]
                    }
                    var headers = HTTPHeaders()
                    for (k, v) in part.headers { headers.set(k, v) }
                    // The batch's own credentials and tag stand for its parts unless a part has its own.
                    for name in ["Authorization", "Cookie", "OfflineOData.CustomTag"]
                    where headers[name] == nil {
                        if let value = request.headers[name] { headers.set(name, value) }
                    }
                    var method = part.method
                    if method == "POST", let tunneled = headers["X-HTTP-Method"], !tunneled.isEmpty {
                        method = tunneled.uppercased()
                    }
                    let input = LocalWriteInput(
                        method: method, path: String(relativeTarget), query: query,
                        body: BatchChanges.resolveBody(part.body, local), headers: headers,
                        gatewayRoot: gatewayRoot)
                    var (entry, outcome) = try applyLocalWrite(db, model: m, input)
                    entry.changeset = changesetID
                    entry.contentID = part.contentID ?? String(index + 1)
                    entries.append(entry)
                    outcomes.append(outcome)
                    if let id = part.contentID {
                        local[id] = outcome.createdKey.map { outcome.set + $0 } ?? String(relativeTarget)
                    }
                }
                return (entries, outcomes)
            }
            references = local
            return zip(parts, outcomes).map { part, outcome in
                var response = writeAnswer(outcome, request: request)
                response.headers.remove(MirrorgateHeader.origin)
                return (part.contentID, response)
            }
        } catch let e as LocalReadError {
            return [
                (
                    parts.first?.contentID,
                    ODataError.response(e.status, code: e.code, e.message, version: version)
                )
            ]
        } catch {
            return [
                (
                    parts.first?.contentID,
                    ODataError.response(
                        500, code: "InternalError", "the changeset could not be stored: \(error)",
                        version: version)
                )
            ]
        }
    }

    private func serializeBatch(
        _ answers: [(changeset: Bool, parts: [(id: String?, response: HTTPResponse)])], json: Bool,
        items: [BatchItem]
    ) -> HTTPResponse {
        func bodyBytes(_ r: HTTPResponse) -> [UInt8] {
            if case .bytes(let b) = r.body { return b }
            return []
        }
        func headerPairs(_ r: HTTPResponse) -> [(String, String)] {
            r.headers.fields.filter { $0.name.lowercased() != "x-mirrorgate-origin" }.map {
                ($0.name, $0.value)
            }
        }
        if json {
            var out: [RawJSON] = []
            var counter = 0
            for (i, answer) in answers.enumerated() {
                var group: String?
                var ids: [String?] = []
                switch items[i] {
                case .single(let p): ids = [p.contentID]
                case .changeset(let ps, let g):
                    group = g
                    ids = ps.map(\.contentID)
                }
                let failedGroup = answer.changeset && answer.parts.count == 1 && ids.count > 1
                let list: [(String?, HTTPResponse)] =
                    failedGroup
                    ? ids.map { ($0, answer.parts[0].response) } : answer.parts.map { ($0.id, $0.response) }
                for (id, r) in list {
                    counter += 1
                    var entry: [(String, RawJSON)] = [("id", .string(id ?? String(counter)))]
                    if let group { entry.append(("atomicityGroup", .string(group))) }
                    entry.append(("status", .number(String(r.status))))
                    entry.append(
                        ("headers", .object(headerPairs(r).map { ($0.0.lowercased(), .string($0.1)) })))
                    let bytes = bodyBytes(r)
                    if !bytes.isEmpty {
                        entry.append(
                            (
                                "body",
                                (try? RawJSON.parse(bytes)) ?? .string(String(decoding: bytes, as: UTF8.self))
                            ))
                    }
                    out.append(.object(entry))
                }
            }
            var bytes: [UInt8] = []
            RawJSON.object([("responses", .array(out))]).write(to: &bytes)
            var h = HTTPHeaders()
            h.set("Content-Type", "application/json")
            h.set("OData-Version", "4.0")
            return HTTPResponse(status: 200, headers: h, body: .bytes(bytes))
        }
        let boundary = "batchresponse_" + UUID().uuidString.lowercased()
        func render(_ id: String?, _ r: HTTPResponse) -> String {
            var s = "Content-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n"
            if let id { s += "Content-ID: \(id)\r\n" }
            s += "\r\nHTTP/1.1 \(r.status) \(HTTPStatus.reasonPhrase(r.status))\r\n"
            let bytes = bodyBytes(r)
            for (k, v) in headerPairs(r) where k.lowercased() != "content-length" { s += "\(k): \(v)\r\n" }
            s += "Content-Length: \(bytes.count)\r\n\r\n"
            s += String(decoding: bytes, as: UTF8.self) + "\r\n"
            return s
        }
        var out = ""
        for answer in answers {
            if answer.changeset, !(answer.parts.count == 1 && answer.parts[0].response.status >= 400) {
                let cs = "changesetresponse_" + UUID().uuidString.lowercased()
                out += "--\(boundary)\r\nContent-Type: multipart/mixed; boundary=\(cs)\r\n\r\n"
                for (id, r) in answer.parts { out += "--\(cs)\r\n" + render(id, r) }
                out += "--\(cs)--\r\n"
            } else {
                for (id, r) in answer.parts {
                    out += "--\(boundary)\r\n" + render(answer.changeset ? nil : id, r)
                }
            }
        }
        out += "--\(boundary)--\r\n"
        var h = HTTPHeaders()
        h.set("Content-Type", "multipart/mixed; boundary=\(boundary)")
        if version == .v4 { h.set("OData-Version", "4.0") } else { h.set("DataServiceVersion", "2.0") }
        return HTTPResponse(status: version == .v2 ? 202 : 200, headers: h, body: .bytes(Array(out.utf8)))
    }
}
