import GatewaySupport

/// What a server adapter gives a ``ResponseStream`` so that the stream can park and wake the connection
/// it feeds. Every call is made with the stream's lock held, so that a suspension and the write that
/// ends it cannot cross.
public protocol StreamTransport: AnyObject, Sendable {
    /// Parks the connection: the server stops asking for data until ``resume()``.
    func suspend()
    /// Wakes the parked connection.
    func resume()
    /// Whether the client is gone: the connection was reset or hung up (a half-close is not gone: the
    /// client still reads). Checked only while suspended, when the server cannot see it.
    func peerClosed() -> Bool
}

/// What ``ResponseStream/read(into:)`` gives the server adapter.
public enum StreamRead: Sendable, Equatable {
    /// This many bytes were copied into the buffer.
    case bytes(Int)
    /// Nothing buffered: the stream suspended the connection through its transport.
    case suspended
    /// The stream ended normally (send the final chunk).
    case end
    /// The stream ended abnormally (close without the final chunk).
    case failed
}

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
    private var transport: (any StreamTransport)?
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

    /// Connects the stream to the connection it feeds (called by the server adapter once).
    public func attach(_ transport: any StreamTransport) {
        lock.withLock { self.transport = transport }
    }

    /// Ends the stream if the client is gone (``StreamTransport/peerClosed()``) while the connection is
    /// suspended (servers often do not notice disconnects of suspended connections). The lock keeps the
    /// connection suspended, and so its socket valid, during the check.
    public func checkPeerClosed() {
        lock.withLock {
            guard suspended, let transport, !closed, !finished else { return }
            if transport.peerClosed() {
                closed = true
                wakeLocked()
                lock.broadcast()
            }
        }
    }

    /// Marks the stream closed because the response was destroyed (done or client gone).
    public func detach() {
        lock.withLock {
            closed = true
            transport = nil
            suspended = false
            lock.broadcast()
        }
    }

    /// Ends the stream from the server (deadline or shutdown).
    public func abort() {
        lock.withLock {
            closed = true
            wakeLocked()
            lock.broadcast()
        }
    }

    /// Whether the stream parked its connection.
    public var isSuspended: Bool { lock.withLock { suspended } }

    private func wakeLocked() {
        if suspended, let transport {
            suspended = false
            transport.resume()
        }
    }

    /// The server's content reader: copies at most one chunk into `buffer`; suspends the connection
    /// (through its transport) when nothing is buffered.
    public func read(into buffer: UnsafeMutableRawBufferPointer) -> StreamRead {
        lock.lock()
        defer { lock.unlock() }
        if head < chunks.count {
            let chunk = chunks[head]
            let n = min(buffer.count, chunk.count - partialOffset)
            chunk.withUnsafeBytes { raw in
                let src = raw.baseAddress!.advanced(by: partialOffset)
                buffer.baseAddress!.copyMemory(from: src, byteCount: n)
            }
            partialOffset += n
            buffered -= n
            if partialOffset == chunk.count {
                partialOffset = 0
                chunks[head] = []  // sent: not kept until the queue drains (a steady producer never lets it)
                head += 1
                if head == chunks.count {
                    chunks.removeAll(keepingCapacity: true)
                    head = 0
                } else if head >= 64 && head * 2 >= chunks.count {
                    chunks.removeFirst(head)
                    head = 0
                }
            }
            lock.broadcast()
            return .bytes(n)
        }
        if failed { return .failed }
        if finished || closed { return .end }
        guard let transport else { return .end }
        suspended = true
        transport.suspend()
        return .suspended
    }
}
