import Testing

@testable import ODataCore

@Suite struct ResourcePathTests {
    let v4 = Fixtures.northwindV4Model
    let v2 = Fixtures.northwindV2Model

    func parse(_ path: String, _ model: EdmModel? = nil) throws -> ODataResourcePath {
        try ODataResourcePath.parse(path, model: model ?? v4)
    }

    func error(_ path: String, _ model: EdmModel? = nil) -> ODataError? {
        do {
            _ = try ODataResourcePath.parse(path, model: model ?? v4)
            return nil
        } catch {
            return error
        }
    }

    @Test func rootsAndSpecialSegments() throws {
        #expect(try parse("").target == .serviceDocument)
        #expect(try parse("/").target == .serviceDocument)
        #expect(try parse("$metadata").target == .metadata)
        #expect(try parse("/$batch").target == .batch)
        #expect(
            try parse("Customers").target
                == .entityCollection(entityType: "NorthwindModel.Customer", entitySet: "Customers"))
        #expect(try parse("Customers/$count").target == .count)
        #expect(
            try parse("Customers/$ref").target
                == .reference(entityType: "NorthwindModel.Customer", isCollection: true))
    }

    @Test func keysAndEncodings() throws {
        let path = try parse("Customers('ALFKI')")
        #expect(
            path.segments == [
                .entitySet(name: "Customers", entityType: "NorthwindModel.Customer"),
                .key(ODataKey([.init(name: "CustomerID", value: .string("ALFKI"))])),
            ])
        #expect(path.target == .entity(entityType: "NorthwindModel.Customer", entitySet: "Customers"))
        // pyodata encodes parens and quotes.
        #expect(try parse("Customers%28%27ALFKI%27%29") == path)
        #expect(try parse("Customers%28CustomerID%3D%27ALFKI%27%29") == path)
        // Encoded slash stays inside the key; an unencoded slash inside quotes too.
        #expect(
            try parse("Customers('A%2FB')").segments.last
                == .key(ODataKey([.init(name: "CustomerID", value: .string("A/B"))])))
        #expect(try parse("Customers('A/B')/Orders").segments.count == 3)
        // `+` is a plus in paths; a double-encoded quote is text, not a delimiter.
        #expect(
            try parse("Customers('a+b')").segments.last
                == .key(ODataKey([.init(name: "CustomerID", value: .string("a+b"))])))
        #expect(
            try parse("Customers('%2527')").segments.last
                == .key(ODataKey([.init(name: "CustomerID", value: .string("%27"))])))
        #expect(
            try parse("Customers('Bon%20app''')").segments.last
                == .key(ODataKey([.init(name: "CustomerID", value: .string("Bon app'"))])))
        let composite = try parse("Order_Details(OrderID=1,ProductID=2)")
        #expect(
            composite.target == .entity(entityType: "NorthwindModel.Order_Detail", entitySet: "Order_Details")
        )
        #expect(
            try parse("Orders/10248").segments.last
                == .key(ODataKey([.init(name: "OrderID", value: .integer(10248))])))
    }

    @Test func navigationPropertiesAndValues() throws {
        let orders = try parse("Customers('ALFKI')/Orders")
        #expect(orders.target == .entityCollection(entityType: "NorthwindModel.Order", entitySet: "Orders"))
        let multi = try parse(
            "Customers('ALFKI')/Orders(10248)/Order_Details(OrderID=10248,ProductID=11)/Product")
        #expect(multi.target == .entity(entityType: "NorthwindModel.Product", entitySet: "Products"))
        #expect(try parse("Orders(1)/Customer/Orders/$count").target == .count)
        #expect(try parse("Customers('A')/CompanyName").target == .property(EdmTypeRef(name: "Edm.String")))
        #expect(
            try parse("Customers('A')/CompanyName/$value").target == .rawValue(EdmTypeRef(name: "Edm.String"))
        )
        #expect(try parse("Customers('A')/Address/City").target == .property(EdmTypeRef(name: "Edm.String")))
        #expect(try parse("Customers('A')/Tags/$count").target == .count)
        #expect(
            try parse("Customers('A')/Orders/$ref").target
                == .reference(entityType: "NorthwindModel.Order", isCollection: true))
        #expect(
            try parse("Orders/NorthwindModel.SpecialOrder").target
                == .entityCollection(entityType: "NorthwindModel.SpecialOrder", entitySet: "Orders"))
        #expect(
            try parse("Orders/NorthwindModel.SpecialOrder(3)/Priority").target
                == .property(EdmTypeRef(name: "Edm.Int16")))
        #expect(
            try parse("Orders(3)/NorthwindModel.SpecialOrder/Priority").target
                == .property(EdmTypeRef(name: "Edm.Int16")))
        let v2Links = try parse("Customers('ALFKI')/$links/Orders", v2)
        #expect(v2Links.target == .reference(entityType: "NorthwindModel.Order", isCollection: true))
        #expect(try parse("Customers('ALFKI')/Orders", v2).entitySet == "Orders")
    }

    @Test func operationImports() throws {
        let trip = Fixtures.tripPinModel
        let call = try parse("GetNearestAirport(lat=33.1,lon=-118)", trip)
        #expect(
            call.segments == [
                .operationImport(
                    name: "GetNearestAirport",
                    parameters: [
                        .init(name: "lat", value: .decimal("33.1")),
                        .init(name: "lon", value: .integer(-118)),
                    ])
            ])
        #expect(
            try parse("Me/Friends('russell')", trip).target
                == .entity(entityType: "Trippin.Person", entitySet: "People"))
        #expect(error("GetNearestAirport(lat='x')", trip)?.message.contains("lat") == true)
        #expect(error("GetNearestAirport(foo=1)", trip) != nil)
        let sap = Fixtures.sapV2Model
        guard case .operationImport(let op) = try parse("sum", sap).target else {
            Issue.record()
            return
        }
        #expect(op.parameters.count == 2)
    }

    @Test func clearErrors() {
        let unknownSet = error("Nope")
        #expect(unknownSet?.segment == "Nope")
        #expect(unknownSet?.message.contains("no entity set") == true)
        #expect(
            error("Customers('A')/Nope")?.message.contains(
                "'Nope' is not a property or navigation property of 'NorthwindModel.Customer'") == true)
        #expect(error("Customers(1)")?.segment == "Customers(1)")
        #expect(error("Customers/$count/x")?.message.contains("no segment may follow") == true)
        #expect(error("Customers('A')/CompanyName/Foo") != nil)
        #expect(error("Customers('A')/Address/$value") != nil)
        #expect(error("Customers('A'") != nil)
        #expect(error("Customers('A')//Orders") != nil)
        #expect(error("Customers('%zz')") != nil)
        #expect(error("Orders(1)/Customer(1)") != nil)
        #expect(error("$foo") != nil)
        #expect(error("Customers('A')/$links") != nil)
        #expect(error("Customers/Orders") != nil)
    }
}

