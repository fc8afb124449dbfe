import CMicroHTTPD
import GatewaySupport
import HTTPCore
import Logging
import Synchronization
import SystemCalls

/// Settings of the HTTP server; every default in one place.
public struct ServerConfiguration: Sendable {
    /// Numeric IPv4/IPv6 address or `localhost`.
    public var host: String
    /// Port; 0 picks an ephemeral one (see `Server.port`).
    public var port: UInt16
    /// Largest accepted request body; larger ones get 413 before they are read.
    public var maxBodySize: Int
    /// Simultaneous connections.
    public var maxConnections: Int
    /// Longest a request may take from arrival to response (and idle connection timeout).
    public var requestTimeout: Duration
    /// Per-connection memory for headers (libmicrohttpd); headers beyond it get 431.
    public var connectionMemoryLimit: Int
    /// libmicrohttpd polling threads (handlers run on them and must not block).
    public var pollingThreads: Int

    /// Creates a configuration.
    public init(
        host: String = "127.0.0.1", port: UInt16 = 8080, maxBodySize: Int = 10 << 20,
        maxConnections: Int = 512, requestTimeout: Duration = .seconds(30),
        connectionMemoryLimit: Int = 32 << 10, pollingThreads: Int = 1
    ) {
        self.host = host
        self.port = port
        self.maxBodySize = maxBodySize
        self.maxConnections = maxConnections
        self.requestTimeout = requestTimeout
        self.connectionMemoryLimit = connectionMemoryLimit
        self.pollingThreads = pollingThreads
    }
}

/// Called once per answered request (on the polling thread: keep it cheap), for access logs and metrics.
public typealias ResponseObserver =
    @Sendable (
        _ method: String, _ target: String, _ status: Int, _ headers: HTTPHeaders, _ durationNanos: UInt64
    ) -> Void

/// An error starting the server.
public struct ServerError: Error, CustomStringConvertible, Sendable {
    /// What went wrong.
    public let description: String
}

/// The HTTP server on libmicrohttpd: internal polling threads with epoll that hand each complete request
/// to the handler (which must not block) and suspend it until it is answered, fixed and streamed
/// responses, body limits, deadlines on every suspension, and graceful shutdown.
public final class Server: Sendable {
    let core: ServerCore

    /// Starts listening. Throws if the address is invalid or cannot be bound.
    public init(
        configuration: ServerConfiguration, handler: any HTTPHandler, errors: @escaping ErrorResponseFactory,
        observer: ResponseObserver? = nil, logger: Logger = Logger(label: "mirrorgate.http")
    ) throws {
        core = ServerCore(
            configuration: configuration, handler: handler, errors: errors, observer: observer, logger: logger
        )
        try core.start()
    }

    /// The bound port (useful when the configuration asked for port 0).
    public var port: UInt16 { core.boundPort }

    /// Requests currently between arrival and completion.
    public var activeRequests: Int { core.active.load(ordering: .relaxed) }

    /// Stops accepting connections, gives in-flight requests `grace` to finish, then ends what is left
    /// (suspended requests get the error factory's 503, streams are closed) and stops the daemon.
    public func shutdown(grace: Duration) { core.shutdown(grace: grace) }
}

final class ServerCore: @unchecked Sendable {
    let configuration: ServerConfiguration
    let handler: any HTTPHandler
    let errors: ErrorResponseFactory
    let observer: ResponseObserver?
    let logger: Logger
    let active = Atomic<Int>(0)
    /// Signalled when `active` drops while the server is stopping (shutdown waits on it).
    private let drained = ConditionLock()
    let stopping = Atomic<Bool>(false)
    /// Open connections (libmicrohttpd's own limit is set above `maxConnections`, see `start`).
    let connections = Atomic<Int>(0)
    private let registry = Mutex<[ObjectIdentifier: RequestContext]>([:])
    private var daemon: OpaquePointer?
    private(set) var boundPort: UInt16 = 0
    private var watchdog: ScheduledWork?
    private var stopped = false

    init(
        configuration: ServerConfiguration, handler: any HTTPHandler, errors: @escaping ErrorResponseFactory,
        observer: ResponseObserver?, logger: Logger
    ) {
        self.configuration = configuration
        self.handler = handler
        self.errors = errors
        self.observer = observer
        self.logger = logger
    }

