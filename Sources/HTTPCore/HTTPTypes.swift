import GatewaySupport

/// An ordered list of header fields. Names compare case-insensitively; order and duplicates are kept,
/// so a forwarded request carries exactly what the client sent.
public struct HTTPHeaders: Sendable, Sequence, ExpressibleByDictionaryLiteral {
    /// The fields in the order they arrived or were added.
    public private(set) var fields: [(name: String, value: String)]

    /// Creates headers from ordered fields.
    public init(_ fields: [(name: String, value: String)] = []) { self.fields = fields }

    /// Creates headers from a literal.
    public init(dictionaryLiteral elements: (String, String)...) {
        fields = elements.map { (name: $0.0, value: $0.1) }
    }

    /// The first value of `name`, compared case-insensitively.
    public subscript(name: String) -> String? {
        for field in fields where field.name.equalsIgnoringASCIICase(name) { return field.value }
        return nil
    }

    /// Every value of `name`.
    public func values(_ name: String) -> [String] {
        fields.filter { $0.name.equalsIgnoringASCIICase(name) }.map(\.value)
    }

    /// Whether a field named `name` is present.
    public func contains(_ name: String) -> Bool { self[name] != nil }

    /// Appends a field.
    public mutating func add(_ name: String, _ value: String) { fields.append((name, value)) }

    /// Replaces every field named `name` by one with `value`.
    public mutating func set(_ name: String, _ value: String) {
        remove(name)
        fields.append((name, value))
    }

    /// Removes every field named `name`.
    public mutating func remove(_ name: String) {
        fields.removeAll { $0.name.equalsIgnoringASCIICase(name) }
    }

    /// Removes every field whose name satisfies `predicate`.
    public mutating func removeAll(where predicate: (String) -> Bool) {
        fields.removeAll { predicate($0.name) }
    }

    public func makeIterator() -> IndexingIterator<[(name: String, value: String)]> {
        fields.makeIterator()
    }

    /// Number of fields.
    public var count: Int { fields.count }
}

extension String {
    /// ASCII case-insensitive comparison, the rule for header names.
    @inlinable
    public func equalsIgnoringASCIICase(_ other: String) -> Bool {
        if utf8.count != other.utf8.count { return false }
        var a = utf8.makeIterator()
        var b = other.utf8.makeIterator()
        while true {
            let x = a.next()
            let y = b.next()
            guard let x, let y else { return x == nil && y == nil }
            if x == y { continue }
            let lx = (x >= 65 && x <= 90) ? x | 0x20 : x
            let ly = (y >= 65 && y <= 90) ? y | 0x20 : y
            if lx != ly { return false }
        }
    }
}

/// A request as it arrived: method, raw target (never unescaped), headers in order, and the whole body.
public struct HTTPRequest: Sendable {
    /// The method, as sent (`GET`, `POST`, …).
    public var method: String
    /// The request target exactly as sent: the raw path and, after `?`, the raw query.
    public var target: String
    /// The HTTP version (`HTTP/1.1`).
    public var version: String
    /// Header fields in arrival order.
    public var headers: HTTPHeaders
    /// The request body (empty when none).
    public var body: [UInt8]
    /// Monotonic time (ns) at which the request line arrived.
    public var receivedAt: UInt64

    /// Creates a request; used by the server and by tests.
    public init(
        method: String, target: String, version: String = "HTTP/1.1", headers: HTTPHeaders = [:],
        body: [UInt8] = [], receivedAt: UInt64 = monotonicNanos()
    ) {
        self.method = method
        self.target = target
        self.version = version
        self.headers = headers
        self.body = body
        self.receivedAt = receivedAt
    }

    /// The raw path, without the query.
    public var path: Substring {
        if let q = target.utf8.firstIndex(of: UInt8(ascii: "?")) { return target[..<q] }
        return target[...]
    }

    /// The raw query (after `?`), or nil when the target has none.
    public var query: Substring? {
        guard let q = target.utf8.firstIndex(of: UInt8(ascii: "?")) else { return nil }
        return target[target.utf8.index(after: q)...]
    }

    /// Query parameters, percent-decoded (`+` as space), in order.
    public var queryItems: [(name: String, value: String)] {
        guard let query else { return [] }
        return FormCodec.pairs(query)
    }

