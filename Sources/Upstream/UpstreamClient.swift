import CCurl
import GatewaySupport
import Synchronization

/// One request to an upstream. Headers are sent as given (order kept); the client adds nothing of its
/// own: no `Accept`, no `Expect: 100-continue`, no default `Content-Type`.
public struct UpstreamRequest: Sendable {
    /// Method as sent by the client.
    public var method: String
    /// Absolute URL.
    public var url: String
    /// Header fields to send (without `Host`, `Content-Length` and hop-by-hop fields).
    public var headers: [(name: String, value: String)]
    /// Body bytes (empty for none).
    public var body: [UInt8]
    /// Budget for DNS + TCP connect + TLS.
    public var connectTimeout: Duration
    /// Budget for the whole transfer, connect included.
    public var timeout: Duration
    /// Whether sending it twice is harmless. libcurl silently re-sends a request whose reused connection
    /// turns out dead before any answer, even though the upstream may have applied it; a request that is
    /// not idempotent therefore always gets a fresh connection. Defaults from the method (GET, HEAD,
    /// OPTIONS, PUT, DELETE are idempotent); callers mark reads sent as POST (Algolia queries).
    public var idempotent: Bool

    /// Creates a request.
    public init(
        method: String, url: String, headers: [(name: String, value: String)] = [], body: [UInt8] = [],
        connectTimeout: Duration = .seconds(1), timeout: Duration = .seconds(30)
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.connectTimeout = connectTimeout
        self.timeout = timeout
        self.idempotent = ["GET", "HEAD", "OPTIONS", "PUT", "DELETE"].contains(method.uppercased())
    }
}

/// A complete upstream response.
public struct UpstreamResponse: Sendable {
    /// Status code.
    public var status: Int
    /// Header fields in arrival order (status line excluded).
    public var headers: [(name: String, value: String)]
    /// Body bytes, as received (no content decoding).
    public var body: [UInt8]

    /// First value of header `name` (case-insensitive).
    public func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }
}

/// Why an upstream call failed, mapped from libcurl's `CURLcode`.
public struct UpstreamError: Error, CustomStringConvertible, Sendable {
    /// The class of failure.
    public enum Kind: String, Sendable {
        /// The connection was refused (nothing listens).
        case refused
        /// A connect or transfer budget ran out.
        case timeout
        /// The host name did not resolve.
        case dns
        /// TLS handshake or certificate failure.
        case tls
        /// The connection broke after it was established (outcome of the request may be unknown).
        case connectionLost
        /// The caller stopped the transfer (client gone).
        case cancelled
        /// The upstream's answer was not well-formed HTTP (a garbled status line or header).
        case malformed
        /// Anything else.
        case other
    }
    /// The class of failure.
    public let kind: Kind
    /// libcurl's code.
    public let curlCode: Int32
    /// libcurl's message.
    public let message: String
    /// Whether a connection had been established before the failure.
    public let connected: Bool
    /// Whether any byte of the request had been written to the connection before the failure.
    public let requestWritten: Bool

    /// Creates an error; `requestWritten` defaults to false (nothing was sent).
    public init(kind: Kind, curlCode: Int32, message: String, connected: Bool, requestWritten: Bool = false) {
        self.kind = kind
        self.curlCode = curlCode
        self.message = message
        self.connected = connected
        self.requestWritten = requestWritten
    }

    /// Whether the upstream may have acted on the request: some of it was written and no complete,
    /// well-formed response came back (a lost connection, a timeout, garbage or a malformed header in
    /// the answer alike). A modification failing so is in doubt; one failing otherwise was never sent.
    public var outcomeUnknown: Bool { requestWritten }

    /// Whether the request reached the upstream, as far as the failure tells.
    public enum Delivery: String, Sendable {
        /// Certainly not sent: the transfer failed before any byte of the request was written, for a
        /// reason that comes before a request can be written at all (the connection was refused, the host
        /// name did not resolve, the connect or the TLS handshake failed or ran out of time). The upstream
        /// cannot have acted on it.
        case notSent
        /// Maybe sent: some of it was written, or the failure does not say (a lost connection, no answer,
        /// a timeout after the connect, garbage in the answer). The upstream may have acted on it.
        case inDoubt
    }

