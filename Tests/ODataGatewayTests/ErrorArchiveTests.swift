import Foundation
import GatewayConfig
import GatewaySupport
import HTTPCore
import JSONCore
import Logging
import MirrorgateTesting
import ODataCore
import Storage
import Testing
import Upstream

@testable import ODataGateway

/// A service whose upstream never answers (port 9), mirrored from bootstrap files.
private func makeService(ifMatch: UploadIfMatch = .mirror, individual: Bool = false) throws -> ODataService {
    try makeBootstrappedService(
        "odarchive", metadata: ODataFixtures.productsV4,
        data: ["Products": #"{"value":[{"ID":1,"Name":"Chai"},{"ID":2,"Name":"Chang"}]}"#],
        timeout: .seconds(1)
    ) { settings in
        settings.uploadIfMatch = ifMatch
        settings.enableIndividualErrorArchiveDeletion = individual
    }.0
}

private func write(_ service: ODataService, _ method: String, _ target: String, _ body: String = "") {
    _ = service.writer.response(
        to: HTTPRequest(
            method: method, target: target, headers: ["Host": "gw", "Content-Type": "application/json"],
            body: Array(body.utf8)))
}

private func archiveGET(_ service: ODataService, _ target: String, method: String = "GET") -> (Int, JSON?) {
    let request = HTTPRequest(method: method, target: target, headers: ["Host": "gw"])
    let path = String(request.path.dropFirst("/odata/s/".count))
    let r = service.archive.response(
        request, path: path, serviceRoot: "http://gw/odata/s/", entityRoot: "http://gw/odata/s/",
        isService: false)
    guard case .bytes(let b) = r.body else { return (r.status, nil) }
    return (r.status, try? JSON.parse(b))
}

/// Archives the oldest queued request as rejected by the upstream with `status`.
private func reject(_ service: ODataService, status: Int = 412) throws -> String {
    let request = try #require(try service.queue.first())
    service.uploader.archive(
        [request], status: status, code: "C", message: "rejected", body: nil, what: "request")
    return request.requestID
}

@Test func theArchiveMetadataParsesInBothVersions() throws {
    for version in [ODataVersion.v4, .v2] {
        let model = try ODataArchiveSets.model(version)
        #expect(model.version == version)
        let archive = try #require(model.entitySet(named: "ErrorArchive"))
        #expect(model.key(of: archive.entityType) == ["RequestID"])
        let names = model.properties(of: archive.entityType).map(\.name)
        for sap in [
            "RequestID", "CustomTag", "HTTPStatusCode", "Code", "Message", "InnerError", "Domain",
            "RequestMethod", "RequestURL", "RequestBody",
        ] {
            #expect(names.contains(sap))
        }
        #expect(model.entitySet(named: "RequestQueue") != nil)
        #expect(model.entitySet(named: "EventLog") != nil)
    }
    #expect(ODataArchiveSets.metadata(.v2).contains("m:DataServiceVersion=\"2.0\""))
}

@Test func archiveEntitiesSerializeInTheServiceVersion() {
    let row: [String: SQLValue] = [
        "RequestID": .text("a'b"), "HTTPStatusCode": .integer(412), "RequestMethod": .text("PATCH"),
        "AffectedEntity": .text("Products(2)"),
    ]
    let v4 = ODataArchiveSets.entity(
        set: "ErrorArchive", row: row, select: nil, version: .v4, serviceRoot: "http://gw/a/",
        entityRoot: "http://gw/odata/s/")
    #expect(v4["HTTPStatusCode"] == .int(412))
    #expect(v4["Code"] == .null)
    #expect(v4["AffectedEntity@odata.navigationLink"]?.stringValue == "http://gw/odata/s/Products(2)")
    let v2 = ODataArchiveSets.entity(
        set: "ErrorArchive", row: row, select: ["RequestID"], version: .v2, serviceRoot: "http://gw/a/",
        entityRoot: "http://gw/odata/s/")
    #expect(v2["__metadata"]?["uri"]?.stringValue == "http://gw/a/ErrorArchive('a''b')")
    #expect(v2["HTTPStatusCode"] == nil && v2["RequestID"]?.stringValue == "a'b")
    let queued = ODataArchiveSets.entity(
        set: "RequestQueue", row: ["RequestID": .text("x"), "ID": .integer(7), "Held": .integer(1)],
        select: nil,
        version: .v2, serviceRoot: "http://gw/a/", entityRoot: "http://gw/odata/s/")
    #expect(queued["ID"]?.stringValue == "7" && queued["Held"] == .bool(true))
    let event = ODataArchiveSets.entity(
        set: "EventLog", row: ["ID": .integer(3), "Type": .text("Upload")], select: nil, version: .v2,
        serviceRoot: "http://gw/a/", entityRoot: "http://gw/odata/s/")
    #expect(event["__metadata"]?["uri"]?.stringValue == "http://gw/a/EventLog(3L)")
}

@Test func laterRequestsForAnArchivedEntityAreHeldOthersNot() throws {
    let service = try makeService()
    write(service, "PATCH", "/odata/s/Products(2)", #"{"Name":"A"}"#)
    write(service, "PATCH", "/odata/s/Products(ID=2)", #"{"Name":"B"}"#)
    write(service, "PATCH", "/odata/s/Products(1)", #"{"Name":"C"}"#)
    let id = try reject(service)
    let second = try #require(try service.queue.first())
    #expect(second.affectedEntity(model: service.mirror.model) == "Products(ID=2)")
    #expect(try service.uploader.holdIfBlocked(second))
    let third = try #require(try service.queue.first())
    #expect(third.url == "Products(1)")
    #expect(try !service.uploader.holdIfBlocked(third))
    #expect(service.queue.heldCount() == 1 && service.queue.count == 2)
    let (status, doc) = archiveGET(service, "/odata/s/RequestQueue?$filter=Held eq true")
    #expect(status == 200)
    #expect(doc?["value"]?[0]?["HeldBy"]?.stringValue == id)
    #expect(doc?["value"]?.arrayValue?.count == 1)

    // Revert: the archive entry and the held request go; the unrelated one stays queued.
    let revert = try #require(try service.revertErrorArchive(id))
    #expect(revert.archived == 1 && revert.held == 1)
    #expect(service.queue.count == 1 && service.queue.heldCount() == 0 && service.queue.archivedCount() == 0)
    #expect(try service.queue.first()?.url == "Products(1)")
    #expect(try service.revertErrorArchive(id) == nil)
    let (_, log) = archiveGET(service, "/odata/s/EventLog")
    #expect(log?["value"]?[0]?["Type"]?.stringValue == "ErrorArchiveDeletion")
    #expect(archiveGET(service, "/odata/s/EventLog(1)").1?["Type"]?.stringValue == "ErrorArchiveDeletion")
    #expect(archiveGET(service, "/odata/s/EventLog(2)").0 == 404)
}

/// Regression: a revert removed only the requests of a queued changeset that changed an archived entity,
/// and the rest of the changeset was uploaded on its own.
@Test func revertingRemovesAChangesetWhole() throws {
    let service = try makeService()
    write(service, "PATCH", "/odata/s/Products(2)", #"{"Name":"A"}"#)
    write(service, "PATCH", "/odata/s/Products(1)", #"{"Name":"Alone"}"#)
    let batch = #"""
        {"requests":[
          {"id":"1","atomicityGroup":"g","method":"PATCH","url":"Products(1)",
           "headers":{"content-type":"application/json"},"body":{"Name":"X"}},
          {"id":"2","atomicityGroup":"g","method":"PATCH","url":"Products(2)",
           "headers":{"content-type":"application/json"},"body":{"Name":"Y"}}]}
        """#
    let answer = service.writer.batchResponse(
        to: HTTPRequest(
            method: "POST", target: "/odata/s/$batch",
            headers: ["Host": "gw", "Content-Type": "application/json"], body: Array(batch.utf8)))
    #expect(answer.status == 200)
    #expect(service.queue.count == 4)
    let id = try reject(service)
    let revert = try #require(try service.revertErrorArchive(id))
    #expect(revert.held == 2)
    #expect(service.queue.count == 1)
    let left = try #require(try service.queue.first())
    #expect(left.changeset == nil && left.url == "Products(1)")
}

@Test func revertingARejectedLocalCreateRemovesItFromTheMirror() throws {
    let service = try makeService()
    write(service, "POST", "/odata/s/Products", #"{"Name":"Tea"}"#)
    write(service, "PATCH", "/odata/s/Products(-1)", #"{"Name":"Green Tea"}"#)
    let id = try reject(service, status: 400)
    let next = try #require(try service.queue.first())
    #expect(try service.uploader.holdIfBlocked(next))
    #expect(service.mirror.rowCounts()["Products"] == 3)
    let revert = try #require(try service.revertErrorArchive(id))
    #expect(revert.entities == ["Products(-1)"])
    #expect(service.mirror.rowCounts()["Products"] == 2)
    #expect(service.queue.count == 0)
}

@Test func archiveReadsHonourQueryOptionsAndRejectBadInput() throws {
    let service = try makeService()
    write(service, "PATCH", "/odata/s/Products(1)", #"{"Name":"A"}"#)
    write(service, "PATCH", "/odata/s/Products(2)", #"{"Name":"B"}"#)
    _ = try reject(service, status: 412)
    _ = try reject(service, status: 400)
    #expect(archiveGET(service, "/odata/s/ErrorArchive").1?["value"]?.arrayValue?.count == 2)
    let filtered = archiveGET(service, "/odata/s/ErrorArchive?$filter=HTTPStatusCode%20eq%20400&$count=true")
        .1
    #expect(filtered?["@odata.count"] == .int(1))
    #expect(filtered?["value"]?[0]?["RequestURL"]?.stringValue == "Products(2)")
    let ordered = archiveGET(service, "/odata/s/ErrorArchive?$orderby=HTTPStatusCode%20desc&$top=1&$skip=0").1
    #expect(ordered?["value"]?[0]?["HTTPStatusCode"] == .int(412))
    #expect(archiveGET(service, "/odata/s/ErrorArchive?$filter=Nope%20eq%201").0 == 400)
    #expect(archiveGET(service, "/odata/s/ErrorArchive?$filter='").0 == 400)
    #expect(archiveGET(service, "/odata/s/ErrorArchive('missing')").0 == 404)
    #expect(archiveGET(service, "/odata/s/ErrorArchive('missing')", method: "DELETE").0 == 404)
    #expect(archiveGET(service, "/odata/s/ErrorArchive", method: "POST").0 == 405)
    #expect(archiveGET(service, "/odata/s/RequestQueue(1)").0 == 404)
}

@Test func uploadIfMatchChoosesWhatAWriteWithoutOneGets() throws {
    #expect(try makeService(ifMatch: .mirror).writer.uploadIfMatch(mirrorETag: "W/\"1\"") == "W/\"1\"")
    #expect(try makeService(ifMatch: .mirror).writer.uploadIfMatch(mirrorETag: nil) == "*")
    #expect(try makeService(ifMatch: .star).writer.uploadIfMatch(mirrorETag: "W/\"1\"") == "*")
    #expect(try makeService(ifMatch: .omit).writer.uploadIfMatch(mirrorETag: "W/\"1\"") == nil)
}

@Test func individualDeletionRevertsOnlyThatEntryAndItsDependents() throws {
    for individual in [true, false] {
        let service = try makeService(individual: individual)
        write(service, "PATCH", "/odata/s/Products(1)", #"{"Name":"A"}"#)
        write(service, "PATCH", "/odata/s/Products(2)", #"{"Name":"B"}"#)
        write(service, "PATCH", "/odata/s/Products(1)", #"{"Name":"A2"}"#)
        write(service, "PATCH", "/odata/s/Products(2)", #"{"Name":"B2"}"#)
        let first = try reject(service)
        _ = try reject(service)
        for _ in 0..<2 {
            #expect(try service.uploader.holdIfBlocked(try #require(try service.queue.first())))
        }
        #expect(service.queue.heldCount() == 2 && service.queue.archivedCount() == 2)
        let revert = try #require(try service.revertErrorArchive(first))
        if individual {
            #expect(revert.archived == 1 && revert.held == 1 && revert.entities == ["Products(1)"])
            #expect(service.queue.archivedCount() == 1 && service.queue.heldCount() == 1)
        } else {
            #expect(revert.archived == 2 && revert.held == 2)
            #expect(service.queue.archivedCount() == 0 && service.queue.count == 0)
        }
    }
}
