import Foundation
import HTTPCore
import JSONCore
import MirrorgateTesting
import Testing

@testable import ODataGateway
@testable import Upstream

/// Credentials at upload (issue 15 item 6): a 401/403 holds the writer's requests (and those depending on
/// them) instead of archiving them, until newer credentials of the writer are accepted.

private func basic(_ user: String, _ password: String) -> String {
    "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
}

private func makeService(dir: String? = nil) throws -> (ODataService, String) {
    try makeBootstrappedService(
        "odcred", metadata: ODataFixtures.offlineStoreV4,
        data: ["Customers": #"{"value":[{"CustomerID":"ALFKI","Name":"Alfreds"}]}"#], dir: dir)
}

private func write(
    _ service: ODataService, _ auth: String, _ method: String, _ target: String, _ body: String
) {
    let r = service.writer.response(
        to: HTTPRequest(
            method: method, target: "/odata/s/" + target,
            headers: ["Host": "gw", "Content-Type": "application/json", "Authorization": auth],
            body: Array(body.utf8)))
    #expect(r.status < 300, "\(bodyText(r))")
}

private func answer(_ status: Int) -> UpstreamResponse {
    UpstreamResponse(status: status, headers: [], body: Array(#"{"error":{"code":"E","message":"m"}}"#.utf8))
}

private func waiting(_ service: ODataService) throws -> [String?] {
    try service.mirror.pool.read { db in
        try db.query(#"SELECT waitingFor FROM "_mg_queue" ORDER BY id"#).map { $0[0].string }
    }
}

@Test func aRefusedWritersRequestsWaitForNewerCredentials() throws {
    let (service, dir) = try makeService()
    let alice = basic("alice", "expired")
    write(service, alice, "POST", "Customers", #"{"Name":"by alice"}"#)  // Customers('local-…')
    let created = try #require(try service.queue.first())
    write(service, basic("bob", "b"), "PATCH", "Customers('ALFKI')", #"{"Name":"by bob"}"#)
    write(service, alice, "PATCH", "Customers('ALFKI')", #"{"Name":"by alice too"}"#)
    write(
        service, basic("bob", "b"), "PATCH", "Customers\(created.localKey!)", #"{"Name":"bob edits alice's"}"#
    )

    // The upstream refuses alice's credentials: her requests wait, nothing is archived.
    let unit = service.uploader.singleUnit(created)
    #expect(service.uploader.credentialVerdict(unit, answer(401)) == .wait)
    #expect(service.queue.archivedCount() == 0)
    #expect(try waiting(service) == ["basic:alice", nil, "basic:alice", nil])
    // Bob's first request goes on; his edit of alice's new customer waits behind her.
    let next = try #require(try service.uploader.nextToSend())
    #expect(next.0.authorization == basic("bob", "b") && next.1 == nil)
    #expect(try service.uploader.waitIfBehindHold(next.0) == nil)
    let dependent = try #require(try service.queue.request(id: next.0.id + 2))
    #expect(try service.uploader.waitIfBehindHold(dependent) == 1)
    #expect(try waiting(service) == ["basic:alice", nil, "basic:alice", "basic:alice"])

    // Status, RequestQueue and a restart tell why.
    let status = service.status()
    #expect(status["waitingForCredentials"] == .int(3))
    #expect(status["credentialHolds"]?[0]?["status"] == .int(401))
    #expect(status["credentialHolds"]?[0]?["writer"] == .string("basic:alice"))
    let (reopened, _) = try makeService(dir: dir)
    #expect(reopened.queue.credentials.isHeld("basic:alice"))
    let request = HTTPRequest(method: "GET", target: "/odata/s/RequestQueue", headers: ["Host": "gw"])
    let listed = try JSON.parse(
        Array(
            bodyText(
                reopened.archive.response(
                    request, path: "RequestQueue", serviceRoot: "http://gw/", entityRoot: "http://gw/",
                    isService: false)
            ).utf8))
    let entries = listed["value"]?.arrayValue ?? []
    #expect(
        entries.map { $0["WaitingFor"] } == [
            .string("credentials"), .null, .string("credentials"), .string("credentials"),
        ])
    #expect(entries.first?["WaitingStatus"] == .int(401))
    #expect(
        !bodyText(
            reopened.archive.response(
                request, path: "RequestQueue", serviceRoot: "http://gw/", entityRoot: "http://gw/",
                isService: false)
        ).contains("expired"))

    // Newer credentials of alice (any request of hers) are tried on her oldest waiting request.
    let fresh = basic("alice", "renewed")
    write(service, fresh, "PATCH", "Customers('ALFKI')", #"{"Name":"alice again"}"#)
    #expect(try waiting(service).last == "basic:alice")
    let retry = try #require(try service.uploader.nextToSend())
    #expect(retry.0.id == created.id && retry.1?.authorization == fresh)
    // Refused too: the candidate is dropped, the requests keep waiting.
    let retryUnit = service.uploader.singleUnit(retry.0, credentials: retry.1)
    #expect(service.uploader.credentialVerdict(retryUnit, answer(403)) == .wait)
    #expect(service.queue.credentials.retryableHolds().isEmpty && service.queue.archivedCount() == 0)
    // The refused ones are not offered again; newer ones (from any request of hers, a read too) are, and
    // once accepted every request of alice takes them and everything waiting behind her is released.
    #expect(
        try !service.queue.credentials.offerCredentials(
            WriterCredentials(authorization: fresh), writer: "basic:alice"))
    let fresher = basic("alice", "renewed again")
    #expect(
        try service.queue.credentials.offerCredentials(
            WriterCredentials(authorization: fresher), writer: "basic:alice"))
    let again = try #require(try service.uploader.nextToSend())
    #expect(again.0.id == created.id && again.1?.authorization == fresher)
    let acceptedUnit = service.uploader.singleUnit(again.0, credentials: again.1)
    #expect(service.uploader.credentialVerdict(acceptedUnit, answer(201)) == .proceed)
    #expect(!service.queue.credentials.any)
    #expect(try waiting(service).allSatisfy { $0 == nil })
    let auths = try service.mirror.pool.read { db in
        try db.query(#"SELECT authorization FROM "_mg_queue" WHERE writer = 'basic:alice'"#).map {
            $0[0].string
        }
    }
    #expect(auths.count == 3 && auths.allSatisfy { $0 == fresher })
}

/// With `uploadCredentials: service` a 401 is an error like any other (the ErrorArchive), and a CSRF
/// refusal is not a credentials problem.
@Test func serviceCredentialsAreNotHeld() throws {
    let service = try makeBootstrappedService(
        "odcredsvc", metadata: ODataFixtures.offlineStoreV4,
        data: ["Customers": #"{"value":[{"CustomerID":"ALFKI","Name":"Alfreds"}]}"#]
    ) { $0.uploadCredentials = .service }.0
    write(service, basic("alice", "x"), "PATCH", "Customers('ALFKI')", #"{"Name":"n"}"#)
    let unit = service.uploader.singleUnit(try #require(try service.queue.first()))
    #expect(service.uploader.credentialVerdict(unit, answer(401)) == .proceed)
    #expect(!service.queue.credentials.any)
}
