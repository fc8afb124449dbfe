import CMicroHTTPD

#if canImport(Glibc)
    import Glibc
#endif

/// A response body produced over time. A producer thread calls `write` and finally `finish`; the
/// server sends each write as its own chunk. While nothing is buffered the connection is suspended
/// (no busy-waiting) and resumed by the next write. Writes block while more than `highWater` bytes
/// wait for a slow client (back-pressure), up to the stream's deadline.
///
/// A stream always ends: by `finish`, by the client going away, by the server's shutdown, or at its
/// deadline — suspended connections never time out in libmicrohttpd, so the deadline is ours.
public final class ResponseStream: @unchecked Sendable {
    private let lock = ConditionLock()
    private var chunks: [[UInt8]] = []
    private var head = 0
    private var partialOffset = 0
    private var buffered = 0
    private var finished = false
    private var closed = false
    private var failed = false
    private var suspended = false
    private var connection: OpaquePointer?
    private var socket: Int32 = -1
    private let highWater: Int
    /// Monotonic deadline (ns) after which the stream is ended by the server's watchdog.
    public let deadline: UInt64

    /// Creates a stream that ends at the latest `timeout` from now.
    public init(timeout: Duration, highWater: Int = 1 << 20) {
        self.highWater = highWater
        self.deadline = monotonicNanos() &+ timeout.nanoseconds
    }

    /// Appends one chunk. Returns false once the client is gone or the stream has ended; the producer
    /// should then stop (and cancel its upstream work).
    @discardableResult
    public func write(_ bytes: [UInt8]) -> Bool {
        write(bytes, blocking: true)
    }

    /// Appends one chunk without ever blocking (for producers on a shared event thread): when more than
    /// `highWater` bytes already wait for a slow client, the stream is closed instead and false returned.
    @discardableResult
    public func writeNonBlocking(_ bytes: [UInt8]) -> Bool {
        write(bytes, blocking: false)
    }

    private func write(_ bytes: [UInt8], blocking: Bool) -> Bool {
        guard !bytes.isEmpty else { return !isClosed }
        lock.lock()
        defer { lock.unlock() }
        if !blocking && buffered > highWater {
            closed = true
            wakeLocked()
            return false
        }
        while buffered > highWater && !closed && !finished {
            if !lock.wait(untilNanos: deadline) && monotonicNanos() >= deadline {
                closed = true
                wakeLocked()
                return false
            }
        }
        if closed || finished { return false }
        chunks.append(bytes)
        buffered += bytes.count
        wakeLocked()
        return true
    }

    /// Ends the stream after what was written.
    public func finish() {
        lock.withLock {
            finished = true
            wakeLocked()
            lock.broadcast()
        }
    }

    /// Ends the stream abnormally: the connection is closed without the final chunk, so the client
    /// sees a truncated body rather than a complete-looking one (used when an upstream breaks mid-body).
    public func fail() {
        lock.withLock {
            failed = true
            finished = true
            wakeLocked()
            lock.broadcast()
        }
    }

    /// Whether the client went away or the stream ended.
    public var isClosed: Bool { lock.withLock { closed || finished } }

    // MARK: server side

    func attach(_ connection: OpaquePointer) {
        let fd = mg_mhd_connection_fd(connection)
        lock.withLock {
            self.connection = connection
            self.socket = fd
        }
    }

    /// Ends the stream if the client closed its side while the connection is suspended (libmicrohttpd
    /// does not notice disconnects of suspended connections). The lock keeps the connection suspended,
    /// and so its socket valid, during the check.
    func checkPeerClosed() {
        lock.withLock {
            guard suspended, socket >= 0, !closed, !finished else { return }
            var byte: UInt8 = 0
            let n = recv(socket, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
            if n == 0 {
                closed = true
                wakeLocked()
                lock.broadcast()
            }
        }
    }

    /// Marks the stream closed because the response was destroyed (done or client gone).
    func detach() {
        lock.withLock {
            closed = true
            connection = nil
            suspended = false
            lock.broadcast()
        }
    }

    /// Ends the stream from the server (deadline or shutdown).
    func abort() {
        lock.withLock {
            closed = true
            wakeLocked()
            lock.broadcast()
        }
    }

    var isSuspended: Bool { lock.withLock { suspended } }

    private func wakeLocked() {
        if suspended, let connection {
            suspended = false
            MHD_resume_connection(connection)
        }
    }

    /// MHD's content reader: one chunk per call; suspends when nothing is buffered.
    func read(into buffer: UnsafeMutablePointer<CChar>, max: Int) -> Int {
        lock.lock()
        defer { lock.unlock() }
        if head < chunks.count {
            let chunk = chunks[head]
            let n = min(max, chunk.count - partialOffset)
            chunk.withUnsafeBytes { raw in
                let src = raw.baseAddress!.advanced(by: partialOffset)
                UnsafeMutableRawPointer(buffer).copyMemory(from: src, byteCount: n)
            }
            partialOffset += n
            buffered -= n
            if partialOffset == chunk.count {
                partialOffset = 0
                head += 1
                if head == chunks.count {
                    chunks.removeAll(keepingCapacity: true)
                    head = 0
                }
            }
            lock.broadcast()
            return n
        }
        if failed { return Int(mg_mhd_end_with_error()) }
        if finished || closed { return Int(mg_mhd_end_of_stream()) }
        guard let connection else { return Int(mg_mhd_end_of_stream()) }
        suspended = true
        MHD_suspend_connection(connection)
        return 0
    }
}