    /// Whether the request reached the upstream: ``Delivery/notSent`` only for a refused connection, a
    /// name that did not resolve, a failed TLS handshake or a timeout before the connect, with no request
    /// byte written; anything else is ``Delivery/inDoubt``.
    public var delivery: Delivery {
        if requestWritten { return .inDoubt }
        switch kind {
        case .refused, .dns, .tls: return .notSent
        case .timeout where !connected: return .notSent
        default: return .inDoubt
        }
    }

    public var description: String {
        "\(kind.rawValue): \(message)"
    }

    /// Network errors and timeouts are transient: the upstream may come back.
    public var isTransient: Bool { kind != .cancelled }
}

/// A blocking HTTP client on libcurl easy handles. Handles are pooled and reused (keeping connections
/// alive); each transfer owns its handle exclusively. Call from worker threads, never from a server
/// polling thread. `curl_global_init` runs once, before the first client is created.
public final class UpstreamClient: Sendable {
    private let idle = Mutex<[UInt]>([])  // bit patterns of idle CURL handles
    private let maxIdle: Int

    /// Initializes libcurl once for the process; call early, before threads start.
    public static func globalInit() { _ = globalInitOnce }
    private static let globalInitOnce: Bool = {
        curl_global_init(Int(CURL_GLOBAL_DEFAULT))
        return true
    }()

    /// Creates a client keeping up to `maxIdleHandles` idle handles (and their connections).
    public init(maxIdleHandles: Int = 256) {
        Self.globalInit()
        maxIdle = maxIdleHandles
    }

    deinit {
        let handles = idle.withLock { $0 }
        for h in handles { curl_easy_cleanup(UnsafeMutableRawPointer(bitPattern: h)) }
    }

    /// Performs a request and returns the whole response.
    public func perform(_ request: UpstreamRequest) throws(UpstreamError) -> UpstreamResponse {
        var body: [UInt8] = []
        var head: (Int, [(name: String, value: String)]) = (0, [])
        try stream(
            request,
            onHead: { s, h in
                head = (s, h)
                return true
            },
            onData: {
                body.append(contentsOf: $0)
                return true
            })
        return UpstreamResponse(status: head.0, headers: head.1, body: body)
    }

    /// Performs a request, calling `onHead` once with the final status and headers, then `onData` for
    /// each piece of the body. Either callback returning false cancels the transfer (`.cancelled`).
    public func stream(
        _ request: UpstreamRequest, onHead: (Int, [(name: String, value: String)]) -> Bool,
        onData: ([UInt8]) -> Bool
    ) throws(UpstreamError) {
        try withoutActuallyEscaping(onHead) { (onHead) throws(UpstreamError) in
            try withoutActuallyEscaping(onData) { (onData) throws(UpstreamError) in
                try run(request, transfer: Transfer(onHead: onHead, onData: onData))
            }
        }
    }

    private func run(_ request: UpstreamRequest, transfer: Transfer) throws(UpstreamError) {
        let handle = acquire()
        let raw = UnsafeMutableRawPointer(handle)
        defer { release(handle) }
        let result: CURLcode = withExtendedLifetime(transfer) {
            let list = Self.configure(raw, request, transfer: transfer)
            defer { curl_slist_free_all(list) }
            return request.body.withUnsafeBytes { bytes in
                if !request.body.isEmpty {
                    mg_curl_setopt_pointer(
                        raw, CURLOPT_POSTFIELDS, UnsafeMutableRawPointer(mutating: bytes.baseAddress))
                    mg_curl_setopt_off_t(raw, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(bytes.count))
                }
                return curl_easy_perform(raw)
            }
        }
        if result == CURLE_OK {
            if !transfer.headDelivered {
                var code = 0
                mg_curl_getinfo_long(raw, CURLINFO_RESPONSE_CODE, &code)
                transfer.status = code
                _ = transfer.deliverHead()
            }
            return
        }
        throw Self.failure(result, cancelled: transfer.cancelled, malformed: transfer.malformed, handle: raw)
    }

