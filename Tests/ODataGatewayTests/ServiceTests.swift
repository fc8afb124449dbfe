import Foundation
import GatewaySupport
import HTTPCore
import Logging
import MirrorgateTesting
import Testing
import Upstream

@testable import ODataGateway

private func makeService() throws -> ODataService {
    try makeBootstrappedService(
        "odsvc", metadata: ODataFixtures.ordersItemsWithFunctionV2,
        data: [
            "Orders":
                #"{"d":{"results":[{"__metadata":{"uri":"x","etag":"W/\"1\""},"ID":"0500000001","Amount":"631.890","Created":"/Date(1754611200000)/","Items":{"results":[{"OrderID":"0500000001","Pos":10},{"OrderID":"0500000001","Pos":20}]}}]}}"#
        ]
    ).0
}

private func get(_ service: ODataService, _ target: String, headers: HTTPHeaders = ["Host": "gw"]) -> (
    Int, String
) {
    localGET(service, target, headers: headers)
}

@Test func v2ServiceAnswersLocally() throws {
    let service = try makeService()
    #expect(service.version == .v2)
    let (status, body) = get(service, "/odata/s/Orders?$expand=Items&$inlinecount=allpages")
    #expect(status == 200)
    #expect(body.contains(#""Amount":"631.890""#))
    #expect(body.contains(#""Created":"/Date(1754611200000)/""#))
    #expect(body.contains(#""etag":"W/\"1\"""#))
    #expect(
        body.contains(
            #""Items":{"results":[{"__metadata":{"id":"http://gw/odata/s/Items(OrderID='0500000001',Pos=10)""#
        ))
    #expect(body.contains(#""__count":"1""#))
    let (_, filtered) = get(service, "/odata/s/Orders?$filter=Created%20eq%20datetime'2025-08-08T00:00:00'")
    #expect(filtered.contains("0500000001"))
    let (_, keyed) = get(service, "/odata/s/Items(OrderID='0500000001',Pos=20)")
    #expect(keyed.hasPrefix(#"{"d":{"__metadata""#))
    let (navCount, count) = get(service, "/odata/s/Orders('0500000001')/Items/$count")
    #expect(navCount == 200 && count == "2")
}

@Test func functionImportsAndErrorsOffline() throws {
    let service = try makeService()
    let (status, body) = get(service, "/odata/s/Confirm?ID='1'")
    #expect(status == 503)
    #expect(body.contains(#""message":{"lang":"en","value":"#))
    let (bad, err) = get(service, "/odata/s/Orders?$filter=Amount%20gt")
    #expect(bad == 400 && err.contains(#""error":{"code""#))
    let (unknown, _) = get(service, "/odata/s/Nope")
    #expect(unknown == 400 || unknown == 404)
}

@Test func readOnlyBatchIsAnsweredLocally() throws {
    let service = try makeService()
    let body = Array(
        ("--b\r\nContent-Type: application/http\r\n\r\nGET Orders('0500000001') HTTP/1.1\r\nAccept: application/json\r\n\r\n\r\n"
            + "--b\r\nContent-Type: multipart/mixed; boundary=c\r\n\r\n--c\r\n\r\nPOST Orders HTTP/1.1\r\n\r\n{}\r\n--c--\r\n--b--\r\n")
            .utf8)
    let withChange = service.writer.batchResponse(
        to: HTTPRequest(
            method: "POST", target: "/odata/s/$batch",
            headers: ["Host": "gw", "Content-Type": "multipart/mixed; boundary=b"], body: body))
    #expect(withChange.status == 202)  // the changeset is applied and queued (BatchWriteTests)
    #expect(service.queue.count == 1)
    let readOnly = Array(
        "--b\r\nContent-Type: application/http\r\n\r\nGET Orders/$count HTTP/1.1\r\n\r\n\r\n--b--\r\n".utf8)
    let r = service.writer.batchResponse(
        to: HTTPRequest(
            method: "POST", target: "/odata/s/$batch",
            headers: ["Host": "gw", "Content-Type": "multipart/mixed; boundary=b"], body: readOnly))
    #expect(r.status == 202)
    guard case .bytes(let b) = r.body else { return }
    #expect(String(decoding: b, as: UTF8.self).contains("HTTP/1.1 200 OK"))
}

@Suite struct ODataErrorTests {
    @Test func anODataErrorRendersItselfInItsVersionsFormat() {
        let v4: any GatewayError = ODataServiceError(404, "NotFound", "no such entity", version: .v4)
        let v2: any GatewayError = ODataServiceError(404, "NotFound", "no such entity", version: .v2)
        #expect(v4.response().headers["OData-Version"] == "4.0")
        #expect(v2.response().headers["DataServiceVersion"] == "1.0")
        guard case .bytes(let b4) = v4.response().body, case .bytes(let b2) = v2.response().body else {
            Issue.record("expected fixed bodies")
            return
        }
        #expect(
            String(decoding: b4, as: UTF8.self)
                == #"{"error":{"code":"NotFound","message":"no such entity"}}"#)
        #expect(
            String(decoding: b2, as: UTF8.self)
                == #"{"error":{"code":"NotFound","message":{"lang":"en","value":"no such entity"}}}"#)
    }
}
