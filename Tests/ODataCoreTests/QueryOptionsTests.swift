import Testing

@testable import ODataCore

@Suite struct QueryOptionsTests {
    func parse(_ query: String, _ version: ODataVersion = .v4) throws -> ODataQueryOptions {
        try ODataQueryOptions.parse(rawQuery: query, version: version)
    }

    @Test func pyodataEncoding() throws {
        let q = try parse(
            "%24top=3&%24orderby=SalesOrderID&%24filter=CurrencyCode+eq+%27EUR%27&%24select=SalesOrderID%2CNote&%24inlinecount=allpages",
            .v2)
        #expect(q.top == 3)
        #expect(q.orderBy == "SalesOrderID")
        #expect(q.filter == "CurrencyCode eq 'EUR'")
        #expect(q.select == [ODataSelectItem(path: ["SalesOrderID"]), ODataSelectItem(path: ["Note"])])
        #expect(q.inlineCount == true && q.wantsCount)
    }

    @Test func pythonODataEncoding() throws {
        let q = try parse("?%24top=3&%24filter=%28UnitPrice%20gt%2015%29&%24orderby=UnitPrice%20desc")
        #expect(q.filter == "(UnitPrice gt 15)" && q.orderBy == "UnitPrice desc" && q.top == 3)
        // A literal plus must arrive encoded; a double-encoded quote stays text.
        #expect(try parse("$filter=Name eq 'a%2Bb'").filter == "Name eq 'a+b'")
        #expect(try parse("$filter=Name+eq+'%2527'").filter == "Name eq '%27'")
        #expect(try parse("$skiptoken=5%215").skipToken == "5!5")
    }

    @Test func caseInsensitiveAndDollarLess() throws {
        let q = try parse("$TOP=2&Skip=1&filter=a eq 1&$Count=TRUE&format=json&sap-client=100&@p=1")
        #expect(q.top == 2 && q.skip == 1 && q.filter == "a eq 1" && q.count == true && q.format == "json")
        #expect(q.custom == [.init(name: "sap-client", value: "100"), .init(name: "@p", value: "1")])
        // V2 keeps `$`-less names as custom options (SAP `search=`).
        let v2 = try parse("search=foo&top=1&$inlinecount=none", .v2)
        #expect(v2.top == nil && v2.inlineCount == false)
        #expect(v2.custom.map(\.name) == ["search", "top"])
        let other = try parse("$apply=groupby((City))&$search=blue OR green&$deltatoken=abc")
        #expect(other.apply == ODataApply([.groupBy(paths: [["City"]], then: [])]))
        #expect(other.search == "blue OR green" && other.deltaToken == "abc")
        #expect(other.searchExpression == .or(.word("blue"), .word("green")))
    }

    @Test func invalidValues() {
        for query in [
            "$top=-1", "$top=x", "$skip=1.5", "$count=yes", "$inlinecount=some", "$top=1&top=2", "$bogus=1",
            "$select=a,,b", "$select=a(", "$expand=Orders($top=x)", "$expand=Orders($filter=a;$filter=b)",
            "$expand=Orders($foo=1)", "$expand=Orders(", "$filter=%zz", "$select=1abc",
        ] {
            #expect(throws: ODataError.self, "\(query)") { try parse(query) }
        }
        let deep =
            "$expand=" + String(repeating: "A($expand=", count: 40) + "B" + String(repeating: ")", count: 40)
        #expect(throws: ODataError.self) { try parse(deep) }
    }

    @Test func selectItemsWithParentheses() {
        func kind(_ query: String) -> ODataError.Kind? {
            do {
                _ = try parse(query)
                return nil
            } catch let error as ODataError {
                return error.kind
            } catch {
                return nil
            }
        }
        // Malformed: 400 (a query error), never "not supported".
        for query in ["$select=*,sqlite_version()", "$select=Name(x)", "$select=a(b", "$select=Name()"] {
            #expect(kind(query) == .query, "\(query)")
        }
        // Valid 4.01 nested options or an operation's parameter names: not supported (501).
        for query in [
            "$select=Addresses($top=2;$skip=1)", "$select=NS.Function(a,b)",
            "$select=Tags(filter=$it eq 'a')",
        ] {
            #expect(kind(query) == .notImplemented, "\(query)")
        }
    }

