import Testing

@testable import ODataCore

@Suite struct LiteralTests {
    @Test func scalarsAndNumbers() throws {
        #expect(try ODataLiteral.parse("'Bon app'''") == .string("Bon app'"))
        #expect(try ODataLiteral.parse("''") == .string(""))
        #expect(try ODataLiteral.parse("123") == .integer(123))
        #expect(try ODataLiteral.parse("-7") == .integer(-7))
        #expect(try ODataLiteral.parse("123L") == .integer(123))
        #expect(try ODataLiteral.parse("9223372036854775807L") == .integer(.max))
        #expect(try ODataLiteral.parse("1.5M") == .decimal("1.5"))
        #expect(try ODataLiteral.parse("1.5m") == .decimal("1.5"))
        #expect(try ODataLiteral.parse("1.50") == .decimal("1.50"))
        #expect(try ODataLiteral.parse("99999999999999999999") == .decimal("99999999999999999999"))
        #expect(try ODataLiteral.parse("1e3d") == .double(1000))
        #expect(try ODataLiteral.parse("1e3") == .double(1000))
        #expect(try ODataLiteral.parse("2.0d") == .double(2))
        #expect(try ODataLiteral.parse("1f") == .double(1))
        #expect(try ODataLiteral.parse("-INF") == .double(-.infinity))
        #expect(try ODataLiteral.parse("true") == .boolean(true))
        #expect(try ODataLiteral.parse("false") == .boolean(false))
        #expect(try ODataLiteral.parse("null") == .null)
        if case .double(let nan) = try ODataLiteral.parse("NaN") {
            #expect(nan.isNaN)
        } else {
            Issue.record()
        }
    }

    @Test func temporalForms() throws {
        #expect(try ODataLiteral.parse("datetime'2020-01-01T00:00'") == .dateTime("2020-01-01T00:00"))
        #expect(
            try ODataLiteral.parse("datetimeoffset'2020-01-01T10:00:00+02:00'")
                == .dateTimeOffset("2020-01-01T10:00:00+02:00"))
        #expect(try ODataLiteral.parse("2020-01-01") == .date("2020-01-01"))
        #expect(
            try ODataLiteral.parse("2020-01-01T10:00:00.123Z") == .dateTimeOffset("2020-01-01T10:00:00.123Z"))
        #expect(
            try ODataLiteral.parse("2020-01-01T10:00:00-05:30")
                == .dateTimeOffset("2020-01-01T10:00:00-05:30"))
        #expect(try ODataLiteral.parse("13:45:00") == .timeOfDay("13:45:00"))
        #expect(try ODataLiteral.parse("time'PT1H30M'", version: .v2) == .duration("PT1H30M"))
        #expect(try ODataLiteral.parse("duration'P1DT2H'") == .duration("P1DT2H"))
        #expect(try ODataLiteral.parse("P1DT2.5S") == .duration("P1DT2.5S"))
        #expect(throws: ODataError.self) { try ODataLiteral.parse("2020-13-01") }
        #expect(throws: ODataError.self) { try ODataLiteral.parse("datetime'2020-01-01T25:00'") }
        #expect(throws: ODataError.self) { try ODataLiteral.parse("25:00:00") }
        #expect(throws: ODataError.self) { try ODataLiteral.parse("duration'P'") }
    }

    @Test func guidsBinaryEnums() throws {
        let guid = "6f9619ff-8b86-d011-b42d-00c04fc964ff"
        #expect(try ODataLiteral.parse("guid'\(guid.uppercased())'") == .guid(guid))
        #expect(try ODataLiteral.parse(guid) == .guid(guid))
        #expect(try ODataLiteral.parse("X'ABCD'") == .binary([0xAB, 0xCD]))
        #expect(try ODataLiteral.parse("binary'0A0b'", version: .v2) == .binary([0x0A, 0x0B]))
        #expect(try ODataLiteral.parse("binary'AQID'", version: .v4) == .binary([1, 2, 3]))
        #expect(try ODataLiteral.parse("Ns.Color'Red'") == .enumMember(type: "Ns.Color", value: "Red"))
        #expect(
            try ODataLiteral.parse("Ns.Color'Red,Blue'") == .enumMember(type: "Ns.Color", value: "Red,Blue"))
        #expect(throws: ODataError.self) { try ODataLiteral.parse("guid'123'") }
        #expect(throws: ODataError.self) { try ODataLiteral.parse("X'ABC'") }
        #expect(throws: ODataError.self) { try ODataLiteral.parse("foo'bar'") }
    }

    @Test func malformed() {
        for text in ["'open", "12abc", "1.5X", "", "abc", "'a' 'b'", "1L5", "--1", "(1)"] {
            #expect(throws: ODataError.self, "\(text)") { try ODataLiteral.parse(text) }
        }
    }

    @Test func conformance() {
        let model = Fixtures.northwindV4Model
        #expect(ODataLiteral.integer(1).conforms(to: EdmTypeRef(name: "Edm.Decimal")))
        #expect(!ODataLiteral.integer(1).conforms(to: EdmTypeRef(name: "Edm.String")))
        #expect(!ODataLiteral.integer(300).conforms(to: EdmTypeRef(name: "Edm.Byte")))
        #expect(!ODataLiteral.string("1").conforms(to: EdmTypeRef(name: "Edm.Int32")))
        #expect(
            ODataLiteral.dateTime("2020-01-01T00:00").conforms(to: EdmTypeRef(name: "Edm.DateTimeOffset")))
        let color = EdmTypeRef(name: "NorthwindModel.Color")
        #expect(ODataLiteral.enumMember(type: "NW.Color", value: "Red,Blue").conforms(to: color, in: model))
        #expect(!ODataLiteral.enumMember(type: "NW.Color", value: "Pink").conforms(to: color, in: model))
        #expect(ODataLiteral.string("Green").conforms(to: color, in: model))
    }
}

