import Foundation
import GatewaySupport
import HTTPCore
import JSONCore
import ODataCore

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

/// The one `$batch` codec, for read-only and write batches alike and for the upload: parsing of request
/// bodies (multipart V2/V4 with changesets, V4 JSON with `atomicityGroup`/`dependsOn`) into
/// ``BatchItem``s, `Content-ID` references, the answers as a multipart or JSON batch response, the
/// multipart body of an uploaded changeset and the parsing of the upstream's multipart answer.
///
/// Promises: a malformed body gives ``Failure/malformed(_:)``, never a crash; reads inside a changeset
/// are refused as malformed (OData allows only changes there); references `$N` resolve only to
/// Content-IDs of earlier requests of the same changeset (or, in JSON, of any earlier request).
enum ODataBatchCodec {
    /// A `$batch` body that cannot be parsed.
    enum Failure: Error {
        case malformed(String)
    }

    /// Most requests in one `$batch` (changeset members included); more is refused as malformed (400)
    /// before any is answered.
    static let maxRequests = 1000
    static let tooManyRequests = Failure.malformed("a $batch holds at most \(maxRequests) requests")

    /// The boundary parameter of a multipart content type.
    static func boundary(_ contentType: String) -> String? {
        for part in contentType.split(separator: ";") {
            let t = part.trimmingCharacters(in: .whitespaces)
            if t.lowercased().hasPrefix("boundary=") {
                var b = String(t.dropFirst("boundary=".count))
                if b.hasPrefix("\""), b.hasSuffix("\""), b.count >= 2 { b = String(b.dropFirst().dropLast()) }
                return b
            }
        }
        return nil
    }

    /// Splits a multipart body into its parts (bytes between boundaries, headers included).
    static func parts(_ body: [UInt8], boundary: String) -> [[UInt8]] {
        let text = String(decoding: body, as: UTF8.self)
        let delimiter = "--" + boundary
        var result: [[UInt8]] = []
        let pieces = text.components(separatedBy: delimiter)
        for piece in pieces.dropFirst() {
            if piece.hasPrefix("--") { break }
            var p = Substring(piece)
            // "\r\n" is one Character in Swift.
            if p.hasPrefix("\r\n") || p.hasPrefix("\n") { p = p.dropFirst() }
            if p.hasSuffix("\r\n") || p.hasSuffix("\n") { p = p.dropLast() }
            result.append(Array(p.utf8))
        }
        return result
    }

    /// Splits `headers\r\n\r\nbody`.
    static func splitHead(_ text: String) -> (head: [String], body: String) {
        let normalized = text.replacingOccurrences(of: "\r\n", with: "\n")
        if let r = normalized.range(of: "\n\n") {
            return (
                normalized[..<r.lowerBound].split(separator: "\n").map(String.init),
                String(normalized[r.upperBound...])
            )
        }
        return (normalized.split(separator: "\n").map(String.init), "")
    }

    /// The items of a multipart batch.
    static func multipart(_ body: [UInt8], contentType: String) throws(Failure) -> [BatchItem] {
        guard let b = boundary(contentType) else {
            throw .malformed("multipart batch without a boundary")
        }
        // Bytes that are not UTF-8 are refused, never replaced (the parts are read as text).
        guard String(validating: body, as: UTF8.self) != nil else {
            throw .malformed("the body is not valid UTF-8")
        }
        var items: [BatchItem] = []
        var count = 0
        for part in parts(body, boundary: b) {
            let (head, inner) = splitPart(part)
            let mime = headerMap(head)
            let partType = mime["content-type"] ?? ""
            if partType.lowercased().hasPrefix("multipart/mixed") {
                guard let cb = boundary(partType) else {
                    throw .malformed("changeset without a boundary")
                }
                var requests: [BatchPart] = []
                for p in parts(Array(inner.utf8), boundary: cb) {
                    count += 1
                    guard count <= maxRequests else { throw tooManyRequests }
                    let (h, r) = splitPart(p)
                    let request = try httpRequest(r, mime: headerMap(h))
                    if request.method == "GET" { throw .malformed("a changeset may not contain a GET") }
                    requests.append(request)
                }
                items.append(.changeset(requests, group: nil))
            } else {
                count += 1
                guard count <= maxRequests else { throw tooManyRequests }
                items.append(.single(try httpRequest(inner, mime: mime)))
            }
        }
        return items
    }

