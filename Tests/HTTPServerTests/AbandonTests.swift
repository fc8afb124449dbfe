import Foundation
import GatewaySupport
import HTTPCore
import Synchronization
import Testing

@testable import HTTPServer

/// `Responder.isAbandoned` on the server's own responder: false while the client waits for its answer
/// (also after a half-close), true once the connection was reset (a suspended connection is polled), or
/// once the request was answered.
@Suite(.serialized) struct AbandonTests {
    /// Keeps the responder of the request being handled.
    final class Held: Sendable {
        let responder = Mutex<(any Responder)?>(nil)
        func wait() -> (any Responder)? {
            for _ in 0..<500 {
                if let r = responder.withLock({ $0 }) { return r }
                usleep(10_000)
            }
            return nil
        }
    }

    /// Reads `fd` until the server closes it or 5 s pass.
    func readAll(_ fd: Int32) -> String {
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        for _ in 0..<1000 {
            let n = read(fd, &buffer, buffer.count)
            if n <= 0 { break }
            out += buffer[..<n]
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// A connected loopback TCP socket to `port`, with `text` sent on it.
    func send(_ text: String, to port: UInt16) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(fd >= 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        try #require(connected == 0)
        let bytes = Array(text.utf8)
        try #require(write(fd, bytes, bytes.count) == bytes.count)
        return fd
    }

    @Test func aClientThatResetsItsConnectionAbandonsItsRequest() throws {
        let held = Held()
        let server = try startServer(timeout: .seconds(30)) { _, res in held.responder.withLock { $0 = res } }
        defer { server.shutdown(grace: .milliseconds(200)) }
        let fd = try send("GET /work HTTP/1.1\r\nHost: x\r\n\r\n", to: server.port)
        let responder = try #require(held.wait(), "the handler never got the request")
        #expect(!responder.isAbandoned, "the client still waits")
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)  // close with a reset
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
        close(fd)
        var gone = false
        for _ in 0..<500 where !gone {
            gone = responder.isAbandoned
            if !gone { usleep(10_000) }
        }
        #expect(gone, "the reset connection was not noticed within 5 s")
    }

    /// Issue 23: a client that half-closes after its request (`shutdown(SHUT_WR)`) still reads: its
    /// request is not abandoned, and the answer reaches it.
    @Test func aHalfClosedClientStillGetsItsAnswer() throws {
        let held = Held()
        let server = try startServer(timeout: .seconds(30)) { _, res in held.responder.withLock { $0 = res } }
        defer { server.shutdown(grace: .milliseconds(200)) }
        let fd = try send("GET /work HTTP/1.1\r\nHost: x\r\n\r\n", to: server.port)
        defer { close(fd) }
        shutdown(fd, Int32(SHUT_WR))
        let responder = try #require(held.wait(), "the handler never got the request")
        for _ in 0..<50 {
            #expect(!responder.isAbandoned, "a half-closed client still waits")
            usleep(10_000)
        }
        #expect(responder.respond(.text(200, "answer")))
        let got = readAll(fd)
        #expect(got.hasPrefix("HTTP/1.1 200") && got.hasSuffix("answer"), "\(got)")
    }

    /// Issue 23: what libmicrohttpd refuses itself (an invalid Content-Length, an HTTP version other than
    /// 1.x, a header line without a colon) is answered once, by the error factory, never with its page.
    @Test func libmicrohttpdsOwnRefusalsAreAnsweredOnceByTheErrorFactory() throws {
        let server = try startServer { _, res in res.respond(.text(200, "served")) }
        defer { server.shutdown(grace: .milliseconds(200)) }
        for (request, status) in [
            ("POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n", 400),
            ("POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n", 413),
            ("GET /x HTTP/2.0\r\nHost: x\r\n\r\n", 505),
            ("GET /x HTTP/1.1\r\nHost: x\r\nno colon\r\n\r\n", 400),
        ] {
            let fd = try send(request, to: server.port)
            let got = readAll(fd)
            close(fd)
            #expect(got.hasPrefix("HTTP/1.1 \(status) "), "\(request): \(got)")
            #expect(got.components(separatedBy: "HTTP/1.1 ").count == 2, "one answer: \(got)")
            #expect(got.hasSuffix(#""status":\#(status)}"#) && !got.contains("<html"), "\(got)")
        }
    }

    /// Issue 23: requests that filled libmicrohttpd's per-connection pool got no answer (many query
    /// arguments: held until the deadline; a head just under the pool's size: closed at once). Each now
    /// gets exactly one answer: served within `maxHeadSize`, 414/431 beyond it or beyond
    /// `maxQueryArguments`.
    @Test func headsNearAndBeyondTheLimitsGetExactlyOneAnswer() throws {
        let server = try startServer { _, res in res.respond(.text(200, "served")) }
        defer { server.shutdown(grace: .milliseconds(200)) }
        let limit = ServerConfiguration().maxHeadSize
        func padded(_ total: Int, line: Bool) -> String {
            let start = line ? "GET /x?p=" : "GET /x"
            let rest =
                line
                ? " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                : " HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Pad: \r\n\r\n"
            let pad = String(repeating: "a", count: total - start.utf8.count - rest.utf8.count)
            return line
                ? start + pad + rest : start + rest.replacingOccurrences(of: "X-Pad: ", with: "X-Pad: " + pad)
        }
        let arguments = (0..<600).map { "a\($0)=1" }.joined(separator: "&")
        let fields = (0..<3000).map { "X-H\($0): v\r\n" }.joined()
        var cases: [(String, String, Int)] = [
            ("600 query arguments", "GET /x?\(arguments) HTTP/1.1\r\nHost: x\r\n\r\n", 414),
            ("3000 fields", "GET /x HTTP/1.1\r\nHost: x\r\n\(fields)\r\n", 431),
        ]
        // (Heads near or past the pool's size are in the end-to-end tests: the server may answer and shut the
        // socket before such a head is written, which fails the write.)
        for total in [limit - 100, limit, limit + 512, 40_960, 65_536] {
            let status = total > limit ? 431 : 200
            cases.append(("field, \(total) bytes", padded(total, line: false), status))
            cases.append(("line, \(total) bytes", padded(total, line: true), total > limit ? 414 : 200))
        }
        for (name, request, status) in cases {
            let fd = try send(request, to: server.port)
            let got = readAll(fd)
            close(fd)
            let statuses = [414, 431, 200]
            let answered = statuses.filter { got.hasPrefix("HTTP/1.1 \($0) ") }
            #expect(
                answered == [status] || (status != 200 && !answered.isEmpty && answered != [200]),
                "\(name): \(got.prefix(200))")
            #expect(
                got.components(separatedBy: "HTTP/1.1 ").count == 2, "\(name): one answer: \(got.prefix(300))"
            )
            #expect(!got.contains("<html"), "\(name): \(got.prefix(300))")
        }
    }

    @Test func anAnsweredRequestIsNoLongerAwaited() throws {
        let held = Held()
        let server = try startServer { _, res in held.responder.withLock { $0 = res } }
        defer { server.shutdown(grace: .milliseconds(200)) }
        let fd = try send("GET /work HTTP/1.1\r\nHost: x\r\n\r\n", to: server.port)
        defer { close(fd) }
        let responder = try #require(held.wait())
        #expect(responder.respond(.text(200, "ok")))
        #expect(responder.isAbandoned)
    }
}
