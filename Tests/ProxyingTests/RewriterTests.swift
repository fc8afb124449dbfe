import GatewaySupport
import HTTPCore
import Testing

@testable import Proxying

@Suite struct RewriterTests {
    let up = "http://127.0.0.1:9000/svc/"
    let gw = "http://127.0.0.1:8080/odata/demo/"

    @Test func wholeBodyReplacesEveryOccurrence() {
        let r = Rewriter([(up, gw)])
        let body =
            #"{"@odata.context":"http://127.0.0.1:9000/svc/$metadata#X","a":"http://127.0.0.1:9000/svc/X(1)"}"#
        let out = String(decoding: r.apply(Array(body.utf8)), as: UTF8.self)
        #expect(
            out
                == #"{"@odata.context":"http://127.0.0.1:8080/odata/demo/$metadata#X","a":"http://127.0.0.1:8080/odata/demo/X(1)"}"#
        )
    }

    @Test func streamedPiecesGiveTheSameResultAsWholeBody() {
        let body = Array(
            String(
                repeating: "xx http://127.0.0.1:9000/svc/E(1) yy http:\\/\\/127.0.0.1:9000\\/svc\\/ ",
                count: 50
            ).utf8)
        let rules = [
            (up, gw),
            (up.replacingOccurrences(of: "/", with: "\\/"), gw.replacingOccurrences(of: "/", with: "\\/")),
        ]
        let whole = Rewriter(rules).apply(body)
        for size in [1, 2, 3, 7, 16, 29, 64, 1000] {
            var r = Rewriter(rules)
            var out: [UInt8] = []
            var i = 0
            while i < body.count {
                out += r.feed(Array(body[i..<min(body.count, i + size)]))
                i += size
            }
            out += r.flush()
            #expect(out == whole, "piece size \(size)")
        }
        #expect(!String(decoding: whole, as: UTF8.self).contains("9000"))
    }

    @Test func hopByHopFieldsAreDropped() {
        var h = HTTPHeaders()
        h.add("Connection", "keep-alive, X-Secret-Hop")
        h.add("X-Secret-Hop", "1")
        h.add("Host", "127.0.0.1:8080")
        h.add("X-Algolia-API-Key", "k")
        h.add("Transfer-Encoding", "chunked")
        h.add("Content-Length", "3")
        let out = HopByHop.requestHeaders(h)
        #expect(out.map(\.name) == ["X-Algolia-API-Key"])
    }
}
