import HTTPCore
import JSONCore
import MirrorgateTesting
import Testing

@testable import ODataGateway

/// Bounds of the OData parsers added with the fuzz targets (Tests/Fuzz), and inputs the fuzzers found.
@Suite struct ODataGatewayFuzzRegressionTests {
    func jsonBatch(_ count: Int) -> [UInt8] {
        let one = #"{"id":"r","method":"GET","url":"Customers"}"#
        return Array(
            (#"{"requests":["# + Array(repeating: one, count: count).joined(separator: ",") + "]}").utf8)
    }

    func multipartBatch(singles: Int, changesetMembers: Int) -> [UInt8] {
        var body = ""
        for _ in 0..<singles {
            body += "--b\r\nContent-Type: application/http\r\n\r\nGET Customers HTTP/1.1\r\n\r\n\r\n"
        }
        if changesetMembers > 0 {
            body += "--b\r\nContent-Type: multipart/mixed; boundary=cs\r\n\r\n"
            for _ in 0..<changesetMembers {
                body += "--cs\r\nContent-Type: application/http\r\n\r\nDELETE Orders(1) HTTP/1.1\r\n\r\n\r\n"
            }
            body += "--cs--\r\n"
        }
        return Array((body + "--b--\r\n").utf8)
    }

    @Test func aBatchOfMoreThanTheLimitOfRequestsIsMalformed() throws {
        let limit = ODataBatchCodec.maxRequests
        #expect(try ODataBatchCodec.json(jsonBatch(limit)).count == limit)
        #expect(throws: ODataBatchCodec.Failure.self) { try ODataBatchCodec.json(jsonBatch(limit + 1)) }

        let type = "multipart/mixed; boundary=b"
        #expect(
            try ODataBatchCodec.multipart(
                multipartBatch(singles: limit, changesetMembers: 0), contentType: type
            ).count == limit)
        #expect(throws: ODataBatchCodec.Failure.self) {
            try ODataBatchCodec.multipart(
                multipartBatch(singles: limit + 1, changesetMembers: 0), contentType: type)
        }
        // Changeset members count as requests.
        let split = try ODataBatchCodec.multipart(
            multipartBatch(singles: limit / 2, changesetMembers: limit / 2), contentType: type)
        #expect(split.count == limit / 2 + 1)
        #expect(throws: ODataBatchCodec.Failure.self) {
            try ODataBatchCodec.multipart(
                multipartBatch(singles: limit / 2, changesetMembers: limit / 2 + 1), contentType: type)
        }
    }

    @Test func anOversizedBatchIsA400InODataFormat() throws {
        let (service, _) = try makeBootstrappedService(
            "odfuzz", metadata: ODataFixtures.customersOrdersV4,
            data: [
                "Customers": #"{"value":[{"CustomerID":"ALFKI","Name":"Alfreds"}]}"#,
                "Orders": #"{"value":[]}"#,
            ])
        let response = service.writer.batchResponse(
            to: HTTPRequest(
                method: "POST", target: "/odata/s/$batch",
                headers: ["Host": "gw", "Content-Type": "application/json"],
                body: jsonBatch(ODataBatchCodec.maxRequests + 1)))
        #expect(response.status == 400)
        let error = try JSON.parse(bodyText(response))["error"]
        #expect(error?["code"]?.stringValue == "BadRequest")
        #expect(error?["message"]?.stringValue?.contains("at most 1000 requests") == true)
    }
}
