import Foundation
import Testing

@testable import ODataCore

/// Filters translated for the exact storage and run on SQLite: every primitive type compares as the
/// upstream compares it.
@Suite struct StorageSemanticsTests {
    let shop: ShopDatabase

    init() throws {
        shop = try ShopDatabase(profile: .exact)
        try ShopData.load(into: shop)
    }

    func ids(_ filter: String?, orderBy: String? = nil, set: String = "Products") throws -> [Int64] {
        try shop.ids(set, filter, orderBy: orderBy)
    }

    @Test func decimalsCompareExactlyAtAnyPrecision() throws {
        // The two prices differ in the 22nd significant digit: a double cannot tell them apart.
        #expect(try ids("Price eq 12345678901234567890.12") == [1])
        #expect(try ids("Price gt 12345678901234567890.12") == [2])
        #expect(try ids("Price lt 12345678901234567890.13 and Price gt 100") == [1])
        #expect(try ids("Price eq 1.5") == [3, 4])  // 1.50 and 1.5 are equal
        #expect(try ids("Price eq 100") == [7])  // sent as 1e2
        #expect(try ids("Price lt 0") == [5])
        #expect(try ids("Price ge -0.5 and Price le 0") == [5, 6])
        #expect(try ids("Price in (0, 1.50)") == [3, 4, 6])
        #expect(try ids(nil, orderBy: "Price desc") == [2, 1, 7, 3, 4, 6, 5])
        #expect(try ids(nil, orderBy: "Price") == [5, 6, 3, 4, 7, 1, 2])
        // Arithmetic reads them as REAL (documented): fine for small values.
        #expect(try ids("Price mul 2 eq 3") == [3, 4])
        #expect(try ids("round(Price) eq 2") == [3, 4])
        #expect(try ids("cast(Price, Edm.String) eq '1.5'") == [3, 4])
    }

    @Test func durationsCompareAsDurations() throws {
        // P10D and PT240H are the same duration; text comparison would say neither.
        #expect(try ids("ShelfLife eq duration'P10D'") == [1, 2])
        #expect(try ids("ShelfLife gt duration'P10D'") == [4])
        #expect(try ids("ShelfLife ge duration'PT36H' and ShelfLife lt duration'P10D'") == [3, 5])
        #expect(try ids("ShelfLife lt duration'PT0S'") == [6])
        #expect(try ids(nil, orderBy: "ShelfLife desc") == [4, 1, 2, 3, 5, 6, 7])
    }

    @Test func instantsCompareAcrossOffsets() throws {
        // 10:00+02:00 is 08:00Z; 08:00:00.5Z is after 08:00Z (text with Z would sort it first).
        #expect(try ids("Created eq 2020-01-01T08:00:00Z") == [1, 4])
        #expect(try ids("Created gt 2020-01-01T08:00:00Z") == [2, 3])
        #expect(try ids("Created lt 2020-01-01T00:00:00+00:30") == [])
        #expect(try ids("Created lt 2020-01-01T00:30:00.0001+00:00") == [5])
        #expect(try ids("Created eq 2020-01-01T00:29:59.999Z") == [5])
        #expect(try ids("Created ne null", orderBy: "Created") == [5, 1, 4, 3, 2])
        #expect(try ids("year(Created) eq 2020 and hour(Created) eq 8") == [1, 3, 4])
        #expect(try ids("date(Created) eq 2020-01-01") == [1, 2, 3, 4, 5])
        #expect(try ids("Created lt now()") == [1, 2, 3, 4, 5])
    }

    @Test func datesAndTimesOfDay() throws {
        #expect(try ids("ReleaseDate ge 2020-01-01") == [1, 2])
        #expect(try ids("ReleaseDate eq 2020-02-29") == [2])
        #expect(try ids("AvailableFrom eq 08:00:00") == [1])
        #expect(try ids("AvailableFrom gt 08:00") == [2, 3])
        #expect(try ids("AvailableFrom lt 08:00:00.5000") == [1, 4])
        #expect(try ids("AvailableFrom ge 23:59:59.9999999") == [3])
        #expect(try ids("hour(AvailableFrom) eq 23") == [3])
    }