@Suite struct RobustnessTests {
    @Test func v2FunctionImportParameters() throws {
        let sap = Fixtures.sapV2Model
        let sum = try #require(sap.operationImport(named: "sum"))
        let options = try ODataQueryOptions.parse(rawQuery: "A=1&B=2&sap-client=100", version: .v2)
        #expect(
            try sum.parameterValues(from: options.custom, model: sap) == [
                .init(name: "A", value: .integer(1)), .init(name: "B", value: .integer(2)),
            ])
        let bad = try ODataQueryOptions.parse(rawQuery: "A='x'&B=2", version: .v2)
        #expect(throws: ODataError.self) { try sum.parameterValues(from: bad.custom, model: sap) }
    }

    @Test func garbagePathsQueriesAndLiteralsNeverCrash() {
        var generator = SplitMix(seed: 7)
        let alphabet = Array("()'%27%28%2F,=/$abcCustomersOrders0123456789.+-&:;*".unicodeScalars)
        let model = Fixtures.northwindV4Model
        for _ in 0..<3_000 {
            var text = ""
            for _ in 0..<(generator.next() % 30) {
                text.unicodeScalars.append(alphabet[Int(generator.next() % UInt64(alphabet.count))])
            }
            _ = try? ODataResourcePath.parse(text, model: model)
            _ = try? ODataResourcePath.parse("Customers" + text, model: model)
            _ = try? ODataQueryOptions.parse(rawQuery: text, version: .v4)
            _ = try? ODataQueryOptions.parse(rawQuery: "$expand=" + text, version: .v2)
            _ = try? ODataLiteral.parse(text)
        }
        let deepPath = String(repeating: "Orders(1)/Customer/", count: 500) + "Orders"
        #expect((try? ODataResourcePath.parse(deepPath, model: model)) != nil)
    }
}

@Suite struct ShopPathTests {
    let model = ShopFixture.model

    func parse(_ path: String) throws -> ODataResourcePath { try ODataResourcePath.parse(path, model: model) }

    func error(_ path: String) -> ODataError? {
        do {
            _ = try ODataResourcePath.parse(path, model: model)
            return nil
        } catch {
            return error
        }
    }

