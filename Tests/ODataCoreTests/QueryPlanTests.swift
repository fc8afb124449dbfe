import JSONCore
import Storage
import Testing

@testable import ODataCore

/// `$apply` and the options after it planned and run on SQLite over the Shop data.
@Suite struct QueryPlanTests {
    let shop: ShopDatabase

    init() throws {
        shop = try ShopDatabase(profile: .exact)
        try ShopData.load(into: shop)
    }

    func plan(_ query: String, set: String = "Products") throws -> ODataQueryPlan {
        let options = try ODataQueryOptions.parse(rawQuery: query, version: .v4)
        let type = shop.model.entitySet(named: set)!.entityType
        return try ODataQueryPlanner(model: shop.model, mapping: shop.mapping, table: set, entityType: type)
            .plan(apply: options.apply, options: options)
    }

    /// Rows of an aggregated result as [path joined by "/": wire value].
    func rows(_ query: String, set: String = "Products") throws -> [[String: RawJSON]] {
        let p = try plan(query, set: set)
        #expect(p.sql.sql.filter { $0 == "?" }.count == p.sql.bindings.count)
        guard case .aggregated(let columns) = p.shape else {
            Issue.record("expected an aggregated result")
            return []
        }
        return try shop.db.query(p.sql.sql, p.sql.bindings.map(ShopDatabase.sqlValue)).map { row in
            var out: [String: RawJSON] = [:]
            for (i, c) in columns.enumerated() {
                out[c.path.joined(separator: "/")] = ODataStorage.wireValue(
                    ShopDatabase.binding(row.values[i]), type: c.type, encoding: c.encoding, model: shop.model
                )
            }
            return out
        }
    }

    /// IDs (and computed columns) of an entity result.
    func entities(_ query: String, set: String = "Products") throws -> [Int64] {
        let p = try plan(query, set: set)
        guard case .entities = p.shape else {
            Issue.record("expected entities")
            return []
        }
        let index = try shop.db.query(p.sql.sql, p.sql.bindings.map(ShopDatabase.sqlValue))
        return index.map { row in row.values[row.columnNames.firstIndex(of: "ID")!].int64 ?? -1 }
    }

    func count(_ query: String) throws -> Int64? {
        let p = try plan(query)
        return try shop.db.scalar(p.countSQL.sql, p.countSQL.bindings.map(ShopDatabase.sqlValue))?.int64
    }