    func start() throws {
        let host = configuration.host == "localhost" ? "127.0.0.1" : configuration.host
        let bareHost = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        guard var storage = Socket.address(host: bareHost, port: configuration.port) else {
            throw ServerError(
                description: "listen address '\(configuration.host)' is not a numeric IP address")
        }
        var flags =
            MHD_USE_INTERNAL_POLLING_THREAD.rawValue | MHD_USE_EPOLL.rawValue
            | MHD_ALLOW_SUSPEND_RESUME.rawValue
        if storage.ss_family == sa_family_t(AF_INET6) { flags |= MHD_USE_IPv6.rawValue }
        let timeoutSeconds = UInt32(max(1, configuration.requestTimeout.components.seconds))
        let cls = Unmanaged.passUnretained(self).toOpaque()
        let d = withUnsafePointer(to: &storage) { ptr in
            ptr.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                mg_mhd_start(
                    UInt32(flags), sa, MHDCallbacks.access, cls, MHDCallbacks.completed, cls,
                    MHDCallbacks.uriLog, cls, MHDCallbacks.connectionNotify, cls,
                    // libmicrohttpd stops polling its listening socket while at its own limit and may not
                    // look again before the next connection timeout; so its limit is a hard ceiling above
                    // ours, and `maxConnections` is enforced by answering 503 (see the access handler).
                    UInt32(configuration.maxConnections + 64), timeoutSeconds,
                    configuration.connectionMemoryLimit, UInt32(configuration.pollingThreads), 1024)
            }
        }
        guard let d else {
            throw ServerError(
                description:
                    "cannot listen on \(configuration.host):\(configuration.port) (address in use or not available)"
            )
        }
        daemon = d
        boundPort = mg_mhd_bound_port(d)
        // Deadlines and disconnects of suspended requests, which libmicrohttpd does not watch.
        watchdog = Scheduler.shared.repeating(every: .milliseconds(20)) { [self] in
            let now = monotonicNanos()
            let contexts = registry.withLock { Array($0.values) }
            for ctx in contexts { ctx.enforceDeadline(now: now) }
        }
    }

    // MARK: registry of suspended work (deadlines and shutdown)

    func register(_ ctx: RequestContext) {
        registry.withLock { $0[ObjectIdentifier(ctx)] = ctx }
    }

    func unregister(_ ctx: RequestContext) {
        _ = registry.withLock { $0.removeValue(forKey: ObjectIdentifier(ctx)) }
    }

    /// Called when a request completes: wakes a shutdown that waits for the last one.
    /// (Sequentially consistent with `waitUntilIdle`: either this sees `stopping` and wakes the waiter,
    /// or the waiter sees the decrement.)
    func requestCompleted() {
        active.subtract(1, ordering: .sequentiallyConsistent)
        if stopping.load(ordering: .sequentiallyConsistent) { drained.withLock { drained.broadcast() } }
    }

    /// Waits until no request is active or `deadline` passes (`stopping` is set).
    private func waitUntilIdle(deadline: UInt64) {
        _ = drained.withLock {
            drained.wait(until: { active.load(ordering: .sequentiallyConsistent) == 0 }, deadline: deadline)
        }
    }

    func shutdown(grace: Duration) {
        guard let daemon, !stopped else { return }
        stopped = true
        stopping.store(true, ordering: .sequentiallyConsistent)
        let fd = MHD_quiesce_daemon(daemon)
        if fd >= 0 {
            do { try Socket.close(fd) } catch { logger.warning("closing the listening socket: \(error)") }
        }
        waitUntilIdle(deadline: grace.fromNow)
        let left = registry.withLock { Array($0.values) }
        if !left.isEmpty {
            logger.notice("shutdown grace over; closing \(left.count) open request(s)")
            for ctx in left { ctx.abortForShutdown() }
            waitUntilIdle(deadline: Duration.seconds(1).fromNow)
        }
        watchdog?.cancel()
        MHD_stop_daemon(daemon)
        self.daemon = nil
    }
}

/// One request's state from its request line to its completion; retained by libmicrohttpd's
/// `req_cls` and released in the completion callback.
final class RequestContext: @unchecked Sendable, Responder {
    enum Phase {
        case receiving
        case dispatched
        case responded(HTTPResponse)
        case queued
    }

    let core: ServerCore
    let target: String
    let receivedAt: UInt64
    // Touched only on the polling thread:
    var connection: OpaquePointer?
    var started = false
    var method = ""
    var version = ""
    var headers = HTTPHeaders()
    var body: [UInt8] = []
    var rejected = false
    var answered = false
    var discarded = 0
    // Guarded by `lock`:
    private let lock = Mutex<Void>(())
    private var phase: Phase = .receiving
    var stream: ResponseStream?
    private var deadline: UInt64 = .max

    init(core: ServerCore, target: String) {
        self.core = core
        self.target = target
        self.receivedAt = monotonicNanos()
    }

    func dispatch() {
        lock.withLock { _ in
            phase = .dispatched
            deadline = receivedAt &+ core.configuration.requestTimeout.nanoseconds
        }
        core.register(self)
    }

    /// Called by handlers on any thread.
    @discardableResult
    func respond(_ response: HTTPResponse) -> Bool {
        let conn: OpaquePointer? = lock.withLock { _ in
            guard case .dispatched = phase else { return nil }
            phase = .responded(response)
            return connection
        }
        guard let conn else { return false }
        MHD_resume_connection(conn)
        return true
    }