    @Test func int64GuidBinaryBooleanEnums() throws {
        // 2^53 + 1 sent as a string (IEEE754Compatible) and 2^53 as a number stay apart.
        #expect(try ids("Stock eq 9007199254740993") == [1])
        #expect(try ids("Stock gt 9007199254740992") == [1])
        #expect(try ids("Stock lt 0") == [3])
        #expect(try ids("Code eq 6f9619ff-8b86-d011-b42d-00c04fc964ff") == [1])
        #expect(try ids("Code eq 6F9619FF-8B86-D011-B42D-00C04FC964FF") == [1])
        #expect(try ids("Code gt 00000000-0000-0000-0000-000000000001") == [1])
        #expect(try ids("Thumbnail eq binary'AQID'") == [1])
        #expect(try ids("Thumbnail eq X'010204'") == [2])
        #expect(try ids("Colors has Shop.Color'Red'") == [1, 3, 4])
        #expect(try ids("Colors has Shop.Color'Red,Blue'") == [1, 4])
        #expect(try ids("Colors eq Shop.Color'Blue,Red'") == [1])
        #expect(try ids("Colors eq 'Green'") == [2])
        #expect(try ids("Status eq Shop.Status'Open'") == [1, 4])
        #expect(try ids("Status gt Shop.Status'Open'") == [2, 3])  // by underlying value
        #expect(try ids("Status ne null", orderBy: "Status desc") == [3, 2, 1, 4])
        #expect(try ids("Rating ge 4.5") == [1, 3])
    }

    @Test func lambdasOverCollectionsOfPrimitivesAndComplexValues() throws {
        #expect(try ids("Tags/any(t: t eq 'sale')") == [1, 4])
        #expect(try ids("Tags/any()") == [1, 2, 4])
        #expect(try ids("Tags/all(t: t ne 'x')") == [1, 2, 3, 5, 6, 7])
        #expect(try ids("Tags/any(t: startswith(t, 'bl'))") == [2])
        #expect(try ids("Tags/$count ge 2") == [1, 4])
        #expect(try shop.ids("People", "Emails/any(e: endswith(e, 'x.org'))") == [1, 2])
        #expect(try shop.ids("People", "Addresses/any(a: a/City eq 'Rome')") == [4])
        #expect(try shop.ids("People", "Addresses/all(a: a/City ne 'Paris')") == [2, 3, 4])
        #expect(try shop.ids("People", "Emails/$count eq 0") == [3, 4])
    }

    @Test func derivedTypesIsofAndCasts() throws {
        #expect(try shop.ids("People", "isof(Shop.Employee)") == [2, 3])
        #expect(try shop.ids("People", "isof(Shop.Person)") == [1, 2, 3, 4])
        #expect(try shop.ids("People", "not isof(Shop.Customer)") == [1, 2, 3])
        #expect(try shop.ids("People", "isof($it, Shop.Model.Customer)") == [4])
        // A derived type's property is read from the stored document, for rows of that type only.
        #expect(try shop.ids("People", "Shop.Customer/Tier eq 2") == [4])
        #expect(try shop.ids("People", "Shop.Employee/DepartmentID eq 1") == [2, 3])
        #expect(try shop.ids("People", "Shop.Employee/Name eq 'Bob'") == [2])
        #expect(try shop.ids("People", "Shop.Customer/Name eq 'Bob'") == [])
        #expect(try shop.ids("People", "Address/City eq 'Rome'") == [2])
        #expect(try shop.ids("People", "Shop.Employee/Salary gt 99999.9") == [2])
        #expect(
            try shop.ids("People", "Shop.Employee/Salary ge 99999.9", orderBy: "Shop.Employee/Salary desc")
                == [2, 3])
        #expect(try shop.ids("Departments", "Staff/any(s: s/Name eq 'Cid')") == [1])
        #expect(try shop.ids("Departments", "Staff/any(s: s/Salary gt 100000)") == [1])
        #expect(try shop.ids("Departments", "Staff/$count eq 2") == [1])
        #expect(try shop.ids("Departments", "Budget gt 100") == [1])
    }

    @Test func searchesStringsCaseAndUnicode() throws {
        #expect(try ids("contains(Name, 'idget')") == [1, 2])
        #expect(try ids("contains(tolower(Name), 'widget')") == [1, 2, 4])
        #expect(try ids("Name eq 'Café'") == [5])
        #expect(try ids("Name gt 'W'", orderBy: "Name") == [1, 6])  // code point order: 'W' < 'n'
        #expect(try ids("Name lt 'Cafe'") == [])
        #expect(try ids("Name gt 'Cafe' and Name lt 'Cag'") == [5])
    }
}

