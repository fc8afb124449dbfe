import Testing

@testable import ODataCore

@Suite struct SearchParserTests {
    func parse(_ text: String) throws -> ODataSearchExpression { try ODataSearchExpression.parse(text) }

    @Test func termsPhrasesAndPrecedence() throws {
        #expect(try parse("blue") == .word("blue"))
        #expect(try parse("\"blue green\"") == .phrase("blue green"))
        #expect(try parse("a b") == .and(.word("a"), .word("b")))
        #expect(try parse("a AND b") == .and(.word("a"), .word("b")))
        // NOT binds tighter than AND, AND tighter than OR.
        #expect(try parse("a OR b c") == .or(.word("a"), .and(.word("b"), .word("c"))))
        #expect(try parse("a b OR c") == .or(.and(.word("a"), .word("b")), .word("c")))
        #expect(try parse("NOT a b") == .and(.not(.word("a")), .word("b")))
        #expect(try parse("NOT (a OR b)") == .not(.or(.word("a"), .word("b"))))
        #expect(try parse("(a OR b) AND c") == .and(.or(.word("a"), .word("b")), .word("c")))
        #expect(try parse("a OR b OR c") == .or(.or(.word("a"), .word("b")), .word("c")))
        // Lowercase operators are words; punctuation inside words is kept.
        #expect(try parse("a and b") == .and(.and(.word("a"), .word("and")), .word("b")))
        #expect(try parse("e-mail 4.5") == .and(.word("e-mail"), .word("4.5")))
        #expect(try parse(#""say \"hi\"""#) == .phrase(#"say "hi""#))
        #expect(try parse("mountain bike").terms == ["mountain", "bike"])
    }

    @Test func errorsAreClear() {
        for bad in ["", "   ", "(a", "a)", "\"open", "\"\"", "a AND", "OR a", "NOT", "a OR OR b", "()"] {
            #expect(throws: ODataError.self, "\(bad)") { try ODataSearchExpression.parse(bad) }
        }
        let deep = String(repeating: "(", count: 5_000) + "a" + String(repeating: ")", count: 5_000)
        #expect(throws: ODataError.self) { try ODataSearchExpression.parse(deep) }
        let nots = String(repeating: "NOT ", count: 5_000) + "a"
        #expect(throws: ODataError.self) { try ODataSearchExpression.parse(nots) }
        let many = Array(repeating: "w", count: 1_000).joined(separator: " ")
        #expect(throws: ODataError.self) { try ODataSearchExpression.parse(many) }
        do {
            _ = try ODataSearchExpression.parse("a AND (b")
        } catch {
            #expect(error.message.contains("')'") && error.offset == 8 && error.segment == "$search")
        }
    }

    static func random(_ g: inout SplitMix, depth: Int = 0) -> ODataSearchExpression {
        let words = ["red", "bike", "x-1", "4.5", "café", "a\\b", "NOTx"]
        switch depth > 3 ? g.next() % 2 : g.next() % 5 {
        case 0: return .word(words[Int(g.next() % UInt64(words.count))])
        case 1: return .phrase(["two words", "q\"uote", "back\\slash", "(par)"][Int(g.next() % 4)])
        case 2: return .not(random(&g, depth: depth + 1))
        case 3: return .and(random(&g, depth: depth + 1), random(&g, depth: depth + 1))
        default: return .or(random(&g, depth: depth + 1), random(&g, depth: depth + 1))
        }
    }

    @Test func parseOfPrintIsIdentity() throws {
        var g = SplitMix(seed: 4)
        for _ in 0..<2_000 {
            let e = Self.random(&g)
            #expect(try ODataSearchExpression.parse(e.text) == e, "\(e.text)")
        }
    }
}

@Suite struct SearchTranslationTests {
    let shop: ShopDatabase

    init() throws {
        shop = try ShopDatabase(profile: .exact)
        try ShopData.load(into: shop)
    }

    func ids(_ search: String, set: String = "Products") throws -> [Int64] {
        let type = shop.model.entitySet(named: set)!.entityType
        let translator = ODataSearchTranslator(model: shop.model, mapping: shop.mapping, entityType: type)
        let f = try translator.translate(try ODataSearchExpression.parse(search))
        #expect(f.sql.filter { $0 == "?" }.count == f.bindings.count)
        let rows = try shop.db.query(
            "SELECT \"ID\" FROM \(ODataSQLTranslator.quote(set)) AS \"t0\" WHERE " + f.sql
                + " ORDER BY \"ID\"",
            f.bindings.map(ShopDatabase.sqlValue))
        return rows.map { $0.values[0].int64 ?? -1 }
    }

    @Test func substringsCaseInsensitivelyOverStringProperties() throws {
        // Names: 1 Widget, 2 Gadget widget, 3 Thing, 4 Other "WIDGET", 5 Café, 6 nothing, 7 P.
        #expect(try ids("widget") == [1, 2, 4])
        #expect(try ids("WIDGET") == [1, 2, 4])
        #expect(try ids("widget gadget") == [2])
        #expect(try ids("widget OR thing") == [1, 2, 3, 4, 6])
        #expect(try ids("NOT widget") == [3, 5, 6, 7])
        #expect(try ids("\"gadget wid\"") == [2])
        #expect(try ids("\"\\\"widget\\\"\"") == [4])
        #expect(try ids("thing NOT nothing") == [3])
        #expect(try ids("(widget OR café) NOT other") == [1, 2, 5])
        #expect(try ids("CAFÉ") == [])  // only ASCII letters fold
        // Complex string properties are searched, through columns and the stored document.
        #expect(try ids("rome", set: "People") == [2])
        #expect(try ids("bob OR dee", set: "People") == [2, 4])
    }

    @Test func everyTermIsBound() throws {
        let translator = ODataSearchTranslator(
            model: shop.model, mapping: shop.mapping, entityType: "Shop.Model.Product")
        let f = try translator.translate(.phrase("x'); DROP TABLE Products; --"))
        #expect(!f.sql.contains("DROP"))
        #expect(translator.searchedPaths() == [["Name"], ["Description"], ["Sku"]])
    }
}
