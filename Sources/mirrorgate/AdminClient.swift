import Foundation
import GatewayConfig
import GatewaySupport
import JSONCore
import Synchronization
import Upstream

/// A runtime failure of a client command (exit code 1); the message is printed as is.
struct CommandFailure: Error, CustomStringConvertible {
    let description: String
}

/// Calls the running gateway's admin API (`/_mirrorgate/…`) at the configured listen address, with the
/// admin token when one is configured, over the blocking libcurl client.
struct AdminClient: Sendable {
    /// `http://HOST:PORT` of the gateway.
    let base: String
    let token: String?
    let client: UpstreamClient

    init(configuration: MirrorgateConfiguration) {
        var host = configuration.server.listen.host
        if host == "0.0.0.0" || host.isEmpty { host = "127.0.0.1" }
        if host == "::" { host = "::1" }
        if host.contains(":") { host = "[\(host)]" }
        base = "http://\(host):\(configuration.server.listen.port)"
        token = configuration.admin.token
        client = UpstreamClient(maxIdleHandles: 8)
    }

    private var headers: [(name: String, value: String)] {
        var h: [(name: String, value: String)] = [("Accept", "application/json")]
        if let token { h.append(("Authorization", "Bearer \(token)")) }
        return h
    }

    /// One call; network failures become a clear ``CommandFailure``. Returns the status and the body.
    func call(_ method: String, _ path: String, body: JSON? = nil, timeout: Duration = .seconds(30))
        throws(CommandFailure) -> (status: Int, body: [UInt8])
    {
        var h = headers
        if body != nil { h.append(("Content-Type", "application/json")) }
        let request = UpstreamRequest(
            method: method, url: base + path, headers: h, body: body?.serializedBytes() ?? [],
            connectTimeout: .seconds(2), timeout: timeout)
        let response: UpstreamResponse
        do {
            response = try client.perform(request)
        } catch {
            throw failure(error)
        }
        if response.status == 401 {
            throw CommandFailure(
                description:
                    "the gateway at \(base) refused the admin token (401): check admin.token in the configuration"
            )
        }
        return (response.status, response.body)
    }

    /// A JSON call that must answer 2xx.
    func json(_ method: String, _ path: String, body: JSON? = nil, timeout: Duration = .seconds(30))
        throws(CommandFailure) -> JSON
    {
        let (status, bytes) = try call(method, path, body: body, timeout: timeout)
        let parsed = try? JSON.parse(bytes)
        guard (200..<300).contains(status), let parsed else {
            throw CommandFailure(description: "\(method) \(path): \(status) \(Self.message(bytes))")
        }
        return parsed
    }

    /// The `message` of an error body, else the body's text.
    static func message(_ bytes: [UInt8]) -> String {
        if let json = try? JSON.parse(bytes), let m = json["message"]?.stringValue { return m }
        return String(decoding: bytes.prefix(300), as: UTF8.self)
    }

    func failure(_ error: UpstreamError) -> CommandFailure {
        switch error.kind {
        case .refused:
            return CommandFailure(
                description:
                    "the gateway is not running at \(base) (connection refused); start it with `mirrorgate serve`"
            )
        case .timeout where !error.connected:
            return CommandFailure(description: "the gateway at \(base) does not answer (connect timed out)")
        default:
            return CommandFailure(description: "cannot reach the gateway at \(base): \(error)")
        }
    }

    /// Follows `GET /_mirrorgate/events` on a background thread: `ready` is signalled once subscribed
    /// (or when the stream failed), then each event is passed to `onEvent`.
    func followEvents(ready: DispatchSemaphore, log: EventLog) {
        let request = UpstreamRequest(
            method: "GET", url: base + "/_mirrorgate/events", headers: headers, connectTimeout: .seconds(2),
            timeout: .seconds(7 * 86400))
        let thread = Thread {
            var buffer: [UInt8] = []
            var signalled = false
            do throws(UpstreamError) {
                try client.stream(
                    request,
                    onHead: { status, _ in
                        if status != 200 {
                            log.fail(
                                CommandFailure(description: "GET /_mirrorgate/events answered \(status)"))
                        }
                        return status == 200
                    },
                    onData: { bytes in
                        buffer += bytes
                        if !signalled {
                            signalled = true
                            ready.signal()
                        }
                        while let end = Self.eventEnd(buffer) {
                            let block = String(decoding: buffer[..<end.start], as: UTF8.self)
                            buffer.removeSubrange(..<end.end)
                            var name = "message"
                            var data = ""
                            for line in block.split(separator: "\n", omittingEmptySubsequences: true) {
                                if line.hasPrefix("event:") {
                                    name = line.dropFirst(6).trimmingCharacters(in: .whitespaces)
                                } else if line.hasPrefix("data:") {
                                    data += line.dropFirst(5).trimmingCharacters(in: .whitespaces)
                                }
                            }
                            if !data.isEmpty, let json = try? JSON.parse(Array(data.utf8)) {
                                log.append(name, json)
                            }
                        }
                        return true
                    })
            } catch {
                log.fail(self.failure(error))
            }
            if !signalled { ready.signal() }
        }
        thread.name = "mg-cli-events"
        thread.start()
    }

    /// Where the first complete event block ends (`\n\n`).
    static func eventEnd(_ buffer: [UInt8]) -> (start: Int, end: Int)? {
        guard buffer.count >= 2 else { return nil }
        for i in 0..<(buffer.count - 1) where buffer[i] == 10 && buffer[i + 1] == 10 {
            return (i, i + 2)
        }
        return nil
    }
}

/// Events seen, in arrival order (filled by the events thread), and why the stream ended if it did.
final class EventLog: @unchecked Sendable {
    private let lock = ConditionLock()
    private var entries: [(String, JSON)] = []  // guarded by `lock`
    private var failure: CommandFailure?  // guarded by `lock`

    func fail(_ error: CommandFailure) {
        lock.withLock {
            if failure == nil { failure = error }
            lock.broadcast()
        }
    }

    /// Why the stream failed, if it did.
    var failed: CommandFailure? { lock.withLock { failure } }

    func append(_ name: String, _ data: JSON) {
        lock.withLock {
            entries.append((name, data))
            lock.broadcast()
        }
    }

    /// Takes everything seen since the last call, waiting at most `timeout` for something to arrive (or
    /// for the stream to fail).
    func drain(waitingAtMost timeout: Duration = .zero) -> [(String, JSON)] {
        let deadline = timeout.fromNow
        return lock.withLock {
            lock.wait(until: { !entries.isEmpty || failure != nil }, deadline: deadline)
            let out = entries
            entries.removeAll()
            return out
        }
    }
}