/// Without columns for derived types, their properties come from the stored document.
@Suite struct DocumentFallbackTests {
    @Test func derivedPropertiesFromTheDocument() throws {
        let shop = try ShopDatabase(profile: .exact, derivedTypeColumns: false)
        try ShopData.load(into: shop)
        #expect(try shop.ids("People", "Shop.Customer/Tier eq 2") == [4])
        #expect(try shop.ids("People", "Shop.Employee/DepartmentID eq 1") == [2, 3])
        #expect(try shop.ids("People", "Shop.Employee/HiredOn ge 2019-01-01") == [2])
        // A number sent as a string (V2, IEEE754Compatible) compares as a number.
        try shop.insert(
            "People", type: "Shop.Model.Customer",
            .o([("ID", .n("5")), ("Name", .s("Eve")), ("Tier", .s("10"))]))
        #expect(try shop.ids("People", "Shop.Customer/Tier gt 9") == [5])
        #expect(try shop.ids("People", "Shop.Customer/Tier lt 9") == [4])
        // Decimals from the document would lose digits: refused, not approximated.
        #expect(throws: ODataError.self) { try shop.ids("People", "Shop.Employee/Salary gt 5") }
        // The join column of Staff (Employee/DepartmentID) has no column: no join is guessed.
        #expect(throws: ODataError.self) { try shop.ids("Departments", "Staff/any()") }
    }
}

/// The same filters over the storage the gateway's mirror uses today: what stays right, and what is
/// refused instead of answered wrongly.
@Suite struct MirrorV1SemanticsTests {
    let shop: ShopDatabase

    init() throws {
        shop = try ShopDatabase(profile: .mirrorV1)
        try ShopData.load(into: shop)
    }

    @Test func sameAnswersWhereTheV1StorageIsExact() throws {
        #expect(try shop.ids("Products", "Price eq 1.5") == [3, 4])
        #expect(try shop.ids("Products", "Created eq 2020-01-01T08:00:00Z") == [1, 4])
        #expect(try shop.ids("Products", "Stock eq 9007199254740993") == [1])
        #expect(try shop.ids("Products", "Colors eq Shop.Color'Green'") == [2])
        #expect(try shop.ids("Products", "Colors has Shop.Color'Red'") == [1, 3, 4])
    }

    @Test func durationOrderingAndEnumOrderingAreRefused() throws {
        for filter in ["ShelfLife gt duration'P10D'", "Status gt Shop.Status'Open'"] {
            do {
                _ = try shop.ids("Products", filter)
                Issue.record("\(filter) should be refused")
            } catch let error as ODataError {
                #expect(error.isNotImplemented)
            }
        }
        #expect(throws: ODataError.self) { try shop.ids("Products", nil, orderBy: "ShelfLife") }
        // Without a type column the derived types cannot be told apart.
        #expect(throws: ODataError.self) {
            let plain = ODataSQLTranslator(
                mapping: ModelSQLMapping(model: shop.model), model: shop.model,
                rootEntityType: "Shop.Model.Person")
            let ast = try ODataFilterParser(model: shop.model, entityType: "Shop.Model.Person").parseFilter(
                "isof(Shop.Employee)")
            _ = try plain.translateFilter(ast)
        }
    }
}

