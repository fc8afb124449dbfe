import GatewaySupport
import Synchronization

/// Adds CORS headers for an allowed origin and removes any CORS headers an upstream sent, so that no web
/// page reads an answer unless its origin is allowed (`origin` nil: only the removal).
public struct CORSResponder: Responder {
    let inner: any Responder
    let origin: String?

    /// Decorates `inner`; `origin` is the request's `Origin` when allowed, else nil.
    public init(inner: any Responder, origin: String?) {
        self.inner = inner
        self.origin = origin
    }

    @discardableResult public func respond(_ response: HTTPResponse) -> Bool {
        var r = response
        r.headers.removeAll { $0.lowercased().hasPrefix("access-control-allow-") }
        r.headers.remove("Access-Control-Expose-Headers")
        if let origin {
            r.headers.add("Access-Control-Allow-Origin", origin)
            r.headers.add("Access-Control-Expose-Headers", MirrorgateHeader.origin)
            r.headers.add("Vary", "Origin")
        }
        return inner.respond(r)
    }

    public var isAbandoned: Bool { inner.isAbandoned }
}

/// Sets `X-Mirrorgate-Origin` on every response that passes (replacing any value it had).
public struct OriginResponder: Responder {
    let inner: any Responder
    let origin: String

    /// Decorates `inner` with `origin` (`remote` or `local`).
    public init(inner: any Responder, origin: String) {
        self.inner = inner
        self.origin = origin
    }

    @discardableResult public func respond(_ response: HTTPResponse) -> Bool {
        var r = response
        r.headers.set(MirrorgateHeader.origin, origin)
        return inner.respond(r)
    }

    public var isAbandoned: Bool { inner.isAbandoned }
}

/// Lets only the first of several racing answers through (a forwarded answer against a local fallback);
/// the others are dropped and their `respond` returns false.
public final class FirstWins: Responder, Sendable {
    private let inner: any Responder
    private let answered = Atomic<Bool>(false)

    /// Decorates `inner`.
    public init(_ inner: any Responder) { self.inner = inner }

    /// Whether an answer went through.
    public var isAnswered: Bool { answered.load(ordering: .acquiring) }

    @discardableResult public func respond(_ response: HTTPResponse) -> Bool {
        guard !answered.exchange(true, ordering: .acquiringAndReleasing) else { return false }
        return inner.respond(response)
    }

    /// True once an answer went through (the others are dropped) or the client is gone.
    public var isAbandoned: Bool { isAnswered || inner.isAbandoned }
}

/// Receives a response as a value instead of sending it: a whole body goes to `body`; a streamed one is
/// finished at once and `body` gets `streamRefusal` instead (a caller that needs the value cannot wait
/// for a stream of unknown length).
public final class CaptureResponder: Responder, Sendable {
    private let body: @Sendable (HTTPResponse) -> Void
    private let streamRefusal: HTTPResponse

    /// Creates a capture.
    public init(
        streamRefusal: HTTPResponse = HTTPResponse(status: 502),
        _ body: @escaping @Sendable (HTTPResponse) -> Void
    ) {
        self.body = body
        self.streamRefusal = streamRefusal
    }

    @discardableResult public func respond(_ response: HTTPResponse) -> Bool {
        if case .stream(let s) = response.body {
            s.finish()
            body(streamRefusal)
            return false
        }
        body(response)
        return true
    }
}

/// Keeps every response it is given, for tests: `wait(for:)` blocks (bounded) until the first arrives.
public final class RecordingResponder: Responder, @unchecked Sendable {
    private let lock = ConditionLock()
    private var received: [HTTPResponse] = []  // guarded by `lock`

    /// Creates an empty recorder.
    public init() {}

    @discardableResult public func respond(_ response: HTTPResponse) -> Bool {
        lock.withLock {
            received.append(response)
            lock.broadcast()
        }
        return true
    }

    /// Every response received so far, in order.
    public var responses: [HTTPResponse] { lock.withLock { received } }

    /// The first response, waiting at most `timeout` for it; nil when none came.
    public func wait(for timeout: Duration = .seconds(10)) -> HTTPResponse? {
        let deadline = timeout.fromNow
        return lock.withLock {
            lock.wait(until: { !received.isEmpty }, deadline: deadline)
            return received.first
        }
    }
}