    /// Takes the response to queue, once.
    func takeResponse() -> HTTPResponse? {
        lock.withLock { _ in
            guard case .responded(let r) = phase else { return nil }
            phase = .queued
            return r
        }
    }

    var isDispatched: Bool {
        lock.withLock { _ in
            if case .dispatched = phase { return true }
            return false
        }
    }

    func enforceDeadline(now: UInt64) {
        if let stream {
            if now >= stream.deadline { stream.abort() } else { stream.checkPeerClosed() }
            return
        }
        let expired = lock.withLock { _ in
            if case .dispatched = phase { return now >= deadline }
            return false
        }
        if expired {
            respond(core.errors(504, "request timed out after \(core.configuration.requestTimeout)", target))
        }
    }

    func abortForShutdown() {
        if let stream {
            stream.abort()
        } else {
            respond(core.errors(503, "server is shutting down", target))
        }
    }
}

/// C entry points for libmicrohttpd. They live in a nonisolated type: closures written at the top level
/// of `main.swift` would be main-actor isolated and crash when called from MHD's thread.
enum MHDCallbacks {
    static let uriLog: mg_mhd_uri_log_callback = { cls, uri, _ in
        let core = Unmanaged<ServerCore>.fromOpaque(cls!).takeUnretainedValue()
        core.active.add(1, ordering: .relaxed)
        let target = uri.map { String(cString: $0) } ?? "/"
        let ctx = RequestContext(core: core, target: target)
        return Unmanaged.passRetained(ctx).toOpaque()
    }

    static let connectionNotify: MHD_NotifyConnectionCallback = { cls, _, _, code in
        let core = Unmanaged<ServerCore>.fromOpaque(cls!).takeUnretainedValue()
        if code == .CONNECTION_NOTIFY_STARTED {
            core.connections.add(1, ordering: .relaxed)
        } else {
            core.connections.subtract(1, ordering: .relaxed)
        }
    }

    static let completed: MHD_RequestCompletedCallback = { cls, _, reqCls, _ in
        guard let reqCls, let raw = reqCls.pointee else { return }
        reqCls.pointee = nil
        let ctx = Unmanaged<RequestContext>.fromOpaque(raw).takeRetainedValue()
        ctx.core.unregister(ctx)
        ctx.core.requestCompleted()
    }

    static let headerIterator: MHD_KeyValueIterator = { cls, _, key, value in
        let ctx = Unmanaged<RequestContext>.fromOpaque(cls!).takeUnretainedValue()
        if let key {
            ctx.headers.add(String(cString: key), value.map { String(cString: $0) } ?? "")
        }
        return .YES
    }

    static let streamReader: MHD_ContentReaderCallback = { cls, _, buf, max in
        let stream = Unmanaged<ResponseStream>.fromOpaque(cls!).takeUnretainedValue()
        switch stream.read(into: UnsafeMutableRawBufferPointer(start: buf, count: max)) {
        case .bytes(let n): return n
        case .suspended: return 0
        case .end: return Int(mg_mhd_end_of_stream())
        case .failed: return Int(mg_mhd_end_with_error())
        }
    }

    static let streamFree: MHD_ContentReaderFreeCallback = { cls in
        let stream = Unmanaged<ResponseStream>.fromOpaque(cls!).takeRetainedValue()
        stream.detach()
    }