    @Test func selectPaths() throws {
        let q = try parse("$select=*,Address/City,NorthwindModel.*, Name ")
        #expect(q.select?.map(\.path) == [["*"], ["Address", "City"], ["NorthwindModel.*"], ["Name"]])
        #expect(q.select?.map(\.isWildcard) == [true, false, true, false])
    }

    @Test func v4NestedExpand() throws {
        let q = try parse(
            "$expand=Orders($filter=Freight gt 5;$select=OrderID,Freight;$orderby=OrderID desc;$top=2;$skip=1;$count=true;$expand=Order_Details($select=Quantity)),Customer/$ref,*($levels=max)"
        )
        let expand = try #require(q.expand)
        #expect(expand.count == 3)
        let orders = expand[0]
        #expect(orders.path == ["Orders"])
        #expect(orders.filter == "Freight gt 5")
        #expect(orders.select?.map(\.path) == [["OrderID"], ["Freight"]])
        #expect(orders.orderBy == "OrderID desc")
        #expect(orders.top == 2 && orders.skip == 1 && orders.count == true)
        #expect(orders.expand?.first?.path == ["Order_Details"])
        #expect(orders.expand?.first?.select?.first?.path == ["Quantity"])
        #expect(expand[1].path == ["Customer"] && expand[1].isRef)
        #expect(expand[2].isWildcard && expand[2].levels == Int.max)
        // Parentheses and semicolons inside string literals do not split.
        let quoted = try parse("$expand=Orders($filter=ShipName eq 'a;b),c')")
        #expect(quoted.expand?.first?.filter == "ShipName eq 'a;b),c'")
    }

    @Test func v2ExpandPathsNest() throws {
        let q = try parse("$expand=Orders/Order_Details/Product,Customer,Orders,Orders/Employee", .v2)
        let expand = try #require(q.expand)
        #expect(expand.map(\.path) == [["Orders"], ["Customer"]])
        #expect(expand[0].expand?.map(\.path) == [["Order_Details"], ["Employee"]])
        #expect(expand[0].expand?[0].expand?.map(\.path) == [["Product"]])
        // V4 keeps paths as written.
        #expect(try parse("$expand=Address/Country").expand?.first?.path == ["Address", "Country"])
    }
}

@Suite struct QueryOptionsValidationTests {
    let model = Fixtures.northwindV4Model

    func validate(_ query: String, _ type: String = "NorthwindModel.Customer", _ version: ODataVersion = .v4)
        throws
    {
        let options = try ODataQueryOptions.parse(rawQuery: query, version: version)
        try options.validate(against: version == .v2 ? Fixtures.northwindV2Model : model, entityType: type)
    }

    @Test func validOptions() throws {
        try validate("$select=CompanyName,Address/City,*&$filter=City eq 'Berlin'&$orderby=CompanyName desc")
        try validate(
            "$expand=Orders($filter=Freight gt 5;$select=OrderID;$expand=Order_Details($orderby=Quantity))")
        try validate(
            "$expand=Orders/Order_Details/Product,Orders/Employee&$select=Orders/Freight",
            "NorthwindModel.Customer", .v2)
    }

    @Test func invalidOptionsNameTheProblem() {
        func message(_ query: String) -> String? {
            do {
                try validate(query)
                return nil
            } catch let error as ODataError {
                return error.message
            } catch {
                return "\(error)"
            }
        }
        #expect(message("$select=Nope") == "$select: 'Nope' is not a property of 'NorthwindModel.Customer'")
        #expect(message("$expand=CompanyName")?.contains("not a navigation property") == true)
        #expect(message("$expand=Address")?.contains("does not lead to a navigation property") == true)
        #expect(
            message("$expand=Orders($filter=Nope eq 1)")
                == "'Nope' is not a property of 'NorthwindModel.Order'")
        #expect(message("$filter=Freight gt 1")?.contains("Freight") == true)
        #expect(message("$orderby=Nope")?.contains("Nope") == true)
    }
}