    @Test func typeCasts() throws {
        let employees = try parse("People/Shop.Employee")
        #expect(employees.segments.last == .cast(type: "Shop.Model.Employee"))
        #expect(employees.target == .entityCollection(entityType: "Shop.Model.Employee", entitySet: "People"))
        #expect(employees.contextFragment == "People/Shop.Model.Employee")
        let manager = try parse("People(1)/Shop.Employee/Manager")
        #expect(manager.target == .entity(entityType: "Shop.Model.Employee", entitySet: "People"))
        #expect(manager.contextFragment == "People/$entity")
        let keyed = try parse("People/Shop.Model.Employee(4)")
        #expect(keyed.target == .entity(entityType: "Shop.Model.Employee", entitySet: "People"))
        #expect(keyed.contextFragment == "People/Shop.Model.Employee/$entity")
        #expect(
            try parse("People(4)/Shop.Model.Employee/Salary").target
                == .property(EdmTypeRef(name: "Edm.Decimal")))
        #expect(
            try parse("People(4)/Shop.Model.Employee/Salary").contextFragment
                == "People(4)/Shop.Model.Employee/Salary")
        #expect(try parse("People/Shop.Customer/$count").target == .count)
        // A derived type's navigation is bound through the cast path.
        #expect(try parse("People(2)/Shop.Customer/Orders").entitySet == "Orders")
        // Casting to an unrelated type is an error naming the segment.
        #expect(error("People/Shop.Product")?.segment == "Shop.Product")
        #expect(error("People(1)/Salary") != nil)
    }

    @Test func singletons() throws {
        let company = try parse("Company")
        #expect(company.target == .entity(entityType: "Shop.Model.Company", entitySet: "Company"))
        #expect(company.segments == [.singleton(name: "Company", entityType: "Shop.Model.Company")])
        #expect(company.contextFragment == "Company")
        let departments = try parse("Company/Departments")
        #expect(
            departments.target
                == .entityCollection(entityType: "Shop.Model.Department", entitySet: "Departments"))
        #expect(departments.contextFragment == "Departments")
        #expect(try parse("Company/Departments(3)/Staff/$count").target == .count)
        #expect(try parse("Company/Headquarters/City").contextFragment == "Company/Headquarters/City")
        #expect(error("Company(1)")?.message.contains("singleton") == true)
        #expect(error("Company/$count") != nil)
    }

    @Test func containment() throws {
        let lines = try parse("Orders(2)/Lines")
        #expect(lines.target == .entityCollection(entityType: "Shop.Model.OrderLine", entitySet: nil))
        #expect(lines.isContained(in: model))
        #expect(lines.contextFragment == "Orders(2)/Lines")
        #expect(
            lines.segments.last
                == .navigation(
                    name: "Lines", entityType: "Shop.Model.OrderLine", isCollection: true, entitySet: nil))
        let line = try parse("Orders(2)/Lines(3)")
        #expect(line.target == .entity(entityType: "Shop.Model.OrderLine", entitySet: nil))
        #expect(line.contextFragment == "Orders(2)/Lines/$entity")
        #expect(try parse("Orders(2)/Lines(3)/Quantity").contextFragment == "Orders(2)/Lines(3)/Quantity")
        #expect(try parse("Orders(2)/Lines/$count").target == .count)
        // A navigation out of a contained entity uses the binding `Lines/Product`.
        let product = try parse("Orders(2)/Lines(3)/Product")
        #expect(product.target == .entity(entityType: "Shop.Model.Product", entitySet: "Products"))
        #expect(!product.isContained(in: model))
        #expect(!(try parse("Orders(2)/Customer").isContained(in: model)))
    }

    @Test func propertyPaths() throws {
        let address = try parse("People(1)/Address")
        #expect(address.target == .property(EdmTypeRef(name: "Shop.Model.Address")))
        #expect(address.contextFragment == "People(1)/Address")
        #expect(try parse("People(1)/Address/City").target == .property(EdmTypeRef(name: "Edm.String")))
        #expect(try parse("People(1)/Address/Geo/Lat").target == .property(EdmTypeRef(name: "Edm.Double")))
        #expect(
            try parse("People(1)/Address/City/$value").target == .rawValue(EdmTypeRef(name: "Edm.String")))
        #expect(
            try parse("People(1)/Address/Shop.PostalAddress/PostBox").target
                == .property(EdmTypeRef(name: "Edm.String")))
        let emails = try parse("People(1)/Emails")
        #expect(emails.target == .property(EdmTypeRef(name: "Edm.String", isCollection: true)))
        #expect(emails.contextFragment == "People(1)/Emails")
        #expect(try parse("People(1)/Emails/$count").target == .count)
        #expect(
            try parse("People(1)/Addresses").target
                == .property(EdmTypeRef(name: "Shop.Model.Address", isCollection: true)))
        #expect(try parse("People(1)/Addresses/$count").target == .count)
        #expect(error("People(1)/Emails/$value") != nil)
        #expect(error("People(1)/Address/$value") != nil)
        #expect(try parse("Products(1)/Photo").target == .property(EdmTypeRef(name: "Edm.Stream")))
        #expect(
            try parse("Products(1)/Tags").target
                == .property(EdmTypeRef(name: "Edm.String", isCollection: true)))
    }

    @Test func countsAndReferences() throws {
        #expect(try parse("Products/$count").target == .count)
        #expect(try parse("People(1)/Friends/$count").target == .count)
        #expect(try parse("People(1)/Shop.Employee/Reports/$count").target == .count)
        let refs = try parse("People(1)/Friends/$ref")
        #expect(refs.target == .reference(entityType: "Shop.Model.Person", isCollection: true))
        #expect(refs.contextFragment == "Collection($ref)")
        let one = try parse("People(1)/Friends(2)/$ref")
        #expect(one.target == .reference(entityType: "Shop.Model.Person", isCollection: false))
        #expect(one.contextFragment == "$ref")
        #expect(
            try parse("Orders(1)/Customer/$ref").target
                == .reference(entityType: "Shop.Model.Customer", isCollection: false))
        #expect(error("Products/$count/$ref") != nil)
    }

    @Test func keysOfEveryKindInContext() throws {
        #expect(
            try parse("Documents(6f9619ff-8b86-d011-b42d-00c04fc964ff)").contextFragment
                == "Documents/$entity")
        #expect(
            try parse("Documents(6F9619FF-8B86-D011-B42D-00C04FC964FF)/Shop.Invoice/Total").contextFragment
                == "Documents(6f9619ff-8b86-d011-b42d-00c04fc964ff)/Shop.Model.Invoice/Total")
        let v2 = Fixtures.northwindV2Model
        let detail = try ODataResourcePath.parse("Order_Details(OrderID=1,ProductID=2)/Quantity", model: v2)
        #expect(detail.contextFragment == "Order_Details(OrderID=1,ProductID=2)/Quantity")
    }

    @Test func boundOperationsAndUnsupportedSegments() throws {
        let top = try parse("Products/Shop.TopProducts(n=3)")
        #expect(
            top.segments.last
                == .boundOperation(
                    name: "Shop.Model.TopProducts", parameters: [.init(name: "n", value: .integer(3))]))
        guard case .boundOperation(let op) = top.target else {
            Issue.record("expected a bound operation")
            return
        }
        #expect(op.name == "TopProducts")
        #expect(error("Products(1)/Shop.TopProducts(n=3)") != nil)  // bound to the collection only
        #expect(error("Products/Shop.TopProducts(n='x')")?.message.contains("n") == true)
        for path in [
            "Products/$each", "Products/$filter(@p)", "$all", "$crossjoin(Products,Orders)", "$entity",
        ] {
            #expect(error(path)?.kind == .notImplemented, "\(path)")
            #expect(error(path)?.isNotImplemented == true)
        }
    }
}

