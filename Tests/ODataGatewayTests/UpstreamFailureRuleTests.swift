import Testing

@testable import ODataGateway

/// Issue 24: which upstream answers the mirror may replace (failures) and which are the service's own
/// final answers (relayed).
@Test func onlyFailuresOfTheUpstreamAreAnsweredByTheMirror() {
    func failure(_ status: Int, _ body: String) -> Bool {
        ODataForwarder.isUpstreamFailure(status: status, headers: [], body: Array(body.utf8))
    }
    let v4Error = #"{"error":{"code":"X","message":"broken"}}"#
    let v2Error = #"{"error":{"code":"X","message":{"lang":"en","value":"broken"}}}"#
    let xmlError =
        #"<?xml version="1.0"?><m:error xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata">"#
        + "<m:code>X</m:code><m:message>broken</m:message></m:error>"
    for status in [429, 502, 503, 504] { #expect(failure(status, v4Error), "\(status)") }
    #expect(failure(500, "<html><body>Internal Server Error</body></html>"))
    #expect(failure(500, ""))
    #expect(failure(500, #"{"error":"text only"}"#))
    #expect(failure(500, #"{"error":{"code":"X","message":"cut"#))
    for body in [v4Error, v2Error, xmlError] { #expect(!failure(500, body), "\(body)") }
    for status in [200, 201, 304, 400, 401, 403, 404, 412, 501, 505] {
        #expect(!failure(status, "<html>proxy</html>"), "\(status)")
    }
}