    /// The error for a transfer on `handle` that ended with `code`: whether it had connected and had
    /// written request bytes (libcurl counts them in `CURLINFO_REQUEST_SIZE` once they are sent).
    static func failure(
        _ code: CURLcode, cancelled: Bool, malformed: Bool, handle: UnsafeMutableRawPointer
    ) -> UpstreamError {
        let sent = progress(handle)
        return mapError(
            code, cancelled: cancelled, malformed: malformed, connected: sent.connected,
            requestWritten: sent.requestWritten)
    }

    /// How far the transfer on `handle` got: connected, and request bytes written. Bytes counted are
    /// written whatever the connect time says (a reused connection may report a connect time of 0).
    static func progress(_ handle: UnsafeMutableRawPointer) -> (connected: Bool, requestWritten: Bool) {
        var connectTime = 0.0
        mg_curl_getinfo_double(handle, CURLINFO_CONNECT_TIME, &connectTime)
        var requestSize = 0
        mg_curl_getinfo_long(handle, CURLINFO_REQUEST_SIZE, &requestSize)
        return (connectTime > 0 || requestSize > 0, requestSize > 0)
    }

    static func mapError(
        _ code: CURLcode, cancelled: Bool, malformed: Bool = false, connected: Bool,
        requestWritten: Bool = false
    ) -> UpstreamError {
        var message = String(cString: curl_easy_strerror(code))
        let kind: UpstreamError.Kind
        if cancelled {
            kind = .cancelled
        } else if malformed {
            kind = .malformed
            message = "the upstream's response head is not well-formed HTTP"
        } else {
            switch code {
            case CURLE_COULDNT_CONNECT: kind = .refused
            case CURLE_OPERATION_TIMEDOUT: kind = .timeout
            case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY: kind = .dns
            case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM,
                CURLE_SSL_CIPHER, CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ISSUER_ERROR,
                CURLE_SSL_PINNEDPUBKEYNOTMATCH:
                kind = .tls
            case CURLE_GOT_NOTHING, CURLE_RECV_ERROR, CURLE_SEND_ERROR, CURLE_PARTIAL_FILE, CURLE_HTTP2,
                CURLE_HTTP2_STREAM:
                kind = .connectionLost
            case CURLE_WRITE_ERROR, CURLE_ABORTED_BY_CALLBACK: kind = .cancelled
            case CURLE_WEIRD_SERVER_REPLY, CURLE_UNSUPPORTED_PROTOCOL, CURLE_BAD_CONTENT_ENCODING:
                kind = .malformed
            default: kind = .other
            }
        }
        return UpstreamError(
            kind: kind, curlCode: Int32(code.rawValue), message: message, connected: connected,
            requestWritten: requestWritten)
    }