    /// The first query parameter named `name` (exact, case-sensitive).
    public func queryValue(_ name: String) -> String? {
        queryItems.first { $0.name == name }?.value
    }
}

/// The one check of a request path before routing: dot segments are refused, so that no request can
/// leave the mount or API prefix it names (libcurl and upstream servers resolve them, and
/// `/odata/S/../../private` would otherwise reach the upstream host as `/private`).
public enum RequestPath {
    /// Why `path` (raw, without the query) is refused, or nil when it is safe to route: a segment that is
    /// `.` or `..`, also percent-encoded (`%2e%2E`), or one that hides such a segment behind an encoded
    /// slash or a backslash (`..%2F..`, a backslash between two dots), which some servers split on.
    public static func refusal(_ path: Substring) -> String? {
        for raw in path.split(separator: "/", omittingEmptySubsequences: false) {
            guard raw.utf8.contains(UInt8(ascii: ".")) || raw.utf8.contains(UInt8(ascii: "%")) else {
                continue
            }
            let decoded = FormCodec.percentDecode(raw)
            for piece in decoded.split(
                omittingEmptySubsequences: false, whereSeparator: { $0 == "/" || $0 == "\\" })
            where piece == "." || piece == ".." {
                return "the request path contains a dot segment ('\(raw)'); dot segments are not accepted"
            }
        }
        return nil
    }
}

/// The body of a response: fixed bytes, or a stream that a producer fills while the client reads.
public enum ResponseBody: Sendable {
    /// A complete body, sent with `Content-Length`.
    case bytes([UInt8])
    /// A body produced over time, sent with chunked transfer encoding.
    case stream(ResponseStream)
}

/// A response: status, headers (without `Content-Length`/`Transfer-Encoding`, which the server sets) and body.
public struct HTTPResponse: Sendable {
    /// The status code.
    public var status: Int
    /// Header fields.
    public var headers: HTTPHeaders
    /// The body.
    public var body: ResponseBody

    /// Creates a response.
    public init(status: Int, headers: HTTPHeaders = [:], body: ResponseBody = .bytes([])) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A response with a JSON body given as text.
    public static func json(_ status: Int, _ text: String, headers: HTTPHeaders = [:]) -> HTTPResponse {
        var h = headers
        h.set("Content-Type", "application/json; charset=utf-8")
        return HTTPResponse(status: status, headers: h, body: .bytes(Array(text.utf8)))
    }

    /// A response with a plain-text body.
    public static func text(_ status: Int, _ text: String, contentType: String = "text/plain; charset=utf-8")
        -> HTTPResponse
    {
        HTTPResponse(status: status, headers: ["Content-Type": contentType], body: .bytes(Array(text.utf8)))
    }

    /// The body's length when fixed.
    public var fixedBodyCount: Int? {
        if case .bytes(let b) = body { return b.count }
        return nil
    }
}

/// What a handler uses to answer one request, exactly once, from any thread. Later calls are ignored
/// (for example after the server already answered a request that ran past its deadline).
public protocol Responder: Sendable {
    /// Sends `response`. Returns false if the request was already answered or abandoned.
    @discardableResult func respond(_ response: HTTPResponse) -> Bool

    /// Whether nobody waits for an answer any more: the request was answered (by the server at its
    /// deadline, for example) or its client is gone (the connection was reset; a client that only
    /// half-closed still waits for the answer). Long work for the request may stop when this turns true.
    /// Polled; never blocks. False unless the responder knows better.
    var isAbandoned: Bool { get }
}

extension Responder {
    /// Not known to be abandoned.
    public var isAbandoned: Bool { false }
}

/// The application. Each complete request is handed to `handle` on the server's polling thread, which
/// must therefore never block: it answers at once, hands the transfer to another event loop, or submits
/// blocking work to a `WorkerPool`.
public protocol HTTPHandler: Sendable {
    /// Handles `request` without blocking and eventually calls `responder.respond` exactly once (from
    /// any thread).
    func handle(_ request: HTTPRequest, _ responder: any Responder)
}

/// Builds the server's own error responses (413, timeouts, shutdown) in the format of the API the
/// request addressed.
public typealias ErrorResponseFactory =
    @Sendable (_ status: Int, _ message: String, _ target: String)
    -> HTTPResponse
