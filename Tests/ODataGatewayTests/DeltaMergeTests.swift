import Foundation
import HTTPCore
import JSONCore
import MirrorgateTesting
import Storage
import Testing

@testable import ODataGateway

/// The merge rules of downloads (issue 16 item 5): a delta's changes and tombstones apply to the mirror
/// except where a local change waits in the queue (it wins until uploaded: never hidden, a locally deleted
/// entity never resurrected); a full read keeps the same entities; the delta link is stored with the rows
/// and survives reopening the file; an entity uploaded while the download ran makes the next read a full one.
@Suite struct DeltaMergeTests {
    private func service() throws -> (ODataService, String) {
        try makeBootstrappedService(
            "oddelta", metadata: ODataFixtures.productsNotesV4,
            data: [
                "Products":
                    #"{"value":[{"ID":1,"Name":"Chai"},{"ID":2,"Name":"Chang"},{"ID":3,"Name":"Syrup"}]}"#
            ])
    }

    private func write(_ service: ODataService, _ method: String, _ target: String, _ body: String = "")
        -> Int
    {
        service.writer.response(
            to: HTTPRequest(
                method: method, target: target, headers: ["Host": "gw", "Content-Type": "application/json"],
                body: Array(body.utf8))
        ).status
    }

    private func product(_ id: Int, _ name: String) -> MirrorEntity {
        MirrorEntity(properties: [("ID", .number(String(id))), ("Name", .string(name))], etag: nil)
    }

    /// The name of `Products(id)` in the mirror, nil when it is not there.
    private func name(_ service: ODataService, _ id: Int) throws -> String? {
        let (status, body) = localGET(service, "/odata/s/Products(\(id))")
        if status == 404 { return nil }
        #expect(status == 200, "\(body)")
        return try RawJSON.parse(Array(body.utf8))["Name"]?.string
    }

    /// A first full read of the `products` defining request (rows 1–3 from the server) with delta link `T1`.
    private func fullRead(_ service: ODataService) throws {
        try service.mirror.replace(
            request: "products", query: "Products",
            rows: ["Products": [product(1, "Chai"), product(2, "Chang"), product(3, "Syrup")]],
            pending: try service.downloader.pendingChanges(), deltaLink: "Products?$deltatoken=T1")
    }

    @Test func pendingLocalChangesWinOverADelta() throws {
        let (s, _) = try service()
        try fullRead(s)
        #expect(s.mirror.deltaLink(request: "products", query: "Products") == "Products?$deltatoken=T1")
        #expect(write(s, "PATCH", "/odata/s/Products(2)", #"{"Name":"Local"}"#) == 204)
        #expect(write(s, "DELETE", "/odata/s/Products(3)") == 204)
        let changed = ["Products": [product(2, "Server"), product(3, "Server"), product(4, "New")]]
        let removed = [MirrorRemoval(set: "Products", entity: "Products(1)")]
        for round in 1...2 {  // the same delta twice: nothing more changes
            let o = try s.mirror.applyDelta(
                request: "products", query: "Products", changed: changed, removed: removed,
                pending: try s.downloader.pendingChanges(), deltaLink: "Products?$deltatoken=T2")
            #expect(o.changed == 1 && o.keptLocal == 2 && o.deltaLinkKept, "round \(round)")
            #expect(o.removed == (round == 1 ? 1 : 0))
            #expect(try name(s, 1) == nil)
            #expect(try name(s, 2) == "Local")  // the pending update is not hidden
            #expect(try name(s, 3) == nil)  // the pending delete is not undone
            #expect(try name(s, 4) == "New")
        }
        #expect(s.mirror.deltaLink(request: "products", query: "Products") == "Products?$deltatoken=T2")
        #expect(s.queue.count == 2)
    }

    @Test func aFullReadKeepsPendingLocalChanges() throws {
        let (s, _) = try service()
        try fullRead(s)
        #expect(write(s, "PATCH", "/odata/s/Products(2)", #"{"Name":"Local"}"#) == 204)
        #expect(write(s, "DELETE", "/odata/s/Products(3)") == 204)
        #expect(write(s, "POST", "/odata/s/Products", #"{"ID":9,"Name":"Created"}"#) == 201)
        let o = try s.mirror.replaceCounting(
            request: "products", query: "Products",
            rows: ["Products": [product(1, "Server 1"), product(2, "Server"), product(3, "Server")]],
            pending: try s.downloader.pendingChanges(), deltaLink: "Products?$deltatoken=T3")
        #expect(o.changed == 1 && o.keptLocal == 2 && o.deltaLinkKept)
        #expect(try name(s, 1) == "Server 1")
        #expect(try name(s, 2) == "Local")
        #expect(try name(s, 3) == nil)
        #expect(try name(s, 9) == "Created")  // written through the gateway, still queued
    }