/// V2 (SAP Gateway style): values as V2 JSON sends them, filters with V2 literal spellings.
@Suite struct V2SemanticsTests {
    static let model: EdmModel = try! CSDLParser.parse(
        """
        <edmx:Edmx Version="1.0" xmlns:edmx="http://schemas.microsoft.com/ado/2007/06/edmx"
          xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata"
          xmlns:sap="http://www.sap.com/Protocols/SAPData">
          <edmx:DataServices m:DataServiceVersion="2.0">
            <Schema Namespace="GW" xmlns="http://schemas.microsoft.com/ado/2008/09/edm">
              <EntityType Name="Order" sap:content-version="1">
                <Key><PropertyRef Name="ID"/></Key>
                <Property Name="ID" Type="Edm.Int32" Nullable="false"/>
                <Property Name="Amount" Type="Edm.Decimal" Precision="16" Scale="3"/>
                <Property Name="Big" Type="Edm.Int64"/>
                <Property Name="CreatedAt" Type="Edm.DateTime" Precision="7"/>
                <Property Name="ChangedAt" Type="Edm.DateTimeOffset"/>
                <Property Name="Slot" Type="Edm.Time"/>
                <Property Name="Guid" Type="Edm.Guid"/>
                <Property Name="Blob" Type="Edm.Binary"/>
                <Property Name="Ratio" Type="Edm.Double"/>
              </EntityType>
              <EntityContainer Name="GW_Entities" m:IsDefaultEntityContainer="true">
                <EntitySet Name="OrderSet" EntityType="GW.Order"/>
              </EntityContainer>
            </Schema>
          </edmx:DataServices>
        </edmx:Edmx>
        """)

    let db: ShopDatabase

    init() throws {
        db = try ShopDatabase(model: Self.model, profile: .exact)
        func order(
            _ id: Int, _ amount: String, _ big: String, _ created: String, _ changed: String, _ slot: String,
            _ guid: String, _ blob: String, _ ratio: String
        ) -> Wire {
            .o([
                ("ID", .n(String(id))), ("Amount", .s(amount)), ("Big", .s(big)), ("CreatedAt", .s(created)),
                ("ChangedAt", .s(changed)), ("Slot", .s(slot)), ("Guid", .s(guid)), ("Blob", .s(blob)),
                ("Ratio", .s(ratio)),
            ])
        }
        try db.insert(
            "OrderSet",
            order(
                1, "631.890", "9007199254740993", "/Date(1754611200000)/",
                "/Date(1754611200000+0120)/", "PT13H20M", "0050568D-393C-1ED4-9D97-E65F0F3FCC23", "AQID",
                "1.5"))
        try db.insert(
            "OrderSet",
            order(
                2, "631.89", "12", "/Date(1754697600000)/", "/Date(1754611200000)/",
                "PT8H", "0050568d-393c-1ed4-9d97-e65f0f3fcc24", "AAAA", "2E1"))
    }

    func ids(_ filter: String) throws -> [Int64] { try db.ids("OrderSet", filter) }

    @Test func v2LiteralsAgainstV2Values() throws {
        #expect(try ids("Amount eq 631.89M") == [1, 2])
        #expect(try ids("Amount gt 631.8899M") == [1, 2])
        #expect(try ids("Big eq 9007199254740993L") == [1])
        #expect(try ids("CreatedAt eq datetime'2025-08-08T00:00'") == [1])
        #expect(try ids("CreatedAt gt datetime'2025-08-08T00:00:00.000'") == [2])
        #expect(try ids("ChangedAt lt datetimeoffset'2025-08-08T00:00:00Z'") == [])
        // `/Date(ms+0120)/` is the instant ms (UTC) sent with an offset: both rows are 00:00Z.
        #expect(try ids("ChangedAt eq datetimeoffset'2025-08-08T02:00:00+02:00'") == [1, 2])
        #expect(try ids("Slot gt time'PT12H'") == [1])
        #expect(try ids("Slot eq time'PT480M'") == [2])
        #expect(try ids("Guid eq guid'0050568D-393C-1ED4-9D97-E65F0F3FCC23'") == [1])
        #expect(try ids("Blob eq X'010203'") == [1])
        #expect(try ids("Blob eq binary'000000'") == [2])  // V2 binary'…' is hexadecimal
        #expect(try ids("Ratio gt 2d") == [2])
        #expect(try ids("Ratio eq 20") == [2])
    }
}
