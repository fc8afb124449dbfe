import Foundation
import HTTPCore
import JSONCore
import MirrorgateTesting
import Testing

@testable import ODataGateway

/// Issue 19 D2: every local write path checks its payload against `$metadata` and refuses with a 400
/// OData error (nothing applied, nothing queued) what the upstream would have refused.
private let metadata = """
    <?xml version="1.0" encoding="utf-8"?>
    <edmx:Edmx Version="4.0" xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx">
      <edmx:DataServices>
        <Schema Namespace="S" xmlns="http://docs.oasis-open.org/odata/ns/edm">
          <EntityType Name="Category">
            <Key><PropertyRef Name="CategoryID"/></Key>
            <Property Name="CategoryID" Type="Edm.Int32" Nullable="false"/>
            <Property Name="Title" Type="Edm.String" Nullable="false" MaxLength="10"/>
            <NavigationProperty Name="Products" Type="Collection(S.Product)" Partner="Category"/>
          </EntityType>
          <EntityType Name="Product">
            <Key><PropertyRef Name="ProductID"/></Key>
            <Property Name="ProductID" Type="Edm.Int32" Nullable="false"/>
            <Property Name="ProductName" Type="Edm.String" Nullable="false"/>
            <Property Name="UnitPrice" Type="Edm.Decimal" Precision="19" Scale="4"/>
            <Property Name="Discontinued" Type="Edm.Boolean" Nullable="false"/>
            <Property Name="CategoryID" Type="Edm.Int32"/>
            <NavigationProperty Name="Category" Type="S.Category" Partner="Products">
              <ReferentialConstraint Property="CategoryID" ReferencedProperty="CategoryID"/>
            </NavigationProperty>
          </EntityType>
          <EntityType Name="Note">
            <Key><PropertyRef Name="NoteID"/></Key>
            <Property Name="NoteID" Type="Edm.String" Nullable="false" MaxLength="10"/>
            <Property Name="Text" Type="Edm.String"/>
          </EntityType>
          <EntityContainer Name="C">
            <EntitySet Name="Notes" EntityType="S.Note"/>
            <EntitySet Name="Categories" EntityType="S.Category">
              <NavigationPropertyBinding Path="Products" Target="Products"/>
            </EntitySet>
            <EntitySet Name="Products" EntityType="S.Product">
              <NavigationPropertyBinding Path="Category" Target="Categories"/>
            </EntitySet>
          </EntityContainer>
        </Schema>
      </edmx:DataServices>
    </edmx:Edmx>
    """

private func makeService() throws -> ODataService {
    try makeBootstrappedService(
        "odvalid", metadata: metadata,
        data: [
            "Categories": #"{"value":[{"CategoryID":1,"Title":"Drinks"}]}"#,
            "Products":
                #"{"value":[{"ProductID":1,"ProductName":"Chai","UnitPrice":18,"Discontinued":false,"CategoryID":1}]}"#,
        ]
    ).0
}

private func write(_ service: ODataService, _ method: String, _ target: String, _ body: [UInt8])
    -> HTTPResponse
{
    service.writer.response(
        to: HTTPRequest(
            method: method, target: "/odata/s/" + target,
            headers: ["Host": "gw", "Content-Type": "application/json"], body: body))
}

private func write(_ service: ODataService, _ method: String, _ target: String, _ body: String)
    -> HTTPResponse
{
    write(service, method, target, Array(body.utf8))
}

/// The OData error of a response: code and target.
private func error(_ r: HTTPResponse) -> (code: String?, target: String?) {
    let e = (try? RawJSON.parse(bodyText(r)))?["error"]
    return (e?["code"]?.string, e?["target"]?.string)
}

