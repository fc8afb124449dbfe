import GatewaySupport
import HTTPCore
import Testing

@testable import ODataGateway

/// The gateway root comes from the client's `Host` only when that is a plain authority (issue 19: the
/// `Host` was copied into `@odata.context` unchecked).
@Test func theGatewayRootTakesOnlyAPlainHost() {
    let mount = ODataMount("/odata/s/")
    func root(_ host: String?) -> String {
        var headers = HTTPHeaders()
        if let host { headers.set("Host", host) }
        return mount.gatewayRoot(for: HTTPRequest(method: "GET", target: "/odata/s/", headers: headers))
    }
    #expect(root("gw") == "http://gw/odata/s/")
    #expect(root("127.0.0.1:8080") == "http://127.0.0.1:8080/odata/s/")
    #expect(root("[::1]:8080") == "http://[::1]:8080/odata/s/")
    #expect(root("mirror.example.com") == "http://mirror.example.com/odata/s/")
    for bad in [
        "evil'host", "x%22y", "a\"b", "a/b", "a@b", "host:", "host:99999", "host:8o", "-lead.example",
        "a..b", "[::1", "[zz::1]", "", "a b", "host:80:81",
    ] {
        #expect(root(bad) == "http://127.0.0.1/odata/s/", "\(bad)")
    }
    #expect(root(nil) == "http://127.0.0.1/odata/s/")
}

@Test func aForwardedWritesBudgetEndsAtItsDeadline() {
    let later = Duration.seconds(2).fromNow
    let left = ODataRouter.remaining(until: later)
    #expect(left != nil && left! <= .seconds(2) && left! > .zero)
    #expect(ODataRouter.remaining(until: monotonicNanos()) == nil)
    #expect(ODataRouter.remaining(until: 0) == nil)
}