    @Test func withNothingQueuedTheServerVersionWins() throws {
        let (s, _) = try service()
        try fullRead(s)
        let o = try s.mirror.applyDelta(
            request: "products", query: "Products", changed: ["Products": [product(2, "Server")]],
            removed: [MirrorRemoval(set: "Products", entity: "Products(3)")],
            pending: try s.downloader.pendingChanges(), deltaLink: "Products?$deltatoken=T2")
        #expect(o.changed == 1 && o.removed == 1 && o.keptLocal == 0)
        #expect(try name(s, 2) == "Server")
        #expect(try name(s, 3) == nil)
    }

    @Test func anUploadDuringTheDownloadStoresNothing() throws {
        let (s, _) = try service()
        try fullRead(s)
        // Products(2)'s request left the queue while the download ran: the downloaded rows may predate the
        // upload, so nothing is stored (the downloader reads the request again).
        let settled: (Database) throws -> MirrorPendingChanges = { _ in
            MirrorPendingChanges(
                queued: false, entities: ["Products|ID=integer(2)"], settled: ["Products|ID=integer(2)"])
        }
        let name2 = ODataMirror.canonicalName(s.mirror.model!, set: "Products", product(2, "x").properties)
        #expect(name2 == "Products|ID=integer(2)")
        #expect(throws: MirrorDownloadRaced.self) {
            try s.mirror.applyDelta(
                request: "products", query: "Products",
                changed: ["Products": [product(1, "Server")]], removed: [], pending: settled,
                deltaLink: "Products?$deltatoken=T2")
        }
        #expect(throws: MirrorDownloadRaced.self) {
            try s.mirror.replace(
                request: "products", query: "Products", rows: ["Products": [product(1, "Server")]],
                pending: settled, deltaLink: "Products?$deltatoken=T2")
        }
        #expect(s.mirror.deltaLink(request: "products", query: "Products") == "Products?$deltatoken=T1")
        #expect(try name(s, 1) == "Chai")
    }

    @Test func theDeltaLinkSurvivesReopeningAndBelongsToItsQuery() throws {
        let (s, dir) = try service()
        try fullRead(s)
        let reopened = try ODataMirror(path: dir + "/mirror.sqlite")
        #expect(reopened.deltaLink(request: "products", query: "Products") == "Products?$deltatoken=T1")
        #expect(reopened.deltaLink(request: "products", query: "Products?$filter=ID gt 1") == nil)
    }

    @Test func deltaEntriesAreRecognised() {
        #expect(ODataDownloader.entityText("http://h/svc/Products(3)", set: "Products") == "Products(3)")
        #expect(ODataDownloader.entityText("Products('a(b)')", set: "Products") == "Products('a(b)')")
        #expect(ODataDownloader.entityText("http://h/svc/OtherProducts(3)", set: "Products") == nil)
        func json(_ text: String) -> RawJSON { (try? RawJSON.parse(Array(text.utf8))) ?? .null }
        #expect(
            ODataDownloader.isRemoval(
                json(#"{"@removed":{"reason":"deleted"},"@id":"Products(1)"}"#), context: ""))
        #expect(
            ODataDownloader.isRemoval(
                json(#"{"id":"Products(1)"}"#), context: "$metadata#Products/$deletedEntity"))
        #expect(
            ODataDownloader.isRemoval(
                json(#"{"__metadata":{"uri":"Products(1)","deleted":true}}"#), context: ""))
        #expect(!ODataDownloader.isRemoval(json(#"{"ID":1,"Name":"x"}"#), context: ""))
        #expect(ODataDownloader.tracksChanges("Products?$filter=ID gt 1"))
        #expect(!ODataDownloader.tracksChanges("Customers?$expand=Orders"))
        #expect(
            ODataDownloader.deltaLink(in: json(#"{"d":{"results":[],"__delta":"A?!deltatoken='D1'"}}"#))
                == "A?!deltatoken='D1'")
    }
}