    @Test func aggregateWithoutGroups() throws {
        let r = try rows(
            "$apply=aggregate($count as N,Price with max as Hi,Price with min as Lo,Rating with countdistinct as D)"
        )
        #expect(
            r == [
                [
                    "N": .number("7"), "Hi": .number("12345678901234567890.13"), "Lo": .number("-0.5"),
                    "D": .number("3"),
                ]
            ])
        #expect(try plan("$apply=aggregate($count as N,Price with max as Hi)").contextSelect == "(N,Hi)")
        // Sums of decimals are doubles (documented); of integers exact.
        let sum = try rows(
            "$apply=filter(Price lt 1000)/aggregate(Price with sum as S,Price with average as A)")
        #expect(sum == [["S": .number("102.5"), "A": .number("20.5")]])
        #expect(
            try rows("$apply=filter(ID lt 0)/aggregate($count as N,Price with sum as S)") == [
                ["N": .number("0"), "S": .null]
            ])
        #expect(
            try rows("$apply=aggregate(Stock with sum as S)") == [
                ["S": .number(String(9_007_199_254_740_993 + 9_007_199_254_740_992 - 1))]
            ])
    }

    @Test func groupByWithNestedAggregates() throws {
        // Status: 1 Open, 2 Shipped, 3 Closed, 4 Open, others null; groups ordered by the underlying value.
        #expect(
            try rows("$apply=groupby((Status))") == [
                ["Status": .null], ["Status": .string("Open")], ["Status": .string("Shipped")],
                ["Status": .string("Closed")],
            ])
        #expect(
            try rows("$apply=groupby((Status),aggregate($count as N,Rating with average as R))") == [
                ["Status": .null, "N": .number("3"), "R": .null],
                ["Status": .string("Open"), "N": .number("2"), "R": .number("4.5")],
                ["Status": .string("Shipped"), "N": .number("1"), "R": .number("3")],
                ["Status": .string("Closed"), "N": .number("1"), "R": .number("10")],
            ])
        #expect(
            try rows("$apply=groupby((Status),aggregate($count as N)/filter(N ge 2))") == [
                ["Status": .null, "N": .number("3")], ["Status": .string("Open"), "N": .number("2")],
            ])
        // Equal decimals group together (1.50 and 1.5).
        #expect(
            try rows("$apply=filter(Price gt 1 and Price lt 2)/groupby((Price),aggregate($count as N))") == [
                ["Price": .number("1.5"), "N": .number("2")]
            ])
        // Durations group by value, P10D with PT240H.
        #expect(
            try rows("$apply=filter(ShelfLife ge duration'P10D')/groupby((ShelfLife),aggregate($count as N))")
                == [
                    ["ShelfLife": .string("P10D"), "N": .number("2")],
                    ["ShelfLife": .string("P21D"), "N": .number("1")],
                ])
    }

    @Test func groupByNestedPathsAndNavigation() throws {
        let p = try plan("$apply=groupby((Address/City),aggregate($count as N))", set: "People")
        #expect(p.contextSelect == "(Address(City),N)")
        #expect(
            try rows("$apply=groupby((Address/City),aggregate($count as N))", set: "People") == [
                ["Address/City": .null, "N": .number("2")],
                ["Address/City": .string("Berlin"), "N": .number("1")],
                ["Address/City": .string("Rome"), "N": .number("1")],
            ])
        #expect(
            try rows("$apply=groupby((Customer/Name),aggregate($count as N))", set: "Orders") == [
                ["Customer/Name": .string("Dee"), "N": .number("1")]
            ])
    }

    @Test func chainsOverAggregatedRows() throws {
        #expect(
            try rows(
                "$apply=groupby((Status),aggregate($count as N))/filter(N gt 1)/orderby(N desc)/compute(N mul 10 as T)"
            ) == [
                ["Status": .null, "N": .number("3"), "T": .number("30")],
                ["Status": .string("Open"), "N": .number("2"), "T": .number("20")],
            ])
        #expect(
            try rows("$apply=groupby((Status),aggregate($count as N))/aggregate(N with sum as Total)") == [
                ["Total": .number("7")]
            ])
        // Options after $apply work on its result; $count counts before $top.
        #expect(
            try rows("$apply=groupby((Status),aggregate($count as N))&$orderby=N,Status desc&$top=2") == [
                ["Status": .string("Closed"), "N": .number("1")],
                ["Status": .string("Shipped"), "N": .number("1")],
            ])
        #expect(try count("$apply=groupby((Status),aggregate($count as N))&$top=1") == 4)
    }

    @Test func entityTransformationsKeepEntities() throws {
        #expect(try entities("$apply=filter(Price gt 1)/orderby(Price desc)/top(2)") == [2, 1])
        #expect(try entities("$apply=top(2)/orderby(Price)") == [1, 2])  // the first two by key, then ordered
        #expect(try entities("$apply=orderby(Price)/skip(1)/top(2)") == [6, 3])
        #expect(try entities("$apply=skip(5)/filter(ID gt 0)") == [6, 7])
        #expect(try entities("$apply=search(widget)/identity") == [1, 2, 4])
        let computed = try plan("$apply=compute(Price mul 2 as P2)/filter(P2 gt 2)&$orderby=P2 desc")
        guard case .entities(let columns) = computed.shape else {
            Issue.record("expected entities")
            return
        }
        #expect(columns.map(\.sqlName) == ["P2"] && columns.first?.type.name == "Edm.Decimal")
        // P2 is a double: the two large prices are equal there (documented), the key breaks the tie.
        #expect(
            try entities("$apply=compute(Price mul 2 as P2)/filter(P2 gt 2)&$orderby=P2 desc") == [
                1, 2, 7, 3, 4,
            ])
        // $compute without $apply, referenced by $filter and $orderby.
        #expect(try entities("$compute=length(Name) as L&$filter=L gt 5&$orderby=L desc") == [4, 2, 6, 1])
        #expect(try count("$search=widget&$top=1") == 3)
        #expect(try entities("$search=widget OR thing&$filter=ID lt 4&$skip=1") == [2, 3])
    }

    @Test func clearErrorsForWhatIsNotSupported() throws {
        func kind(_ query: String, set: String = "Products") -> ODataError.Kind? {
            do {
                _ = try plan(query, set: set)
                return nil
            } catch let e as ODataError {
                return e.kind
            } catch {
                return nil
            }
        }
        #expect(kind("$apply=groupby((Status),top(1))") == .notImplemented)
        #expect(kind("$apply=groupby((Address),aggregate($count as N))", set: "People") == .notImplemented)
        #expect(kind("$apply=groupby((Status))/search(x)") == .notImplemented)
        #expect(kind("$apply=aggregate(ShelfLife with sum as S)") == .translation)
        #expect(kind("$apply=aggregate(Name with sum as S)") == .translation)
        #expect(kind("$apply=groupby((Status),aggregate($count as Status))") == .query)
        #expect(kind("$apply=groupby((Nope))") == .filter)
        #expect(kind("$apply=groupby((Status),aggregate($count as N))/filter(Price gt 1)") == .filter)
        #expect(kind("$apply=compute(1 as Name)") == .query)
        // Valid aggregation across collections: not translated, and said so.
        #expect(kind("$apply=aggregate(Lines/Quantity with sum as Q)", set: "Orders") == .notImplemented)
        #expect(kind("$apply=groupby((Tags))") == .notImplemented)
        #expect(kind("$apply=groupby((Customer/Orders/Status))", set: "Orders") == .notImplemented)
    }
}