@Test func badSingleWritesAre400WithTheirPropertyAndNothingIsQueued() throws {
    let service = try makeService()
    let refused: [(String, String, String, String?)] = [
        (
            "POST", "Products", #"{"ProductName":"X","Discontinued":false,"UnitPrice":"not-a-number"}"#,
            "UnitPrice"
        ),
        ("POST", "Products", #"{"ProductName":"X","Discontinued":"maybe"}"#, "Discontinued"),
        ("POST", "Products", #"{"ProductName":"X","Discontinued":false,"UnitPrice":1e309}"#, "UnitPrice"),
        ("POST", "Products", #"{"ProductID":"abc","ProductName":"X","Discontinued":false}"#, "ProductID"),
        (
            "POST", "Products", #"{"ProductID":1099511627776,"ProductName":"X","Discontinued":false}"#,
            "ProductID"
        ),
        ("POST", "Products", #"{"ProductName":"X"}"#, "Discontinued"),
        ("POST", "Products", #"{"ProductName":"X","Discontinued":true,"Colour":"red"}"#, "Colour"),
        (
            "POST", "Products",
            #"{"ProductName":"X","Discontinued":true,"Nowhere@odata.bind":"Categories(1)"}"#,
            "Nowhere@odata.bind"
        ),
        (
            "POST", "Products", #"{"ProductName":"X","Discontinued":true,"Category@odata.bind":17}"#,
            "Category@odata.bind"
        ),
        ("PATCH", "Products(1)", #"{"UnitPrice":"cheap"}"#, "UnitPrice"),
        ("PATCH", "Products(1)", #"{"Discontinued":null}"#, "Discontinued"),
        ("PATCH", "Products(1)", #"{"ProductID":2}"#, "ProductID"),
        (
            "PUT", "Products(1)", #"{"ProductName":"Chai","Discontinued":false,"CategoryID":2147483648}"#,
            "CategoryID"
        ),
        // A client's bad foreign key is refused even where a link would set it.
        (
            "POST", "Products",
            #"{"ProductName":"X","Discontinued":true,"CategoryID":"abc","Category@odata.bind":"Categories(1)"}"#,
            "CategoryID"
        ),
        (
            "POST", "Categories(1)/Products", #"{"ProductName":"X","Discontinued":true,"CategoryID":1.5}"#,
            "CategoryID"
        ),
        // A deep insert's nested entity is checked like a create of its own.
        ("POST", "Categories", #"{"Title":"Food","Products":[{"ProductName":"Bread"}]}"#, "Discontinued"),
        ("POST", "Categories", #"{"Title":"Far too long a title"}"#, "Title"),
        ("POST", "Categories(1)/Products", #"{"ProductName":"Tea","Discontinued":"no"}"#, "Discontinued"),
    ]
    for (method, target, body, property) in refused {
        let r = write(service, method, target, body)
        #expect(r.status == 400, "\(method) \(target) \(body): \(r.status) \(bodyText(r))")
        #expect(r.headers["Location"] == nil)
        #expect(error(r).code == "BadRequest" && error(r).target == property, "\(body): \(bodyText(r))")
    }
    #expect(service.queue.count == 0)
    #expect(localGET(service, "/odata/s/Products/$count").1 == "1")
    #expect(localGET(service, "/odata/s/Products(1)").1.contains(#""UnitPrice":18"#))
}

@Test func invalidUTF8AndBadKeyPredicatesAreRefusedNotReplaced() throws {
    let service = try makeService()
    var body = Array(#"{"ProductName":"Caf"#.utf8)
    body += [0xE9]  // Latin-1 é: not UTF-8
    body += Array(#"","Discontinued":false}"#.utf8)
    let r = write(service, "POST", "Products", body)
    #expect(r.status == 400)
    // A key predicate of the wrong type in the path is a bad request, not an unknown resource.
    #expect(write(service, "PATCH", "Products('abc')", #"{"ProductName":"Y"}"#).status == 400)
    #expect(write(service, "PATCH", "Products(1099511627776)", #"{"ProductName":"Y"}"#).status == 400)
    #expect(write(service, "PATCH", "Nowhere(1)", #"{"ProductName":"Y"}"#).status == 404)
    let batch =
        "--b\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n"
        + "POST Products HTTP/1.1\r\nContent-Type: application/json\r\n\r\n{\"ProductName\":\"Caf"
    var batchBody = Array(batch.utf8)
    batchBody += [0xE9]
    batchBody += Array("\",\"Discontinued\":false}\r\n--b--\r\n".utf8)
    let b = service.writer.batchResponse(
        to: HTTPRequest(
            method: "POST", target: "/odata/s/$batch",
            headers: ["Host": "gw", "Content-Type": "multipart/mixed; boundary=b"], body: batchBody))
    #expect(b.status == 400, "\(bodyText(b))")
    #expect(service.queue.count == 0)
    #expect(localGET(service, "/odata/s/Products/$count").1 == "1")
}

@Test func batchPartsAreCheckedAndAFailingPartRefusesItsChangeset() throws {
    let service = try makeService()
    let json = """
        {"requests":[
          {"id":"1","atomicityGroup":"g","method":"POST","url":"Categories","body":{"Title":"Food"}},
          {"id":"2","atomicityGroup":"g","method":"POST","url":"$1/Products",
           "body":{"ProductName":"Bread","Discontinued":false,"UnitPrice":1.23456}},
          {"id":"3","method":"POST","url":"Products","body":{"ProductName":"Tea","Discontinued":true}}
        ]}
        """
    let r = service.writer.batchResponse(
        to: HTTPRequest(
            method: "POST", target: "/odata/s/$batch",
            headers: ["Host": "gw", "Content-Type": "application/json"], body: Array(json.utf8)))
    #expect(r.status == 200)
    let responses = try #require(try RawJSON.parse(bodyText(r))["responses"]?.elements)
    let statuses = responses.map { $0["status"].map { $0.serialized() } ?? "" }
    // The changeset is refused whole (its second part's UnitPrice has 5 decimals, Scale=4); the third
    // request stands alone and is accepted.
    #expect(statuses.contains("400") && statuses.contains("201"), "\(bodyText(r))")
    #expect(bodyText(r).contains("UnitPrice"))
    #expect(service.queue.count == 1)
    #expect(localGET(service, "/odata/s/Categories/$count").1 == "1")
}

@Test func validWritesOfEveryPathStillPass() throws {
    let service = try makeService()
    #expect(
        write(service, "POST", "Products", #"{"ProductName":"Tea","Discontinued":false,"UnitPrice":"2.5"}"#)
            .status == 201)
    #expect(
        write(service, "POST", "Categories(1)/Products", #"{"ProductName":"Mate","Discontinued":false}"#)
            .status == 201)
    #expect(
        write(
            service, "POST", "Categories",
            #"{"Title":"Food","Products":[{"ProductName":"Bread","Discontinued":true}]}"#
        )
        .status == 201)
    #expect(
        write(
            service, "POST", "Products",
            #"{"ProductName":"Kvass","Discontinued":false,"Category@odata.bind":"Categories(1)"}"#
        )
        .status == 201)
    #expect(write(service, "PATCH", "Products(1)", #"{"UnitPrice":19.5,"ProductID":1}"#).status == 204)
    #expect(
        write(service, "PUT", "Products(1)", #"{"ProductName":"Chai","Discontinued":true}"#).status == 204)
    #expect(service.queue.count == 6)
}

/// A key the client leaves out is minted by the gateway (`local-…`) and replaced by the upstream's: the
/// placeholder is not held to the key's facets (a SAP `SalesOrderID` of `MaxLength="10"`), a client's key is.
@Test func aMintedStringKeyIsNotCheckedAgainstTheKeysMaxLength() throws {
    let service = try makeService()
    let created = write(service, "POST", "Notes", #"{"Text":"server fills the key"}"#)
    #expect(created.status == 201, "\(bodyText(created))")
    #expect(try RawJSON.parse(bodyText(created))["NoteID"]?.string?.hasPrefix("local-") == true)
    let tooLong = write(service, "POST", "Notes", #"{"NoteID":"ABCDEFGHIJK","Text":"x"}"#)
    #expect(tooLong.status == 400)
    #expect(error(tooLong).target == "NoteID")
    #expect(write(service, "POST", "Notes", #"{"NoteID":"ABCDEFGHIJ","Text":"x"}"#).status == 201)
    // A key minted earlier, given back by a client (a foreign key to an offline create, as a `$1` reference
    // resolves to), is the same placeholder.
    let placeholder = "local-" + UUID().uuidString.lowercased()
    #expect(write(service, "POST", "Notes", #"{"NoteID":"\#(placeholder)"}"#).status == 201)
    #expect(write(service, "POST", "Notes", #"{"NoteID":"local-not-a-uuid"}"#).status == 400)
    #expect(service.queue.count == 3)
}
