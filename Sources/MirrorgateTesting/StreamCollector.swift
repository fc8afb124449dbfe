import GatewaySupport
import HTTPCore

/// Reads a ``ResponseStream`` the way a server adapter does (suspending while nothing is buffered), so
/// that a test can check what a streamed answer (a preventive NDJSON stream) sent, chunk by chunk, and act
/// between chunks. Every wait is bounded.
public final class StreamCollector: StreamTransport, @unchecked Sendable {
    private let lock = ConditionLock()
    private var parked = false  // guarded by `lock`
    private let stream: ResponseStream
    private var buffer = [UInt8](repeating: 0, count: 64 << 10)
    /// Whether the stream ended normally (set once ``next(timeout:)`` returned nil).
    public private(set) var ended = false

    /// Attaches to `stream` (before anything reads it).
    public init(_ stream: ResponseStream) {
        self.stream = stream
        stream.attach(self)
    }

    /// The next chunk (one `write` of the producer), waiting at most `timeout`; nil when the stream ended
    /// (``ended`` tells whether normally), failed, or nothing came in time.
    public func next(timeout: Duration = .seconds(10)) -> [UInt8]? {
        let deadline = timeout.fromNow
        var current: [UInt8] = []
        for _ in 0..<100_000 {
            let read = buffer.withUnsafeMutableBytes { stream.read(into: $0) }
            switch read {
            case .bytes(let n):
                current += buffer[0..<n]
                if n < buffer.count { return current }
            case .suspended:
                if !current.isEmpty { return current }
                let woke = lock.withLock { lock.wait(until: { !parked }, deadline: deadline) }
                if !woke { return nil }
            case .end:
                ended = true
                return current.isEmpty ? nil : current
            case .failed:
                return nil
            }
        }
        return nil
    }

    /// Reads `stream` until it ends, waiting at most `timeout` per chunk. Returns the chunks as they came
    /// and whether the stream ended normally (`false`: failed or timed out).
    public static func collect(_ stream: ResponseStream, timeout: Duration = .seconds(10)) -> (
        chunks: [[UInt8]], ended: Bool
    ) {
        let collector = StreamCollector(stream)
        var chunks: [[UInt8]] = []
        for _ in 0..<10_000 {
            guard let chunk = collector.next(timeout: timeout) else { break }
            chunks.append(chunk)
        }
        return (chunks, collector.ended)
    }

    public func suspend() { lock.withLock { parked = true } }

    public func resume() {
        lock.withLock {
            parked = false
            lock.broadcast()
        }
    }

    public func peerClosed() -> Bool { false }
}