    /// Sets every option of a transfer except the body; returns the header list to free afterwards.
    static func configure(
        _ h: UnsafeMutableRawPointer, _ request: UpstreamRequest, transfer: Transfer
    ) -> UnsafeMutablePointer<curl_slist>? {
        var list: UnsafeMutablePointer<curl_slist>?
        mg_curl_setopt_long(h, CURLOPT_NOSIGNAL, 1)
        mg_curl_setopt_string(h, CURLOPT_URL, request.url)
        mg_curl_setopt_long(h, CURLOPT_CONNECTTIMEOUT_MS, Int(max(1, request.connectTimeout.milliseconds)))
        mg_curl_setopt_long(h, CURLOPT_TIMEOUT_MS, Int(max(1, request.timeout.milliseconds)))
        mg_curl_setopt_long(h, CURLOPT_TCP_NODELAY, 1)
        mg_curl_setopt_long(h, CURLOPT_TCP_KEEPALIVE, 1)
        mg_curl_setopt_string(h, CURLOPT_PROTOCOLS_STR, "http,https")
        mg_curl_setopt_long(h, CURLOPT_FOLLOWLOCATION, 0)
        // An easy handle performing on its own keeps its own connection cache (five by default, for each
        // of up to `maxIdleHandles` idle handles): one idle connection per handle is enough.
        mg_curl_setopt_long(h, CURLOPT_MAXCONNECTS, 1)
        if !request.idempotent {
            // A write goes on a new connection (never one the upstream may be closing), which is closed
            // after it instead of being kept idle: otherwise every write left one more idle connection.
            mg_curl_setopt_long(h, CURLOPT_FRESH_CONNECT, 1)
            mg_curl_setopt_long(h, CURLOPT_FORBID_REUSE, 1)
        }
        let method = request.method.uppercased()
        switch method {
        case "GET":
            mg_curl_setopt_long(h, CURLOPT_HTTPGET, 1)
        case "HEAD":
            mg_curl_setopt_long(h, CURLOPT_NOBODY, 1)
        case "POST":
            mg_curl_setopt_long(h, CURLOPT_POST, 1)
            if request.body.isEmpty { mg_curl_setopt_off_t(h, CURLOPT_POSTFIELDSIZE_LARGE, 0) }
        default:
            mg_curl_setopt_string(h, CURLOPT_CUSTOMREQUEST, request.method)
        }
        if method == "GET" && !request.body.isEmpty {
            mg_curl_setopt_string(h, CURLOPT_CUSTOMREQUEST, "GET")
        }
        var sawAccept = false
        var sawContentType = false
        for (name, value) in request.headers {
            let lower = name.lowercased()
            if lower == "accept" { sawAccept = true }
            if lower == "content-type" { sawContentType = true }
            list = curl_slist_append(list, value.isEmpty ? "\(name);" : "\(name): \(value)")
        }
        if !sawAccept { list = curl_slist_append(list, "Accept:") }
        if !sawContentType { list = curl_slist_append(list, "Content-Type:") }
        list = curl_slist_append(list, "Expect:")
        mg_curl_setopt_slist(h, CURLOPT_HTTPHEADER, list)
        let cls = Unmanaged.passUnretained(transfer).toOpaque()
        mg_curl_setopt_data_callback(h, CURLOPT_HEADERFUNCTION, Transfer.headerCallback)
        mg_curl_setopt_pointer(h, CURLOPT_HEADERDATA, cls)
        mg_curl_setopt_data_callback(h, CURLOPT_WRITEFUNCTION, Transfer.writeCallback)
        mg_curl_setopt_pointer(h, CURLOPT_WRITEDATA, cls)
        return list
    }

    private func acquire() -> OpaquePointer {
        if let h = idle.withLock({ $0.popLast() }), let p = OpaquePointer(bitPattern: h) { return p }
        return OpaquePointer(curl_easy_init()!)
    }

    private func release(_ handle: OpaquePointer) {
        let raw = UnsafeMutableRawPointer(handle)
        curl_easy_reset(raw)
        let bits = UInt(bitPattern: raw)
        let kept = idle.withLock { list -> Bool in
            guard list.count < maxIdle else { return false }
            list.append(bits)
            return true
        }
        if !kept { curl_easy_cleanup(raw) }
    }
}

/// State of one transfer, reached from libcurl's callbacks through an unretained pointer.
final class Transfer {
    var status = 0
    var headers: [(name: String, value: String)] = []
    var headDelivered = false
    var cancelled = false
    let onHead: (Int, [(name: String, value: String)]) -> Bool
    let onData: ([UInt8]) -> Bool

    init(
        onHead: @escaping (Int, [(name: String, value: String)]) -> Bool, onData: @escaping ([UInt8]) -> Bool
    ) {
        self.onHead = onHead
        self.onData = onData
    }

    func deliverHead() -> Bool {
        headDelivered = true
        if !onHead(status, headers) {
            cancelled = true
            return false
        }
        return true
    }

