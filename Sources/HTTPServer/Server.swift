import CMHDOwnErrors
import CMicroHTTPD
import GatewaySupport
import Glibc
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
    /// The whole-request bound, independent of activity: a connection's request head must be complete
    /// this long after it started waiting for it (accept, or the previous response), the body this long
    /// after the request line, and the answer too (504); also the idle timeout while a response is sent.
    public var requestTimeout: Duration
    /// Connections from one address that may wait for (or trickle) a request head at once (see
    /// ``PendingTable``); by default a quarter of `maxConnections`, at least 8.
    public var maxPendingPerAddress: Int
    /// Connections from all addresses together that may wait for a request head at once; by default half
    /// of `maxConnections`, at least 16.
    public var maxPending: Int
    /// The largest request head (request line and header fields) the server accepts; a larger one gets
    /// 431 (414 when the request line alone is larger) in the API's format.
    public var maxHeadSize: Int
    /// The most query arguments a request target may carry; more get 414 in the API's format.
    public var maxQueryArguments: Int
    /// The most header fields a request head may carry (as many as common upstream servers accept, e.g.
    /// Python's http.server); more get 431 in the API's format.
    public var maxHeaderFields: Int
    /// libmicrohttpd's per-connection memory pool: the read buffer, one record per header field and
    /// query argument, and the answer's head. Well above `maxHeadSize` (by default four times), so a
    /// head within the limit always fits with room for its answer; what libmicrohttpd refuses when the
    /// pool runs out is answered in the API's format too (see `CMHDOwnErrors`). Pages are committed only
    /// when touched.
    public var connectionMemoryLimit: Int
    /// libmicrohttpd polling threads (handlers run on them and must not block).
    public var pollingThreads: Int
    /// A request-ID field (e.g. `X-Request-Id`): when set, every request carries one before the handler
    /// sees it (the client's, if acceptable, else a minted one) and every response echoes it, the
    /// server's own errors included (see ``RequestID``). Nil: no such field is added.
    public var requestIDHeader: String?

    /// Creates a configuration; the pending-connection limits default to fractions of `maxConnections`.
    public init(
        host: String = "127.0.0.1", port: UInt16 = 8080, maxBodySize: Int = 10 << 20,
        maxConnections: Int = 512, requestTimeout: Duration = .seconds(30),
        maxHeadSize: Int = 32 << 10, maxQueryArguments: Int = 256, maxHeaderFields: Int = 100,
        connectionMemoryLimit: Int? = nil,
        pollingThreads: Int = 1, maxPendingPerAddress: Int? = nil, maxPending: Int? = nil
    ) {
        self.host = host
        self.port = port
        self.maxBodySize = maxBodySize
        self.maxConnections = maxConnections
        self.requestTimeout = requestTimeout
        self.maxPendingPerAddress = max(1, maxPendingPerAddress ?? max(8, maxConnections / 4))
        self.maxPending = max(1, maxPending ?? max(16, maxConnections / 2))
        self.maxHeadSize = max(1024, maxHeadSize)
        self.maxQueryArguments = max(1, maxQueryArguments)
        self.maxHeaderFields = max(8, maxHeaderFields)
        self.connectionMemoryLimit = max(connectionMemoryLimit ?? 0, 4 * self.maxHeadSize)
        self.pollingThreads = pollingThreads
        self.requestIDHeader = nil
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
///
/// What it enforces before a request reaches the handler (libmicrohttpd 0.9.75 does none of it):
/// RFC 9112 framing (``RequestFraming``, and for 0.9.x the head layout check of ``HeadLayout``: NUL and
/// obs-fold), answered 400/501 in the API's format and followed by a close; a whole-request
/// deadline independent of activity (a head trickling in is closed at `requestTimeout`, a body gets 408);
/// per-address and total limits on connections still waiting for a head (``PendingTable``); a TLS
/// ClientHello on the plain port is closed at once; a chunked body is cut with 413 as soon as its running
/// count passes `maxBodySize`.
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
    /// Connections waiting for a request head, and every slot's `closed`/`shut` state: a socket is shut
    /// down only under this lock and only while libmicrohttpd has not reported its close.
    private let table: Mutex<PendingTable>
    /// Slow connections refused or closed since the last report (logged at most every 10 s).
    private let slowReport = Mutex<(refused: Int, closed: Int, since: UInt64)>((0, 0, 0))
    /// Whether ``HeadLayout`` describes the running libmicrohttpd's parser.
    let checksHeadLayout: Bool
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
        let timeout = configuration.requestTimeout.nanoseconds
        table = Mutex(
            PendingTable(
                perAddressLimit: configuration.maxPendingPerAddress, totalLimit: configuration.maxPending,
                slowAfter: min(1_000_000_000, timeout / 2), headDeadline: timeout))
        let version = MHD_get_version().map { String(cString: $0) } ?? ""
        checksHeadLayout = HeadLayout.applies(toVersion: version)
        if !checksHeadLayout {
            logger.notice(
                "libmicrohttpd \(version): NUL and obs-fold in request heads are left to its own parser"
            )
        }
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
                    UInt32(flags), sa, MHDCallbacks.acceptPolicy, cls, MHDCallbacks.access, cls,
                    MHDCallbacks.completed, cls,
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
        if !mg_mhd_set_own_error_hook(MHDCallbacks.ownError) {
            logger.warning(
                "libmicrohttpd's own error pages (malformed heads) cannot be replaced in this build: they are sent as HTML"
            )
        }
        // Accept a connection once its first bytes are there, so that the connection notification can
        // look at them (a TLS ClientHello is closed at once). Not essential: without it such a hello is
        // closed at the head deadline.
        let listenFd = mg_mhd_listen_fd(d)
        let deferSeconds = Int32(max(1, min(30, configuration.requestTimeout.components.seconds)))
        do {
            try syscall("setsockopt(TCP_DEFER_ACCEPT)") { mg_set_defer_accept(listenFd, deferSeconds) }
        } catch {
            logger.notice("\(error); a TLS hello on the plain port is closed at the head deadline only")
        }
        // Deadlines: of suspended requests (libmicrohttpd never times them out), of request bodies, and of
        // heads (its own timeout is an idle timeout, which a client trickling bytes never reaches).
        watchdog = Scheduler.shared.repeating(every: .milliseconds(20)) { [self] in
            let now = monotonicNanos()
            let contexts = registry.withLock { Array($0.values) }
            for ctx in contexts { ctx.enforceDeadline(now: now) }
            sweepPending(now: now)
        }
    }

    // MARK: connections waiting for a request head (slow clients)

    /// The accept policy: whether a new connection from `peer` is admitted (closing slow pending
    /// connections to make room, see ``PendingTable``).
    func admit(_ peer: PeerAddress) -> Bool {
        let now = monotonicNanos()
        let (admitted, closing) = table.withLock { t in
            let decision = t.admit(peer, now: now)
            for slot in decision.close { Self.shutDownSocket(slot.fd) }
            return decision
        }
        if !admitted || !closing.isEmpty {
            report(refused: admitted ? 0 : 1, closed: closing.count, now: now, peer: peer)
        }
        return admitted
    }

    /// A connection was accepted. A first byte that cannot start an HTTP request but starts a TLS
    /// record (0x16) or an SSLv2 hello (high bit set) closes it at once: it is a TLS client on the
    /// plain port, which would otherwise wait for a ServerHello until the head deadline. The target of
    /// the first request line, if already there, is noted for an answer libmicrohttpd would give before
    /// the request reaches the server (a request line it refuses: see ``answerOwnError(_:status:)``).
    func opened(_ slot: ConnectionSlot) {
        let now = monotonicNanos()
        let tls = withUnsafeTemporaryAllocation(byteCount: Self.peekSize, alignment: 1) { buffer -> Bool in
            let peeked = try? syscall("recv(MSG_PEEK)", blocking: false) {
                recv(slot.fd, buffer.baseAddress, buffer.count, Int32(MSG_PEEK | MSG_DONTWAIT))
            }
            guard case .processed(let n)? = peeked, n > 0 else { return false }
            let first = buffer[0]
            if first == 0x16 || first >= 0x80 { return true }
            slot.target = RequestFraming.target(ofRequestLine: UnsafeRawBufferPointer(rebasing: buffer[..<n]))
            return false
        }
        table.withLock { t in
            t.opened(slot, now: now)
            if tls {
                t.shut(slot)
                Self.shutDownSocket(slot.fd)
            }
        }
        if tls { logger.debug("closed a TLS hello from \(slot.peer) on the plain HTTP port") }
    }

    /// How much of a new connection's first bytes ``opened(_:)`` looks at.
    static let peekSize = 1024

    func closed(_ slot: ConnectionSlot) { table.withLock { $0.closed(slot) } }

    /// libmicrohttpd is about to send its own error page for the request on `slot` (a head or chunked
    /// body it refuses before or while the server reads it): the answer goes out here instead, from the
    /// error factory in the format of the API the request addressed (its target, or the connection's
    /// last one when the request line itself was refused), and the socket is shut down so that
    /// libmicrohttpd's page is never sent. Its statuses: 400 (malformed request line, header line,
    /// `Content-Length` or chunked framing), 413 (a length beyond 64 bits), 414/431 (a request line or
    /// head, or its field and argument records, beyond `connectionMemoryLimit`), 505 (an HTTP version
    /// other than 1.x), 500 (a body it could not buffer). The server's own head checks use it too, with
    /// their `message`.
    func answerOwnError(_ slot: ConnectionSlot, status: Int, message given: String? = nil) {
        let limit = configuration.maxHeadSize
        let message: String
        switch status {
        case _ where given != nil: message = given ?? ""
        case 400:
            message = "malformed request: the request line, a header line, Content-Length or the chunked body"
        case 413: message = "Content-Length or a chunk size is too large"
        case 414: message = "the request line is longer than the limit of \(limit) bytes"
        case 431:
            message =
                "the request head is larger than the limit of \(limit) bytes or has too many fields or query arguments"
        case 505: message = "HTTP version not supported: the gateway speaks HTTP/1.0 and HTTP/1.1"
        default: message = "the request could not be read"
        }
        let target = slot.target ?? "/"
        var response = errors(status, message, target)
        if let field = configuration.requestIDHeader, !response.headers.contains(field) {
            response.headers.add(field, RequestID.mint())
        }
        if answerAndShut(slot, response.closingMessage()) {
            observer?("-", target, response.status, response.headers, 0)
        }
    }

    /// Whether the client of `slot` is gone: the connection was closed or shut down, or reset or hung up
    /// (``Socket/peerGone(_:)``; a half-close is not gone: the client still reads the answer). Under the
    /// table's lock, so a reused descriptor is never polled.
    func peerGone(_ slot: ConnectionSlot) -> Bool {
        table.withLock { _ in slot.closed || slot.shut || Socket.peerGone(slot.fd) }
    }

    /// A request head is complete; returns how many open connections the server has shut down already
    /// (see ``PendingTable/shutOpen``).
    func requestStarted(_ slot: ConnectionSlot) -> Int {
        table.withLock { t in
            t.requestStarted(slot)
            return t.shutOpen
        }
    }

    func requestEnded(_ slot: ConnectionSlot) {
        let now = monotonicNanos()
        table.withLock { $0.requestEnded(slot, now: now) }
    }

    /// Writes `message` (a complete response) to the connection's socket, if it is still open, and shuts
    /// it down; for answers the server must give while libmicrohttpd is still reading the request, which
    /// it cannot queue then. Returns whether the socket was still open.
    @discardableResult
    func answerAndShut(_ slot: ConnectionSlot, _ message: [UInt8]?) -> Bool {
        table.withLock { t in
            guard !slot.closed, !slot.shut else { return false }
            t.shut(slot)
            if let message {
                // Non-blocking, one attempt: an error answer is small, and the socket's send buffer is
                // empty while a request is being read.
                _ = message.withUnsafeBytes { raw in
                    try? syscall("send", blocking: false) {
                        send(slot.fd, raw.baseAddress, raw.count, Int32(MSG_DONTWAIT | MSG_NOSIGNAL))
                    }
                }
            }
            Self.shutDownSocket(slot.fd)
            return true
        }
    }

    private func sweepPending(now: UInt64) {
        let closing = table.withLock { t in
            let closing = t.sweep(now: now)
            for slot in closing { Self.shutDownSocket(slot.fd) }
            return closing.count
        }
        if closing > 0 { report(refused: 0, closed: closing, now: now, peer: nil) }
    }

    /// Both directions: libmicrohttpd then reads end-of-file and closes the connection itself.
    private static func shutDownSocket(_ fd: Int32) {
        guard fd >= 0 else { return }
        _ = try? syscall("shutdown") { Glibc.shutdown(fd, Int32(SHUT_RDWR)) }
    }

    private func report(refused: Int, closed: Int, now: UInt64, peer: PeerAddress?) {
        let line: String? = slowReport.withLock { r in
            r.refused += refused
            r.closed += closed
            guard now >= r.since &+ 10_000_000_000 || r.since == 0 else { return nil }
            defer { r = (0, 0, now) }
            return "slow clients: \(r.refused) connection(s) refused, \(r.closed) closed (head not complete "
                + "within requestTimeout, or beyond the pending limits: \(configuration.maxPendingPerAddress) "
                + "per address, \(configuration.maxPending) in all)"
                + (peer.map { "; last from \($0)" } ?? "")
        }
        if let line { logger.warning("\(line)") }
    }

    // MARK: registry of suspended work (deadlines and shutdown)

    /// Reports an answered request to the observer (access log, metrics).
    func observe(_ ctx: RequestContext, _ response: HTTPResponse) {
        observer?(
            ctx.method, ctx.target, response.status, response.headers, monotonicNanos() - ctx.receivedAt)
    }

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
        /// The server answered (408, 413) or closed the connection itself while the request was still
        /// arriving; libmicrohttpd is told to close it at its next call.
        case cut
    }

    let core: ServerCore
    let target: String
    let receivedAt: UInt64
    /// The connection's slot (nil only if libmicrohttpd gave no socket context).
    let slot: ConnectionSlot?
    // Touched only on the polling thread:
    var connection: OpaquePointer?
    var started = false
    var method = ""
    var version = ""
    var headers = HTTPHeaders()
    var fields: [HeadLayout.Field] = []
    var layoutBase: UnsafeRawPointer?
    var body: [UInt8] = []
    var answered = false
    var sawBody = false
    /// In the server's registry since the head (a body was awaited).
    var registered = false
    // Guarded by `lock`:
    private let lock = Mutex<Void>(())
    private var phase: Phase = .receiving
    private var bodyArrived = false
    var expectsContinue = false
    var stream: ResponseStream?
    /// The request's ID and the field that carries it (``ServerConfiguration/requestIDHeader``).
    var requestID: (field: String, value: String)?
    /// The authority of an absolute-form target (it replaces the Host field); nil for origin-form.
    var authority: String?
    private var deadline: UInt64 = .max

    init(core: ServerCore, target: String, slot: ConnectionSlot?) {
        self.core = core
        self.target = target
        self.slot = slot
        self.receivedAt = monotonicNanos()
    }

    /// The head is complete and a body follows: it must be complete by the request deadline.
    func awaitBody(expectsContinue: Bool) {
        lock.withLock { _ in
            self.expectsContinue = expectsContinue
            deadline = receivedAt &+ core.configuration.requestTimeout.nanoseconds
        }
        core.register(self)
        registered = true
    }

    /// Body bytes arrived (so a `100 Continue`, if any, has been sent).
    func noteBody() {
        sawBody = true
        lock.withLock { _ in bodyArrived = true }
    }

    /// Hands the request over; false when the server already cut it.
    func dispatch() -> Bool {
        let ok = lock.withLock { _ in
            guard case .receiving = phase else { return false }
            phase = .dispatched
            deadline = receivedAt &+ core.configuration.requestTimeout.nanoseconds
            return true
        }
        if ok && !registered { core.register(self) }
        return ok
    }

    var isCut: Bool {
        lock.withLock { _ in
            if case .cut = phase { return true }
            return false
        }
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

    /// Answered already (by a handler, or by the server at the deadline or shutdown), cut, or its client
    /// closed the connection (a suspended connection is not watched by libmicrohttpd, so the socket is
    /// peeked).
    var isAbandoned: Bool {
        let waiting = lock.withLock { _ -> Bool in
            if case .dispatched = phase { return true }
            return false
        }
        guard waiting, let slot else { return !waiting }
        return core.peerGone(slot)
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
        enum Due {
            case none
            case respond
            case receiving
        }
        let due: Due = lock.withLock { _ in
            guard now >= deadline else { return .none }
            switch phase {
            case .dispatched: return .respond
            case .receiving: return .receiving
            default: return .none
            }
        }
        switch due {
        case .none: return
        case .respond:
            respond(core.errors(504, "request timed out after \(core.configuration.requestTimeout)", target))
        case .receiving:
            cutWhileReceiving(
                408, "the request body did not arrive within \(core.configuration.requestTimeout)")
        }
    }

    func abortForShutdown() {
        if let stream {
            stream.abort()
        } else if !respond(core.errors(503, "server is shutting down", target)) {
            cutWhileReceiving(503, "server is shutting down")
        }
    }

    /// Answers a request whose body is still arriving and closes the connection: libmicrohttpd queues no
    /// response while it reads a body, so the answer is written to the socket here (unless a
    /// `100 Continue` may still be on its way, which it must not interleave with: then only closed).
    func cutWhileReceiving(_ status: Int, _ message: String) {
        let writeAnswer: Bool? = lock.withLock { _ in
            guard case .receiving = phase else { return nil }
            phase = .cut
            return !expectsContinue || bodyArrived
        }
        guard let writeAnswer else { return }
        core.unregister(self)
        var response = core.errors(status, message, target)
        stamp(&response)
        if let slot, core.answerAndShut(slot, writeAnswer ? response.closingMessage() : nil) {
            core.observe(self, response)
        }
    }
}