    /// A part's MIME headers and content (a part that starts with an empty line has no headers).
    static func splitPart(_ part: [UInt8]) -> (head: [String], body: String) {
        let text = String(decoding: part, as: UTF8.self)
        if text.hasPrefix("\r\n") || text.hasPrefix("\n") { return ([], String(text.dropFirst())) }
        return splitHead(text)
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
    static func httpRequest(_ text: String, mime: [String: String]) throws(Failure) -> BatchPart {
        var trimmed = Substring(text)
        while trimmed.first == "\n" || trimmed.first == "\r\n" || trimmed.first == "\r" {
            trimmed = trimmed.dropFirst()
        }
        let (head, body) = splitHead(String(trimmed))
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
    static func json(_ body: [UInt8]) throws(Failure) -> [BatchItem] {
        guard let json = try? RawJSON.parse(body), let requests = json["requests"]?.elements else {
            throw .malformed("a JSON batch needs a \"requests\" array")
        }
        guard requests.count <= maxRequests else { throw tooManyRequests }
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
        guard let b = boundary(contentType) else { return nil }
        var items: [[PartResponse]] = []
        for part in parts(body, boundary: b) {
            let (head, inner) = splitHead(String(decoding: part, as: UTF8.self))
            let type = headerMap(head)["content-type"] ?? ""
            if type.lowercased().hasPrefix("multipart/mixed"), let cb = boundary(type) {
                items.append(
                    parts(Array(inner.utf8), boundary: cb).compactMap { p in
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
        let (head, body) = splitHead(String(trimmed))
        guard let line = head.first else { return nil }
        let words = line.split(separator: " ")
        guard words.count >= 2, let status = Int(words[1]) else { return nil }
        return PartResponse(
            status: status, headers: headerMap(Array(head.dropFirst())),
            body: Array(body.trimmingCharacters(in: .whitespacesAndNewlines).utf8))
    }

    /// The items of a `$batch` request (JSON when its `Content-Type` says so, else multipart).
    static func items(_ request: HTTPRequest) throws(Failure) -> [BatchItem] {
        let contentType = request.headers["Content-Type"] ?? ""
        return contentType.lowercased().hasPrefix("application/json")
            ? try json(request.body) : try multipart(request.body, contentType: contentType)
    }

    /// Whether a `$batch` request changes data (malformed ones count as not changing).
    static func hasChanges(_ request: HTTPRequest) -> Bool {
        (try? items(request)).map(hasChanges) ?? false
    }

    /// The batch response for `answers` (per item of `items`: its responses with their ids, one response
    /// for a failed changeset): V4 JSON `{"responses":[…]}` (a failed atomicity group answers for each of
    /// its requests), else multipart (changesets nested; V2 `202`, V4 `200`).
    static func response(
        _ answers: [(changeset: Bool, parts: [(id: String?, response: HTTPResponse)])], json: Bool,
        items: [BatchItem], version: ODataVersion
    ) -> HTTPResponse {
        func bodyBytes(_ r: HTTPResponse) -> [UInt8] {
            if case .bytes(let b) = r.body { return b }
            return []
        }
        func headerPairs(_ r: HTTPResponse) -> [(String, String)] {
            r.headers.fields.filter { $0.name.lowercased() != MirrorgateHeader.origin.lowercased() }.map {
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
            var h = ODataVersionHeaders.response(.v4, for: .data)
            h.set("Content-Type", "application/json")
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
        var h = ODataVersionHeaders.response(version, for: .data)
        h.set("Content-Type", "multipart/mixed; boundary=\(boundary)")
        return HTTPResponse(status: version == .v2 ? 202 : 200, headers: h, body: .bytes(Array(out.utf8)))
    }
}

extension ODataBatchCodec {
    /// A request under `mount` for one batch part: its method and `url` (relative to the service root,
    /// an absolute path or an absolute URL; `$N` references resolved by the caller), the outer batch's
    /// `Host` plus the part's own headers (`Accept: application/json` when it names none), and its body.
    static func request(
        _ part: BatchPart, url: String, outer: HTTPRequest, mount: String, gatewayRoot: String
    )
        -> HTTPRequest
    {
        var url = url
        if url.hasPrefix(gatewayRoot) {
            url = String(url.dropFirst(gatewayRoot.count))
        } else if let r = url.range(of: "://") {
            let afterScheme = url[r.upperBound...]
            url = afterScheme.firstIndex(of: "/").map { String(afterScheme[$0...]) } ?? "/"
        }
        if url.hasPrefix(mount) {
            url = String(url.dropFirst(mount.count))
        } else if url.hasPrefix("/") {
            url = String(url.dropFirst())
        }
        var headers = HTTPHeaders()
        for (name, value) in outer.headers where name.lowercased() == "host" { headers.set(name, value) }
        for (name, value) in part.headers { headers.set(name, value) }
        if headers["Accept"] == nil { headers.set("Accept", "application/json") }
        return HTTPRequest(
            method: part.method, target: mount + url, version: outer.version, headers: headers,
            body: part.body)
    }
}