    static let access: MHD_AccessHandlerCallback = {
        cls, connection, _, method, version, uploadData, uploadSize, reqCls in
        guard let connection, let reqCls, let raw = reqCls.pointee else { return .NO }
        let ctx = Unmanaged<RequestContext>.fromOpaque(raw).takeUnretainedValue()
        let core = ctx.core
        if !ctx.started {
            ctx.started = true
            ctx.connection = connection
            ctx.method = method.map { String(cString: $0) } ?? "GET"
            ctx.version = version.map { String(cString: $0) } ?? "HTTP/1.1"
            MHD_get_connection_values(
                connection, .HEADER_KIND, headerIterator, Unmanaged.passUnretained(ctx).toOpaque())
            if core.connections.load(ordering: .relaxed) > core.configuration.maxConnections {
                ctx.answered = true
                var response = core.errors(
                    503,
                    "too many connections (server.maxConnections = \(core.configuration.maxConnections))",
                    ctx.target)
                response.headers.set("Retry-After", "1")
                return queue(response, ctx, connection)
            }
            let contentLength = ctx.headers["Content-Length"].flatMap(MHDCallbacks.decimal)
            if let n = contentLength, n > core.configuration.maxBodySize {
                ctx.rejected = true
                return queue(
                    core.errors(
                        413, "request body is larger than \(core.configuration.maxBodySize) bytes", ctx.target
                    ),
                    ctx, connection)
            }
            if let n = contentLength, n > 0 { ctx.body.reserveCapacity(n) }
            return .YES
        }
        if ctx.answered {
            // Answered in the first call (connection limit): swallow whatever body follows.
            uploadSize?.pointee = 0
            return .YES
        }
        if let uploadSize, uploadSize.pointee > 0 {
            let n = uploadSize.pointee
            uploadSize.pointee = 0
            if ctx.rejected {
                // Discard the rest of an oversized chunked body so the 413 can be sent when it ends;
                // a client that keeps sending far beyond the limit is cut off.
                ctx.discarded += n
                return ctx.discarded > max(64 << 20, 4 * core.configuration.maxBodySize) ? .NO : .YES
            }
            if ctx.body.count + n > core.configuration.maxBodySize {
                ctx.rejected = true
                ctx.body = []
                ctx.discarded = n
                return .YES
            }
            if let uploadData {
                uploadData.withMemoryRebound(to: UInt8.self, capacity: n) { p in
                    ctx.body.append(contentsOf: UnsafeBufferPointer(start: p, count: n))
                }
            }
            return .YES
        }
        if ctx.rejected {
            return queue(
                core.errors(
                    413, "request body is larger than \(core.configuration.maxBodySize) bytes", ctx.target),
                ctx, connection)
        }
        if let response = ctx.takeResponse() {
            core.unregister(ctx)
            return queue(response, ctx, connection)
        }
        if ctx.isDispatched { return .YES }
        // Body complete: hand the request to the handler, suspended until it answers.
        let request = HTTPRequest(
            method: ctx.method, target: ctx.target, version: ctx.version, headers: ctx.headers,
            body: ctx.body,
            receivedAt: ctx.receivedAt)
        ctx.body = []
        ctx.dispatch()
        MHD_suspend_connection(connection)
        core.handler.handle(request, ctx)
        return .YES
    }

    /// A non-negative decimal header value with optional surrounding spaces or tabs (Content-Length),
    /// parsed on bytes: Foundation's trimming showed up in the per-request profile.
    static func decimal(_ text: String) -> Int? {
        var value = 0
        var digits = 0
        var trailing = false
        for byte in text.utf8 {
            if byte == 32 || byte == 9 {
                if digits > 0 { trailing = true }
                continue
            }
            guard !trailing, byte >= 48, byte <= 57 else { return nil }
            // Saturates: a length too large for Int is still "larger than the limit".
            value = digits < 18 ? value * 10 + Int(byte - 48) : Int.max
            digits += 1
        }
        return digits > 0 ? value : nil
    }

    static func queue(_ response: HTTPResponse, _ ctx: RequestContext, _ connection: OpaquePointer)
        -> MHD_Result
    {
        let mhdResponse: OpaquePointer?
        switch response.body {
        case .bytes(let bytes):
            mhdResponse = bytes.withUnsafeBytes { raw in
                MHD_create_response_from_buffer(
                    raw.count, UnsafeMutableRawPointer(mutating: raw.baseAddress), .RESPMEM_MUST_COPY)
            }
        case .stream(let stream):
            stream.attach(MHDStreamTransport(connection))
            ctx.stream = stream
            ctx.core.register(ctx)
            mhdResponse = MHD_create_response_from_callback(
                mg_mhd_size_unknown(), 16 * 1024, streamReader, Unmanaged.passRetained(stream).toOpaque(),
                streamFree)
        }
        guard let mhdResponse else { return .NO }
        for (name, value) in response.headers {
            if name.equalsIgnoringASCIICase("Content-Length")
                || name.equalsIgnoringASCIICase("Transfer-Encoding")
                || name.equalsIgnoringASCIICase("Connection")
            {
                continue
            }
            MHD_add_response_header(mhdResponse, name, value)
        }
        let result = MHD_queue_response(connection, UInt32(response.status), mhdResponse)
        MHD_destroy_response(mhdResponse)
        if let observer = ctx.core.observer {
            observer(
                ctx.method, ctx.target, response.status, response.headers, monotonicNanos() - ctx.receivedAt)
        }
        return result
    }
}

/// Parks and wakes a libmicrohttpd connection for a ``ResponseStream`` (always called with the stream's
/// lock held, see ``StreamTransport``).
final class MHDStreamTransport: StreamTransport, @unchecked Sendable {
    private let connection: OpaquePointer
    private let socket: Int32

    init(_ connection: OpaquePointer) {
        self.connection = connection
        self.socket = mg_mhd_connection_fd(connection)
    }

    func suspend() { MHD_suspend_connection(connection) }
    func resume() { MHD_resume_connection(connection) }
    func peerClosed() -> Bool { socket >= 0 && Socket.peerClosed(socket) }
}
