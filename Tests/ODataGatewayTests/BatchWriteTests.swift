import Foundation
import GatewayConfig
import GatewaySupport
import HTTPCore
import JSONCore
import Logging
import MirrorgateTesting
import Storage
import Testing
import Upstream

@testable import ODataGateway

/// A localFirst service whose upstream never answers, mirrored from bootstrap files.
private func makeService(v2: Bool = false) throws -> ODataService {
    try makeBootstrappedService(
        "odbatch", metadata: v2 ? ODataFixtures.customersOrdersV2 : ODataFixtures.customersOrdersV4,
        data: [
            "Customers":
                #"{"value":[{"CustomerID":"ALFKI","Name":"Alfreds"},{"CustomerID":"BONAP","Name":"Bon"}]}"#,
            "Orders": #"{"value":[{"OrderID":1,"CustomerID":"ALFKI","Freight":3.5}]}"#,
        ]
    ).0
}

private func text(_ r: HTTPResponse) -> String { bodyText(r) }

private func get(_ service: ODataService, _ target: String) -> (Int, String) { localGET(service, target) }

private func batch(_ service: ODataService, _ body: String, contentType: String) -> HTTPResponse {
    service.writer.batchResponse(
        to: HTTPRequest(
            method: "POST", target: "/odata/s/$batch", headers: ["Host": "gw", "Content-Type": contentType],
            body: Array(body.replacingOccurrences(of: "\n", with: "\r\n").utf8)))
}

private let changeset = """
    --b
    Content-Type: multipart/mixed; boundary=cs

    --cs
    Content-Type: application/http
    Content-Transfer-Encoding: binary
    Content-ID: 1

    POST Customers HTTP/1.1
    Content-Type: application/json

    {"CustomerID":"NEWCO","Name":"New Co"}
    --cs
    Content-Type: application/http
    Content-Transfer-Encoding: binary
    Content-ID: 2

    POST $1/Orders HTTP/1.1
    Content-Type: application/json

    {"Freight":7.25}
    --cs
    Content-Type: application/http
    Content-ID: 3

    PATCH Customers('BONAP') HTTP/1.1
    Content-Type: application/json

    {"Name":"Bon app"}
    --cs
    Content-Type: application/http
    Content-ID: 4

    DELETE Orders(1) HTTP/1.1


    --cs--
    --b
    Content-Type: application/http

    GET Customers('NEWCO')/Orders HTTP/1.1
    Accept: application/json


    --b--
    """

@Test func multipartChangesetsParseWithContentIDsAndBodies() throws {
    let items = try ODataBatchCodec.multipart(
        Array(changeset.replacingOccurrences(of: "\n", with: "\r\n").utf8),
        contentType: "multipart/mixed; boundary=b")
    #expect(items.count == 2)
    guard case .changeset(let parts, nil) = items[0], case .single(let read) = items[1] else {
        Issue.record("unexpected items \(items)")
        return
    }
    #expect(parts.map(\.method) == ["POST", "POST", "PATCH", "DELETE"])
    #expect(parts.map(\.contentID) == ["1", "2", "3", "4"])
    #expect(parts[1].url == "$1/Orders")
    #expect(String(decoding: parts[0].body, as: UTF8.self) == #"{"CustomerID":"NEWCO","Name":"New Co"}"#)
    #expect(parts[3].body.isEmpty)
    #expect(parts[0].headers["content-type"] == "application/json")
    #expect(read.method == "GET" && read.url == "Customers('NEWCO')/Orders")
    #expect(ODataBatchCodec.hasChanges(items))
    // A GET inside a changeset is not allowed.
    let bad =
        "--b\r\nContent-Type: multipart/mixed; boundary=c\r\n\r\n--c\r\nContent-Type: application/http\r\n\r\nGET Customers HTTP/1.1\r\n\r\n\r\n--c--\r\n--b--\r\n"
    #expect(throws: ODataBatchCodec.Failure.self) {
        try ODataBatchCodec.multipart(Array(bad.utf8), contentType: "multipart/mixed; boundary=b")
    }
}

