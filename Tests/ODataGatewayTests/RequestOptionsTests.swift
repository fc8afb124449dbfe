import Foundation
import HTTPCore
import JSONCore
import MirrorgateTesting
import Storage
import Testing

@testable import ODataGateway

private func makeService() throws -> ODataService {
    try makeBootstrappedService(
        "odoptions", metadata: ODataFixtures.offlineStoreV4,
        data: ["Customers": #"{"value":[{"CustomerID":"ALFKI","Name":"Alfreds"}]}"#]
    ).0
}

private func write(
    _ service: ODataService, _ method: String, _ target: String, _ body: String, _ extra: HTTPHeaders
)
    -> HTTPResponse
{
    var headers: HTTPHeaders = ["Host": "gw", "Content-Type": "application/json"]
    for (k, v) in extra { headers.set(k, v) }
    return service.writer.response(
        to: HTTPRequest(
            method: method, target: "/odata/s/" + target, headers: headers, body: Array(body.utf8)))
}

private func requestQueue(_ service: ODataService) -> [JSON] {
    let request = HTTPRequest(method: "GET", target: "/odata/s/RequestQueue", headers: ["Host": "gw"])
    let r = service.archive.response(
        request, path: "RequestQueue", serviceRoot: "http://gw/odata/s/", entityRoot: "http://gw/odata/s/",
        isService: false)
    return (try? JSON.parse(Array(bodyText(r).utf8)))?["value"]?.arrayValue ?? []
}

/// The four `OfflineOData.*` headers are recorded with the queued request and shown in the RequestQueue.
@Test func requestOptionsAreRecordedAndShown() throws {
    let service = try makeService()
    let r = write(
        service, "PATCH", "Customers('ALFKI')", #"{"Name":"x"}"#,
        [
            "OfflineOData.TransactionID": "T-1", "offlineodata.nonmergeable": "TRUE",
            "OfflineOData.RemoveAfterUpload": "true", "OfflineOData.CustomTag": "tag-1",
        ])
    #expect(r.status == 204)
    let queued = try #require(try service.queue.first())
    #expect(queued.transactionID == "T-1" && queued.nonMergeable && queued.removeAfterUpload)
    let entry = try #require(requestQueue(service).first)
    #expect(entry["TransactionID"] == .string("T-1") && entry["NonMergeable"] == .bool(true))
    #expect(entry["RemoveAfterUpload"] == .bool(true) && entry["CustomTag"] == .string("tag-1"))
    #expect(entry["WaitingFor"] == .null)
    // A boolean option that is neither true nor false is the client's error, and nothing is queued.
    let bad = write(
        service, "PATCH", "Customers('ALFKI')", #"{"Name":"y"}"#, ["OfflineOData.NonMergeable": "yes"])
    #expect(bad.status == 400 && bodyText(bad).contains("OfflineOData.NonMergeable"))
    #expect(service.queue.count == 1)
}

/// In a `$batch`, each part's own option headers count, else the batch's.
@Test func requestOptionsApplyToEachPartOfABatch() throws {
    let service = try makeService()
    let r = localBatch(
        service, twoPartChangeset(firstPartHeaders: ["OfflineOData.TransactionID: part"]),
        headers: ["OfflineOData.TransactionID": "outer", "OfflineOData.NonMergeable": "true"])
    #expect(r.status == 200)
    let rows = try service.mirror.pool.read { db in
        try db.query(#"SELECT transactionID, nonMergeable FROM "_mg_queue" ORDER BY id"#)
    }
    #expect(rows.map { $0[0].string } == ["part", "outer"])
    #expect(rows.map { $0[1].int } == [1, 1])
}

/// Forwarding strips the option headers of a `$batch`'s requests and nothing else (multipart: header lines
/// of the inner requests only; JSON: the requests' `headers`).
@Test func optionHeadersAreStrippedFromForwardedBatches() {
    let multipart = """
        --b\r
        Content-Type: multipart/mixed; boundary=c\r
        \r
        --c\r
        Content-Type: application/http\r
        Content-ID: 1\r
        \r
        POST Customers HTTP/1.1\r
        Content-Type: text/plain\r
        OfflineOData.TransactionID: t\r
        offlineodata.customtag: x\r
        \r
        OfflineOData.CustomTag: this line is body text\r
        --c--\r
        --b\r
        Content-Type: application/http\r
        \r
        GET Customers HTTP/1.1\r
        OfflineOData.NonMergeable: true\r
        Accept: application/json\r
        \r
        \r
        --b--\r

        """
    let stripped = String(
        decoding: ODataRequestOptions.strippingOptionHeaders(
            Array(multipart.utf8), contentType: "multipart/mixed; boundary=b"), as: UTF8.self)
    #expect(!stripped.contains("OfflineOData.TransactionID") && !stripped.contains("offlineodata.customtag"))
    #expect(!stripped.contains("OfflineOData.NonMergeable"))
    #expect(stripped.contains("OfflineOData.CustomTag: this line is body text"))
    #expect(
        stripped.contains("Content-Type: text/plain\r\n\r\n") && stripped.contains("Accept: application/json")
    )
    #expect(
        stripped
            == multipart.replacingOccurrences(of: "OfflineOData.TransactionID: t\r\n", with: "")
            .replacingOccurrences(of: "offlineodata.customtag: x\r\n", with: "")
            .replacingOccurrences(of: "OfflineOData.NonMergeable: true\r\n", with: ""))
    let json =
        #"{"requests":[{"id":"1","method":"GET","url":"Customers","headers":{"Accept":"application/json","OfflineOData.CustomTag":"t"}}]}"#
    let out = String(
        decoding: ODataRequestOptions.strippingOptionHeaders(
            Array(json.utf8), contentType: "application/json"),
        as: UTF8.self)
    #expect(
        out
            == #"{"requests":[{"id":"1","method":"GET","url":"Customers","headers":{"Accept":"application/json"}}]}"#
    )
    // Without any option header the body is returned as it is.
    let plain = Array(#"{"requests":[]}"#.utf8)
    #expect(ODataRequestOptions.strippingOptionHeaders(plain, contentType: "application/json") == plain)
    #expect(ODataRequestOptions.isOptionHeader("OFFLINEODATA.TransactionID"))
    #expect(
        !ODataRequestOptions.isOptionHeader("OfflineOData") && !ODataRequestOptions.isOptionHeader("X-Other"))
}

