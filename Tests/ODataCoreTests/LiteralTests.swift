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