    /// Set when the upstream's head was not well-formed HTTP (RFC 9112): the transfer is stopped and
    /// fails as ``UpstreamError/Kind/malformed``, whatever libcurl would have made of it.
    var malformed = false

    /// One header line as libcurl delivers it (with its CR LF), parsed on the bytes: a status line
    /// starts a new header block (after 100 Continue or a redirect), a blank line is skipped. Returns
    /// false for a line that is not well-formed: a status line without a three-digit code, a field
    /// without a colon or with a name that is not a token, a NUL or bare CR in a value, or a second
    /// `Content-Length` that differs from the first.
    func headerLine(_ raw: UnsafeRawBufferPointer) -> Bool {
        var end = raw.count
        while end > 0, raw[end - 1] == 0x0A || raw[end - 1] == 0x0D { end -= 1 }
        if end == 0 { return true }
        let line = UnsafeRawBufferPointer(rebasing: raw[0..<end])
        if end >= 5, line[0] == 0x48, line[1] == 0x54, line[2] == 0x54, line[3] == 0x50, line[4] == 0x2F {
            // "HTTP/x.y NNN reason"
            status = 0
            headers = []
            guard let space = line.firstIndex(of: 0x20) else { return false }
            var i = space + 1
            while i < end, line[i] >= 0x30, line[i] <= 0x39 {
                status = status * 10 + Int(line[i] - 0x30)
                i += 1
            }
            return i == space + 4 && (i == end || line[i] == 0x20)
        }
        if line[0] == 0x20 || line[0] == 0x09 {
            // obs-fold (RFC 9112 §5.2): a continuation of the previous value, joined with a space.
            guard !headers.isEmpty else { return false }
            var v = 0
            while v < end, line[v] == 0x20 || line[v] == 0x09 { v += 1 }
            headers[headers.count - 1].value +=
                " " + String(decoding: UnsafeRawBufferPointer(rebasing: line[v..<end]), as: UTF8.self)
            return true
        }
        guard let colon = line.firstIndex(of: 0x3A), colon > 0,
            line[0..<colon].allSatisfy(Self.isTokenByte)
        else { return false }
        var v = colon + 1
        while v < end, line[v] == 0x20 || line[v] == 0x09 { v += 1 }
        if line[v..<end].contains(where: { $0 == 0 || $0 == 0x0D }) { return false }
        let name = String(decoding: UnsafeRawBufferPointer(rebasing: line[0..<colon]), as: UTF8.self)
        let value = String(decoding: UnsafeRawBufferPointer(rebasing: line[v..<end]), as: UTF8.self)
        if name.lowercased() == "content-length",
            let earlier = headers.first(where: { $0.name.lowercased() == "content-length" }),
            earlier.value != value
        {
            return false
        }
        headers.append((name, value))
        return true
    }

    /// tchar of RFC 9110 §5.6.2.
    static func isTokenByte(_ b: UInt8) -> Bool {
        switch b {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: return true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"),
            UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."),
            UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            return true
        default: return false
        }
    }

    static let headerCallback: mg_curl_data_callback = { ptr, size, count, userdata in
        let t = Unmanaged<Transfer>.fromOpaque(userdata!).takeUnretainedValue()
        let n = size * count
        if let ptr, !t.headerLine(UnsafeRawBufferPointer(start: ptr, count: n)) {
            t.malformed = true
            return 0
        }
        return n
    }

    static let writeCallback: mg_curl_data_callback = { ptr, size, count, userdata in
        let t = Unmanaged<Transfer>.fromOpaque(userdata!).takeUnretainedValue()
        let n = size * count
        if !t.headDelivered {
            if !t.deliverHead() { return 0 }
        }
        guard let ptr, n > 0 else { return n }
        let bytes = [UInt8](UnsafeRawBufferPointer(start: ptr, count: n))
        if !t.onData(bytes) {
            t.cancelled = true
            return 0
        }
        return n
    }
}
