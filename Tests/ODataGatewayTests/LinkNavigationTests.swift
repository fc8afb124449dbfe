import Foundation
import JSONCore
import MirrorgateTesting
import ODataCore
import Storage
import Testing

@testable import ODataGateway

private func tempMirror(_ metadata: String) throws -> ODataMirror {
    try makeTemporaryMirror("odlink", metadata: metadata).0
}

/// Ingests a defining request's payload as the download does and stores it.
private func download(_ mirror: ODataMirror, request: String, set: String, type: String, _ payload: String)
    throws
{
    let m = try #require(mirror.model)
    var rows: [String: [MirrorEntity]] = [set: []]
    var links: [MirrorLinkRecord] = []
    for item in ODataDownloader.entities(in: try RawJSON.parse(payload)).items {
        ODataDownloader.ingest(item.members!, set: set, type: type, model: m, into: &rows, links: &links)
    }
    try mirror.replace(request: request, query: set, rows: rows, links: links)
}

private func read(
    _ mirror: ODataMirror, _ path: String, _ query: String = "", version: ODataVersion = .v4
) throws -> (Int, String) {
    let r = try ODataLocalReader(mirror: mirror, mount: ODataMount("/odata/x/")).read(
        LocalReadRequest(
            path: path, query: query, serviceRoot: "http://gw/o/", format: ODataFormat(version: version),
            pageSize: nil))
    return (r.status, String(decoding: r.body, as: UTF8.self))
}

private func status(_ mirror: ODataMirror, _ path: String, _ query: String = "") -> Int {
    do { return try read(mirror, path, query).0 } catch { return (error as? ODataServiceError)?.status ?? -1 }
}

