import Foundation
import HTTPCore
import JSONCore
import MirrorgateTesting
import Testing

@testable import ODataGateway

/// The seed's examples (`OfflineODataParameters`, seed `002_…`) run through the offline writer and the
/// queue preparation of a service, checking the queue the upload then sends.

private func makeService(
    optimize: Bool = false, undo: Bool = false, transactions: Bool = false,
    metadata: String = ODataFixtures.offlineStoreV4
) throws -> ODataService {
    var data = ["Customers": #"{"value":[{"CustomerID":"ALFKI","Name":"Alfreds"}]}"#]
    if metadata == ODataFixtures.offlineStoreV4 {
        data["CPUs"] = #"{"value":[{"ID":101,"Model":"x86","MotherboardID":null}]}"#
    }
    return try makeBootstrappedService("odplan", metadata: metadata, data: data) { s in
        s.enableRequestQueueOptimization = optimize
        s.enableUndoLocalCreation = undo
        s.enableTransactionBuilder = transactions
    }.0
}

@discardableResult
private func write(
    _ service: ODataService, _ method: String, _ target: String, _ body: String = "",
    headers extra: [(String, String)] = []
) -> HTTPResponse {
    var headers: HTTPHeaders = ["Host": "gw", "Content-Type": "application/json"]
    for (k, v) in extra { headers.set(k, v) }
    let r = service.writer.response(
        to: HTTPRequest(
            method: method, target: "/odata/s/" + target, headers: headers, body: Array(body.utf8)))
    #expect(r.status < 300, "\(method) \(target): \(bodyText(r))")
    return r
}

/// A V4 JSON `$batch` of one changeset (atomicity group) with `parts` as `(method, url, body)`.
private func changeset(_ service: ODataService, _ parts: [(String, String, String)]) {
    let requests = parts.enumerated().map { i, p in
        #"{"id":"\#(i + 1)","atomicityGroup":"g","method":"\#(p.0)","url":"\#(p.1)","headers":{"Content-Type":"application/json"},"body":\#(p.2)}"#
    }
    let body = #"{"requests":["# + requests.joined(separator: ",") + "]}"
    let r = service.writer.batchResponse(
        to: HTTPRequest(
            method: "POST", target: "/odata/s/$batch",
            headers: ["Host": "gw", "Content-Type": "application/json"], body: Array(body.utf8)))
    #expect(r.status == 200, "\(bodyText(r))")
}

/// One queued request as the upload sends it.
struct SentRequest: Equatable, CustomStringConvertible {
    var method: String
    var url: String
    var body: String
    var description: String { "\(method) \(url) \(body)" }
}

/// The queue as the upload would send it: units in the order of their first request (a changeset's requests
/// together), each a list of requests.
func uploadUnits(_ service: ODataService) throws -> [[SentRequest]] {
    let rows = try service.mirror.pool.read { db in
        try db.query(#"SELECT id, method, url, CAST(body AS TEXT), changeset FROM "_mg_queue" ORDER BY id"#)
    }
    var units: [[SentRequest]] = []
    var index: [String: Int] = [:]
    for r in rows {
        let sent = SentRequest(method: r[1].string ?? "", url: r[2].string ?? "", body: r[3].string ?? "")
        if let c = r[4].string {
            if let i = index[c] {
                units[i].append(sent)
                continue
            }
            index[c] = units.count
        }
        units.append([sent])
    }
    return units
}

private func prepare(_ service: ODataService) throws -> ODataQueuePreparation {
    try #require(try ODataQueuePreparer(context: service.uploader.context).prepare())
}

private func name(_ body: String) -> String? { (try? JSON.parse(Array(body.utf8)))?["Name"]?.stringValue }

/// Seed: "Create Customer 1 John; Batch #1 { Create Customer 2 Jan; Update Customer 2 Jane }; Update
/// Customer 1 John Doe; Update Customer 2 Jane Do; Update Customer 2 Jane Doe" becomes "Create Customer 1
/// John Doe; Batch #1 { Create Customer 2 Jane }; Update Customer 2 Jane Doe".
@Test func requestQueueOptimizationCombinesTheSeedsCustomers() throws {
    let service = try makeService(optimize: true)
    write(service, "POST", "Customers", #"{"CustomerID":"C1","Name":"John"}"#)
    changeset(
        service,
        [
            ("POST", "Customers", #"{"CustomerID":"C2","Name":"Jan"}"#),
            ("PATCH", "Customers('C2')", #"{"Name":"Jane"}"#),
        ])
    write(service, "PATCH", "Customers('C1')", #"{"Name":"John Doe"}"#)
    write(service, "PATCH", "Customers('C2')", #"{"Name":"Jane Do"}"#)
    write(service, "PATCH", "Customers('C2')", #"{"Name":"Jane Doe"}"#)
    #expect(service.queue.count == 6)
    let outcome = try prepare(service)
    #expect(outcome.before == 6 && outcome.after == 3 && outcome.combined == 3)
    let units = try uploadUnits(service)
    #expect(units.count == 3)
    #expect(units[0].map(\.method) == ["POST"] && units[0].map { name($0.body) } == ["John Doe"])
    #expect(units[0][0].body.contains(#""CustomerID":"C1""#))
    #expect(units[1].map(\.method) == ["POST"] && units[1].map { name($0.body) } == ["Jane"])
    #expect(units[2].map(\.method) == ["PATCH"] && units[2].map { name($0.body) } == ["Jane Doe"])
    #expect(units[2][0].url == "Customers('C2')")
    #expect(service.queue.count == 3)
    // The EventLog tells what the preparation did.
    let events = try service.mirror.pool.read { db in
        try db.query(#"SELECT Details FROM "_mg_EventLog" WHERE Type = 'QueueOptimization'"#)
    }
    #expect(events.first?[0].string?.contains(#""before":6"#) == true)
}

/// Without the option nothing changes; an unmodifiable (`NonMergeable`) request is never combined, and
/// later updates do not jump over it.
@Test func nonMergeableRequestsAndTheDefaultKeepTheQueue() throws {
    let off = try makeService()
    write(off, "POST", "Customers", #"{"CustomerID":"C1","Name":"a"}"#)
    write(off, "PATCH", "Customers('C1')", #"{"Name":"b"}"#)
    #expect(try ODataQueuePreparer(context: off.uploader.context).prepare() == nil)
    #expect(off.queue.count == 2)

    let service = try makeService(optimize: true)
    write(service, "PATCH", "Customers('ALFKI')", #"{"Name":"NEW"}"#)
    write(
        service, "PATCH", "Customers('ALFKI')", #"{"Name":"IN PROCESS"}"#,
        headers: [("OfflineOData.NonMergeable", "true")])
    write(service, "PATCH", "Customers('ALFKI')", #"{"Name":"SOLUTION PROVIDED"}"#)
    write(service, "PATCH", "Customers('ALFKI')", #"{"Name":"CONFIRMED"}"#)
    let outcome = try prepare(service)
    #expect(outcome.before == 4 && outcome.after == 3)
    let units = try uploadUnits(service).map { $0.map { name($0.body) } }
    #expect(units == [["NEW"], ["IN PROCESS"], ["CONFIRMED"]])
}

/// A create and its delete vanish; updates then a delete become the delete; a PUT replaces what came before.
@Test func createsDeletesAndReplacesCombine() throws {
    let service = try makeService(optimize: true)
    write(service, "POST", "Products", #"{"Name":"tmp"}"#)
    write(service, "PATCH", "Products(-1)", #"{"Name":"tmp2"}"#)
    write(service, "DELETE", "Products(-1)")
    write(service, "PATCH", "Customers('ALFKI')", #"{"Name":"x"}"#)
    write(service, "DELETE", "Customers('ALFKI')")
    write(service, "POST", "Customers", #"{"CustomerID":"C9","Name":"n"}"#)
    write(service, "PUT", "Customers('C9')", #"{"CustomerID":"C9","Name":"put"}"#)
    write(service, "PATCH", "Customers('C9')", #"{"Name":"patched"}"#)
    _ = try prepare(service)
    let units = try uploadUnits(service)
    #expect(units.map { $0[0].method } == ["DELETE", "POST"])
    #expect(units[0][0].url == "Customers('ALFKI')" && units[0][0].body.isEmpty)
    #expect(name(units[1][0].body) == "patched" && units[1][0].body.contains(#""CustomerID":"C9""#))
    // The local entity created and deleted left nothing in the mirror either.
    #expect(localGET(service, "/odata/s/Products(-1)").0 == 404)
}

/// A create and its delete stay when another request names the entity (a link to it).
@Test func aCreateNamedByAnotherRequestStays() throws {
    let service = try makeService(optimize: true)
    write(service, "POST", "Customers", #"{"CustomerID":"C5","Name":"n"}"#)
    write(service, "POST", "Orders", #"{"Amount":1,"Customer@odata.bind":"Customers('C5')"}"#)
    write(service, "DELETE", "Customers('C5')")
    _ = try prepare(service)
    #expect(try uploadUnits(service).map { $0[0].method } == ["POST", "POST", "DELETE"])
}

/// Seed, undo local creation 1: create customer101, update it, delete it: nothing is sent.
@Test func undoLocalCreationRemovesCreateUpdateAndDelete() throws {
    let service = try makeService(undo: true)
    let created = write(service, "POST", "Customers", #"{"Name":"customer101"}"#)
    let location = try #require(created.headers["Location"])
    let range = try #require(location.range(of: "Customers("))
    let key = "(" + location[range.upperBound...]
    write(service, "PATCH", "Customers" + key, #"{"Name":"customer 101"}"#)
    write(service, "DELETE", "Customers" + key)
    let outcome = try prepare(service)
    #expect(outcome.before == 3 && outcome.after == 0 && outcome.undone == 3)
    #expect(service.queue.count == 0)
}

/// Seed, undo local creation 2: create customer101, create order101 related to it, delete customer101
/// (orders are deleted with their customer): nothing is sent, and the order leaves the mirror.
@Test func undoLocalCreationFollowsCascadingDeletes() throws {
    let service = try makeService(undo: true)
    write(service, "POST", "Customers", #"{"CustomerID":"C101","Name":"customer101"}"#)
    write(service, "POST", "Customers('C101')/Orders", #"{"Amount":5}"#)
    write(service, "POST", "Orders", #"{"Amount":7,"CustomerID":"C101"}"#)
    write(service, "DELETE", "Customers('C101')")
    #expect(localGET(service, "/odata/s/Orders(-1)").0 == 200)
    let outcome = try prepare(service)
    #expect(outcome.after == 0 && outcome.undone == 4)
    #expect(localGET(service, "/odata/s/Orders(-1)").0 == 404)
    #expect(localGET(service, "/odata/s/Orders(-2)").0 == 404)
}

/// Without a cascading delete, the order would outlive its customer upstream: everything is sent.
@Test func undoLocalCreationKeepsRequestsWhenTheDeleteWouldNotCascade() throws {
    let service = try makeService(undo: true, metadata: ODataFixtures.customersOrdersV4)
    write(service, "POST", "Customers", #"{"CustomerID":"C101","Name":"customer101"}"#)
    write(service, "POST", "Orders", #"{"OrderID":7,"CustomerID":"C101"}"#)
    write(service, "DELETE", "Customers('C101')")
    let outcome = try prepare(service)
    #expect(outcome.after == 3 && outcome.undone == 0)
}

/// Seed, undo local creation 3: motherboard101 created locally with the existing CPU101 installed, then
/// deleted: deleting it upstream deletes CPU101 (cascade), so both requests are sent.
@Test func undoLocalCreationSendsTheMotherboardThatTookAnExistingCPU() throws {
    let service = try makeService(undo: true)
    write(service, "POST", "Motherboards", #"{"Model":"motherboard101","CPUs@odata.bind":["CPUs(101)"]}"#)
    write(service, "DELETE", "Motherboards(-1)")
    let outcome = try prepare(service)
    #expect(outcome.after == 2 && outcome.undone == 0)
    #expect(try uploadUnits(service).map { $0[0].method } == ["POST", "DELETE"])
    // A motherboard that took no existing CPU is undone.
    write(service, "POST", "Motherboards", #"{"Model":"motherboard102"}"#)
    write(service, "DELETE", "Motherboards(-2)")
    #expect(try prepare(service).undone == 2)
    #expect(service.queue.count == 2)
}

/// Undo ignores changesets and `NonMergeable` (unlike optimisation), but never touches a request that was
/// sent (its outcome unknown).
@Test func undoLocalCreationIgnoresChangesetsButNotSentRequests() throws {
    let service = try makeService(undo: true)
    changeset(
        service,
        [
            ("POST", "Customers", #"{"CustomerID":"C7","Name":"a"}"#),
            ("POST", "Products", #"{"ProductID":70,"Name":"p"}"#),
        ])
    write(
        service, "PATCH", "Customers('C7')", #"{"Name":"b"}"#,
        headers: [("OfflineOData.NonMergeable", "true")])
    write(service, "DELETE", "Customers('C7')")
    #expect(try prepare(service).undone == 3)
    #expect(try uploadUnits(service).flatMap { $0 }.map(\.url) == ["Products"])

    let sent = try makeService(undo: true)
    write(sent, "POST", "Customers", #"{"CustomerID":"C8","Name":"a"}"#)
    write(sent, "DELETE", "Customers('C8')")
    try sent.queue.markSent(try #require(try sent.queue.first()), true)
    #expect(try prepare(sent).undone == 0)
}

/// Seed, transaction builder: requests 1, 2, 5 (transaction "1") form one changeset at request 1's place,
/// request 3 (no transaction) follows alone, then requests 4 and 6 (transaction "2").
@Test func transactionBuilderGroupsTheSeedsSixRequests() throws {
    let service = try makeService(transactions: true)
    func tx(_ id: String) -> [(String, String)] { [("OfflineOData.TransactionID", id)] }
    write(service, "POST", "Customers", #"{"CustomerID":"C1","Name":"Customer 1"}"#, headers: tx("1"))
    write(service, "POST", "Orders", #"{"OrderID":1,"CustomerID":"C1","Amount":1}"#, headers: tx("1"))
    write(service, "POST", "Products", #"{"ProductID":1,"Name":"Product 1"}"#)
    write(service, "POST", "Customers", #"{"CustomerID":"C2","Name":"Customer 2"}"#, headers: tx("2"))
    write(service, "PATCH", "Customers('C1')", #"{"Name":"Customer One"}"#, headers: tx("1"))
    write(service, "PATCH", "Customers('C2')", #"{"Name":"Customer Two"}"#, headers: tx("2"))
    let outcome = try prepare(service)
    #expect(outcome.transactions == 2 && outcome.after == 6)
    let units = try uploadUnits(service).map { $0.map { "\($0.method) \($0.url)" } }
    #expect(
        units == [
            ["POST Customers", "POST Orders", "PATCH Customers('C1')"], ["POST Products"],
            ["POST Customers", "PATCH Customers('C2')"],
        ])
    // What the uploader sends for the first: one changeset of three.
    let first = try #require(try service.queue.first())
    let unit = service.uploader.changesetUnit(first, try #require(first.changeset))
    #expect(unit.rows.count == 3 && unit.url == "$batch")
}

/// The transaction builder keeps one unmodifiable request per entity in a changeset and splits where a
/// request in between touches the same entity; with optimisation too, requests combine inside a changeset
/// and outside, never across.
@Test func transactionBuilderSplitsWhereOrderOrUnmodifiableRequestsRequire() throws {
    let service = try makeService(optimize: true, transactions: true)
    func tx(_ id: String, nonMergeable: Bool = false) -> [(String, String)] {
        [("OfflineOData.TransactionID", id)] + (nonMergeable ? [("OfflineOData.NonMergeable", "true")] : [])
    }
    write(service, "POST", "Customers", #"{"CustomerID":"C1","Name":"a"}"#, headers: tx("T"))
    write(service, "PATCH", "Customers('C1')", #"{"Name":"b"}"#, headers: tx("T"))
    write(service, "PATCH", "Customers('ALFKI')", #"{"Name":"s1"}"#, headers: tx("T", nonMergeable: true))
    write(service, "PATCH", "Customers('ALFKI')", #"{"Name":"s2"}"#, headers: tx("T", nonMergeable: true))
    write(service, "PATCH", "Customers('C1')", #"{"Name":"outside"}"#)
    write(service, "PATCH", "Customers('C1')", #"{"Name":"c"}"#, headers: tx("T"))
    let outcome = try prepare(service)
    #expect(outcome.transactions == 1 && outcome.before == 6 && outcome.after == 4)
    let units = try uploadUnits(service).map { $0.map { "\($0.method) \($0.url) \(name($0.body) ?? "")" } }
    #expect(
        units == [
            ["POST Customers b", "PATCH Customers('ALFKI') s1"], ["PATCH Customers('ALFKI') s2"],
            ["PATCH Customers('C1') c"],
        ])
}
