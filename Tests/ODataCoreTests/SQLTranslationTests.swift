import Testing

@testable import ODataCore

@Suite struct SQLTranslationTests {
    let model = Fixtures.northwindV4Model

    func translate(_ filter: String, _ type: String = "NorthwindModel.Order") throws -> SQLFragment {
        let ast = try ODataFilterParser(model: model, entityType: type).parseFilter(filter)
        return try ODataSQLTranslator(
            mapping: ModelSQLMapping(model: model), model: model, rootEntityType: type
        )
        .translateFilter(ast)
    }

    func expectSQL(
        _ filter: String, _ sql: String, _ bindings: [SQLBinding], type: String = "NorthwindModel.Order",
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let fragment = try translate(filter, type)
        #expect(fragment.sql == sql, sourceLocation: sourceLocation)
        #expect(fragment.bindings == bindings, sourceLocation: sourceLocation)
        #expect(
            fragment.sql.filter { $0 == "?" }.count == fragment.bindings.count, sourceLocation: sourceLocation
        )
    }

    @Test func comparisonsBindEveryLiteral() throws {
        try expectSQL("Freight gt 5", #"("t0"."Freight" > ?)"#, [.integer(5)])
        try expectSQL("CustomerID eq 'ALFKI'", #"("t0"."CustomerID" = ?)"#, [.text("ALFKI")])
        try expectSQL("5 lt Freight", #"(? < "t0"."Freight")"#, [.integer(5)])
        try expectSQL("Freight le 1.5M", #"("t0"."Freight" <= ?)"#, [.real(1.5)])
        try expectSQL("CustomerID eq null", #"("t0"."CustomerID" IS NULL)"#, [])
        try expectSQL("null ne CustomerID", #"("t0"."CustomerID" IS NOT NULL)"#, [])
        try expectSQL(
            "OrderDate ge 2020-01-01T10:00:00+02:00", #"("t0"."OrderDate" >= ?)"#,
            [.text("2020-01-01T08:00:00Z")])
        try expectSQL(
            "TrackingId eq 6F9619FF-8B86-D011-B42D-00C04FC964FF", #"("t0"."TrackingId" = ?)"#,
            [.text("6f9619ff-8b86-d011-b42d-00c04fc964ff")])
        try expectSQL("Discontinued", #"("t0"."Discontinued" = 1)"#, [], type: "NorthwindModel.Product")
        try expectSQL(
            "Discontinued eq false", #"("t0"."Discontinued" = ?)"#, [.integer(0)],
            type: "NorthwindModel.Product")
        try expectSQL(
            "Picture eq X'0A0B'", #"("t0"."Picture" = ?)"#, [.blob([10, 11])], type: "NorthwindModel.Product")
    }

    @Test func injectionStaysInBindings() throws {
        let evil = "x'); DROP TABLE Orders; --"
        let escaped = evil.replacingOccurrences(of: "'", with: "''")
        let fragment = try translate("CustomerID eq '\(escaped)'")
        #expect(fragment.sql == #"("t0"."CustomerID" = ?)"#)
        #expect(fragment.bindings == [.text(evil)])
    }

    @Test func logicalArithmeticAndIn() throws {
        try expectSQL(
            "Freight gt 5 and (CustomerID eq 'A' or not (OrderID lt 3))",
            #"(("t0"."Freight" > ?) AND (("t0"."CustomerID" = ?) OR (NOT ("t0"."OrderID" < ?))))"#,
            [.integer(5), .text("A"), .integer(3)])
        try expectSQL(
            "OrderID add 2 mul 3 gt -Freight", #"(("t0"."OrderID" + (? * ?)) > (- "t0"."Freight"))"#,
            [.integer(2), .integer(3)])
        try expectSQL("OrderID mod 2 eq 0", #"(("t0"."OrderID" % ?) = ?)"#, [.integer(2), .integer(0)])
        try expectSQL(
            "OrderID divby 2 gt 1", #"((CAST("t0"."OrderID" AS REAL) / ?) > ?)"#, [.integer(2), .integer(1)])
        try expectSQL(
            "OrderID in (1,2,3)", #"("t0"."OrderID" IN (?, ?, ?))"#, [.integer(1), .integer(2), .integer(3)])
        try expectSQL(
            "Paint has NW.Color'Red,Blue'",
            #"((instr(',' || replace("t0"."Paint", ' ', '') || ',', ?) > 0) AND (instr(',' || replace("t0"."Paint", ' ', '') || ',', ?) > 0))"#,
            [.text(",Red,"), .text(",Blue,")])
    }

    @Test func stringFunctions() throws {
        let c = "NorthwindModel.Customer"
        try expectSQL(
            "contains(CompanyName,'Al')", #"(instr("t0"."CompanyName", ?) > 0)"#, [.text("Al")], type: c)
        try expectSQL(
            "substringof('Al',CompanyName)", #"(instr("t0"."CompanyName", ?) > 0)"#, [.text("Al")], type: c)
        try expectSQL(
            "startswith(CompanyName,'A')", #"(substr("t0"."CompanyName", 1, length(?)) = ?)"#,
            [.text("A"), .text("A")],
            type: c)
        try expectSQL(
            "endswith(CompanyName,'A')", #"(length(?) = 0 OR substr("t0"."CompanyName", -length(?)) = ?)"#,
            [.text("A"), .text("A"), .text("A")], type: c)
        try expectSQL("length(City) gt 3", #"(length("t0"."City") > ?)"#, [.integer(3)], type: c)
        try expectSQL(
            "indexof(City,'e') eq 1", #"((instr("t0"."City", ?) - 1) = ?)"#, [.text("e"), .integer(1)],
            type: c)
        try expectSQL(
            "substring(City,1,2) eq 'er'", #"(substr("t0"."City", (?) + 1, ?) = ?)"#,
            [.integer(1), .integer(2), .text("er")], type: c)
        try expectSQL("tolower(City) eq 'berlin'", #"(lower("t0"."City") = ?)"#, [.text("berlin")], type: c)
        try expectSQL("toupper(trim(City)) eq 'B'", #"(upper(trim("t0"."City")) = ?)"#, [.text("B")], type: c)
        try expectSQL(
            "concat(City,Country) eq 'x'", #"(("t0"."City" || "t0"."Country") = ?)"#, [.text("x")], type: c)
        try expectSQL(
            "replace(City,'a','b') eq 'x'", #"(replace("t0"."City", ?, ?) = ?)"#,
            [.text("a"), .text("b"), .text("x")],
            type: c)
        try expectSQL("Address/City eq 'Berlin'", #"("t0"."Address_City" = ?)"#, [.text("Berlin")], type: c)
    }

    @Test func dateAndMathFunctions() throws {
        try expectSQL(
            "year(OrderDate) eq 1997", #"(CAST(strftime('%Y', "t0"."OrderDate") AS INTEGER) = ?)"#,
            [.integer(1997)])
        try expectSQL(
            "month(OrderDate) eq 1", #"(CAST(strftime('%m', "t0"."OrderDate") AS INTEGER) = ?)"#,
            [.integer(1)])
        try expectSQL(
            "date(OrderDate) eq 2020-01-01", #"(date("t0"."OrderDate") = ?)"#, [.text("2020-01-01")])
        try expectSQL(
            "OrderDate lt now()", #"("t0"."OrderDate" < strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))"#, [])
        try expectSQL("round(Freight) eq 32", #"(round("t0"."Freight") = ?)"#, [.integer(32)])
        try expectSQL(
            "floor(Freight) eq 32",
            #"((CAST("t0"."Freight" AS INTEGER) - ("t0"."Freight" < CAST("t0"."Freight" AS INTEGER))) = ?)"#,
            [.integer(32)])
        try expectSQL(
            "ceiling(Freight) eq 33",
            #"((CAST("t0"."Freight" AS INTEGER) + ("t0"."Freight" > CAST("t0"."Freight" AS INTEGER))) = ?)"#,
            [.integer(33)])
        try expectSQL("cast(OrderID,Edm.String) eq '1'", #"(CAST("t0"."OrderID" AS TEXT) = ?)"#, [.text("1")])
        #expect(throws: ODataError.self) { try translate("isof(NorthwindModel.SpecialOrder)") }
    }

    @Test func navigationAndLambdas() throws {
        try expectSQL(
            "Customer/City eq 'Berlin'",
            #"((SELECT "t1"."City" FROM "Customers" AS "t1" WHERE "t1"."CustomerID" = "t0"."CustomerID" LIMIT 1) = ?)"#,
            [.text("Berlin")])
        try expectSQL(
            "Customer eq null",
            #"(NOT EXISTS (SELECT 1 FROM "Customers" AS "t1" WHERE "t1"."CustomerID" = "t0"."CustomerID"))"#,
            [])
        try expectSQL(
            "Orders/any(o:o/Freight gt 50)",
            #"EXISTS (SELECT 1 FROM "Orders" AS "t1" WHERE "t1"."CustomerID" = "t0"."CustomerID" AND ("t1"."Freight" > ?))"#,
            [.integer(50)], type: "NorthwindModel.Customer")
        try expectSQL(
            "Orders/any()",
            #"EXISTS (SELECT 1 FROM "Orders" AS "t1" WHERE "t1"."CustomerID" = "t0"."CustomerID")"#, [],
            type: "NorthwindModel.Customer")
        try expectSQL(
            "Orders/all(o:o/Freight gt 50)",
            #"(NOT EXISTS (SELECT 1 FROM "Orders" AS "t1" WHERE "t1"."CustomerID" = "t0"."CustomerID" AND (("t1"."Freight" > ?)) IS NOT 1))"#,
            [.integer(50)], type: "NorthwindModel.Customer")
        try expectSQL(
            "Orders/any(o:o/Order_Details/any(d:d/Quantity gt 10 and o/Freight gt 1))",
            #"EXISTS (SELECT 1 FROM "Orders" AS "t1" WHERE "t1"."CustomerID" = "t0"."CustomerID" AND EXISTS (SELECT 1 FROM "Order_Details" AS "t2" WHERE "t2"."OrderID" = "t1"."OrderID" AND (("t2"."Quantity" > ?) AND ("t1"."Freight" > ?))))"#,
            [.integer(10), .integer(1)], type: "NorthwindModel.Customer")
        try expectSQL(
            "Orders/$count gt 2",
            #"((SELECT COUNT(*) FROM "Orders" AS "t1" WHERE "t1"."CustomerID" = "t0"."CustomerID") > ?)"#,
            [.integer(2)], type: "NorthwindModel.Customer")
        try expectSQL(
            "Order/Customer/Country eq 'DE'",
            #"((SELECT (SELECT "t2"."Country" FROM "Customers" AS "t2" WHERE "t2"."CustomerID" = "t1"."CustomerID" LIMIT 1) FROM "Orders" AS "t1" WHERE "t1"."OrderID" = "t0"."OrderID" LIMIT 1) = ?)"#,
            [.text("DE")], type: "NorthwindModel.Order_Detail")
    }

    @Test func pluggableMappings() throws {
        struct Custom: SQLMapping {
            func column(for path: [String], in entityType: String) -> String? {
                "c_" + path.joined(separator: "__")
            }
            func navigation(_ name: String, from entityType: String) -> SQLNavigationMapping? {
                SQLNavigationMapping(
                    table: "rel_target", entityType: "NorthwindModel.Order",
                    joins: [SQLJoinColumns(sourceColumn: "id", targetColumn: "src")], linkTable: "link",
                    linkJoins: [SQLJoinColumns(sourceColumn: "dst", targetColumn: "id")])
            }
            func collection(for path: [String], in entityType: String) -> SQLCollectionMapping? {
                SQLCollectionMapping(
                    table: "tags", joins: [SQLJoinColumns(sourceColumn: "id", targetColumn: "owner")],
                    valueColumn: "value")
            }
            func binding(for literal: ODataLiteral, type: EdmTypeRef?) -> SQLBinding {
                if case .decimal(let text) = literal { return .text(text) }
                return SQLDefaults.binding(for: literal, type: type)
            }
        }
        let c = "NorthwindModel.Customer"
        let translator = ODataSQLTranslator(mapping: Custom(), rootEntityType: c, rootAlias: "root")
        let parser = ODataFilterParser(model: model, entityType: c)
        let many = try translator.translateFilter(parser.parseFilter("Orders/any(o:o/Freight eq 1.50)"))
        #expect(
            many.sql
                == #"EXISTS (SELECT 1 FROM "link" AS "t1l" JOIN "rel_target" AS "t1" ON "t1l"."dst" = "t1"."id" WHERE "t1l"."src" = "root"."id" AND ("t1"."c_Freight" = ?))"#
        )
        #expect(many.bindings == [.text("1.50")])
        let tags = try translator.translateFilter(parser.parseFilter("Tags/any(t:t eq 'vip')"))
        #expect(
            tags.sql
                == #"EXISTS (SELECT 1 FROM "tags" AS "t1" WHERE "t1"."owner" = "root"."id" AND ("t1"."value" = ?))"#
        )
        let weird = try translator.translateFilter(parser.parseFilter("Address/City eq 'x'"))
        #expect(weird.sql == #"("root"."c_Address__City" = ?)"#)
        #expect(ODataSQLTranslator.quote(#"a"b"#) == #""a""b""#)
    }

    @Test func untranslatableIsAnError() throws {
        // Customer -> CustomerDemographics has no constraint in the V2 model: no join mapping.
        let v2 = Fixtures.northwindV2Model
        let parser = ODataFilterParser(model: v2, entityType: "NorthwindModel.Customer")
        let translator = ODataSQLTranslator(
            mapping: ModelSQLMapping(model: v2), model: v2, rootEntityType: "NorthwindModel.Customer")
        let ast = try parser.parseFilter("CustomerDemographics/any(d:d/CustomerDesc eq 'x')")
        #expect(throws: ODataError.self) { try translator.translateFilter(ast) }
        #expect(throws: ODataError.self) {
            try self.translate("Tags/any(t:t eq 'vip')", "NorthwindModel.Customer")
        }
    }

    @Test func orderBy() throws {
        let parser = ODataFilterParser(model: model, entityType: "NorthwindModel.Order")
        let translator = ODataSQLTranslator(
            mapping: ModelSQLMapping(model: model), model: model, rootEntityType: "NorthwindModel.Order")
        let sql = try translator.translateOrderBy(
            parser.parseOrderBy("Freight desc,Customer/City,tolower(CustomerID) asc"))
        #expect(
            sql.sql
                == #""t0"."Freight" DESC, (SELECT "t1"."City" FROM "Customers" AS "t1" WHERE "t1"."CustomerID" = "t0"."CustomerID" LIMIT 1) ASC, lower("t0"."CustomerID") ASC"#
        )
        #expect(sql.bindings.isEmpty)
    }

    @Test func dateTimeOffsetNormalization() {
        #expect(SQLDefaults.normalizeDateTimeOffset("2020-01-01T00:30:00+01:00") == "2019-12-31T23:30:00Z")
        #expect(
            SQLDefaults.normalizeDateTimeOffset("2020-02-28T23:00:00.125-02:00") == "2020-02-29T01:00:00.125Z"
        )
        #expect(SQLDefaults.normalizeDateTimeOffset("2020-01-01T10:00Z") == "2020-01-01T10:00:00Z")
        #expect(SQLDefaults.normalizeDateTimeOffset("nonsense") == nil)
        #expect(
            SQLDefaults.binding(for: .dateTime("2020-01-01T10:00"), type: nil) == .text("2020-01-01T10:00:00")
        )
    }
}