private let customersWithOrders = #"""
    {"value":[
      {"CustomerID":"ALFKI","Country":"DE","Orders":[{"OrderID":2,"Freight":11.61},{"OrderID":1,"Freight":32.38}]},
      {"CustomerID":"ANATR","Country":"MX","Orders":[]},
      {"CustomerID":"BONAP","Country":"FR","Orders":[{"OrderID":3,"Freight":65.83}]}]}
    """#

@Test func linkNavigationsAreTheOnesWithoutConstraints() throws {
    let mirror = try tempMirror(ODataFixtures.customersOrdersWithoutConstraintV4)
    let links = try #require(mirror.model?.links)
    #expect(links["Customers"]?["Orders"]?.targetSet == "Orders")
    #expect(links["Orders"]?["Customer"]?.isCollection == false)
    #expect(links["Customers"]?["Orders"]?.singlePartner == "Customer")
    #expect(links["Orders"]?["Customer"]?.singlePartner == nil)  // its partner is a collection
    #expect(links["Customers"]?["Orders"]?.table == "_mg_link/Customers/Orders")
}

@Test func expandedPayloadsRecordLinksAndMarkers() throws {
    let mirror = try tempMirror(ODataFixtures.customersOrdersWithoutConstraintV4)
    let m = try #require(mirror.model)
    var rows: [String: [MirrorEntity]] = [:]
    var links: [MirrorLinkRecord] = []
    for item in ODataDownloader.entities(in: try RawJSON.parse(customersWithOrders)).items {
        ODataDownloader.ingest(
            item.members!, set: "Customers", type: "NS.Customer", model: m, into: &rows, links: &links)
    }
    #expect(rows["Orders"]?.count == 3)
    let alfki = links.filter { $0.source == [.text("ALFKI")] }
    #expect(alfki.map(\.target) == [nil, [.integer(2)], [.integer(1)]])
    // Expanded and empty: the marker alone says "known, none".
    #expect(links.filter { $0.source == [.text("ANATR")] }.map(\.target) == [nil])

    // V2: nested `results`, a single object, and `__deferred` (not expanded: nothing recorded).
    let v2 = try tempMirror(ODataFixtures.headersItemsWithoutConstraintV2)
    let m2 = try #require(v2.model)
    #expect(m2.links["HeaderSet"]?["ToItems"]?.targetKey.map(\.name) == ["Id", "Pos"])
    var rows2: [String: [MirrorEntity]] = [:]
    var links2: [MirrorLinkRecord] = []
    let payload = try RawJSON.parse(
        #"{"d":{"results":[{"Id":"A","ToItems":{"results":[{"Id":"A","Pos":10,"Qty":1}]}},{"Id":"B","ToItems":{"__deferred":{"uri":"x"}}}]}}"#
    )
    for item in ODataDownloader.entities(in: payload).items {
        ODataDownloader.ingest(
            item.members!, set: "HeaderSet", type: "S.Header", model: m2, into: &rows2, links: &links2)
    }
    #expect(
        links2 == [
            MirrorLinkRecord(
                sourceSet: "HeaderSet", navigation: "ToItems", source: [.text("A")], target: nil),
            MirrorLinkRecord(
                sourceSet: "HeaderSet", navigation: "ToItems", source: [.text("A")],
                target: [.text("A"), .integer(10)]),
        ])
}

@Test func navigationPathsCountExpandAndFiltersThroughLinks() throws {
    let mirror = try tempMirror(ODataFixtures.customersOrdersWithoutConstraintV4)
    try download(mirror, request: "c", set: "Customers", type: "NS.Customer", customersWithOrders)
    try download(
        mirror, request: "o", set: "Orders", type: "NS.Order",
        #"{"value":[{"OrderID":1,"Freight":32.38,"Customer":{"CustomerID":"ALFKI","Country":"DE"}},{"OrderID":2,"Freight":11.61,"Customer":{"CustomerID":"ALFKI","Country":"DE"}},{"OrderID":3,"Freight":65.83,"Customer":{"CustomerID":"BONAP","Country":"FR"}},{"OrderID":4,"Freight":1,"Customer":null}]}"#
    )
    let orders = try read(mirror, "Customers('ALFKI')/Orders")
    #expect(orders.0 == 200)
    #expect(orders.1.contains(#""@odata.context":"http://gw/o/$metadata#Orders""#))
    #expect(orders.1.range(of: #""OrderID":1"#)!.lowerBound < orders.1.range(of: #""OrderID":2"#)!.lowerBound)
    #expect(!orders.1.contains(#""OrderID":3"#))
    #expect(try read(mirror, "Customers('ALFKI')/Orders/$count").1 == "2")
    #expect(try read(mirror, "Customers('ANATR')/Orders").1.contains(#""value":[]"#))
    #expect(status(mirror, "Customers('NOPE')/Orders") == 404)
    #expect(status(mirror, "Customers('NOPE')/Orders/$ref") == 404)
    #expect(try read(mirror, "Orders(2)/Customer").1.contains(#""CustomerID":"ALFKI""#))
    #expect(status(mirror, "Orders(4)/Customer") == 404)  // expanded as null: known, no customer
    let expanded = try read(mirror, "Customers", "$expand=Orders($select=OrderID;$top=1)")
    #expect(expanded.1.contains(#""CustomerID":"ALFKI","Country":"DE","Orders":[{"OrderID":1}]"#))
    #expect(expanded.1.contains(#""CustomerID":"ANATR","Country":"MX","Orders":[]"#))
    let filtered = try read(mirror, "Orders", "$filter=Customer/Country%20eq%20'DE'&$select=OrderID")
    #expect(filtered.1.contains(#""value":[{"OrderID":1},{"OrderID":2}]"#))
    let any = try read(mirror, "Customers", "$filter=Orders/any(o:o/Freight%20gt%2020)&$select=CustomerID")
    #expect(any.1.contains(#""value":[{"CustomerID":"ALFKI"},{"CustomerID":"BONAP"}]"#))
    let all = try read(mirror, "Customers", "$filter=Orders/all(o:o/Freight%20gt%2020)&$select=CustomerID")
    #expect(all.1.contains(#""value":[{"CustomerID":"ANATR"},{"CustomerID":"BONAP"}]"#))
    let counted = try read(mirror, "Customers", "$filter=Orders/$count%20ge%202&$select=CustomerID")
    #expect(counted.1.contains(#""value":[{"CustomerID":"ALFKI"}]"#))
}

@Test func linksNeverDownloadedAre501AndReplaceIsPerRequest() throws {
    let mirror = try tempMirror(ODataFixtures.customersOrdersWithoutConstraintV4)
    try download(mirror, request: "c", set: "Customers", type: "NS.Customer", customersWithOrders)
    // A customer from a request without $expand: its orders cannot be known.
    try download(
        mirror, request: "more", set: "Customers", type: "NS.Customer",
        #"{"value":[{"CustomerID":"ZED","Country":"DE"}]}"#)
    #expect(status(mirror, "Customers('ZED')/Orders") == 501)
    #expect(status(mirror, "Customers('ZED')", "$expand=Orders") == 501)
    #expect(status(mirror, "Customers('ALFKI')/Orders") == 200)
    // A filter through the navigation would silently miss ZED's orders: 501 until every row is covered.
    #expect(status(mirror, "Customers", "$filter=Orders/any()") == 501)
    // Orders were never downloaded with $expand=Customer, but each order ALFKI's expanded Orders showed
    // has ALFKI as its (single-valued partner) Customer.
    #expect(try read(mirror, "Orders(1)/Customer").1.contains(#""CustomerID":"ALFKI""#))
    let viaPartner = try read(mirror, "Orders", "$filter=Customer/Country%20eq%20'DE'&$select=OrderID").1
    #expect(viaPartner.contains(#""value":[{"OrderID":1},{"OrderID":2}]"#))
    // An order no expanded customer showed: its customer is unknown.
    try download(mirror, request: "o", set: "Orders", type: "NS.Order", #"{"value":[{"OrderID":9}]}"#)
    #expect(status(mirror, "Orders(9)/Customer") == 501)
    #expect(status(mirror, "Orders", "$filter=Customer/Country%20eq%20'DE'") == 501)
    try download(mirror, request: "o", set: "Orders", type: "NS.Order", #"{"value":[]}"#)
    // The next download of "c" replaces its links (ALFKI lost order 2) and "more" no longer holds ZED.
    try download(
        mirror, request: "c", set: "Customers", type: "NS.Customer",
        #"{"value":[{"CustomerID":"ALFKI","Country":"DE","Orders":[{"OrderID":1,"Freight":32.38}]}]}"#)
    try download(mirror, request: "more", set: "Customers", type: "NS.Customer", #"{"value":[]}"#)
    #expect(try read(mirror, "Customers('ALFKI')/Orders/$count").1 == "1")
    #expect(
        try read(mirror, "Customers", "$filter=Orders/any()&$select=CustomerID").1.contains(
            #""value":[{"CustomerID":"ALFKI"}]"#))
}

@Test func referencesV4AndLinksV2() throws {
    let mirror = try tempMirror(ODataFixtures.customersOrdersWithoutConstraintV4)
    try download(mirror, request: "c", set: "Customers", type: "NS.Customer", customersWithOrders)
    #expect(
        try read(mirror, "Customers('ALFKI')/Orders/$ref").1
            == #"{"@odata.context":"http://gw/o/$metadata#Collection($ref)","value":[{"@odata.id":"http://gw/o/Orders(1)"},{"@odata.id":"http://gw/o/Orders(2)"}]}"#
    )
    #expect(
        try read(mirror, "Customers('ALFKI')/Orders(2)/$ref").1
            == #"{"@odata.context":"http://gw/o/$metadata#$ref","@odata.id":"http://gw/o/Orders(2)"}"#)
    #expect(status(mirror, "Customers('ALFKI')/Orders(3)/$ref") == 404)

    let v2 = try tempMirror(ODataFixtures.headersItemsWithoutConstraintV2)
    try download(
        v2, request: "h", set: "HeaderSet", type: "S.Header",
        #"{"d":{"results":[{"Id":"A","ToItems":{"results":[{"Id":"A","Pos":20},{"Id":"A","Pos":10}]}}]}}"#)
    #expect(
        try read(v2, "HeaderSet('A')/$links/ToItems", version: .v2).1
            == #"{"d":{"results":[{"uri":"http://gw/o/ItemSet(Id='A',Pos=10)"},{"uri":"http://gw/o/ItemSet(Id='A',Pos=20)"}]}}"#
    )
    #expect(
        try read(v2, "HeaderSet('A')/$links/ToItems(Id='A',Pos=20)", version: .v2).1
            == #"{"d":{"uri":"http://gw/o/ItemSet(Id='A',Pos=20)"}}"#)
    #expect(try read(v2, "HeaderSet('A')/ToItems/$count", version: .v2).1 == "2")
    let expanded = try read(v2, "HeaderSet('A')", "$expand=ToItems", version: .v2).1
    #expect(
        expanded.contains(#""ToItems":{"results":[{"__metadata":{"id":"http://gw/o/ItemSet(Id='A',Pos=10)""#))
    #expect(expanded.range(of: "Pos=10")!.lowerBound < expanded.range(of: "Pos=20")!.lowerBound)
}

@Test func filterThroughLinksBindsEveryLiteral() throws {
    let mirror = try tempMirror(ODataFixtures.customersOrdersWithoutConstraintV4)
    let m = try #require(mirror.model)
    let mapping = MirrorSQLMapping(m)
    let parser = ODataFilterParser(model: m.model, entityType: "NS.Order", version: .v4)
    let translator = ODataSQLTranslator(mapping: mapping, model: m.model, rootEntityType: "NS.Order")
    let f = try translator.translateFilter(parser.parseFilter("Customer/Country eq 'D''E'"))
    #expect(
        f.sql
            == #"((SELECT "t1"."Country" FROM "_mg_link/Orders/Customer" AS "t1l" JOIN "Customers" AS "t1" ON "t1l"."t_CustomerID" = "t1"."CustomerID" WHERE "t1l"."s_OrderID" = "t0"."OrderID" LIMIT 1) = ?)"#
    )
    #expect(f.bindings == [.text("D'E")])
    #expect(mapping.usage.all.map(\.table) == ["_mg_link/Orders/Customer"])
    let c = ODataSQLTranslator(mapping: MirrorSQLMapping(m), model: m.model, rootEntityType: "NS.Customer")
    let cp = ODataFilterParser(model: m.model, entityType: "NS.Customer", version: .v4)
    let count = try c.translateFilter(cp.parseFilter("Orders/$count gt 1"))
    #expect(count.sql.contains(#"COUNT(DISTINCT "t1".rowid)"#))
    #expect(count.bindings == [.integer(1)])
}

@Test func nestedExpandLevelsRecordTheirLinksToo() throws {
    let mirror = try tempMirror(ODataFixtures.customersOrdersWithoutConstraintV4)
    // `Customers?$expand=Orders($expand=Customer)`: both navigations are known from one request.
    try download(
        mirror, request: "c", set: "Customers", type: "NS.Customer",
        #"{"value":[{"CustomerID":"ALFKI","Country":"DE","Orders":[{"OrderID":1,"Freight":1.5,"Customer":{"CustomerID":"ALFKI","Country":"DE"}}]},{"CustomerID":"BONAP","Country":"FR","Orders":[]}]}"#
    )
    #expect(
        try read(mirror, "Orders(1)/Customer/$ref").1.contains(
            #""@odata.id":"http://gw/o/Customers('ALFKI')""#))
    let deep = try read(mirror, "Customers('ALFKI')", "$expand=Orders($expand=Customer($select=Country))").1
    #expect(
        deep.contains(
            #""Orders":[{"OrderID":1,"Freight":1.5,"Customer":{"CustomerID":"ALFKI","Country":"DE"}}]"#))
    let filtered = try read(mirror, "Orders", "$filter=Customer/Country%20eq%20'DE'&$select=OrderID").1
    #expect(filtered.contains(#""value":[{"OrderID":1}]"#))
    // A nested $select without the key leaves the links unknown rather than empty.
    try download(
        mirror, request: "c", set: "Customers", type: "NS.Customer",
        #"{"value":[{"CustomerID":"ALFKI","Country":"DE","Orders":[{"Freight":1.5}]}]}"#)
    #expect(status(mirror, "Customers('ALFKI')/Orders") == 501)
}
