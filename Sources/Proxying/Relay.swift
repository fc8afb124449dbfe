import GatewaySupport
import HTTPCore
import Upstream

/// Header rules for a forwarding hop (RFC 9110 §7.6.1): hop-by-hop fields, and the fields named in
/// `Connection`, are not forwarded; `Host` and `Content-Length` are set by the next hop.
public enum HopByHop {
    static let names: [String] = [
        "connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade",
        "proxy-authenticate", "proxy-authorization",
    ]

    @inline(__always)
    static func isHopByHop(_ name: String) -> Bool {
        names.contains { name.equalsIgnoringASCIICase($0) }
    }

    /// The request's fields to send upstream, minus hop-by-hop ones, `Host`, `Content-Length`, `Expect`
    /// and any name in `dropping` (lowercased).
    public static func requestHeaders(_ headers: HTTPHeaders, dropping: Set<String> = [])
        -> [(name: String, value: String)]
    {
        let listed = connectionListed(
            headers.fields.lazy.filter { $0.name.equalsIgnoringASCIICase("connection") }.map(\.value))
        var out: [(name: String, value: String)] = []
        out.reserveCapacity(headers.count)
        for field in headers.fields {
            let name = field.name
            if isHopByHop(name) || name.equalsIgnoringASCIICase("host")
                || name.equalsIgnoringASCIICase("content-length")
                || name.equalsIgnoringASCIICase("expect")
            {
                continue
            }
            if !dropping.isEmpty && dropping.contains(name.lowercased()) { continue }
            if !listed.isEmpty && listed.contains(name.lowercased()) { continue }
            out.append(field)
        }
        return out
    }

    /// The upstream response's fields to relay, minus hop-by-hop ones and `Content-Length`.
    public static func responseHeaders(_ headers: [(name: String, value: String)]) -> HTTPHeaders {
        let listed = connectionListed(
            headers.lazy.filter { $0.name.equalsIgnoringASCIICase("connection") }.map(\.value))
        var out: [(name: String, value: String)] = []
        out.reserveCapacity(headers.count)
        for field in headers {
            if isHopByHop(field.name) || field.name.equalsIgnoringASCIICase("content-length") { continue }
            if !listed.isEmpty && listed.contains(field.name.lowercased()) { continue }
            out.append(field)
        }
        return HTTPHeaders(out)
    }

