import Testing

@testable import ODataCore

@Suite struct FilterParserTests {
    let v4 = Fixtures.northwindV4Model
    let v2 = Fixtures.northwindV2Model

    func parser(_ type: String = "NorthwindModel.Order", _ model: EdmModel? = nil) -> ODataFilterParser {
        ODataFilterParser(model: model ?? v4, entityType: type)
    }

    func filter(_ text: String, _ type: String = "NorthwindModel.Order", _ model: EdmModel? = nil) throws
        -> ODataFilterExpression
    {
        try parser(type, model).parseFilter(text)
    }

    func failure(_ text: String, _ type: String = "NorthwindModel.Order", _ model: EdmModel? = nil)
        -> ODataError?
    {
        do {
            _ = try parser(type, model).parseFilter(text)
            return nil
        } catch {
            return error
        }
    }

    func prop(_ name: String, _ type: String) -> ODataFilterExpression {
        .property(
            ODataPropertyPath(
                steps: [.property(name: name, type: EdmTypeRef(name: type))], type: EdmTypeRef(name: type)))
    }

    @Test func comparisonsAndLiterals() throws {
        #expect(
            try filter("Freight gt 5") == .binary(.gt, prop("Freight", "Edm.Decimal"), .literal(.integer(5))))
        #expect(
            try filter("CustomerID eq 'ALFKI'")
                == .binary(.eq, prop("CustomerID", "Edm.String"), .literal(.string("ALFKI"))))
        #expect(
            try filter("OrderDate ge 2020-01-01T00:00:00Z")
                == .binary(
                    .ge, prop("OrderDate", "Edm.DateTimeOffset"),
                    .literal(.dateTimeOffset("2020-01-01T00:00:00Z"))))
        #expect(
            try filter("ShipDate eq 2020-01-01")
                == .binary(.eq, prop("ShipDate", "Edm.Date"), .literal(.date("2020-01-01"))))
        _ = try filter("TrackingId eq 6f9619ff-8b86-d011-b42d-00c04fc964ff")
        _ = try filter("Freight le 1.5M and Freight ne null")
        #expect(
            try filter("Paint has NW.Color'Red'")
                == .has(prop("Paint", "NorthwindModel.Color"), .enumMember(type: "NW.Color", value: "Red")))
        #expect(
            try filter("OrderID in (1, 2, 3)")
                == .in(
                    prop("OrderID", "Edm.Int32"),
                    [.literal(.integer(1)), .literal(.integer(2)), .literal(.integer(3))]))
        let v2Date = try filter("OrderDate lt datetime'1997-01-01T00:00'", "NorthwindModel.Order", v2)
        #expect(
            v2Date == .binary(.lt, prop("OrderDate", "Edm.DateTime"), .literal(.dateTime("1997-01-01T00:00")))
        )
    }

    @Test func precedence() throws {
        let a = prop("OrderID", "Edm.Int32")
        // and binds tighter than or.
        #expect(
            try filter("OrderID eq 1 or OrderID eq 2 and OrderID eq 3")
                == .binary(
                    .or,
                    .binary(.eq, a, .literal(.integer(1))),
                    .binary(
                        .and, .binary(.eq, a, .literal(.integer(2))), .binary(.eq, a, .literal(.integer(3)))))
        )
        // mul before add before comparison.
        #expect(
            try filter("OrderID add 2 mul 3 gt 10")
                == .binary(
                    .gt,
                    .binary(.add, a, .binary(.mul, .literal(.integer(2)), .literal(.integer(3)))),
                    .literal(.integer(10))))
        // parentheses override.
        #expect(
            try filter("(OrderID add 2) mul 3 gt 10")
                == .binary(
                    .gt,
                    .binary(.mul, .binary(.add, a, .literal(.integer(2))), .literal(.integer(3))),
                    .literal(.integer(10))))
        // not applies to the comparison; and still separates.
        #expect(
            try filter("not OrderID eq 1 and OrderID ne 2")
                == .binary(
                    .and,
                    .not(.binary(.eq, a, .literal(.integer(1)))), .binary(.ne, a, .literal(.integer(2)))))
        #expect(try filter("-OrderID lt -5") == .binary(.lt, .negate(a), .literal(.integer(-5))))
        #expect(
            try filter("OrderID sub 1 sub 1 eq 0")
                == .binary(
                    .eq, .binary(.sub, .binary(.sub, a, .literal(.integer(1))), .literal(.integer(1))),
                    .literal(.integer(0))))
        _ = try filter("OrderID mod 2 eq 0 and OrderID div 2 gt 1 and OrderID divby 2 gt 0.5")
    }

    @Test func functions() throws {
        let name = prop("CompanyName", "Edm.String")
        #expect(
            try filter("contains(CompanyName,'Al')", "NorthwindModel.Customer")
                == .function(.contains, [name, .literal(.string("Al"))]))
        // V2 substringof has reversed arguments.
        #expect(
            try filter("substringof('Al', CompanyName)", "NorthwindModel.Customer")
                == .function(.contains, [name, .literal(.string("Al"))]))
        _ = try filter("substringof('Al',CompanyName) eq true", "NorthwindModel.Customer", v2)
        for text in [
            "startswith(CompanyName,'A')", "endswith(CompanyName,'A')", "length(CompanyName) gt 3",
            "indexof(CompanyName,'x') eq 1", "substring(CompanyName,1) eq 'x'",
            "substring(CompanyName,1,2) eq 'x'",
            "tolower(CompanyName) eq 'x'", "toupper(CompanyName) eq 'X'", "trim(CompanyName) eq 'x'",
            "concat(concat(City,', '),Country) eq 'Berlin, Germany'", "replace(CompanyName,'a','b') eq 'x'",
            "isof(NorthwindModel.Customer)", "isof(CompanyName,'Edm.String')",
            "cast(CompanyName,Edm.String) eq 'x'",
        ] {
            #expect(throws: Never.self, "\(text)") { try filter(text, "NorthwindModel.Customer") }
        }
        for text in [
            "year(OrderDate) eq 1997", "month(OrderDate) eq 1", "day(OrderDate) eq 1", "hour(OrderDate) eq 1",
            "minute(OrderDate) eq 1", "second(OrderDate) eq 1", "fractionalseconds(OrderDate) lt 0.5",
            "date(OrderDate) eq 2020-01-01", "time(OrderDate) lt 12:00:00", "OrderDate lt now()",
            "totaloffsetminutes(OrderDate) eq 60", "round(Freight) eq 32", "floor(Freight) eq 32",
            "ceiling(Freight) eq 33", "year(ShipDate) eq 2020",
        ] {
            #expect(throws: Never.self, "\(text)") { try filter(text) }
        }
    }

    @Test func pathsAndLambdas() throws {
        let nav = try filter("Customer/City eq 'Berlin'")
        guard case .binary(.eq, .property(let path), _) = nav else {
            Issue.record()
            return
        }
        #expect(
            path.steps == [
                .navigation(name: "Customer", entityType: "NorthwindModel.Customer", isCollection: false),
                .property(name: "City", type: EdmTypeRef(name: "Edm.String")),
            ])
        _ = try filter("Customer/Address/City eq 'Berlin'")
        let any = try filter("Orders/any(o:o/Freight gt 50)", "NorthwindModel.Customer")
        guard case .lambda(let lambda) = any else {
            Issue.record()
            return
        }
        #expect(
            lambda.kind == .any && lambda.variable == "o"
                && lambda.elementType == EdmTypeRef(name: "NorthwindModel.Order"))
        #expect(
            lambda.predicate
                == .binary(
                    .gt,
                    .property(
                        ODataPropertyPath(
                            root: .variable("o"),
                            steps: [.property(name: "Freight", type: EdmTypeRef(name: "Edm.Decimal"))],
                            type: EdmTypeRef(name: "Edm.Decimal"))), .literal(.integer(50))))
        _ = try filter("Orders/any()", "NorthwindModel.Customer")
        _ = try filter(
            "Orders/all(o:o/Order_Details/any(d:d/Quantity gt o/Freight))", "NorthwindModel.Customer")
        _ = try filter("Tags/any(t:t eq 'vip')", "NorthwindModel.Customer")
        _ = try filter("Orders/$count gt 2", "NorthwindModel.Customer")
        _ = try filter("NorthwindModel.SpecialOrder/Priority eq 1")
        _ = try filter("$it/Freight gt 1")
        // Open types accept unknown properties.
        _ = try filter("Dynamic eq 1", "Trippin.Person", Fixtures.tripPinModel)
        // No model: untyped.
        _ = try ODataFilterParser(model: nil, entityType: nil).parseFilter("a/b eq 1 and c")
    }

    @Test func typeErrors() {
        let unknown = failure("Nope eq 1")
        #expect(unknown?.message == "'Nope' is not a property of 'NorthwindModel.Order'")
        #expect(unknown?.offset == 0)
        #expect(failure("Freight gt 5 and Customer/Nope eq 1")?.offset == 26)
        #expect(failure("CustomerID eq 1")?.message.contains("cannot compare") == true)
        #expect(failure("Freight add 'x' gt 1") != nil)
        #expect(failure("Freight") != nil)  // not boolean
        #expect(failure("Freight and true") != nil)
        #expect(failure("contains(Freight,'x')") != nil)
        #expect(failure("contains(CustomerID)") != nil)
        #expect(failure("year(CustomerID) eq 1") != nil)
        #expect(failure("Customer eq 1") != nil)
        #expect(failure("Order_Details/Quantity eq 1") != nil)
        #expect(failure("Customer/any(c:true)") != nil)
        #expect(failure("Order_Details/any(d:d/Nope eq 1)") != nil)
        #expect(failure("Order_Details/any(d:x/Quantity eq 1)") != nil)
        #expect(failure("Paint has 1") != nil)
        #expect(failure("OrderID in ()") != nil)
        #expect(failure("frobnicate(OrderID) eq 1") != nil)
    }

    @Test func syntaxErrorsCarryOffsets() {
        let cases: [(String, Int)] = [
            ("OrderID eq", 10), ("OrderID eq 1)", 12), ("(OrderID eq 1", 13), ("OrderID eq 'x", 11),
            ("OrderID eq 1 1", 13), ("OrderID # 1", 8), ("", 0), ("OrderID eq 12abc", 11),
        ]
        for (text, offset) in cases {
            let e = failure(text)
            #expect(e != nil, "\(text)")
            #expect(e?.offset == offset, "\(text): \(String(describing: e))")
            #expect(e?.kind == .filter)
        }
    }

    @Test func deepNestingIsAnErrorNotACrash() {
        let deep =
            String(repeating: "(", count: 10_000) + "OrderID eq 1" + String(repeating: ")", count: 10_000)
        #expect(failure(deep)?.message.contains("nested too deeply") == true)
        #expect(failure(String(repeating: "not ", count: 10_000) + "true") != nil)
        #expect(failure(String(repeating: "-", count: 10_000) + "1 eq 1") != nil)
        #expect(
            failure(
                String(repeating: "tolower(", count: 5_000) + "CustomerID"
                    + String(repeating: ")", count: 5_000) + " eq 'a'") != nil)
        // Long flat chains are fine and balanced.
        let chain = (0..<2_000).map { "OrderID eq \($0)" }.joined(separator: " or ")
        #expect(throws: Never.self) { try filter(chain) }
    }

    /// Found by the read fuzz test (`1 add 1 add … eq 1`, 2,000 terms): left-associative chains built a
    /// tree 2,000 levels deep that overflowed a worker's stack when it was translated; each chained
    /// operator now counts as a level of nesting.
    @Test func longLeftAssociativeChainsAreAnErrorNotACrash() {
        for (op, cmp) in [
            ("add", " eq 1"), ("sub", " eq 1"), ("mul", " eq 1"), ("div", " eq 1"), ("mod", " eq 1"),
        ] {
            let text = Array(repeating: "OrderID", count: 2_000).joined(separator: " \(op) ") + cmp
            #expect(failure(text)?.message.contains("nested too deeply") == true, "\(op)")
        }
        #expect(failure(Array(repeating: "true", count: 2_000).joined(separator: " eq ")) != nil)
        #expect(failure(Array(repeating: "1", count: 2_000).joined(separator: " lt ")) != nil)
        // A short chain still parses.
        #expect(throws: Never.self) { try filter("OrderID add 1 sub 2 mul 3 div 4 mod 5 gt 1") }
        #expect(throws: Never.self) {
            try filter((0..<20).map { "OrderID add \($0)" }.joined(separator: " add ") + " eq 1")
        }
    }

    @Test func garbageNeverCrashes() {
        var generator = SplitMix(seed: 42)
        let alphabet = Array(
            "()',/:-$@ abceglnoqrt0123456789.OrderIDFreight eq and or not any all".unicodeScalars)
        let pieces = [
            "OrderID", "eq", "(", ")", "'", "any(", "o:", "/", ",", "1", "-", "not", "and", "or", "Customer",
            "in", "has", "NW.Color'Red'", "2020-01-01", "contains(", "$it", "Freight",
        ]
        for round in 0..<3_000 {
            var text = ""
            if round % 2 == 0 {
                for _ in 0..<(generator.next() % 40) {
                    text.unicodeScalars.append(alphabet[Int(generator.next() % UInt64(alphabet.count))])
                }
            } else {
                for _ in 0..<(generator.next() % 15) {
                    text +=
                        pieces[Int(generator.next() % UInt64(pieces.count))]
                        + (generator.next() % 2 == 0 ? " " : "")
                }
            }
            _ = try? filter(text)
            _ = try? parser().parseOrderBy(text)
        }
    }

    @Test func orderBy() throws {
        let items = try parser().parseOrderBy("Freight desc, OrderID,Customer/City asc,year(OrderDate) desc")
        #expect(items.map(\.descending) == [true, false, false, true])
        #expect(items[1].expression == prop("OrderID", "Edm.Int32"))
        #expect(throws: ODataError.self) { try parser().parseOrderBy("Freight sideways") }
        #expect(throws: ODataError.self) { try parser().parseOrderBy("Nope") }
        #expect(throws: ODataError.self) { try parser().parseOrderBy("Freight,") }
    }
}

struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
