import Foundation
import GatewayConfig
import GatewaySupport
import HTTPCore
import Logging
import MirrorgateTesting
import Storage
import Testing
import Upstream

@testable import ODataGateway

/// A service whose upstream never answers (port 9), mirrored from bootstrap files.
private func makeService(dir: String? = nil, repeatable: RepeatabilitySupport = .auto) throws -> (
    ODataService, String
) {
    try makeBootstrappedService(
        "odwrite", metadata: ODataFixtures.productsNotesV4,
        data: [
            "Products": #"{"value":[{"ID":1,"Name":"Chai","Price":18.5},{"ID":2,"Name":"Chang","Price":19}]}"#
        ],
        dir: dir
    ) { $0.upstreamSupportsRepeatability = repeatable }
}

private func write(_ service: ODataService, _ method: String, _ target: String, _ body: String = "")
    -> HTTPResponse
{
    service.writer.response(
        to: HTTPRequest(
            method: method, target: target,
            headers: ["Host": "gw", "Content-Type": "application/json", "Authorization": "Basic dTpw"],
            body: Array(body.utf8)))
}

private func text(_ r: HTTPResponse) -> String { bodyText(r) }

private func get(_ service: ODataService, _ target: String) -> (Int, String) { localGET(service, target) }

@Test func localWritesApplyToTheMirrorAndQueueInOrder() throws {
    let (service, _) = try makeService()
    let created = write(service, "POST", "/odata/s/Products", #"{"Name":"Tea","Price":3.5}"#)
    #expect(created.status == 201)
    #expect(created.headers["Location"] == "http://gw/odata/s/Products(-1)")
    #expect(text(created).contains(#""ID":-1"#))
    let second = write(service, "POST", "/odata/s/Products", #"{"Name":"Coffee"}"#)
    #expect(second.headers["Location"] == "http://gw/odata/s/Products(-2)")
    let note = write(service, "POST", "/odata/s/Notes", #"{"Text":"hello"}"#)
    #expect(note.status == 201)
    #expect(note.headers["Location"]?.contains("Notes('local-") == true)
    #expect(write(service, "PATCH", "/odata/s/Products(2)", #"{"Price":25}"#).status == 204)
    #expect(write(service, "DELETE", "/odata/s/Products(1)").status == 204)
    #expect(write(service, "DELETE", "/odata/s/Products(99)").status == 404)
    #expect(write(service, "POST", "/odata/s/Products", "not json").status == 400)

    #expect(get(service, "/odata/s/Products(-1)").1.contains(#""Name":"Tea""#))
    #expect(get(service, "/odata/s/Products?$filter=Price%20gt%2020").1.contains(#""Name":"Chang""#))
    #expect(get(service, "/odata/s/Products(1)").0 == 404)
    #expect(get(service, "/odata/s/Products/$count").1 == "3")

    #expect(service.queue.count == 5)
    #expect(service.queue.holds("Products") && service.queue.holds("Notes"))
    let first = try #require(try service.queue.first())
    #expect(first.method == "POST" && first.url == "Products" && first.localKey == "(-1)")
    #expect(first.authorization == "Basic dTpw")
    #expect(!first.requestID.isEmpty && first.firstSent.hasSuffix(" GMT"))
    // Rows the client cannot see: they stay queued until a 2xx removes them.
    let rows = try service.mirror.pool.read { db in
        try db.query(#"SELECT method, url, ifMatch FROM "_mg_queue" ORDER BY id"#)
    }
    #expect(rows.map { $0[0].string ?? "" } == ["POST", "POST", "POST", "PATCH", "DELETE"])
    #expect(rows[3][2].string == "*")  // no ETag in the mirror, none from the client
}

@Test func theQueueSurvivesReopeningTheFile() throws {
    let (service, dir) = try makeService()
    _ = write(service, "POST", "/odata/s/Products", #"{"Name":"Tea"}"#)
    _ = write(service, "PATCH", "/odata/s/Products(-1)", #"{"Name":"Green tea"}"#)
    let (reopened, _) = try makeService(dir: dir)
    #expect(reopened.queue.count == 2)
    #expect(get(reopened, "/odata/s/Products(-1)").1.contains("Green tea"))
    // Minted keys are never reused.
    #expect(
        write(reopened, "POST", "/odata/s/Products", #"{"Name":"x"}"#).headers["Location"]?.hasSuffix("(-2)")
            == true)
}

@Test func anUploadedCreateReplacesItsLocalKeyEverywhere() throws {
    let (service, _) = try makeService()
    _ = write(service, "POST", "/odata/s/Products", #"{"Name":"Tea"}"#)
    _ = write(service, "PATCH", "/odata/s/Products(-1)", #"{"Name":"Green tea"}"#)
    let create = try #require(try service.queue.first())
    service.uploader.finish(
        [(create, Array(#"{"ID":42,"Name":"Tea","Price":null}"#.utf8), "http://up/svc/Products(42)")],
        what: "an uploaded request")
    #expect(service.queue.count == 1)
    let patch = try #require(try service.queue.first())
    #expect(patch.url == "Products(42)")
    #expect(get(service, "/odata/s/Products(42)").0 == 200)
    #expect(get(service, "/odata/s/Products(-1)").0 == 404)
    // The old local URL keeps resolving through the key map.
    let old = HTTPRequest(
        method: "GET", target: "/odata/s/Products(-1)/Name?$format=json", headers: ["Host": "gw"])
    #expect(
        service.router.resolvingUploadedLocalKey(old)?.target == "/odata/s/Products(42)/Name?$format=json")
    let pending = HTTPRequest(method: "GET", target: "/odata/s/Products(-7)", headers: ["Host": "gw"])
    #expect(service.router.resolvingUploadedLocalKey(pending) == nil)
}

@Test func rejectedRequestsGoToTheErrorArchive() throws {
    let (service, _) = try makeService()
    _ = write(service, "DELETE", "/odata/s/Products(2)")
    let request = try #require(try service.queue.first())
    service.uploader.archive([request], status: 400, code: "BAD", message: "no", body: "{}", what: "request")
    #expect(service.queue.count == 0)
    #expect(service.queue.archivedCount() == 1)
    let entry = try #require(service.queue.archived().first)
    #expect(entry["HTTPStatusCode"] == "400" && entry["RequestMethod"] == "DELETE")
    #expect(entry["RequestURL"] == "Products(2)" && entry["Code"] == "BAD")
    #expect(
        ODataUploader.errorDetails(Array(#"{"error":{"code":"C","message":{"value":"m"}}}"#.utf8)) == (
            "C", "m"
        ))
}

@Test func uploadAgainstAnUnreachableUpstreamKeepsTheQueue() throws {
    let (service, _) = try makeService()
    _ = write(service, "POST", "/odata/s/Products", #"{"Name":"Tea"}"#)
    let stats = service.uploader.runUpload()
    #expect(stats.interrupted && stats.uploaded == 0)
    #expect(service.queue.count == 1)
}

@Test func aSentRequestWithAnUnknownOutcomeIsHeldInDoubtNotResent() throws {
    let (service, dir) = try makeService()
    _ = write(service, "POST", "/odata/s/Products", #"{"Name":"Tea"}"#)
    _ = write(service, "DELETE", "/odata/s/Products(2)")
    // As if the gateway had been killed after sending the POST.
    try service.queue.markSent(try #require(try service.queue.first()), true)
    let stats = service.uploader.runUpload()
    #expect(stats.inDoubt == 1)
    #expect(stats.interrupted)  // the DELETE (idempotent) waits for the upstream
    #expect(service.queue.count == 1 && service.queue.inDoubtCount() == 1)
    #expect(service.queue.archived().first?["Code"] == "MG_IN_DOUBT")
    // Refused: known not sent, so the DELETE is not marked as sent.
    #expect(try service.queue.first()?.sentAt == nil)

    // With an upstream known to support repeatable requests, the same request is re-sent instead.
    let (other, _) = try makeService(repeatable: .yes)
    _ = write(other, "POST", "/odata/s/Products", #"{"Name":"Tea"}"#)
    try other.queue.markSent(try #require(try other.queue.first()), true)
    let again = other.uploader.runUpload()
    #expect(again.inDoubt == 0 && again.interrupted && other.queue.count == 1)
    _ = dir
}

/// Regression: the changeset upload counted any repeatability result, SAP's `unsupported` included, as
/// support, so a changeset whose answer was lost afterwards was re-sent (and applied twice).
@Test func anUnsupportedRepeatabilityResultTeachesNothing() throws {
    #expect(!ODataUploader.showsRepeatabilitySupport(nil))
    #expect(!ODataUploader.showsRepeatabilitySupport("Unsupported"))
    #expect(ODataUploader.showsRepeatabilitySupport("accepted"))
    let (service, _) = try makeService()
    #expect(!service.uploader.mayResendInDoubt())
    _ = write(service, "POST", "/odata/s/Products", #"{"Name":"Tea"}"#)
    // As if the gateway had sent a changeset and lost its answer after seeing `unsupported` answers.
    try service.queue.markSent(try #require(try service.queue.first()), true)
    let queued = try #require(try service.queue.first())
    #expect(service.uploader.send(service.uploader.changesetUnit(queued, "cs")) == .inDoubt)
    #expect(service.queue.inDoubtCount() == 1)
    let (learned, _) = try makeService(repeatable: .yes)
    #expect(learned.uploader.mayResendInDoubt())
}

@Test func aDownloadNeverOverwritesQueuedLocalChanges() throws {
    let (service, _) = try makeService()
    #expect(write(service, "PATCH", "/odata/s/Products(2)", #"{"Name":"Local"}"#).status == 204)
    let rows: [String: [MirrorEntity]] = [
        "Products": [
            MirrorEntity(properties: [("ID", .number("1")), ("Name", .string("Server 1"))], etag: nil),
            MirrorEntity(properties: [("ID", .number("2")), ("Name", .string("Server"))], etag: nil),
        ]
    ]
    try service.mirror.replace(
        request: "products", query: "Products", rows: rows, pending: try service.downloader.pendingChanges())
    #expect(get(service, "/odata/s/Products(2)").1.contains(#""Name":"Local""#))
    #expect(get(service, "/odata/s/Products(1)").1.contains(#""Name":"Server 1""#))
}

@Test func ifMatchIsCheckedAgainstTheMirrorAndLocalVersionsGetMintedETags() throws {
    let (service, _) = try makeService()
    try service.mirror.pool.write { db in
        try db.run(#"UPDATE "Products" SET "_etag" = 'W/"v1"' WHERE "ID" = 1"#)
    }
    func patch(_ key: Int, _ ifMatch: String?) -> HTTPResponse {
        var headers: HTTPHeaders = ["Host": "gw", "Content-Type": "application/json"]
        if let ifMatch { headers.set("If-Match", ifMatch) }
        return service.writer.response(
            to:
                HTTPRequest(
                    method: "PATCH", target: "/odata/s/Products(\(key))", headers: headers,
                    body: Array(#"{"Price":20}"#.utf8)))
    }
    #expect(patch(1, #"W/"v0""#).status == 412)
    #expect(service.queue.count == 0)
    let applied = patch(1, #"W/"v0", W/"v1""#)
    #expect(applied.status == 204)
    let minted = try #require(applied.headers["ETag"])
    #expect(minted.hasPrefix(#"W/"mg-"#))
    #expect(patch(1, #"W/"v1""#).status == 412)  // that version is gone
    #expect(patch(1, minted).status == 204)
    #expect(patch(1, "*").status == 204)
    #expect(patch(1, nil).status == 204)
    // Uploads carry the client's server ETag; one minted by the gateway never goes upstream.
    let sent = try service.mirror.pool.read { db in
        try db.query(#"SELECT ifMatch FROM "_mg_queue" ORDER BY id"#).map { $0[0].string }
    }
    #expect(sent == [#"W/"v0", W/"v1""#, "*", "*", "*"])
    // A create in a set that carries ETags answers with a minted one.
    let created = write(service, "POST", "/odata/s/Products", #"{"Name":"Kombu","Price":6}"#)
    #expect(created.status == 201)
    #expect(created.headers["ETag"]?.hasPrefix(#"W/"mg-"#) == true)
    #expect(text(created).contains(#""@odata.etag":"W/\"mg-"#))
    // An entity the mirror has no ETag for: If-Match cannot be checked, and no ETag is minted.
    let plain = patch(2, #"W/"whatever""#)
    #expect(plain.status == 204)
    #expect(plain.headers["ETag"] == nil)
}
