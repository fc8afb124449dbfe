import Foundation
import FoundationXML
import JSONCore
import MirrorgateTesting
import ODataCore
import Storage
import Testing

@testable import ODataGateway

/// Issue 15 on the local read path: what is not evaluated locally is refused (501), never ignored.
private func productsMirror() throws -> ODataMirror {
    let (mirror, _) = try makeTemporaryMirror("odfid", metadata: ODataFixtures.customersOrdersLinesV4)
    try mirror.replace(
        request: "c", query: "Customers",
        rows: [
            "Customers": [
                MirrorEntity(properties: try RawJSON.parse(#"{"CustomerID":"A","Name":"Widget"}"#).members!),
                MirrorEntity(properties: try RawJSON.parse(#"{"CustomerID":"B","Name":"Gadget"}"#).members!),
            ]
        ])
    return mirror
}

private func status(_ reader: ODataLocalReader, _ path: String, _ query: String, atom: Bool = false) -> Int {
    var request = LocalReadRequest(
        path: path, query: query, serviceRoot: "http://gw/x/", format: ODataFormat(version: .v4),
        pageSize: nil)
    request.atom = atom
    do { return try reader.read(request).status } catch { return error.status }
}

@Test(arguments: [
    "$index=1", "$levels=2", "$expand=Orders($apply=aggregate($count%20as%20n))",
    "$expand=Orders($levels=max)",
    "$expand=Orders/$ref", "$apply=groupby((Name))&$select=Name",
])
func unansweredOptionsAre501(query: String) throws {
    let reader = ODataLocalReader(mirror: try productsMirror(), mount: ODataMount("/x/"))
    #expect(status(reader, "Customers", query) == 501)
    #expect(status(reader, "Customers", "") == 200)
}

@Test func atomForV4Is406() throws {
    let reader = ODataLocalReader(mirror: try productsMirror(), mount: ODataMount("/x/"))
    #expect(status(reader, "Customers", "", atom: true) == 406)
    #expect(status(reader, "$metadata", "", atom: true) == 200)
    #expect(ODataLocalReader.wantsAtom(accept: "application/atom+xml", format: nil))
    #expect(!ODataLocalReader.wantsAtom(accept: "application/atom+xml, application/json", format: nil))
    #expect(ODataLocalReader.wantsAtom(accept: "application/json", format: "atom"))
    #expect(!ODataLocalReader.wantsAtom(accept: nil, format: nil))
}

@Test func atomAnswersTakeATypeTheClientAccepts() {
    let svc = "application/atomsvc+xml;charset=utf-8"
    let feed = "application/atom+xml;type=feed;charset=utf-8"
    let xml = "application/xml;charset=utf-8"
    #expect(ODataLocalReader.acceptedXMLType(svc, accept: "application/atomsvc+xml") == svc)
    #expect(ODataLocalReader.acceptedXMLType(svc, accept: "application/atom+xml, application/xml") == xml)
    #expect(ODataLocalReader.acceptedXMLType(svc, accept: "application/xml;q=0.9, */*;q=0.1") == svc)
    #expect(ODataLocalReader.acceptedXMLType(feed, accept: "application/xml") == xml)
    #expect(ODataLocalReader.acceptedXMLType(feed, accept: "application/atom+xml,application/xml") == feed)
    #expect(ODataLocalReader.acceptedXMLType("text/plain", accept: "application/xml") == "text/plain")
}

/// A mirror of the Shop model with people of three types and products whose values compare wrongly as
/// text or floats.
private func shopMirror() throws -> ODataMirror {
    let (mirror, _) = try makeTemporaryMirror("odshop", metadata: ODataFixtures.shopV4)
    func e(_ text: String) throws -> [(String, RawJSON)] { try RawJSON.parse(text).members! }
    var people: [String: [MirrorEntity]] = [:]
    var links: [MirrorLinkRecord] = []
    let m = mirror.model!
    for text in [
        #"{"ID":1,"Name":"Ann","Address":{"Street":"Main","City":"Bern"},"Emails":["a@x","ann@y"]}"#,
        ##"{"@odata.type":"#Shop.Model.Employee","ID":2,"Name":"Bob","Salary":1200.50,"HiredOn":"2020-02-03","Emails":[]}"##,
        ##"{"@odata.type":"#Shop.Customer","ID":3,"Name":"Cid","Tier":2,"Emails":["c@x"]}"##,
    ] {
        ODataDownloader.ingest(
            try e(text), set: "People", type: "Shop.Model.Person", model: m, into: &people, links: &links)
    }
    var products: [String: [MirrorEntity]] = [:]
    for text in [
        #"{"ID":1,"Name":"Widget","Price":9.5,"ShelfLife":"P9D","AvailableFrom":"09:00:00","Colors":"Red, Blue","Status":"Open","Tags":["x","y"],"Stock":"9007199254740993"}"#,
        #"{"ID":2,"Name":"Gadget","Price":10.25,"ShelfLife":"P10DT1H","AvailableFrom":"10:30:00","Colors":"Green","Status":"Shipped","Tags":["z"],"Stock":"2"}"#,
        #"{"ID":3,"Name":"Widget Pro","Price":100,"ShelfLife":"PT36H","AvailableFrom":"8:05:00","Colors":"Blue","Status":"Closed","Tags":[],"Stock":"10"}"#,
    ] {
        ODataDownloader.ingest(
            try e(text), set: "Products", type: "Shop.Model.Product", model: m, into: &products, links: &links
        )
    }
    try mirror.replace(request: "people", query: "People", rows: people)
    try mirror.replace(request: "products", query: "Products", rows: products)
    return mirror
}

private func get(_ reader: ODataLocalReader, _ path: String, _ query: String = "", v2: Bool = false) throws
    -> (
        Int, RawJSON
    )
{
    let r = try reader.read(
        LocalReadRequest(
            path: path, query: query, serviceRoot: "http://gw/s/",
            format: ODataFormat(version: v2 ? .v2 : .v4), pageSize: nil))
    return (r.status, r.body.isEmpty ? .null : try RawJSON.parse(r.body))
}

private func ids(_ body: RawJSON) -> [String] {
    (body["value"]?.elements ?? []).map { $0["ID"]?.serialized() ?? "?" }
}

@Test func derivedTypesCastsAndTypeAnnotations() throws {
    let reader = ODataLocalReader(mirror: try shopMirror(), mount: ODataMount("/s/"))
    var (status, body) = try get(reader, "People/Shop.Model.Employee")
    #expect(status == 200)
    #expect(ids(body) == ["2"])
    #expect(body["@odata.context"]?.string == "http://gw/s/$metadata#People/Shop.Model.Employee")
    (_, body) = try get(reader, "People")
    #expect(ids(body) == ["1", "2", "3"])
    let items = body["value"]!.elements!
    #expect(items[0]["@odata.type"] == nil)
    #expect(items[1]["@odata.type"]?.string == "#Shop.Model.Employee")
    #expect(items[2]["@odata.type"]?.string == "#Shop.Model.Customer")
    (_, body) = try get(reader, "People", "$filter=isof('Shop.Model.Customer')")
    #expect(ids(body) == ["3"])
    (_, body) = try get(reader, "People", "$filter=Shop.Model.Employee/Salary%20gt%201000")
    #expect(ids(body) == ["2"])
    #expect(throws: ODataServiceError.self) { try get(reader, "People(1)/Shop.Model.Employee") }
    (status, body) = try get(reader, "People(2)/Shop.Model.Employee")
    #expect(status == 200)
    #expect(body["Salary"]?.serialized() == "1200.50")
    (_, body) = try get(reader, "People(2)")
    #expect(body["@odata.context"]?.string == "http://gw/s/$metadata#People/Shop.Model.Employee/$entity")
    (_, body) = try get(reader, "People(1)")
    #expect(body["@odata.context"]?.string == "http://gw/s/$metadata#People/$entity")
}

@Test func primitiveComparisonsFollowTheirTypes() throws {
    let reader = ODataLocalReader(mirror: try shopMirror(), mount: ODataMount("/s/"))
    var (_, body) = try get(reader, "Products", "$filter=ShelfLife%20gt%20duration'P9DT12H'")
    #expect(ids(body) == ["2"])
    (_, body) = try get(reader, "Products", "$filter=Price%20gt%2010")
    #expect(ids(body) == ["2", "3"])
    (_, body) = try get(reader, "Products", "$filter=Stock%20eq%209007199254740993")
    #expect(ids(body) == ["1"])
    (_, body) = try get(reader, "Products", "$filter=Colors%20has%20Shop.Model.Color'Blue'")
    #expect(ids(body) == ["1", "3"])
    (_, body) = try get(reader, "Products", "$filter=Tags/any(t:t%20eq%20'z')")
    #expect(ids(body) == ["2"])
    (_, body) = try get(reader, "Products", "$orderby=ShelfLife%20desc&$select=ID")
    #expect(ids(body) == ["2", "1", "3"])
}

@Test func searchApplyAndComputeAreEvaluated() throws {
    let reader = ODataLocalReader(mirror: try shopMirror(), mount: ODataMount("/s/"))
    var (status, body) = try get(reader, "Products", "$search=widget")
    #expect(status == 200)
    #expect(ids(body) == ["1", "3"])
    (_, body) = try get(reader, "Products", "$search=widget%20NOT%20pro")
    #expect(ids(body) == ["1"])
    (status, body) = try get(reader, "Products", "$apply=aggregate(Price%20with%20sum%20as%20Total)")
    #expect(status == 200)
    #expect(body["value"]?.elements?.first?["Total"] != nil)
    #expect(body["@odata.context"]?.string == "http://gw/s/$metadata#Products(Total)")
    (_, body) = try get(reader, "Products", "$apply=groupby((Status),aggregate($count%20as%20n))")
    #expect(body["value"]?.elements?.count == 3)
    (_, body) = try get(
        reader, "Products",
        "$compute=Price%20mul%202%20as%20Double&$select=ID,Double&$filter=Double%20gt%2020")
    #expect(ids(body) == ["2", "3"])
    #expect(body["value"]?.elements?.first?["Double"] != nil)
    (_, body) = try get(reader, "Products", "$select=Name")
    #expect(body["value"]?.elements?.first?["ID"] != nil)
    #expect(body["value"]?.elements?.first?["Price"] == nil)
}

@Test func complexPropertiesAndCollectionsAreRead() throws {
    let reader = ODataLocalReader(mirror: try shopMirror(), mount: ODataMount("/s/"))
    var (status, body) = try get(reader, "People(1)/Address")
    #expect(status == 200)
    #expect(body["City"]?.string == "Bern")
    #expect(body["value"] == nil)
    (_, body) = try get(reader, "People(1)/Address/City")
    #expect(body["value"]?.string == "Bern")
    (_, body) = try get(reader, "People(1)/Emails")
    #expect(body["value"]?.elements?.count == 2)
    let raw = try reader.read(
        LocalReadRequest(
            path: "People(1)/Address/City/$value", query: "", serviceRoot: "http://gw/s/",
            format: ODataFormat(version: .v4), pageSize: nil))
    #expect(String(decoding: raw.body, as: UTF8.self) == "Bern")
}

@Test func olderLayoutIsMigratedKeepingRows() throws {
    let dir = try makeTemporaryDirectory("odmig")
    let path = dir + "/m.sqlite"
    do {
        let mirror = try ODataMirror(path: path)
        try mirror.install(metadata: Array(ODataFixtures.shopV4.utf8))
        try mirror.replace(
            request: "p", query: "Products",
            rows: [
                "Products": [MirrorEntity(properties: try RawJSON.parse(#"{"ID":1,"Price":9.5}"#).members!)]
            ])
        // What layout 1 looked like: Price as REAL, no `_type`, no layout version.
        try mirror.pool.write { db in
            try db.execute(#"DROP TABLE "Products""#)
            try db.execute(
                #"CREATE TABLE "Products" ("_json" TEXT NOT NULL, "_etag" TEXT, "_dr" TEXT NOT NULL, "ID" INTEGER, "Price" REAL)"#
            )
            try db.execute(#"INSERT INTO "Products" VALUES ('{"ID":1,"Price":9.5}', NULL, 'local', 1, 9.5)"#)
            try db.execute(#"DELETE FROM "_mg_meta" WHERE key='layout'"#)
        }
    }
    let mirror = try ODataMirror(path: path)
    let reader = ODataLocalReader(mirror: mirror, mount: ODataMount("/s/"))
    let (_, body) = try get(reader, "Products", "$filter=Price%20eq%209.50")
    #expect(ids(body) == ["1"])
    #expect(mirror.meta("layout") == MirrorModel.layoutVersion)
    let scope = try mirror.pool.read { db in try db.scalar(#"SELECT "_dr" FROM "Products""#)?.string }
    #expect(scope == "local")
}

/// Shop orders downloaded with `$expand=Lines`: contained lines in `Orders/Lines` with their parent's key.
private func shopOrdersMirror() throws -> ODataMirror {
    let mirror = try shopMirror()
    let m = mirror.model!
    var rows: [String: [MirrorEntity]] = [:]
    var links: [MirrorLinkRecord] = []
    for text in [
        #"{"ID":1,"Status":"Open","CustomerID":3,"Lines":[{"LineNo":1,"Quantity":2,"Amount":3.05},{"LineNo":2,"Quantity":5,"Amount":12.10}]}"#,
        #"{"ID":2,"Status":"Closed","CustomerID":3,"Lines":[{"LineNo":1,"Quantity":7,"Amount":1.00}]}"#,
        #"{"ID":3,"Status":"Open","CustomerID":3,"Lines":[]}"#,
    ] {
        ODataDownloader.ingest(
            try RawJSON.parse(text).members!, set: "Orders", type: "Shop.Model.Order", model: m, into: &rows,
            links: &links)
    }
    try mirror.replace(request: "orders", query: "Orders?$expand=Lines", rows: rows)
    return mirror
}

@Test func containedEntitiesAreReadWithinTheirParent() throws {
    let reader = ODataLocalReader(mirror: try shopOrdersMirror(), mount: ODataMount("/s/"))
    var (status, body) = try get(reader, "Orders(1)/Lines")
    #expect(status == 200)
    #expect((body["value"]?.elements ?? []).map { $0["LineNo"]?.serialized() ?? "" } == ["1", "2"])
    (_, body) = try get(reader, "Orders(2)/Lines(1)")
    #expect(body["Quantity"]?.serialized() == "7")
    (_, body) = try get(reader, "Orders(3)/Lines")
    #expect(body["value"]?.elements?.isEmpty == true)
    (_, body) = try get(reader, "Orders", "$expand=Lines&$filter=Lines/any(l:l/Quantity%20gt%204)")
    #expect(ids(body) == ["1", "2"])
    #expect(body["value"]?.elements?.first?["Lines"]?.elements?.count == 2)
    (_, body) = try get(reader, "Orders(1)/Lines/$count")
    #expect(body.serialized() == "2")
    let full = try reader.read(
        LocalReadRequest(
            path: "Orders(1)/Lines", query: "", serviceRoot: "http://gw/s/",
            format: ODataFormat(version: .v4, metadata: .full), pageSize: nil))
    #expect(
        String(decoding: full.body, as: UTF8.self).contains(#""@odata.id":"http://gw/s/Orders(1)/Lines(2)""#))
}

@Test func containmentNotDownloadedIs501() throws {
    let reader = ODataLocalReader(mirror: try shopMirror(), mount: ODataMount("/s/"))
    #expect(status(reader, "Company", "") == 404 || status(reader, "Company", "") == 200)
    let (mirror, _) = try makeTemporaryMirror("odshop2", metadata: ODataFixtures.shopV4)
    try mirror.replace(
        request: "orders", query: "Orders",
        rows: ["Orders": [MirrorEntity(properties: try RawJSON.parse(#"{"ID":1}"#).members!)]])
    let r2 = ODataLocalReader(mirror: mirror, mount: ODataMount("/s/"))
    #expect(status(r2, "Orders(1)/Lines", "") == 501)
}

@Test func containmentNotDownloadedIsReadOnlyUnderParentsCreatedLocally() throws {
    let (mirror, _) = try makeTemporaryMirror("odshop3", metadata: ODataFixtures.shopV4)
    try mirror.replace(
        request: "orders", query: "Orders",
        rows: ["Orders": [MirrorEntity(properties: try RawJSON.parse(#"{"ID":1}"#).members!)]])
    let m = try #require(mirror.model)
    let orders = try #require(m.layouts["Orders"])
    let lines = try #require(m.layouts["Orders/Lines"])
    try mirror.write { w in
        // An order created offline with one line (as a deep insert stores them).
        try w.insert(orders, members: try RawJSON.parse(#"{"ID":-1}"#).members!, etag: nil)
        try w.insert(
            lines, members: try RawJSON.parse(#"{"LineNo":1,"Quantity":2}"#).members!, etag: nil,
            parent: [("ID", .number("-1"))])
    }
    let reader = ODataLocalReader(mirror: mirror, mount: ODataMount("/s/"))
    let (code, body) = try get(reader, "Orders(-1)/Lines")
    #expect(code == 200)
    #expect((body["value"]?.elements ?? []).map { $0["LineNo"]?.serialized() ?? "" } == ["1"])
    #expect(status(reader, "Orders(-1)", "$expand=Lines") == 200)
    // The downloaded order's lines were never downloaded: not answered as an empty collection.
    #expect(status(reader, "Orders(1)/Lines", "") == 501)
    #expect(status(reader, "Orders(1)", "$expand=Lines") == 501)
    #expect(status(reader, "Orders", "$expand=Lines") == 501)
}

private func fullMetadata(_ reader: ODataLocalReader, _ path: String, _ query: String = "") throws
    -> LocalReadResponse
{
    try reader.read(
        LocalReadRequest(
            path: path, query: query, serviceRoot: "http://gw/s/",
            format: ODataFormat(version: .v4, metadata: .full), pageSize: nil))
}

@Test func fullMetadataNamesPropertyTypesAndNavigationLinks() throws {
    let reader = ODataLocalReader(mirror: try shopOrdersMirror(), mount: ODataMount("/s/"))
    let order = try RawJSON.parse(try fullMetadata(reader, "Orders(1)").body)
    #expect(order["ID@odata.type"]?.string == "#Int32")
    #expect(order["Status@odata.type"]?.string == "#Shop.Model.Status")
    #expect(order["Lines@odata.navigationLink"]?.string == "http://gw/s/Orders(1)/Lines")
    #expect(order["Customer@odata.associationLink"]?.string == "http://gw/s/Orders(1)/Customer/$ref")
    let expanded = try RawJSON.parse(try fullMetadata(reader, "Orders(1)", "$expand=Lines").body)
    #expect(expanded["Lines@odata.navigationLink"]?.string == "http://gw/s/Orders(1)/Lines")
    let line = try #require(expanded["Lines"]?.elements?.first)
    #expect(line["Amount@odata.type"]?.string == "#Decimal")
    #expect(line["LineNo@odata.type"]?.string == "#Int32")

    let people = ODataLocalReader(mirror: try shopMirror(), mount: ODataMount("/s/"))
    let ann = try RawJSON.parse(try fullMetadata(people, "People(1)").body)
    #expect(ann["Name@odata.type"] == nil)  // String, Boolean and Double need none
    #expect(ann["Emails@odata.type"]?.string == "#Collection(String)")
    #expect(ann["Address@odata.type"]?.string == "#Shop.Model.Address")
    #expect(ann["Address"]?["@odata.type"]?.string == "#Shop.Model.Address")
}

@Test func computedAndAggregatedInt64AndDecimalAreStringsUnderIEEE754Compatible() throws {
    let reader = ODataLocalReader(mirror: try shopMirror(), mount: ODataMount("/s/"))
    func ieee(_ query: String) throws -> RawJSON {
        try RawJSON.parse(
            try reader.read(
                LocalReadRequest(
                    path: "Products", query: query, serviceRoot: "http://gw/s/",
                    format: ODataFormat(version: .v4, ieee754Compatible: true), pageSize: nil)
            ).body)
    }
    let sum = try ieee("$apply=aggregate(Stock%20with%20sum%20as%20S)")
    #expect(sum["value"]?.elements?.first?["S"]?.string == "9007199254741005")
    let computed = try ieee("$compute=Price%20mul%202%20as%20P&$select=ID,P&$filter=ID%20eq%202")
    #expect(computed["value"]?.elements?.first?["P"]?.string == "20.5")
    let (_, plain) = try get(reader, "Products", "$apply=aggregate(Stock%20with%20sum%20as%20S)")
    #expect(plain["value"]?.elements?.first?["S"]?.serialized() == "9007199254741005")
}

@Test func fullMetadataOfANumericDynamicPropertyIs501() throws {
    let (mirror, _) = try makeTemporaryMirror("odopen", metadata: ODataFixtures.shopV4)
    var rows: [String: [MirrorEntity]] = [:]
    var links: [MirrorLinkRecord] = []
    ODataDownloader.ingest(
        try RawJSON.parse(
            ##"{"@odata.type":"#Shop.Model.Customer","ID":3,"Name":"Cid","Nick":"C","Visits":7}"##
        )
        .members!, set: "People", type: "Shop.Model.Person", model: mirror.model!, into: &rows, links: &links)
    try mirror.replace(request: "people", query: "People", rows: rows)
    let reader = ODataLocalReader(mirror: mirror, mount: ODataMount("/s/"))
    let answer = try fullMetadata(reader, "People(3)")
    #expect(answer.status == 501)
    #expect(String(decoding: answer.body, as: UTF8.self).contains("Visits"))
    let (code, body) = try get(reader, "People(3)")  // minimal metadata: the value as downloaded
    #expect(code == 200)
    #expect(body["Visits"]?.serialized() == "7")
    // Not selected, it needs no type.
    #expect(try fullMetadata(reader, "People(3)", "$select=Name").status == 200)
}

@Test func v2AtomFeedsEntriesAndProperties() throws {
    let (mirror, _) = try makeTemporaryMirror("odatom", metadata: ODataFixtures.customersOrdersV2)
    try mirror.replace(
        request: "c", query: "Customers",
        rows: [
            "Customers": [
                MirrorEntity(
                    properties: try RawJSON.parse(#"{"CustomerID":"A<&>","Name":null}"#).members!,
                    etag: "W/\"1\"")
            ]
        ])
    let reader = ODataLocalReader(mirror: mirror, mount: ODataMount("/s/"))
    var request = LocalReadRequest(
        path: "Customers", query: "$inlinecount=allpages", serviceRoot: "http://gw/s/",
        format: ODataFormat(version: .v2), pageSize: nil)
    request.atom = true
    let feed = try reader.read(request)
    #expect(feed.contentType.hasPrefix("application/atom+xml;type=feed"))
    let doc = try XMLDocument(data: Data(feed.body))
    let root = try #require(doc.rootElement())
    #expect(root.localName == "feed")
    #expect(child(root, "count", ODataAtomSerializer.metadataNS)?.stringValue == "1")
    let entry = try #require(child(root, "entry", ODataAtomSerializer.atom))
    #expect(
        child(entry, "id", ODataAtomSerializer.atom)?.stringValue == "http://gw/s/Customers('A%3C%26%3E')")
    let content = try #require(child(entry, "content", ODataAtomSerializer.atom))
    let properties = try #require(child(content, "properties", ODataAtomSerializer.metadataNS))
    #expect(child(properties, "CustomerID", ODataAtomSerializer.dataNS)?.stringValue == "A<&>")
    let name = try #require(child(properties, "Name", ODataAtomSerializer.dataNS))
    #expect(name.attributes?.first { $0.localName == "null" }?.stringValue == "true")
    request.path = "Customers('A%3C%26%3E')/CustomerID"
    request.query = ""
    let propertyBody = try reader.read(request).body
    // Well-formed with namespaces: the `d` prefix of `d:CustomerID` is declared.
    #expect(
        String(decoding: propertyBody, as: UTF8.self).contains("xmlns:d=\"\(ODataAtomSerializer.dataNS)\""))
    let property = try XMLDocument(data: Data(propertyBody)).rootElement()
    #expect(property?.localName == "CustomerID")
    #expect(property?.stringValue == "A<&>")
}

/// The first child element of `node` with that local name and namespace URI.
private func child(_ node: XMLElement, _ name: String, _ uri: String) -> XMLElement? {
    (node.children ?? []).compactMap { $0 as? XMLElement }.first {
        ($0.localName ?? $0.name) == name && ($0.uri ?? "") == uri
    }
}

@Test func atomEntryBodiesAreWrittenOfflineAndAnsweredInAtom() throws {
    let (service, _) = try makeBootstrappedService(
        "odatomw", metadata: ODataFixtures.customersOrdersV2,
        data: ["Customers": #"{"d":{"results":[{"CustomerID":"A","Name":"Ann"}]}}"#])
    let entry = """
        <?xml version="1.0" encoding="utf-8"?>
        <entry xmlns="http://www.w3.org/2005/Atom" xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata"
          xmlns:d="http://schemas.microsoft.com/ado/2007/08/dataservices">
          <content type="application/xml"><m:properties>
            <d:OrderID>7</d:OrderID><d:CustomerID>A</d:CustomerID><d:Freight>12.50</d:Freight>
          </m:properties></content>
        </entry>
        """
    let created = service.writer.response(
        to: HTTPRequest(
            method: "POST", target: "/odata/s/Orders",
            headers: [
                "Host": "gw", "Content-Type": "application/atom+xml", "Accept": "application/atom+xml",
            ],
            body: Array(entry.utf8)))
    #expect(created.status == 201)
    #expect(created.headers["Content-Type"]?.hasPrefix("application/atom+xml") == true)
    #expect(bodyText(created).contains("<d:Freight>12.50</d:Freight>"))
    let (_, json) = localGET(service, "/odata/s/Orders(7)")
    #expect(json.contains(#""Freight":"12.50""#))
    let update = service.writer.response(
        to: HTTPRequest(
            method: "MERGE", target: "/odata/s/Customers('A')",
            headers: ["Host": "gw", "Content-Type": "application/atom+xml"],
            body: Array(
                entry.replacingOccurrences(of: "<d:OrderID>7</d:OrderID>", with: "<d:Name m:null=\"true\"/>")
                    .replacingOccurrences(
                        of: "<d:CustomerID>A</d:CustomerID><d:Freight>12.50</d:Freight>", with: ""
                    ).utf8)))
    #expect(update.status == 204)
    #expect(localGET(service, "/odata/s/Customers('A')").1.contains(#""Name":null"#))
    let bad = service.writer.response(
        to: HTTPRequest(
            method: "POST", target: "/odata/s/Orders",
            headers: ["Host": "gw", "Content-Type": "application/atom+xml"],
            body: Array("<entry><oops".utf8)))
    #expect(bad.status == 400)
    let entity = service.writer.response(
        to: HTTPRequest(
            method: "POST", target: "/odata/s/Orders",
            headers: ["Host": "gw", "Content-Type": "application/atom+xml"],
            body: Array(
                #"<?xml version="1.0"?><!DOCTYPE entry [<!ENTITY x SYSTEM "file:///etc/passwd">]><entry>&x;</entry>"#
                    .utf8)))
    #expect(entity.status == 400)
    #expect(bodyText(entity).contains("DTD"))
}

@Test func urlSuffixDoesNotOverrideTheClientsOwnParameters() {
    let s = ODataServiceSettings(
        name: "so", mount: "/odata/so/", upstream: "http://up/svc/",
        urlSuffix: "sap-client=100&sap-language=EN")
    #expect(
        s.upstreamURL(for: "/odata/so/A?$top=1") == "http://up/svc/A?$top=1&sap-client=100&sap-language=EN")
    #expect(s.upstreamURL(for: "/odata/so/A") == "http://up/svc/A?sap-client=100&sap-language=EN")
    #expect(
        s.upstreamURL(for: "/odata/so/A?SAP-Client=200") == "http://up/svc/A?SAP-Client=200&sap-language=EN")
    #expect(
        s.upstreamURL(for: "/odata/so/A?sap-language=DE&sap-client=200")
            == "http://up/svc/A?sap-language=DE&sap-client=200")
}

@Test(arguments: ["PUT", "MERGE", "PATCH", "DELETE"])
func writesToEntitiesTheMirrorDoesNotHoldFollowOneRule(method: String) throws {
    // `Customers` is held whole (bootstrapped without options): an unknown key did not exist at the last
    // download, so the answer is the upstream's 404. `Orders` was never downloaded: the write is queued.
    let (service, _) = try makeBootstrappedService(
        "odunheld", metadata: ODataFixtures.customersOrdersV2,
        data: ["Customers": #"{"d":{"results":[{"CustomerID":"A","Name":"Ann"}]}}"#])
    let body = method == "DELETE" ? [] : Array(#"{"CustomerID":"A","Freight":"3.50"}"#.utf8)
    func write(_ target: String) -> HTTPResponse {
        service.writer.response(
            to: HTTPRequest(
                method: method, target: target, headers: ["Host": "gw", "Content-Type": "application/json"],
                body: method == "DELETE" ? [] : Array(#"{"Name":"Zed"}"#.utf8)))
    }
    #expect(write("/odata/s/Customers('Z')").status == 404)
    #expect(service.queue.count == 0)
    let queued = service.writer.response(
        to: HTTPRequest(
            method: method, target: "/odata/s/Orders(99)",
            headers: ["Host": "gw", "Content-Type": "application/json"], body: body))
    #expect(queued.status == 204)
    #expect(service.queue.count == 1)
    let (status, json) = localGET(service, "/odata/s/Orders(99)")
    if method == "DELETE" {
        #expect(status == 404)
    } else {
        // Read-your-writes: the key and the given properties.
        #expect(status == 200)
        #expect(json.contains(#""Freight":"3.50""#) && json.contains(#""OrderID":99"#))
    }
}

@Test func atomEntryBodiesInsideABatchChangesetAreWrittenOffline() throws {
    let (service, _) = try makeBootstrappedService(
        "odatomb", metadata: ODataFixtures.customersOrdersV2,
        data: ["Customers": #"{"d":{"results":[{"CustomerID":"A","Name":"Ann"}]}}"#])
    let body = """
        --b
        Content-Type: multipart/mixed; boundary=cs

        --cs
        Content-Type: application/http
        Content-Transfer-Encoding: binary

        POST Orders HTTP/1.1
        Content-Type: application/atom+xml

        <entry xmlns="http://www.w3.org/2005/Atom" xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata" xmlns:d="http://schemas.microsoft.com/ado/2007/08/dataservices"><content type="application/xml"><m:properties><d:OrderID>8</d:OrderID><d:CustomerID>A</d:CustomerID><d:Freight>4.25</d:Freight></m:properties></content></entry>
        --cs--
        --b--

        """
    let r = localBatch(service, body)
    #expect(r.status == 202)
    #expect(bodyText(r).contains("HTTP/1.1 201"))
    #expect(localGET(service, "/odata/s/Orders(8)").1.contains(#""Freight":"4.25""#))
    #expect(service.queue.count == 1)
}

@Test func computedAndAggregatedColumnsAreTypedUnderFullMetadata() throws {
    // A `$compute` alias or an aggregate is no dynamic property of unknown type: its expression types it.
    let reader = ODataLocalReader(mirror: try shopMirror(), mount: ODataMount("/s/"))
    let computed = try fullMetadata(reader, "Products", "$compute=Price%20mul%202%20as%20P&$select=ID,P")
    #expect(computed.status == 200)
    let first = try #require(try RawJSON.parse(computed.body)["value"]?.elements?.first)
    #expect(first["P@odata.type"]?.string == "#Decimal")
    #expect(first["P"]?.serialized() == "19")
    #expect(first["ID@odata.type"]?.string == "#Int32")
    let aggregated = try fullMetadata(reader, "Products", "$apply=aggregate(Stock%20with%20sum%20as%20S)")
    #expect(aggregated.status == 200)
    let sum = try #require(try RawJSON.parse(aggregated.body)["value"]?.elements?.first)
    #expect(sum["S@odata.type"]?.string == "#Int64")
    #expect(sum["S"]?.serialized() == "9007199254741005")
    let grouped = try fullMetadata(
        reader, "Products", "$apply=groupby((Status),aggregate(Price%20with%20max%20as%20M))")
    #expect(grouped.status == 200)
    let group = try #require(try RawJSON.parse(grouped.body)["value"]?.elements?.first)
    #expect(group["M@odata.type"]?.string == "#Decimal")
}

/// A JSON write answered by the offline writer.
private func jsonWrite(_ service: ODataService, _ method: String, _ target: String, _ body: String)
    -> HTTPResponse
{
    service.writer.response(
        to: HTTPRequest(
            method: method, target: target, headers: ["Host": "gw", "Content-Type": "application/json"],
            body: Array(body.utf8)))
}

@Test func aCreateIntoContainedEntitiesOfADownloadedParentIsAnsweredWithTheEntity() throws {
    // `Orders(1)` was downloaded, its lines were not: the line written offline is held and answered
    // (read-your-writes), the collection of its lines still is not.
    let (service, _) = try makeBootstrappedService(
        "odcpost", metadata: ODataFixtures.shopV4,
        data: ["Orders": #"{"value":[{"ID":1,"Status":"Open","CustomerID":3}]}"#])
    let created = jsonWrite(service, "POST", "/odata/s/Orders(1)/Lines", #"{"LineNo":5,"Quantity":1}"#)
    #expect(created.status == 201)
    #expect(created.headers["Location"] == "http://gw/odata/s/Orders(1)/Lines(5)")
    let entity = try RawJSON.parse(bodyText(created))
    #expect(entity["error"] == nil)
    #expect(entity["LineNo"]?.serialized() == "5" && entity["Quantity"]?.serialized() == "1")
    #expect(service.queue.count == 1)
    let (code, line) = localGET(service, "/odata/s/Orders(1)/Lines(5)")
    #expect(code == 200)
    #expect(line.contains(#""LineNo":5"#))
    #expect(localGET(service, "/odata/s/Orders(1)/Lines(5)/Quantity").0 == 200)
    #expect(localGET(service, "/odata/s/Orders(1)/Lines(6)").0 == 501)
    #expect(localGET(service, "/odata/s/Orders(1)/Lines(6)/Quantity").0 == 501)
    #expect(localGET(service, "/odata/s/Orders(1)/Lines").0 == 501)
    #expect(localGET(service, "/odata/s/Orders(1)/Lines/$count").0 == 501)
    #expect(localGET(service, "/odata/s/Orders(1)?$expand=Lines").0 == 501)
    #expect(localGET(service, "/odata/s/Orders(2)/Lines(5)").0 == 404)
}

@Test(arguments: ["PATCH", "PUT"])
func anUpdatedEntityTheMirrorDidNotHoldIsNoParentCreatedOffline(method: String) throws {
    // `Orders(7)` was never downloaded: the update stores it, but what it contains upstream is unknown, so
    // its lines are not answered as an empty collection (unlike those of an order created offline).
    let (service, _) = try makeBootstrappedService(
        "odunkp", metadata: ODataFixtures.shopV4,
        data: ["Products": #"{"value":[{"ID":1,"Name":"x"}]}"#])
    let updated = jsonWrite(service, method, "/odata/s/Orders(7)", #"{"Status":"Closed"}"#)
    #expect(updated.status == 204)
    let (code, order) = localGET(service, "/odata/s/Orders(7)")
    #expect(code == 200 && order.contains(#""Status":"Closed""#))
    #expect(localGET(service, "/odata/s/Orders(7)/Lines").0 == 501)
    #expect(localGET(service, "/odata/s/Orders(7)/Lines/$count").0 == 501)
    #expect(localGET(service, "/odata/s/Orders(7)?$expand=Lines").0 == 501)
    let created = jsonWrite(service, "POST", "/odata/s/Orders", #"{"ID":8,"Status":"Open"}"#)
    #expect(created.status == 201)
    let (createdCode, lines) = localGET(service, "/odata/s/Orders(8)/Lines")
    #expect(createdCode == 200 && lines.contains(#""value":[]"#))
}

@Test func aDownloadKeepsAnUpdatedUnknownEntityWhileQueuedAndThenReplacesIt() throws {
    // Written through the gateway like a created entity: pending, it wins over a download; once nothing is
    // queued, it gives way to the server's rows.
    let (service, _) = try makeBootstrappedService(
        "odunkd", metadata: ODataFixtures.shopV4,
        data: ["Products": #"{"value":[{"ID":1,"Name":"x"}]}"#])
    let updated = jsonWrite(service, "PATCH", "/odata/s/Orders(7)", #"{"Status":"Closed"}"#)
    #expect(updated.status == 204)
    func download() throws {
        try service.mirror.replace(
            request: "orders", query: "Orders",
            rows: ["Orders": [MirrorEntity(properties: try RawJSON.parse(#"{"ID":1}"#).members!)]],
            pending: try service.downloader.pendingChanges(), deltaLink: nil)
    }
    try download()
    #expect(localGET(service, "/odata/s/Orders(7)").1.contains(#""Status":"Closed""#))
    #expect(localGET(service, "/odata/s/Orders(1)").0 == 200)
    while let r = try service.queue.first() {
        try service.mirror.write { w in try service.queue.remove(r, in: w.db) }
        service.queue.didLeave(r)
    }
    try download()
    #expect(localGET(service, "/odata/s/Orders(7)").0 == 404)
    #expect(localGET(service, "/odata/s/Orders(1)").0 == 200)
}

@Test func lambdasOverContainedEntitiesNotDownloadedAre501() throws {
    // `Orders(1)` was downloaded without its lines: whether it has any is unknown upstream.
    let (mirror, _) = try makeTemporaryMirror("odlambda", metadata: ODataFixtures.shopV4)
    try mirror.replace(
        request: "orders", query: "Orders",
        rows: ["Orders": [MirrorEntity(properties: try RawJSON.parse(#"{"ID":1}"#).members!)]])
    let reader = ODataLocalReader(mirror: mirror, mount: ODataMount("/s/"))
    for filter in [
        "Lines/any()", "not%20Lines/any()", "Lines/all(l:l/Quantity%20gt%200)",
        "Lines/any(l:l/Quantity%20gt%200)", "Lines/$count%20eq%200",
    ] {
        #expect(status(reader, "Orders", "$filter=" + filter) == 501, "\(filter)")
        #expect(status(reader, "Orders/$count", "$filter=" + filter) == 501, "\(filter)")
    }
    #expect(status(reader, "Orders", "$orderby=Lines/$count") == 501)
    // Downloaded with their lines, the same filters are answered.
    let downloaded = ODataLocalReader(mirror: try shopOrdersMirror(), mount: ODataMount("/s/"))
    let (code, body) = try get(downloaded, "Orders", "$filter=Lines/any()")
    #expect(code == 200)
    #expect(ids(body) == ["1", "2"])
    #expect(try ids(get(downloaded, "Orders", "$filter=not%20Lines/any()").1) == ["3"])
    // Orders created offline contain exactly what was written into them.
    let (service, _) = try makeBootstrappedService(
        "odlambdal", metadata: ODataFixtures.shopV4, data: ["Products": #"{"value":[{"ID":1,"Name":"x"}]}"#])
    #expect(jsonWrite(service, "POST", "/odata/s/Orders", #"{"ID":8,"Status":"Open"}"#).status == 201)
    #expect(jsonWrite(service, "POST", "/odata/s/Orders", #"{"ID":9,"Status":"Open"}"#).status == 201)
    #expect(
        jsonWrite(service, "POST", "/odata/s/Orders(9)/Lines", #"{"LineNo":1,"Quantity":1}"#).status == 201)
    let (localCode, local) = localGET(service, "/odata/s/Orders?$filter=Lines/any()&$select=ID")
    #expect(localCode == 200)
    #expect(try ids(RawJSON.parse(local)) == ["9"])
}

@Test func aFailedDownloadRunKeepsTheOfflineWrites() throws {
    // The upstream is unreachable: the run fails and the mirror stays as the offline writes left it
    // (the bootstrap data is not reloaded over them).
    let (service, _) = try makeBootstrappedService(
        "odfailrun", metadata: ODataFixtures.customersOrdersV2,
        data: [
            "Customers":
                #"{"d":{"results":[{"CustomerID":"A","Name":"Ann"},{"CustomerID":"B","Name":"Bo"}]}}"#
        ],
        timeout: .seconds(2))
    #expect(jsonWrite(service, "MERGE", "/odata/s/Customers('A')", #"{"Name":"Annie"}"#).status == 204)
    let deleted = service.writer.response(
        to: HTTPRequest(method: "DELETE", target: "/odata/s/Customers('B')", headers: ["Host": "gw"]))
    #expect(deleted.status == 204)
    #expect(throws: (any Error).self) { try service.downloader.runDownload() }
    let (code, after) = localGET(service, "/odata/s/Customers")
    #expect(code == 200)
    #expect(after.contains(#""Name":"Annie""#))
    #expect(!after.contains(#""CustomerID":"B""#))
    #expect(service.queue.count == 2)
}

@Test func anOrderCreatedOfflineContainsOnlyItsWrittenLinesUntilItsCreateIsUploaded() throws {
    let (service, _) = try makeBootstrappedService(
        "odupl", metadata: ODataFixtures.shopV4, data: ["Products": #"{"value":[{"ID":1,"Name":"x"}]}"#])
    #expect(jsonWrite(service, "POST", "/odata/s/Orders", #"{"ID":8,"Status":"Open"}"#).status == 201)
    #expect(
        jsonWrite(service, "POST", "/odata/s/Orders(8)/Lines", #"{"LineNo":1,"Quantity":1}"#).status == 201)
    #expect(localGET(service, "/odata/s/Orders(8)/Lines").0 == 200)
    let create = try #require(try service.queue.first())
    try service.mirror.write { w in
        try service.uploader.recordUploaded(create, body: [], location: nil, in: w)
    }
    service.queue.didLeave(create)
    // The server's order may hold more lines than were written: read whole, they are not known.
    #expect(localGET(service, "/odata/s/Orders(8)").0 == 200)
    #expect(localGET(service, "/odata/s/Orders(8)/Lines").0 == 501)
    #expect(localGET(service, "/odata/s/Orders?$filter=Lines/any()").0 == 501)
    #expect(localGET(service, "/odata/s/Orders(8)/Lines(1)").0 == 200)
}