@Suite struct HostileQueryTests {
    /// Random text into the `$search`, `$apply` and `$compute` parsers and, when it parses, into the
    /// planner: errors only, never a crash or a hang.
    @Test func garbageNeverCrashes() throws {
        var g = SplitMix(seed: 21)
        let pieces = [
            "(", ")", "\"", "'", "/", ",", " ", "as", " with ", "sum", "$count", "groupby((", "aggregate(",
            "filter(", "Price", "Name", "Status", "gt", "1", "NOT", "AND", "OR", "compute(", "top(", "skip(",
            "orderby(", "search(", "identity", "Shop.Color'Red'", "Tags/any(t:t eq 'x')", "\\",
        ]
        let shop = try ShopDatabase(profile: .exact)
        let planner = ODataQueryPlanner(
            model: shop.model, mapping: shop.mapping, table: "Products", entityType: "Shop.Model.Product")
        var planned = 0
        for _ in 0..<4_000 {
            var text = ""
            for _ in 0..<(1 + g.next() % 12) { text += pieces[Int(g.next() % UInt64(pieces.count))] }
            _ = try? ODataSearchExpression.parse(text)
            _ = try? ODataComputeItem.parseList(text)
            if let apply = try? ODataApply.parse(text) {
                if let plan = try? planner.plan(apply: apply, options: ODataQueryOptions()) {
                    planned += 1
                    _ = try? shop.db.query(plan.sql.sql, plan.sql.bindings.map(ShopDatabase.sqlValue))
                }
            }
        }
        #expect(planned > 0)
    }
}
