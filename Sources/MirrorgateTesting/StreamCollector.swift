import GatewaySupport
import HTTPCore

/// Reads a ``ResponseStream`` the way a server adapter does (suspending while nothing is buffered), so
/// that a test can check what a streamed answer (a preventive NDJSON stream) sent, chunk by chunk.
public final class StreamCollector: StreamTransport, @unchecked Sendable {
    private let lock = ConditionLock()
    private var parked = false  // guarded by `lock`

    /// Reads `stream` until it ends, waiting at most `timeout` in all. Returns the chunks as they came
    /// (one chunk per `write`) and whether the stream ended normally (`false`: failed or timed out).
    public static func collect(_ stream: ResponseStream, timeout: Duration = .seconds(10)) -> (
        chunks: [[UInt8]], ended: Bool
    ) {
        let collector = StreamCollector()
        stream.attach(collector)
        let deadline = timeout.fromNow
        var chunks: [[UInt8]] = []
        var current: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        for _ in 0..<1_000_000 {
            let read = buffer.withUnsafeMutableBytes { stream.read(into: $0) }
            switch read {
            case .bytes(let n):
                current += buffer[0..<n]
                if n < buffer.count {
                    chunks.append(current)
                    current = []
                }
            case .suspended:
                let woke = collector.lock.withLock {
                    collector.lock.wait(until: { !collector.parked }, deadline: deadline)
                }
                if !woke { return (chunks, false) }
            case .end:
                if !current.isEmpty { chunks.append(current) }
                return (chunks, true)
            case .failed:
                return (chunks, false)
            }
        }
        return (chunks, false)
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
