import CLinux

#if canImport(Glibc)
    import Glibc
#endif

/// A system call that failed: the call's name and its `errno`.
public struct SystemCallError: Error, CustomStringConvertible, Sendable, Equatable {
    /// The call, as named at the choke point (`epoll_create1`, `eventfd`, …).
    public let call: String
    /// The `errno` it left.
    public let code: Int32

    /// Creates an error for `call` with `code`.
    public init(call: String, code: Int32) {
        self.call = call
        self.code = code
    }

    public var description: String { "\(call) failed: \(String(cString: strerror(code))) (errno \(code))" }
}

/// The outcome of a call on a non-blocking descriptor.
public enum IOResult<T: Sendable>: Sendable {
    /// The call did its work and returned this.
    case processed(T)
    /// The descriptor was not ready (`EAGAIN`/`EWOULDBLOCK`).
    case wouldBlock
}

/// The one choke point for the gateway's own system calls: runs `body` (a call that returns -1 and sets
/// `errno` on failure), retries on `EINTR`, and turns any other failure into a ``SystemCallError`` naming
/// `call`. With `blocking: false` (a non-blocking descriptor), `EAGAIN` is ``IOResult/wouldBlock``
/// rather than an error.
@inline(__always)
public func syscall<T: FixedWidthInteger & Sendable>(
    _ call: String, blocking: Bool = true, _ body: () -> T
) throws(SystemCallError) -> IOResult<T> {
    while true {
        let result = body()
        if result != -1 { return .processed(result) }
        let code = errno
        if code == EINTR { continue }
        if !blocking && (code == EAGAIN || code == EWOULDBLOCK) { return .wouldBlock }
        throw SystemCallError(call: call, code: code)
    }
}

/// ``syscall(_:blocking:_:)`` for a call on a blocking descriptor (or one that never blocks): the result.
@inline(__always)
@discardableResult
public func syscall<T: FixedWidthInteger & Sendable>(_ call: String, _ body: () -> T) throws(SystemCallError)
    -> T
{
    switch try syscall(call, blocking: true, body) {
    case .processed(let value): return value
    case .wouldBlock: return -1  // unreachable: a blocking call never reports EAGAIN as would-block
    }
}

/// An epoll set (level-triggered), with the ready fds read into plain arrays.
public final class Epoll: @unchecked Sendable {
    /// The epoll descriptor.
    public let fd: Int32

    /// Event bits.
    public struct Events: OptionSet, Sendable {
        public let rawValue: UInt32
        public init(rawValue: UInt32) { self.rawValue = rawValue }
        /// Readable.
        public static let input = Events(rawValue: mg_epollin())
        /// Writable.
        public static let output = Events(rawValue: mg_epollout())
        /// An error on the descriptor.
        public static let error = Events(rawValue: mg_epollerr())
        /// The peer hung up (either side).
        public static let hangup = Events(rawValue: mg_epollhup())
    }

    /// Creates an epoll set (close-on-exec).
    public init() throws(SystemCallError) {
        fd = try syscall("epoll_create1") { epoll_create1(Int32(EPOLL_CLOEXEC)) }
    }

    /// Watches `target` for `events`.
    public func add(_ target: Int32, _ events: Events) throws(SystemCallError) {
        try syscall("epoll_ctl(ADD)") { mg_epoll_ctl(fd, EPOLL_CTL_ADD, target, events.rawValue) }
    }

    /// Changes the events watched on `target`.
    public func modify(_ target: Int32, _ events: Events) throws(SystemCallError) {
        try syscall("epoll_ctl(MOD)") { mg_epoll_ctl(fd, EPOLL_CTL_MOD, target, events.rawValue) }
    }

    /// Stops watching `target`.
    public func remove(_ target: Int32) throws(SystemCallError) {
        try syscall("epoll_ctl(DEL)") { mg_epoll_ctl(fd, EPOLL_CTL_DEL, target, 0) }
    }

    /// Waits at most `timeoutMs` (-1: forever) and fills `fds`/`events` (same capacity, at most 128 are
    /// used); returns how many are ready.
    public func wait(fds: inout [Int32], events: inout [UInt32], timeoutMs: Int32) throws(SystemCallError)
        -> Int
    {
        let capacity = Int32(min(fds.count, events.count))
        let n = try fds.withUnsafeMutableBufferPointer { f throws(SystemCallError) in
            try events.withUnsafeMutableBufferPointer { e throws(SystemCallError) in
                try syscall("epoll_wait") {
                    mg_epoll_wait(fd, f.baseAddress, e.baseAddress, capacity, timeoutMs)
                }
            }
        }
        return Int(n)
    }

    /// Closes the set.
    public func close() throws(SystemCallError) { try syscall("close(epoll)") { Glibc.close(fd) } }
}

/// A non-blocking eventfd, to wake a thread that waits in an ``Epoll`` set.
public final class EventFD: @unchecked Sendable {
    /// The descriptor.
    public let fd: Int32

    /// Creates the eventfd (non-blocking, close-on-exec).
    public init() throws(SystemCallError) {
        fd = try syscall("eventfd") { eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC)) }
    }

    /// Makes the descriptor readable (a full counter, which never happens with single increments, is
    /// already readable: would-block is fine).
    public func signal() throws(SystemCallError) {
        _ = try syscall("write(eventfd)", blocking: false) { mg_eventfd_signal(fd) }
    }

    /// Resets the counter (nothing to read is fine).
    public func drain() throws(SystemCallError) {
        _ = try syscall("read(eventfd)", blocking: false) { mg_eventfd_drain(fd) }
    }

    /// Closes the descriptor.
    public func close() throws(SystemCallError) { try syscall("close(eventfd)") { Glibc.close(fd) } }
}

/// Socket helpers of the server adapter.
public enum Socket {
    /// An IPv4 or IPv6 socket address from a numeric host (`127.0.0.1`, `::1`); nil when `host` is not
    /// a numeric address.
    public static func address(host: String, port: UInt16) -> sockaddr_storage? {
        var storage = sockaddr_storage()
        return mg_make_sockaddr(host, port, &storage) == 1 ? storage : nil
    }

    /// Whether the peer of connected socket `fd` is gone: the connection was reset or hung up in both
    /// directions (`POLLHUP`/`POLLERR`), which is what a write would fail on. End-of-file alone is not:
    /// a client that half-closes after its request (`shutdown(SHUT_WR)`) still reads the answer, and a
    /// FIN cannot tell a half-close from a close. Data waiting, nothing yet, or a failing poll all count
    /// as present.
    public static func peerGone(_ fd: Int32) -> Bool {
        var entry = pollfd(fd: fd, events: 0, revents: 0)
        guard case .processed(1)? = try? syscall("poll", blocking: false, { poll(&entry, 1, 0) }) else {
            return false
        }
        return entry.revents & Int16(POLLHUP | POLLERR) != 0
    }

    /// Closes `fd`.
    public static func close(_ fd: Int32) throws(SystemCallError) { try syscall("close") { Glibc.close(fd) } }
}