@Test func jsonBatchesGroupAdjacentAtomicityGroups() throws {
    let body = """
        {"requests":[
          {"id":"1","atomicityGroup":"g","method":"POST","url":"Customers","body":{"CustomerID":"X"}},
          {"id":"2","atomicityGroup":"g","method":"POST","url":"$1/Orders","body":{"Freight":1}},
          {"id":"3","method":"GET","url":"Customers('X')","dependsOn":["g"]}
        ]}
        """
    let items = try ODataBatchCodec.json(Array(body.utf8))
    #expect(items.count == 2)
    guard case .changeset(let parts, "g") = items[0], case .single(let read) = items[1] else {
        Issue.record("unexpected items \(items)")
        return
    }
    #expect(parts.map(\.contentID) == ["1", "2"])
    #expect(String(decoding: parts[1].body, as: UTF8.self) == #"{"Freight":1}"#)
    #expect(parts[1].headers["content-type"] == "application/json")
    #expect(read.dependsOn == ["g"])
    let split = """
        {"requests":[{"id":"1","atomicityGroup":"g","method":"DELETE","url":"Orders(1)"},
          {"id":"2","method":"DELETE","url":"Orders(2)"},
          {"id":"3","atomicityGroup":"g","method":"DELETE","url":"Orders(3)"}]}
        """
    #expect(throws: ODataBatchCodec.Failure.self) { try ODataBatchCodec.json(Array(split.utf8)) }
}

@Test func contentIDReferencesResolveInURLsAndLinkValues() {
    let refs = ["1": "Customers('local-a')", "2": "Orders(-1)"]
    #expect(ODataBatchCodec.resolveURL("$1/Orders", refs) == "Customers('local-a')/Orders")
    #expect(ODataBatchCodec.resolveURL("$2", refs) == "Orders(-1)")
    #expect(ODataBatchCodec.resolveURL("$9/Orders", refs) == "$9/Orders")
    #expect(ODataBatchCodec.resolveURL("Customers", refs) == "Customers")
    let body = ODataBatchCodec.resolveBody(
        Array(#"{"Freight":1,"Customer@odata.bind":"$1","Note":"$2","X":{"__metadata":{"uri":"$2"}}}"#.utf8),
        refs)
    #expect(
        String(decoding: body, as: UTF8.self)
            == #"{"Freight":1,"Customer@odata.bind":"Customers('local-a')","Note":"$2","X":{"__metadata":{"uri":"Orders(-1)"}}}"#
    )
}

