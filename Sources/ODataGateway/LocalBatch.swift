import GatewaySupport
import HTTPCore
import JSONCore
import ODataCore

/// One read inside a `$batch`.
struct BatchRead {
    var id: String?
    var method: String
    var url: String
    var headers: [(String, String)]
}

/// Read-only `$batch` answered from the mirror: multipart (V2 and V4) and JSON (V4) batches whose
/// requests are all GETs. A batch with changes is answered by ``BatchChanges`` (applied and queued).
enum LocalBatch {
    enum Failure: Error {
        case notReadOnly
        case malformed(String)
    }

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

    /// The reads of a multipart batch.
    static func multipartReads(_ body: [UInt8], contentType: String) throws(Failure) -> [BatchRead] {
        guard let b = boundary(contentType) else { throw .malformed("multipart batch without a boundary") }
        var reads: [BatchRead] = []
        for part in parts(body, boundary: b) {
            let (partHead, inner) = splitHead(String(decoding: part, as: UTF8.self))
            let partType = partHead.first { $0.lowercased().hasPrefix("content-type:") }?.lowercased() ?? ""
            if partType.contains("multipart/mixed") { throw .notReadOnly }
            let (requestHead, _) = splitHead(inner)
            guard let line = requestHead.first else { throw .malformed("empty batch part") }
            let words = line.split(separator: " ")
            guard words.count >= 2 else { throw .malformed("bad request line '\(line)'") }
            guard words[0] == "GET" else { throw .notReadOnly }
            var headers: [(String, String)] = []
            for h in requestHead.dropFirst() {
                if let c = h.firstIndex(of: ":") {
                    headers.append(
                        (String(h[..<c]), h[h.index(after: c)...].trimmingCharacters(in: .whitespaces)))
                }
            }
            reads.append(BatchRead(id: nil, method: "GET", url: String(words[1]), headers: headers))
        }
        return reads
    }

    /// The reads of a V4 JSON batch.
    static func jsonReads(_ body: [UInt8]) throws(Failure) -> [BatchRead] {
        guard let json = try? RawJSON.parse(body), let requests = json["requests"]?.elements else {
            throw .malformed("a JSON batch needs a \"requests\" array")
        }
        var reads: [BatchRead] = []
        for r in requests {
            guard let method = r["method"]?.string, let url = r["url"]?.string else {
                throw .malformed("each batch request needs method and url")
            }
            guard method.uppercased() == "GET" else { throw .notReadOnly }
            var headers: [(String, String)] = []
            for (k, v) in r["headers"]?.members ?? [] { if let s = v.string { headers.append((k, s)) } }
            reads.append(BatchRead(id: r["id"]?.string, method: "GET", url: url, headers: headers))
        }
        return reads
    }
}

extension HTTPRequest {
    /// A GET under `mount` built from one batch read (URL relative to the service root, absolute path or
    /// absolute URL), with the batch's headers plus the part's own.
    static func batchPart(_ read: BatchRead, outer: HTTPRequest, mount: String, gatewayRoot: String)
        -> HTTPRequest
    {
        var url = read.url
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
        for (name, value) in read.headers { headers.set(name, value) }
        if headers["Accept"] == nil { headers.set("Accept", "application/json") }
        return HTTPRequest(
            method: "GET", target: mount + url, version: outer.version, headers: headers, body: [])
    }
}
