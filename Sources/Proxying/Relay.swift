import HTTPServer
import Upstream

/// Header rules for a forwarding hop (RFC 9110 §7.6.1): hop-by-hop fields, and the fields named in
/// `Connection`, are not forwarded; `Host` and `Content-Length` are set by the next hop.
public enum HopByHop {
    static let names: Set<String> = [
        "connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade",
        "proxy-authenticate", "proxy-authorization",
    ]

    /// The request's fields to send upstream, minus hop-by-hop ones, `Host`, `Content-Length`, `Expect`
    /// and any name in `dropping` (lowercased).
    public static func requestHeaders(_ headers: HTTPHeaders, dropping: Set<String> = [])
        -> [(name: String, value: String)]
    {
        let listed = connectionListed(headers.values("Connection"))
        return headers.fields.filter { field in
            let lower = field.name.lowercased()
            return !names.contains(lower) && !listed.contains(lower) && lower != "host"
                && lower != "content-length"
                && lower != "expect" && !dropping.contains(lower)
        }
    }

    /// The upstream response's fields to relay, minus hop-by-hop ones and `Content-Length`.
    public static func responseHeaders(_ headers: [(name: String, value: String)]) -> HTTPHeaders {
        let listed = connectionListed(headers.filter { $0.name.lowercased() == "connection" }.map(\.value))
        return HTTPHeaders(
            headers.filter { field in
                let lower = field.name.lowercased()
                return !names.contains(lower) && !listed.contains(lower) && lower != "content-length"
            })
    }

    private static func connectionListed(_ values: [String]) -> Set<String> {
        var result = Set<String>()
        for v in values {
            for token in v.split(separator: ",") {
                result.insert(token.trimmingCharacters(in: .whitespaces).lowercased())
            }
        }
        return result
    }
}

/// How a relay ended.
public enum RelayOutcome: Sendable {
    /// The upstream answered with this status and the response was sent to the client.
    case relayed(status: Int)
    /// The upstream answered 5xx; nothing was sent (the caller may try another host). Body kept (capped).
    case serverError(status: Int, headers: [(name: String, value: String)], body: [UInt8])
    /// The transfer failed before anything was sent to the client.
    case failed(UpstreamError)
    /// The transfer failed after the response had started; the client saw a truncated body.
    case brokenAfterStart(UpstreamError)
}

/// Streams one upstream transfer to a client. Small bodies (under `bufferLimit`) are collected and
/// sent with `Content-Length` (and through `transform`, for URL rewriting); larger ones start a chunked
/// response as soon as the limit is passed and are forwarded piece by piece (through `streamTransform`).
public struct Relay: Sendable {
    /// Bodies up to this size are sent whole.
    public var bufferLimit: Int
    /// Create with a buffering limit.
    public init(bufferLimit: Int = 1 << 20) { self.bufferLimit = bufferLimit }

    /// Performs `request` and relays the response to `responder`, unless the upstream answered 5xx and
    /// `holdServerErrors` is set (then `.serverError` is returned and nothing is sent).
    public func run(
        _ request: UpstreamRequest, client: UpstreamClient, responder: any Responder, holdServerErrors: Bool,
        adjustHeaders: (inout HTTPHeaders) -> Void = { _ in },
        transform: (([UInt8]) -> [UInt8])? = nil,
        makeStreamTransform: (() -> any StreamTransform)? = nil
    ) -> RelayOutcome {
        var status = 0
        var headers: [(name: String, value: String)] = []
        var buffer: [UInt8] = []
        var stream: ResponseStream?
        var streamTransform: (any StreamTransform)?
        var hold = false
        do {
            try client.stream(
                request,
                onHead: { s, h in
                    status = s
                    headers = h
                    hold = holdServerErrors && s >= 500
                    return true
                },
                onData: { bytes in
                    if hold {
                        if buffer.count < 64 << 10 { buffer.append(contentsOf: bytes) }
                        return true
                    }
                    if let stream {
                        let out = streamTransform?.feed(bytes) ?? bytes
                        return out.isEmpty ? !stream.isClosed : stream.write(out)
                    }
                    buffer.append(contentsOf: bytes)
                    if buffer.count > bufferLimit {
                        let s = ResponseStream(timeout: request.timeout + .seconds(1))
                        var h = HopByHop.responseHeaders(headers)
                        adjustHeaders(&h)
                        streamTransform = makeStreamTransform?()
                        stream = s
                        responder.respond(HTTPResponse(status: status, headers: h, body: .stream(s)))
                        let out = streamTransform?.feed(buffer) ?? buffer
                        buffer = []
                        return s.write(out)
                    }
                    return true
                })
        } catch {
            if let stream {
                if let tail = streamTransform?.flush(), !tail.isEmpty { stream.write(tail) }
                stream.fail()
                return .brokenAfterStart(error)
            }
            return .failed(error)
        }
        if hold { return .serverError(status: status, headers: headers, body: buffer) }
        if let stream {
            if let tail = streamTransform?.flush(), !tail.isEmpty { stream.write(tail) }
            stream.finish()
            return .relayed(status: status)
        }
        var h = HopByHop.responseHeaders(headers)
        adjustHeaders(&h)
        let body = transform?(buffer) ?? buffer
        responder.respond(HTTPResponse(status: status, headers: h, body: .bytes(body)))
        return .relayed(status: status)
    }
}

/// A byte transformation applied to a body that arrives in pieces.
public protocol StreamTransform {
    /// Transforms the next piece; may hold back bytes until more arrive.
    mutating func feed(_ bytes: [UInt8]) -> [UInt8]
    /// Returns what is held back, at the end of the body.
    mutating func flush() -> [UInt8]
}
