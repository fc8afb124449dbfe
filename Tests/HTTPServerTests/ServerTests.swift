import Foundation
import GatewaySupport
import HTTPCore
import Testing
import Upstream

@testable import HTTPServer

/// A handler whose behaviour each test chooses; the body may block (it runs on a worker pool, as a
/// service's blocking work would).
struct ClosureHandler: HTTPHandler {
    static let pool = WorkerPool(threads: 8, name: "test-handler")
    let body: @Sendable (HTTPRequest, any Responder) -> Void
    func handle(_ request: HTTPRequest, _ responder: any Responder) {
        Self.pool.submit { body(request, responder) }
    }
}

func startServer(
    maxBody: Int = 1 << 20, timeout: Duration = .seconds(5),
    _ body: @escaping @Sendable (HTTPRequest, any Responder) -> Void
) throws -> Server {
    try Server(
        configuration: ServerConfiguration(
            host: "127.0.0.1", port: 0, maxBodySize: maxBody, requestTimeout: timeout),
        handler: ClosureHandler(body: body),
        errors: { status, message, _ in .json(status, #"{"message":"\#(message)","status":\#(status)}"#) })
}

let client = UpstreamClient()

@Suite(.serialized) struct ServerTests {
    @Test func echoesRawTargetHeadersAndBody() throws {
        let server = try startServer { req, res in
            var h = HTTPHeaders()
            h.add("X-Method", req.method)
            h.add("X-Target", req.target)
            h.add("X-Key", req.headers["x-algolia-api-key"] ?? "-")
            res.respond(HTTPResponse(status: 201, headers: h, body: .bytes(req.body)))
        }
        defer { server.shutdown(grace: .seconds(1)) }
        let r = try client.perform(
            UpstreamRequest(
                method: "POST", url: "http://127.0.0.1:\(server.port)/1/indexes/a%2Fb/query?x=%20y+z",
                headers: [("X-Algolia-API-Key", "secret"), ("Content-Type", "application/json")],
                body: Array(#"{"query":"é"}"#.utf8)))
        #expect(r.status == 201)
        #expect(r.header("X-Method") == "POST")
        #expect(r.header("X-Target") == "/1/indexes/a%2Fb/query?x=%20y+z")
        #expect(r.header("X-Key") == "secret")
        #expect(String(decoding: r.body, as: UTF8.self) == #"{"query":"é"}"#)
    }

    @Test func streamsChunksWrittenOverTime() throws {
        let server = try startServer { _, res in
            let stream = ResponseStream(timeout: .seconds(5))
            res.respond(
                HTTPResponse(
                    status: 200, headers: ["Content-Type": "application/x-ndjson"], body: .stream(stream)))
            for i in 0..<3 {
                usleep(50_000)
                stream.write(Array("{\"n\":\(i)}\n".utf8))
            }
            stream.finish()
        }
        defer { server.shutdown(grace: .seconds(1)) }
        let r = try client.perform(UpstreamRequest(method: "GET", url: "http://127.0.0.1:\(server.port)/s"))
        #expect(r.status == 200)
        #expect(String(decoding: r.body, as: UTF8.self) == "{\"n\":0}\n{\"n\":1}\n{\"n\":2}\n")
        #expect(r.header("Transfer-Encoding")?.lowercased() == "chunked")
    }

    @Test func rejectsOversizedBodyByContentLength() throws {
        let server = try startServer(maxBody: 1000) { _, res in res.respond(.text(200, "ok")) }
        defer { server.shutdown(grace: .seconds(1)) }
        let r = try client.perform(
            UpstreamRequest(
                method: "POST", url: "http://127.0.0.1:\(server.port)/x",
                body: [UInt8](repeating: 65, count: 5000)))
        #expect(r.status == 413)
        let ok = try client.perform(
            UpstreamRequest(
                method: "POST", url: "http://127.0.0.1:\(server.port)/x",
                body: [UInt8](repeating: 65, count: 1000)))
        #expect(ok.status == 200)
    }

    @Test func answersWhenTheHandlerNeverDoes() throws {
        let server = try startServer(timeout: .seconds(1)) { _, _ in }
        defer { server.shutdown(grace: .milliseconds(100)) }
        let r = try client.perform(
            UpstreamRequest(method: "GET", url: "http://127.0.0.1:\(server.port)/hang", timeout: .seconds(5)))
        #expect(r.status == 504)
    }

    @Test func shutdownLetsInFlightRequestsFinish() throws {
        let server = try startServer { _, res in
            usleep(300_000)
            res.respond(.text(200, "done"))
        }
        let port = server.port
        let box = ResultBox()
        let t = Thread {
            box.set(try? client.perform(UpstreamRequest(method: "GET", url: "http://127.0.0.1:\(port)/slow")))
        }
        t.start()
        usleep(100_000)
        server.shutdown(grace: .seconds(2))
        var waited = 0
        while box.get() == nil && waited < 50 {
            usleep(20_000)
            waited += 1
        }
        #expect(box.get()?.status == 200)
        #expect(server.activeRequests == 0)
    }
}

final class ResultBox: @unchecked Sendable {
    private let lock = NSLock()
    private var value: UpstreamResponse?
    func set(_ v: UpstreamResponse?) { lock.withLock { value = v } }
    func get() -> UpstreamResponse? { lock.withLock { value } }
}

@Suite struct RequestPathTests {
    @Test func dotSegmentsAreRefusedInEveryDisguise() {
        for path in [
            "/odata/S/../../private", "/odata/S/Customers/../../..", "/1/indexes/../../x", "/a/./b",
            "/odata/S/%2e%2E/x", "/odata/S/.%2e/x", "/odata/S/..%2F..%2Fprivate", "/odata/S/..%5c..%5cx",
            "/a/..\\..\\x", "/a/..",
        ] {
            #expect(RequestPath.refusal(Substring(path)) != nil, "\(path)")
        }
    }

    @Test func dotsInsideSegmentsAreOrdinaryText() {
        for path in [
            "/odata/S/Products('..')", "/1/indexes/a..b/query", "/odata/S/v1.2/x", "/", "/a//b", "/a/...b",
        ] {
            #expect(RequestPath.refusal(Substring(path)) == nil, "\(path)")
        }
    }
}
