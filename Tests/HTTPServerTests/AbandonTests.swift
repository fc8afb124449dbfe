import Foundation
import GatewaySupport
import HTTPCore
import Synchronization
import Testing

@testable import HTTPServer

/// `Responder.isAbandoned` on the server's own responder: false while the client waits for its answer,
/// true once the client has closed its connection (a suspended connection is peeked), or once the
/// request was answered.
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

    @Test func aClientThatClosesItsConnectionAbandonsItsRequest() throws {
        let held = Held()
        let server = try startServer { _, res in held.responder.withLock { $0 = res } }
        defer { server.shutdown(grace: .milliseconds(200)) }
        let fd = try send("GET /work HTTP/1.1\r\nHost: x\r\n\r\n", to: server.port)
        let responder = try #require(held.wait(), "the handler never got the request")
        #expect(!responder.isAbandoned, "the client still waits")
        close(fd)
        var gone = false
        for _ in 0..<500 where !gone {
            gone = responder.isAbandoned
            if !gone { usleep(10_000) }
        }
        #expect(gone, "the closed connection was not noticed within 5 s")
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