/// Who wrote a request, as far as its credentials tell.
@Test func writerIdentityFromCredentials() {
    func id(_ auth: String?, _ cookie: String? = nil) -> String {
        ODataWriterIdentity.of(WriterCredentials(authorization: auth, cookie: cookie))
    }
    #expect(id("Basic " + Data("alice:secret".utf8).base64EncodedString()) == "basic:alice")
    #expect(id("Basic " + Data("alice:other".utf8).base64EncodedString()) == "basic:alice")
    func jwt(_ claims: String) -> String {
        let payload = Data(claims.utf8).base64EncodedString().replacingOccurrences(of: "=", with: "")
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        return "Bearer eyJhbGciOiJIUzI1NiJ9." + payload + ".c2ln"
    }
    #expect(id(jwt(#"{"sub":"bob","iss":"idp","exp":1}"#)) == "jwt:idp|bob")
    #expect(id(jwt(#"{"sub":"bob","iss":"idp","exp":2}"#)) == "jwt:idp|bob")
    #expect(id("Bearer opaque-token") == "bearer")
    #expect(id(nil, "SESSION=1") == "anonymous")
    let a = WriterCredentials(authorization: "Bearer a", cookie: nil)
    #expect(a.fingerprint == WriterCredentials(authorization: "Bearer a", cookie: nil).fingerprint)
    #expect(a.fingerprint != WriterCredentials(authorization: "Bearer b", cookie: nil).fingerprint)
    #expect(a.fingerprint != WriterCredentials(authorization: "Bearer a", cookie: "c=1").fingerprint)
}

