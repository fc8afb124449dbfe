import Testing

@testable import ODataCore

/// Navigation through a link table (many-to-many, or links recorded from `$expand` when the model has no
/// referential constraint): joins through the link, literals bound, targets counted once.
@Suite struct LinkTableTranslationTests {
    struct Links: SQLMapping {
        func column(for path: [String], in entityType: String) -> String? { path.joined(separator: "_") }
        func navigation(_ name: String, from entityType: String) -> SQLNavigationMapping? {
            SQLNavigationMapping(
                table: "Orders", entityType: "NorthwindModel.Order",
                joins: [SQLJoinColumns(sourceColumn: "CustomerID", targetColumn: "s_CustomerID")],
                linkTable: "_mg_link/Customers/Orders",
                linkJoins: [SQLJoinColumns(sourceColumn: "t_OrderID", targetColumn: "OrderID")])
        }
    }

    let model = Fixtures.northwindV4Model
    let type = "NorthwindModel.Customer"

    func translate(_ filter: String) throws -> SQLFragment {
        let ast = try ODataFilterParser(model: model, entityType: type).parseFilter(filter)
        return try ODataSQLTranslator(mapping: Links(), model: model, rootEntityType: type).translateFilter(
            ast)
    }

    @Test func countThroughALinkTableCountsDistinctTargets() throws {
        let f = try translate("Orders/$count ge 2")
        #expect(
            f.sql
                == #"((SELECT COUNT(DISTINCT "t1".rowid) FROM "_mg_link/Customers/Orders" AS "t1l" JOIN "Orders" AS "t1" ON "t1l"."t_OrderID" = "t1"."OrderID" WHERE "t1l"."s_CustomerID" = "t0"."CustomerID") >= ?)"#
        )
        #expect(f.bindings == [.integer(2)])
    }

    @Test func lambdasThroughALinkTableBindTheirLiterals() throws {
        let f = try translate("Orders/all(o:o/CustomerID eq 'x'' OR 1=1')")
        #expect(
            f.sql.hasPrefix(#"(NOT EXISTS (SELECT 1 FROM "_mg_link/Customers/Orders" AS "t1l" JOIN "Orders""#)
        )
        #expect(!f.sql.contains("OR 1=1"))
        #expect(f.bindings == [.text("x' OR 1=1")])
    }
}