@Suite struct KeyPredicateTests {
    let v4 = Fixtures.northwindV4Model
    let v2 = Fixtures.northwindV2Model

    @Test func singleAndComposite() throws {
        #expect(
            try ODataKey.parse("'ALFKI'", entityType: "NorthwindModel.Customer", model: v4)["CustomerID"]
                == .string("ALFKI"))
        #expect(
            try ODataKey.parse("CustomerID='ALFKI'", entityType: "NorthwindModel.Customer", model: v4).values
                .count == 1)
        #expect(
            try ODataKey.parse("10248", entityType: "NorthwindModel.Order", model: v4)["OrderID"]
                == .integer(10248))
        let composite = try ODataKey.parse(
            "ProductID=2, OrderID=1", entityType: "NorthwindModel.Order_Detail", model: v4)
        #expect(
            composite.values == [
                .init(name: "OrderID", value: .integer(1)), .init(name: "ProductID", value: .integer(2)),
            ])
        #expect(
            try ODataKey.parse("'Bon app'''", entityType: "NorthwindModel.Customer", model: v4)["CustomerID"]
                == .string("Bon app'"))
        #expect(
            try ODataKey.parse("'a,b=c'", entityType: "NorthwindModel.Customer", model: v4)["CustomerID"]
                == .string("a,b=c"))
    }

    @Test func typedByModel() throws {
        let sap = Fixtures.sapV2Model
        let key = try ODataKey.parse(
            "Sensor='S1',Date=datetime'2017-12-24T18:00'", entityType: "EXAMPLE_SRV.TemperatureMeasurement",
            model: sap)
        #expect(key["Date"] == .dateTime("2017-12-24T18:00"))
        #expect(throws: ODataError.self) {
            try ODataKey.parse(
                "Sensor='S1',Date='2017'", entityType: "EXAMPLE_SRV.TemperatureMeasurement", model: sap)
        }
        #expect(throws: ODataError.self) {
            try ODataKey.parse("'1'", entityType: "NorthwindModel.Order", model: v2)
        }
        #expect(throws: ODataError.self) {
            try ODataKey.parse("1", entityType: "NorthwindModel.Customer", model: v2)
        }
        #expect(throws: ODataError.self) {
            try ODataKey.parse("null", entityType: "NorthwindModel.Order", model: v2)
        }
        #expect(throws: ODataError.self) {
            try ODataKey.parse("1", entityType: "NorthwindModel.Order_Detail", model: v2)
        }
        #expect(throws: ODataError.self) {
            try ODataKey.parse("OrderID=1", entityType: "NorthwindModel.Order_Detail", model: v2)
        }
        #expect(throws: ODataError.self) {
            try ODataKey.parse("OrderID=1,OrderID=2", entityType: "NorthwindModel.Order_Detail", model: v2)
        }
        #expect(throws: ODataError.self) {
            try ODataKey.parse("OrderID=1,Foo=2", entityType: "NorthwindModel.Order_Detail", model: v2)
        }
        #expect(throws: ODataError.self) {
            try ODataKey.parse("1,2", entityType: "NorthwindModel.Order_Detail", model: v2)
        }
        #expect(
            try ODataKey.parse("12L", entityType: "NorthwindModel.Order", model: v2)["OrderID"]
                == .integer(12))
    }

    @Test func percentDecoding() throws {
        #expect(try PercentDecoding.decode("%28%27ALFKI%27%29", plusAsSpace: false) == "('ALFKI')")
        #expect(try PercentDecoding.decode("a+b", plusAsSpace: false) == "a+b")
        #expect(try PercentDecoding.decode("City+eq+%27Berlin%27", plusAsSpace: true) == "City eq 'Berlin'")
        #expect(try PercentDecoding.decode("%2527", plusAsSpace: true) == "%27")  // decoded once only
        #expect(try PercentDecoding.decode("%C3%A9", plusAsSpace: false) == "é")
        for bad in ["%", "%4", "%zz", "%C3"] {
            #expect(throws: ODataError.self) { try PercentDecoding.decode(bad, plusAsSpace: false) }
        }
    }
}