    /// Lowercased field names listed in `Connection` values, other than the hop-by-hop names themselves
    /// (so the common `keep-alive` / `close` lists yield nothing, without allocating).
    private static func connectionListed(_ values: some Sequence<String>) -> Set<String> {
        var result = Set<String>()
        for v in values {
            for token in v.utf8.split(separator: UInt8(ascii: ",")) {
                var lo = token.startIndex
                var hi = token.endIndex
                func blank(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 }
                while lo < hi, blank(token[lo]) { lo = token.index(after: lo) }
                while lo < hi, blank(token[token.index(before: hi)]) { hi = token.index(before: hi) }
                let t = String(decoding: token[lo..<hi], as: UTF8.self)
                if t.isEmpty || isHopByHop(t) || t.equalsIgnoringASCIICase("close") { continue }
                result.insert(t.lowercased())
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

/// Relays one upstream transfer to a client, on the curl loop's thread (never blocking it). Small bodies
/// (under `bufferLimit`) are collected and sent with `Content-Length` (through `transform`, for URL
/// rewriting); larger ones start a chunked response as soon as the limit is passed and are forwarded
/// piece by piece (through the stream transform). With `holdServerErrors`, a 5xx is not sent: the
/// outcome says so and the caller may try another host.
public final class RelayTransfer: TransferSink {
    /// Options of a relay.
    public struct Options {
        /// Keep 5xx answers from the client (the caller decides).
        public var holdServerErrors = false
        /// Also hold a 429 (rate limited) like a 5xx: for callers that can answer elsewhere.
        public var holdRateLimited = false
        /// Bodies up to this size are sent whole.
        public var bufferLimit = 1 << 20
        /// A body still arriving this long after the headers is streamed from then on (a slow upstream's
        /// bytes reach the client as they come, not when the body is complete).
        public var streamAfter: Duration = .milliseconds(100)
        /// Longest a streamed response may last.
        public var streamTimeout: Duration = .seconds(30)
        /// Final edit of the relayed headers.
        public var adjustHeaders: (inout HTTPHeaders) -> Void = { _ in }
        /// Whole-body transformation (small bodies).
        public var transform: (([UInt8]) -> [UInt8])?
        /// Applies the transformations only for statuses it accepts (all when nil).
        public var transformIf: ((Int) -> Bool)?
        /// Piecewise transformation (streamed bodies).
        public var makeStreamTransform: (() -> any StreamTransform)?
        /// Polled while the transfer runs: true cancels it (the client went away).
        public var isCancelled: (() -> Bool)?
        /// Creates default options.
        public init() {}
    }

    public var isCancelled: Bool { options.isCancelled?() ?? false }

    private let responder: any Responder
    private let options: Options
    private let completion: (RelayOutcome) -> Void
    private var status = 0
    private var headers: [(name: String, value: String)] = []
    private var buffer: [UInt8] = []
    private var stream: ResponseStream?
    private var streamTransform: (any StreamTransform)?
    private var hold = false
    private var headAt = ContinuousClock.now
    private let startedAt = ContinuousClock.now

    /// Creates the sink; `completion` runs once, on the loop thread, after the response was sent
    /// (or held).
    public init(responder: any Responder, options: Options, completion: @escaping (RelayOutcome) -> Void) {
        self.responder = responder
        self.options = options
        self.completion = completion
    }

    /// Takes the upstream's status and fields, and adds `Server-Timing: upstream;dur=MS` (W3C Server
    /// Timing): the time from this transfer's start to the upstream's response head, which the access log
    /// reports as the upstream time.
    public func head(status: Int, headers: [(name: String, value: String)]) -> Bool {
        self.status = status
        self.headers = headers
        hold = (options.holdServerErrors && status >= 500) || (options.holdRateLimited && status == 429)
        headAt = ContinuousClock.now
        let micros = (headAt - startedAt).components
        let ms = Double(micros.seconds) * 1000 + Double(micros.attoseconds / 1_000_000_000_000) / 1000
        self.headers.append((name: "Server-Timing", value: "upstream;dur=\((ms * 1000).rounded() / 1000)"))
        return true
    }

    public func body(_ bytes: [UInt8]) -> Bool {
        if hold {
            if buffer.count < 64 << 10 { buffer.append(contentsOf: bytes) }
            return true
        }
        if let stream {
            let out = streamTransform?.feed(bytes) ?? bytes
            return out.isEmpty ? !stream.isClosed : stream.writeNonBlocking(out)
        }
        buffer.append(contentsOf: bytes)
        guard buffer.count > options.bufferLimit || ContinuousClock.now - headAt > options.streamAfter else {
            return true
        }
        let s = ResponseStream(timeout: options.streamTimeout, highWater: 16 << 20)
        var h = HopByHop.responseHeaders(headers)
        options.adjustHeaders(&h)
        if options.transformIf?(status) ?? true { streamTransform = options.makeStreamTransform?() }
        stream = s
        responder.respond(HTTPResponse(status: status, headers: h, body: .stream(s)))
        let out = streamTransform?.feed(buffer) ?? buffer
        buffer = []
        return s.writeNonBlocking(out)
    }

    public func finished(_ error: UpstreamError?) {
        if let error {
            if let stream {
                stream.fail()
                completion(.brokenAfterStart(error))
            } else {
                completion(.failed(error))
            }
            return
        }
        if hold {
            completion(.serverError(status: status, headers: headers, body: buffer))
            return
        }
        if let stream {
            if let tail = streamTransform?.flush(), !tail.isEmpty { stream.writeNonBlocking(tail) }
            stream.finish()
            completion(.relayed(status: status))
            return
        }
        var h = HopByHop.responseHeaders(headers)
        options.adjustHeaders(&h)
        let out = (options.transformIf?(status) ?? true) ? (options.transform?(buffer) ?? buffer) : buffer
        responder.respond(HTTPResponse(status: status, headers: h, body: .bytes(out)))
        completion(.relayed(status: status))
    }
}

/// A byte transformation applied to a body that arrives in pieces.
public protocol StreamTransform {
    /// Transforms the next piece; may hold back bytes until more arrive.
    mutating func feed(_ bytes: [UInt8]) -> [UInt8]
    /// Returns what is held back, at the end of the body.
    mutating func flush() -> [UInt8]
}