/// The references the key index keeps: `Set(…)` with a `-` in the key and `local-…` tokens.
@Test func keyReferencesFoundInURLsAndBodies() {
    let refs = ODataKeyReferences.extract(
        url: "Orders(-3)/Items",
        body: Array(
            #"{"Customer@odata.bind":"http://gw/odata/s/Customers('local-ab-12')","Price":-5,"P":"Products(7)","Note":"Notes(%27local-x%27)"}"#
                .utf8))
    #expect(refs.contains("Orders(-3)") && refs.contains("Customers('local-ab-12')"))
    #expect(refs.contains("local-ab-12") && refs.contains("local-x") && refs.contains("Notes(%27local-x%27)"))
    #expect(!refs.contains("Products(7)"))
}

/// An uploaded create rewrites only the queued requests that name its local key (the index), and the
/// index follows the rows out of the queue.
@Test func anUploadedCreateRewritesOnlyTheRequestsNamingItsKey() throws {
    let service = try makeService()
    _ = write(service, "POST", "Customers", #"{"Name":"n"}"#, [:])
    let create = try #require(try service.queue.first())
    let local = try #require(create.localKey)
    let stringKey = try #require(ODataKeyText.unquote(local))
    _ = write(service, "PATCH", "Customers" + local, #"{"Name":"m"}"#, [:])
    _ = write(service, "POST", "Orders", #"{"Amount":1,"CustomerID":"\#(stringKey)"}"#, [:])
    _ = write(service, "PATCH", "Customers('ALFKI')", #"{"Name":"a"}"#, [:])
    let count = { (ref: String) in
        try service.mirror.pool.read { db in try ODataKeyReferences.referencing(ref, in: db).count }
    }
    #expect(try count("Customers" + local) == 1 && count(stringKey) == 2)
    service.uploader.finish(
        [(create, Array(#"{"CustomerID":"SRV1","Name":"n"}"#.utf8), nil)], what: "an uploaded request")
    let rows = try service.mirror.pool.read { db in
        try db.query(#"SELECT url, CAST(body AS TEXT) FROM "_mg_queue" ORDER BY id"#)
    }
    #expect(rows.map { $0[0].string } == ["Customers('SRV1')", "Orders", "Customers('ALFKI')"])
    #expect(rows[1][1].string?.contains(#""CustomerID":"SRV1""#) == true)
    #expect(try count("Customers" + local) == 0 && count(stringKey) == 0)
    // Rows leaving the queue take their references with them.
    let leftover = try service.mirror.pool.read { db in
        try db.scalar(#"SELECT COUNT(*) FROM "_mg_keyref" WHERE id NOT IN (SELECT id FROM "_mg_queue")"#)?.int
    }
    #expect(leftover == 0)
}

/// `OfflineOData.RemoveAfterUpload: true`: once uploaded, the entity leaves the mirror.
@Test func removeAfterUploadTakesTheEntityOutOfTheMirror() throws {
    let service = try makeService()
    _ = write(service, "POST", "Products", #"{"Name":"gone"}"#, ["OfflineOData.RemoveAfterUpload": "true"])
    _ = write(service, "PATCH", "Customers('ALFKI')", #"{"Name":"kept"}"#, [:])
    #expect(localGET(service, "/odata/s/Products(-1)").0 == 200)
    let create = try #require(try service.queue.first())
    service.uploader.finish(
        [(create, Array(#"{"ProductID":50,"Name":"gone"}"#.utf8), nil)], what: "a request")
    #expect(localGET(service, "/odata/s/Products(50)").0 == 404)
    #expect(localGET(service, "/odata/s/Products(-1)").0 == 404)
    let patch = try #require(try service.queue.first())
    service.uploader.finish([(patch, [], nil)], what: "a request")
    #expect(localGET(service, "/odata/s/Customers('ALFKI')").1.contains("kept"))
}