@Suite struct LiteralPrintingTests {
    /// A random literal of every kind the parser produces.
    static func randomLiteral(_ g: inout SplitMix) -> ODataLiteral {
        func digits(_ n: UInt64) -> String {
            String((0..<(1 + g.next() % n)).map { _ in Character(String(g.next() % 10)) })
        }
        func two(_ max: UInt64) -> String {
            let v = g.next() % max
            return v < 10 ? "0\(v)" : "\(v)"
        }
        switch g.next() % 15 {
        case 0: return .null
        case 1: return .boolean(g.next() % 2 == 0)
        case 2: return .integer(Int64(bitPattern: g.next()) >> (g.next() % 63))
        case 3: return .decimal((g.next() % 2 == 0 ? "-" : "") + digits(30) + "." + digits(20))
        case 4:
            let d = Double(bitPattern: g.next())
            return .double(d.isNaN ? 0.5 : d)
        case 5:
            let alphabet = Array("ab' %/()é😀,=\"".unicodeScalars)
            var s = ""
            for _ in 0..<(g.next() % 12) {
                s.unicodeScalars.append(alphabet[Int(g.next() % UInt64(alphabet.count))])
            }
            return .string(s)
        case 6:
            let hex = Array("0123456789abcdef")
            let groups = [8, 4, 4, 4, 12].map { n in String((0..<n).map { _ in hex[Int(g.next() % 16)] }) }
            return .guid(groups.joined(separator: "-"))
        case 7: return .date("20\(two(100))-0\(1 + g.next() % 9)-1\(g.next() % 9)")
        case 8:
            return .dateTimeOffset(
                "2021-0\(1 + g.next() % 9)-1\(g.next() % 9)T\(two(24)):\(two(60)):\(two(60)).\(digits(7))+0\(g.next() % 9):30"
            )
        case 9: return .dateTime("2021-12-31T\(two(24)):\(two(60))")
        case 10: return .timeOfDay("\(two(24)):\(two(60)):\(two(60))")
        case 11:
            return .duration(
                (g.next() % 2 == 0 ? "-" : "")
                    + "P\(g.next() % 40)DT\(g.next() % 24)H\(g.next() % 60)M\(digits(2)).\(digits(6))S")
        case 12: return .binary((0..<(g.next() % 9)).map { _ in UInt8(g.next() % 256) })
        case 13: return .enumMember(type: "Shop.Color", value: ["Red", "Red,Blue", "3"][Int(g.next() % 3)])
        default: return .integer(Int64(g.next() % 1000))
        }
    }

    @Test func parseOfPrintIsIdentity() throws {
        var g = SplitMix(seed: 15)
        for _ in 0..<5_000 {
            let literal = Self.randomLiteral(&g)
            let v4 = literal.urlText(version: .v4)
            #expect(try ODataLiteral.parse(v4, version: .v4) == literal, "\(v4)")
            if case .date = literal { continue }  // V2 has no Edm.Date: printed as a datetime
            let v2 = literal.urlText(version: .v2, type: .int64)
            #expect(try ODataLiteral.parse(v2, version: .v2) == literal, "\(v2)")
        }
    }

    @Test func spellings() {
        #expect(ODataLiteral.string("O'Neil").urlText() == "'O''Neil'")
        #expect(ODataLiteral.integer(12).urlText(version: .v2, type: .int64) == "12L")
        #expect(ODataLiteral.integer(12).urlText(version: .v2, type: .int32) == "12")
        #expect(ODataLiteral.decimal("1.5").urlText(version: .v2) == "1.5M")
        #expect(ODataLiteral.decimal("1.5").urlText() == "1.5")
        #expect(ODataLiteral.double(1.5).urlText() == "1.5e0")
        #expect(ODataLiteral.double(-.infinity).urlText() == "-INF")
        #expect(
            ODataLiteral.guid("6f9619ff-8b86-d011-b42d-00c04fc964ff").urlText(version: .v2)
                == "guid'6f9619ff-8b86-d011-b42d-00c04fc964ff'")
        #expect(ODataLiteral.duration("P10D").urlText() == "duration'P10D'")
        #expect(ODataLiteral.duration("PT1H").urlText(version: .v2) == "time'PT1H'")
        #expect(ODataLiteral.binary([1, 2, 255]).urlText() == "binary'AQL_'")
        #expect(ODataLiteral.binary([1, 2, 255]).urlText(version: .v2) == "X'0102FF'")
        #expect(
            ODataLiteral.dateTime("2020-01-01T10:00").urlText(version: .v2) == "datetime'2020-01-01T10:00'")
    }
}