@Test func aChangesetIsAppliedAndQueuedTogether() throws {
    let service = try makeService()
    let r = batch(service, changeset, contentType: "multipart/mixed; boundary=b")
    #expect(r.status == 200)
    let body = text(r)
    #expect(body.contains("HTTP/1.1 201 Created"))
    #expect(body.contains("Content-ID: 2"))
    #expect(body.contains("HTTP/1.1 204 No Content"))
    // The read after the changeset sees the order created through `$1/Orders`.
    #expect(body.contains(#""OrderID":-1"#) && body.contains(#""CustomerID":"NEWCO""#))
    #expect(get(service, "/odata/s/Orders(-1)").1.contains(#""CustomerID":"NEWCO""#))
    #expect(get(service, "/odata/s/Customers('BONAP')").1.contains("Bon app"))
    #expect(get(service, "/odata/s/Orders(1)").0 == 404)
    #expect(get(service, "/odata/s/Customers('NEWCO')/Orders/$count").1 == "1")
    let rows = try service.mirror.pool.read { db in
        try db.query(#"SELECT method, url, changeset, contentID, localKey FROM "_mg_queue" ORDER BY id"#)
    }
    #expect(rows.map { $0[0].string ?? "" } == ["POST", "POST", "PATCH", "DELETE"])
    #expect(rows[1][1].string == "Customers('NEWCO')/Orders")
    #expect(Set(rows.compactMap { $0[2].string }).count == 1)
    #expect(rows.map { $0[3].string ?? "" } == ["1", "2", "3", "4"])
    #expect(rows[1][4].string == "(-1)")
    let queued = try service.queue.changeset(try #require(rows[0][2].string))
    #expect(queued.count == 4)
}

@Test func aFailingRequestRollsBackTheWholeChangeset() throws {
    let service = try makeService()
    let failing = changeset.replacingOccurrences(of: "DELETE Orders(1)", with: "DELETE Orders(999)")
    let r = batch(service, failing, contentType: "multipart/mixed; boundary=b")
    #expect(r.status == 200)
    let body = text(r)
    #expect(body.contains("HTTP/1.1 404 Not Found"))
    #expect(!body.contains("201 Created"))
    #expect(service.queue.count == 0)
    #expect(get(service, "/odata/s/Customers('NEWCO')").0 == 404)
    #expect(get(service, "/odata/s/Customers('BONAP')").1.contains(#""Name":"Bon""#))
    #expect(get(service, "/odata/s/Orders(1)").0 == 200)
}

@Test func aJSONBatchAnswersWithResponsesAndFailedDependencies() throws {
    let service = try makeService()
    let body = """
        {"requests":[
          {"id":"a","atomicityGroup":"g1","method":"POST","url":"Customers","body":{"CustomerID":"JSONC","Name":"J"}},
          {"id":"b","atomicityGroup":"g1","method":"POST","url":"Orders","body":{"Freight":2,"Customer@odata.bind":"$a"}},
          {"id":"c","atomicityGroup":"g2","method":"PATCH","url":"Orders(12345)","body":{"Freight":1}},
          {"id":"d","method":"GET","url":"Customers('JSONC')/Orders","dependsOn":["g1"]},
          {"id":"e","method":"GET","url":"Orders","dependsOn":["c"]}
        ]}
        """
    let r = batch(service, body, contentType: "application/json")
    #expect(r.status == 200)
    let json = try RawJSONTestHelper.parse(text(r))
    let responses = try #require(json["responses"]?.elements)
    #expect(responses.compactMap { $0["id"]?.string } == ["a", "b", "c", "d", "e"])
    #expect(
        responses.compactMap { $0["status"].map { $0.serialized() } } == ["201", "201", "404", "200", "424"])
    #expect(responses[3]["body"]?["value"]?.elements?.count == 1)
    #expect(service.queue.count == 2)
}

@Test func createThroughANavigationAndDeepInsertSetForeignKeys() throws {
    let service = try makeService()
    let viaNav = service.writer.response(
        to: HTTPRequest(
            method: "POST", target: "/odata/s/Customers('ALFKI')/Orders",
            headers: ["Host": "gw", "Content-Type": "application/json"], body: Array(#"{"Freight":4}"#.utf8)))
    #expect(viaNav.status == 201)
    #expect(text(viaNav).contains(#""CustomerID":"ALFKI""#))
    #expect(get(service, "/odata/s/Customers('ALFKI')/Orders/$count").1 == "2")
    #expect(
        service.writer.response(
            to:
                HTTPRequest(
                    method: "POST", target: "/odata/s/Customers('NOONE')/Orders",
                    headers: ["Host": "gw", "Content-Type": "application/json"],
                    body: Array(#"{"Freight":4}"#.utf8))
        ).status == 404)

    let deep = service.writer.response(
        to: HTTPRequest(
            method: "POST", target: "/odata/s/Customers",
            headers: ["Host": "gw", "Content-Type": "application/json"],
            body: Array(#"{"CustomerID":"DEEP1","Name":"Deep","Orders":[{"Freight":1},{"Freight":2}]}"#.utf8))
    )
    #expect(deep.status == 201)
    #expect(get(service, "/odata/s/Customers('DEEP1')/Orders/$count").1 == "2")
    #expect(service.queue.count == 2)  // one per client request: the deep insert is queued once
    let rows = try service.mirror.pool.read { db in
        try db.query(#"SELECT url, nested, body FROM "_mg_queue" ORDER BY id"#)
    }
    #expect(rows[0][0].string == "Customers('ALFKI')/Orders")
    let nested = try #require(rows[1][1].string)
    #expect(nested.contains(#""set":"Orders""#) && nested.contains(#""nav":"Orders""#))
    #expect(String(decoding: rows[1][2].bytes ?? [], as: UTF8.self).contains(#""Orders":[{"Freight":1}"#))

    // A deep insert whose nested entity cannot be stored leaves nothing behind.
    let dup = service.writer.response(
        to: HTTPRequest(
            method: "POST", target: "/odata/s/Customers",
            headers: ["Host": "gw", "Content-Type": "application/json"],
            body: Array(#"{"CustomerID":"DEEP2","Orders":[{"OrderID":1,"Freight":1}]}"#.utf8)))
    #expect(dup.status == 409)
    #expect(get(service, "/odata/s/Customers('DEEP2')").0 == 404)
    #expect(service.queue.count == 2)

    // `@odata.bind` sets the foreign key.
    let bound = service.writer.response(
        to: HTTPRequest(
            method: "POST", target: "/odata/s/Orders",
            headers: ["Host": "gw", "Content-Type": "application/json"],
            body: Array(#"{"Freight":9,"Customer@odata.bind":"Customers('BONAP')"}"#.utf8)))
    #expect(bound.status == 201)
    #expect(text(bound).contains(#""CustomerID":"BONAP""#))
}

@Test func uploadPartsReferToEarlierCreatesByContentID() {
    func row(_ method: String, _ set: String, _ url: String, _ body: String, _ cid: String, _ local: String?)
        -> QueuedRequest
    {
        QueuedRequest(
            id: 0, entitySet: set, method: method, url: url, body: Array(body.utf8),
            contentType: "application/json",
            authorization: nil, ifMatch: nil, localKey: local, gatewayRoot: "http://gw/odata/s/",
            requestID: "r",
            firstSent: "t", attempts: 0, changeset: "c", contentID: cid)
    }
    let rows = [
        row("POST", "Customers", "Customers", #"{"Name":"N"}"#, "1", "('local-a')"),
        row(
            "POST", "Orders", "Customers('local-a')/Orders",
            #"{"Freight":1,"Customer@odata.bind":"http://gw/odata/s/Customers('local-a')"}"#, "2", "(-1)"),
        row("PATCH", "Orders", "Orders(-1)", #"{"Freight":2}"#, "3", nil),
    ]
    let parts = ODataUploader.uploadParts(
        rows, map: ODataURLMap(gatewayRoot: "http://gw/odata/s/", upstreamRoot: "http://up/svc/"),
        upstreamRoot: "http://up/svc/")
    #expect(parts.map(\.url) == ["Customers", "$1/Orders", "$2"])
    #expect(String(decoding: parts[1].body, as: UTF8.self) == #"{"Freight":1,"Customer@odata.bind":"$1"}"#)
    let body = String(
        decoding: ODataBatchCodec.changesetBody(parts, boundary: "b", changesetBoundary: "c"), as: UTF8.self)
    let reparsed = try? ODataBatchCodec.multipart(
        Array(body.utf8), contentType: "multipart/mixed; boundary=b")
    guard case .changeset(let back, _)? = reparsed?.first else {
        Issue.record("does not parse back: \(body)")
        return
    }
    #expect(back.map(\.url) == ["Customers", "$1/Orders", "$2"])
    #expect(back.map(\.contentID) == ["1", "2", "3"])
}

@Test func v2ChangesetsAreCutBeforeARequestNeedingAKeyCreatedInThem() {
    func row(_ method: String, _ set: String, _ url: String, _ body: String, _ local: String?)
        -> QueuedRequest
    {
        QueuedRequest(
            id: 0, entitySet: set, method: method, url: url, body: Array(body.utf8), contentType: nil,
            authorization: nil, ifMatch: nil, localKey: local, gatewayRoot: "", requestID: "r",
            firstSent: "t",
            attempts: 0, changeset: "c")
    }
    let independent = [
        row("POST", "Orders", "Orders", "{}", "('local-a')"),
        row("PATCH", "Orders", "Orders('7')", "{}", nil),
    ]
    #expect(ODataUploader.v2ChangesetCut(independent) == 2)
    let dependent =
        independent + [
            row("POST", "Items", "Orders('local-a')/ToItems", "{}", nil),
            row("DELETE", "Orders", "Orders('8')", "", nil),
        ]
    #expect(ODataUploader.v2ChangesetCut(dependent) == 2)
    let bound = [
        row("POST", "Orders", "Orders", "{}", "('local-a')"),
        row("POST", "Notes", "Notes", #"{"Order":{"__metadata":{"uri":"Orders('local-a')"}}}"#, nil),
    ]
    #expect(ODataUploader.v2ChangesetCut(bound) == 1)
}

@Test func changesetResponsesParse() {
    let body = """
        --r\r
        Content-Type: multipart/mixed; boundary=cs\r
        \r
        --cs\r
        Content-Type: application/http\r
        \r
        HTTP/1.1 201 Created\r
        Location: http://up/svc/Customers('S1')\r
        Content-Type: application/json\r
        \r
        {"CustomerID":"S1"}\r
        --cs\r
        Content-Type: application/http\r
        Content-ID: 7\r
        \r
        HTTP/1.1 204 No Content\r
        \r
        \r
        --cs--\r
        --r--\r

        """
    let items = ODataBatchCodec.responses(Array(body.utf8), contentType: "multipart/mixed; boundary=r")
    #expect(items?.count == 1)
    #expect(items?.first?.map(\.status) == [201, 204])
    #expect(items?.first?.first?.headers["location"] == "http://up/svc/Customers('S1')")
    #expect(String(decoding: items?.first?.first?.body ?? [], as: UTF8.self) == #"{"CustomerID":"S1"}"#)
    #expect(items?.first?.last?.headers["content-id"] == "7")
    // A failed changeset: one response in place of the changeset.
    let failed =
        "--r\r\nContent-Type: application/http\r\n\r\nHTTP/1.1 400 Bad Request\r\n\r\n{}\r\n--r--\r\n"
    #expect(
        ODataBatchCodec.responses(Array(failed.utf8), contentType: "multipart/mixed; boundary=r")?.first?.map(
            \.status)
            == [400])
}

@Test func malformedBatchesGetODataErrors() throws {
    let service = try makeService()
    let bodies: [(String, String)] = [
        ("garbage", "multipart/mixed"),
        ("--b\r\nContent-Type: multipart/mixed\r\n\r\n--c--\r\n--b--\r\n", "multipart/mixed; boundary=b"),
        (
            "--b\r\nContent-Type: multipart/mixed; boundary=c\r\n\r\n--c\r\n\r\nPOST\r\n--c--\r\n--b--",
            "multipart/mixed; boundary=b"
        ),
        ("{", "application/json"),
        (#"{"requests":[{"method":"POST"}]}"#, "application/json"),
        (
            #"{"requests":[{"id":"1","atomicityGroup":"g","method":"GET","url":"Orders"}]}"#,
            "application/json"
        ),
        (
            #"{"requests":[{"id":"1","method":"POST","url":"Orders","body":"not an object"}]}"#,
            "application/json"
        ),
        (#"{"requests":[{"id":"1","method":"POST","url":"Nope","body":{}}]}"#, "application/json"),
    ]
    for (body, type) in bodies {
        let r = batch(service, body, contentType: type)
        let t = text(r)
        #expect(r.status == 400 || t.contains(#""status":4"#) || t.contains("HTTP/1.1 4"), "\(body)")
        #expect(t.contains("error"), "\(body)")
    }
    #expect(service.queue.count == 0)
}

@Test func anUploadedDeepInsertTakesTheNestedServerKeysFromTheResponse() throws {
    let service = try makeService()
    let created = service.writer.response(
        to: HTTPRequest(
            method: "POST", target: "/odata/s/Customers",
            headers: ["Host": "gw", "Content-Type": "application/json"],
            body: Array(#"{"CustomerID":"DEEP9","Orders":[{"Freight":1},{"Freight":2}]}"#.utf8)))
    #expect(created.status == 201)
    let later = service.writer.response(
        to: HTTPRequest(
            method: "PATCH", target: "/odata/s/Orders(-2)",
            headers: ["Host": "gw", "Content-Type": "application/json"],
            body: Array(#"{"Freight":5}"#.utf8)))
    #expect(later.status == 204)
    let row = try #require(try service.queue.first())
    let response = #"{"CustomerID":"DEEP9","Orders":[{"OrderID":501,"CustomerID":"DEEP9","Freight":1}]}"#
    try service.mirror.write { w in
        try service.uploader.recordUploaded(row, body: Array(response.utf8), location: nil, in: w)
    }
    // The first nested order has its server key; the second (absent from the response) left the mirror until
    // the download brings it; the later PATCH now names the server key.
    #expect(get(service, "/odata/s/Orders(501)").1.contains(#""CustomerID":"DEEP9""#))
    #expect(get(service, "/odata/s/Orders(-1)").0 == 404)
    #expect(get(service, "/odata/s/Orders(-2)").0 == 404)
    let next = try #require(try service.queue.first())
    #expect(next.url == "Orders(-2)")  // not in the response: unchanged
}

@Test func anOlderQueueTableGetsTheChangesetColumns() throws {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent(
        "oldq-\(UUID().uuidString).sqlite"
    ).path
    let pool = try DatabasePool(path: path, options: DatabaseOptions(synchronous: .normal), readers: 1)
    try pool.write { db in
        try db.execute(
            """
            CREATE TABLE "_mg_queue" (id INTEGER PRIMARY KEY AUTOINCREMENT,
              entitySet TEXT NOT NULL, method TEXT NOT NULL, url TEXT NOT NULL, body BLOB NOT NULL,
              contentType TEXT, authorization TEXT, ifMatch TEXT, localKey TEXT, gatewayRoot TEXT NOT NULL,
              requestID TEXT NOT NULL, firstSent TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,
              createdAt TEXT NOT NULL, sentAt TEXT);
            INSERT INTO "_mg_queue" (entitySet, method, url, body, gatewayRoot, requestID, firstSent, createdAt)
              VALUES ('Orders', 'DELETE', 'Orders(1)', x'', 'http://gw/', 'r1', 't', 'c');
            """)
    }
    let queue = try ODataRequestQueue(pool: pool)
    let first = try #require(try queue.first())
    #expect(first.url == "Orders(1)" && first.changeset == nil)
    _ = try ODataRequestQueue(pool: pool)  // a second open finds the columns in place
    #expect(queue.count == 1)
}

private func send(_ service: ODataService, _ method: String, _ target: String, _ body: String = "")
    -> HTTPResponse
{
    service.writer.response(
        to: HTTPRequest(
            method: method, target: target, headers: ["Host": "gw", "Content-Type": "application/json"],
            body: Array(body.utf8)))
}

@Test func v4ReferenceWritesChangeForeignKeys() throws {
    let service = try makeService()
    func customerOfOrder1() -> String { get(service, "/odata/s/Orders(1)").1 }
    #expect(
        send(service, "PUT", "/odata/s/Orders(1)/Customer/$ref", #"{"@odata.id":"Customers('BONAP')"}"#)
            .status == 204)
    #expect(customerOfOrder1().contains(#""CustomerID":"BONAP""#))
    #expect(send(service, "DELETE", "/odata/s/Orders(1)/Customer/$ref").status == 204)
    #expect(customerOfOrder1().contains(#""CustomerID":null"#))
    #expect(
        send(
            service, "POST", "/odata/s/Customers('ALFKI')/Orders/$ref",
            #"{"@odata.id":"http://gw/odata/s/Orders(1)"}"#
        )
        .status == 204)
    #expect(get(service, "/odata/s/Customers('ALFKI')/Orders/$count").1 == "1")
    #expect(send(service, "DELETE", "/odata/s/Customers('ALFKI')/Orders(1)/$ref").status == 204)
    #expect(get(service, "/odata/s/Customers('ALFKI')/Orders/$count").1 == "0")
    #expect(
        send(service, "POST", "/odata/s/Customers('ALFKI')/Orders/$ref", #"{"@odata.id":"Orders(1)"}"#).status
            == 204)
    #expect(send(service, "DELETE", "/odata/s/Customers('ALFKI')/Orders/$ref?$id=Orders(1)").status == 204)
    #expect(get(service, "/odata/s/Customers('ALFKI')/Orders/$count").1 == "0")
    // Links to entities that do not exist are refused and not queued.
    #expect(
        send(service, "PUT", "/odata/s/Orders(1)/Customer/$ref", #"{"@odata.id":"Customers('NONE')"}"#).status
            == 404)
    #expect(
        send(service, "PUT", "/odata/s/Orders(7)/Customer/$ref", #"{"@odata.id":"Customers('BONAP')"}"#)
            .status == 404)
    // Regression: an entity of another type is refused (its row was given the foreign key) and not queued.
    #expect(
        send(
            service, "POST", "/odata/s/Customers('ALFKI')/Orders/$ref", #"{"@odata.id":"Customers('BONAP')"}"#
        )
        .status == 400)
    #expect(
        send(service, "PUT", "/odata/s/Orders(1)/Customer/$ref", #"{"@odata.id":"Orders(1)"}"#).status == 400)
    #expect(!get(service, "/odata/s/Customers('BONAP')").1.contains("ALFKI"))
    #expect(service.queue.count == 6)
    let rows = try service.mirror.pool.read { db in
        try db.query(#"SELECT entitySet, url FROM "_mg_queue" ORDER BY id"#)
    }
    #expect(rows.first?[0].string == "Orders" && rows.first?[1].string == "Orders(1)/Customer/$ref")
}

@Test func v2DeepInsertLinksAndChangesets() throws {
    let service = try makeService(v2: true)
    let deep = send(
        service, "POST", "/odata/s/Customers",
        #"{"CustomerID":"V2D","Name":"Deep","Orders":{"results":[{"Freight":"1.00"},{"Freight":"2.00"}]}}"#)
    #expect(deep.status == 201)
    #expect(get(service, "/odata/s/Customers('V2D')/Orders/$count").1 == "2")
    #expect(
        send(service, "PUT", "/odata/s/Orders(1)/$links/Customer", #"{"uri":"Customers('BONAP')"}"#).status
            == 204)
    #expect(get(service, "/odata/s/Orders(1)").1.contains(#""CustomerID":"BONAP""#))
    // A deferred link in the body of a create binds the new order to its customer.
    let linked = send(
        service, "POST", "/odata/s/Orders",
        #"{"Freight":"3.00","Customer":{"__metadata":{"uri":"http://gw/odata/s/Customers('ALFKI')"}}}"#)
    #expect(linked.status == 201)
    #expect(text(linked).contains(#""CustomerID":"ALFKI""#))
    let body = """
        --b
        Content-Type: multipart/mixed; boundary=cs

        --cs
        Content-Type: application/http
        Content-ID: 1

        POST Customers HTTP/1.1
        Content-Type: application/json

        {"CustomerID":"V2B","Name":"Batch"}
        --cs
        Content-Type: application/http
        Content-ID: 2

        POST $1/Orders HTTP/1.1
        Content-Type: application/json

        {"Freight":"4.00"}
        --cs--
        --b--
        """
    let r = batch(service, body, contentType: "multipart/mixed; boundary=b")
    #expect(r.status == 202)
    #expect(text(r).components(separatedBy: "HTTP/1.1 201 Created").count == 3)
    #expect(get(service, "/odata/s/Customers('V2B')/Orders/$count").1 == "1")
    #expect(service.queue.count == 5)
}

/// Parses JSON text in tests.
enum RawJSONTestHelper {
    static func parse(_ text: String) throws -> RawJSON { try RawJSON.parse(text) }
}
