import HTTPCore
import MirrorgateTesting
import Testing

@testable import ODataGateway
@testable import Upstream

private func makeService(v2: Bool = false) throws -> ODataService {
    try makeBootstrappedService(
        "odverdict", metadata: v2 ? ODataFixtures.customersOrdersV2 : ODataFixtures.customersOrdersV4,
        data: ["Customers": #"{"value":[{"CustomerID":"ALFKI","Name":"Alfreds"}]}"#]
    ).0
}

private func response(_ status: Int, _ headers: [(name: String, value: String)] = [], _ body: String = "")
    -> UpstreamResponse
{
    UpstreamResponse(
        status: status, headers: headers, body: Array(body.replacingOccurrences(of: "\n", with: "\r\n").utf8))
}

private func write(_ service: ODataService, _ method: String, _ target: String, _ body: String = "") {
    let r = service.writer.response(
        to: HTTPRequest(
            method: method, target: target, headers: ["Host": "gw", "Content-Type": "application/json"],
            body: Array(body.utf8)))
    #expect(r.status < 300)
}

/// What the one send-and-classify path reads from an upstream answer to a single request.
@Test func aSingleRequestsVerdict() throws {
    let service = try makeService()
    write(service, "POST", "/odata/s/Customers", #"{"CustomerID":"NEW","Name":"n"}"#)
    let create = try #require(try service.queue.first())
    let unit = service.uploader.singleUnit(create)
    #expect(unit.rows.count == 1 && unit.noun == "request" && unit.url == "Customers")
    #expect(unit.headers.contains { $0.name == "OData-Version" && $0.value == "4.0" })
    let created = unit.verdict(response(201, [("Location", "http://up/svc/Customers('NEW')")]))
    guard case .accepted(let answers) = created else {
        Issue.record("a 201 is accepted, not \(created)")
        return
    }
    #expect(answers.first?.location == "http://up/svc/Customers('NEW')")
    let failed = unit.verdict(response(500))
    guard case .rejected(500, _) = failed else {
        Issue.record("a 500 is rejected, not \(failed)")
        return
    }
}

/// A DELETE answered 404 failed the first time; re-sent after its answer was lost, the entity being gone is
/// its success.
@Test func aResentDeleteAnswered404IsUploaded() throws {
    let service = try makeService()
    write(service, "DELETE", "/odata/s/Customers('ALFKI')")
    var delete = try #require(try service.queue.first())
    let first = service.uploader.singleUnit(delete).verdict(response(404))
    guard case .rejected(404, _) = first else {
        Issue.record("a first DELETE answered 404 is rejected, not \(first)")
        return
    }
    delete.sentAt = "2026-01-01T00:00:00.000Z"
    let again = service.uploader.singleUnit(delete).verdict(response(404))
    guard case .accepted = again else {
        Issue.record("a re-sent DELETE answered 404 is accepted, not \(again)")
        return
    }
}

/// What the same path reads from the upstream's answer to a changeset: every part accepted (matched by
/// Content-ID), the first failing part's status, or an answer that does not describe the changeset.
@Test func aChangesetsVerdict() throws {
    let service = try makeService(v2: true)
    let answer = localBatch(service, twoPartChangeset())
    #expect(answer.status == 202)
    let first = try #require(try service.queue.first())
    let unit = service.uploader.changesetUnit(first, try #require(first.changeset))
    #expect(unit.rows.count == 2 && unit.noun == "changeset" && unit.url == "$batch")
    #expect(unit.headers.contains { $0.name == "DataServiceVersion" && $0.value == "2.0" })
    let type = [(name: "Content-Type", value: "multipart/mixed; boundary=r")]
    // Parts answered in another order than sent: matched by the Content-ID they echo.
    let accepted = unit.verdict(
        response(
            202, type,
            """
            --r
            Content-Type: multipart/mixed; boundary=cs

            --cs
            Content-Type: application/http
            Content-ID: 2

            HTTP/1.1 204 No Content


            --cs
            Content-Type: application/http
            Content-ID: 1

            HTTP/1.1 201 Created
            Location: http://up/svc/Customers('C1')

            {"d":{"CustomerID":"C1"}}
            --cs--
            --r--

            """))
    guard case .accepted(let answers) = accepted else {
        Issue.record("every part accepted is accepted, not \(accepted)")
        return
    }
    #expect(answers.map(\.request.method) == ["POST", "PATCH"])
    #expect(answers.first?.location == "http://up/svc/Customers('C1')")
    let partFailed = unit.verdict(
        response(
            202, type,
            """
            --r
            Content-Type: application/http

            HTTP/1.1 412 Precondition Failed

            {"error":{"code":"E","message":{"lang":"en","value":"no"}}}
            --r--

            """))
    guard case .rejected(412, _) = partFailed else {
        Issue.record("a failing part's status is the verdict, not \(partFailed)")
        return
    }
    guard case .unclear = unit.verdict(response(200, [], "{}")) else {
        Issue.record("a 2xx that describes no changeset leaves the outcome unknown")
        return
    }
    guard case .rejected(503, _) = unit.verdict(response(503)) else {
        Issue.record("a 503 is the verdict")
        return
    }
}

/// The one place for version headers: V4 always 4.0; V2 2.0 for payloads, 1.0 for errors and empty
/// answers; uploads and downloads name theirs.
@Test func versionHeadersFollowOneRule() {
    for kind in [ODataVersionHeaders.Payload.data, .empty, .error] {
        #expect(ODataVersionHeaders.response(.v4, for: kind)["OData-Version"] == "4.0")
        #expect(ODataVersionHeaders.response(.v4, for: kind)["DataServiceVersion"] == nil)
    }
    #expect(ODataVersionHeaders.response(.v2, for: .data)["DataServiceVersion"] == "2.0")
    #expect(ODataVersionHeaders.response(.v2, for: .empty)["DataServiceVersion"] == "1.0")
    #expect(ODataVersionHeaders.response(.v2, for: .error)["DataServiceVersion"] == "1.0")
    #expect(
        ODataServiceError(404, "NotFound", "x", version: .v2).response().headers["DataServiceVersion"]
            == "1.0")
    #expect(
        ODataVersionHeaders.upload(.v4, batch: false).map(\.name) == ["OData-Version", "OData-MaxVersion"])
    #expect(ODataVersionHeaders.upload(.v2, batch: true).map(\.value) == ["2.0"])
    #expect(ODataVersionHeaders.upload(.v2, batch: false).isEmpty)
    #expect(
        ODataVersionHeaders.download(configured: nil, accept: "application/json").map(\.name) == [
            "OData-MaxVersion"
        ])
    #expect(ODataVersionHeaders.download(configured: .v2, accept: "application/json").isEmpty)
    #expect(ODataVersionHeaders.download(configured: .v4, accept: "application/xml").isEmpty)
}
