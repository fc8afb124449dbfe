import Foundation
import JSONCore
import Testing

@testable import ODataCore

@Suite struct StorageEncodingTests {
    /// A random decimal text of up to 30 significant digits, in one of the spellings services send.
    static func randomDecimal(_ g: inout SplitMix) -> String {
        let digits = String((0..<(1 + g.next() % 30)).map { _ in Character(String(g.next() % 10)) })
        let point = Int(g.next() % UInt64(digits.count + 1))
        var text = String(digits.prefix(point)) + (point < digits.count ? "." + digits.dropFirst(point) : "")
        if text.hasPrefix(".") { text = "0" + text }
        if g.next() % 4 == 0 { text += String(repeating: "0", count: Int(g.next() % 3)) }
        if g.next() % 5 == 0 { text += "e" + String(Int(g.next() % 20) - 10) }
        if g.next() % 2 == 0 { text = "-" + text }
        return text
    }

    @Test func decimalKeysOrderLikeTheNumbers() throws {
        var g = SplitMix(seed: 99)
        var values: [(Decimal, String)] = []
        for _ in 0..<3_000 {
            let text = Self.randomDecimal(&g)
            let key = try #require(ODataStorage.decimalKey(text), "\(text)")
            let exact = try #require(Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")))
            values.append((exact, key))
            // The plain decimal read back is the same number.
            let plain = try #require(ODataStorage.decimal(fromKey: key))
            #expect(
                Decimal(string: plain, locale: Locale(identifier: "en_US_POSIX")) == exact,
                "\(text) → \(plain)")
        }
        for i in 0..<(values.count - 1) {
            let (a, ka) = values[i]
            let (b, kb) = values[i + 1]
            #expect((a < b) == (Array(ka.utf8).lexicographicallyPrecedes(Array(kb.utf8))), "\(ka) vs \(kb)")
            #expect((a == b) == (ka == kb), "\(ka) vs \(kb)")
        }
    }

    @Test func decimalKeySpellings() {
        #expect(ODataStorage.decimalKey("0") == "1 0")
        #expect(ODataStorage.decimalKey("-0.000") == "1 0")
        #expect(ODataStorage.decimalKey("1.50") == ODataStorage.decimalKey("15e-1"))
        #expect(ODataStorage.decimalKey("+001.5") == ODataStorage.decimalKey("1.5"))
        #expect(ODataStorage.decimalKey("123") == "2500003123 123")
        #expect(ODataStorage.decimalKey("-0.12") == "050000087~ -0.12")
        #expect(ODataStorage.decimal(fromKey: ODataStorage.decimalKey("1e100")!) == "1e100")
        #expect(ODataStorage.decimal(fromKey: ODataStorage.decimalKey("-0.00120")!) == "-0.0012")
        for bad in ["", "-", ".", "1.2.3", "abc", "1e", "--1", "1e9999999", "NaN", "INF"] {
            #expect(ODataStorage.decimalKey(bad) == nil, "\(bad)")
        }
    }

    @Test func durations() {
        #expect(ODataStorage.durationSeconds("P10D") == "864000")
        #expect(ODataStorage.durationSeconds("PT240H") == "864000")
        #expect(ODataStorage.durationSeconds("-P1DT2H3M4.50S") == "-93784.5")
        #expect(ODataStorage.durationSeconds("P1W") == "604800")
        #expect(ODataStorage.durationSeconds("PT0S") == "0")
        #expect(ODataStorage.durationSeconds("-PT0S") == "0")
        for bad in [
            "P", "PT", "P1Y", "P1M", "1D", "P1.5D", "PT1.5H", "P1DT", "PT1H2", "P1D1D2", "P1D2D", "PT1S2M",
            "PT1M1H",
        ] {
            #expect(ODataStorage.durationSeconds(bad) == nil, "\(bad)")
        }
        #expect(ODataStorage.durationKey("P10D") == ODataStorage.durationKey("PT240H"))
        #expect(ODataStorage.duration(fromSeconds: "93784.5") == "P1DT2H3M4.5S")
        #expect(ODataStorage.duration(fromSeconds: "-86400") == "-P1D")
        #expect(ODataStorage.duration(fromSeconds: "0") == "PT0S")
        var g = SplitMix(seed: 3)
        for _ in 0..<1_000 {
            let text =
                "P\(g.next() % 50)DT\(g.next() % 24)H\(g.next() % 60)M\(g.next() % 60).\(g.next() % 1000)S"
            let seconds = ODataStorage.durationSeconds(text)!
            let canonical = ODataStorage.duration(fromSeconds: seconds)!
            #expect(ODataStorage.durationSeconds(canonical) == seconds, "\(text) → \(canonical)")
        }
    }

    @Test func instantsTimesAndDates() {
        #expect(ODataStorage.instant("2020-01-01T10:00:00+02:00") == "2020-01-01T08:00:00")
        #expect(ODataStorage.instant("2020-01-01T10:00Z") == "2020-01-01T10:00:00")
        #expect(ODataStorage.instant("2020-01-01T10:00:00.5000Z") == "2020-01-01T10:00:00.5")
        #expect(ODataStorage.instant("2020-01-01T10:00:00.000Z") == "2020-01-01T10:00:00")
        #expect(ODataStorage.instant("/Date(1754611200000)/") == "2025-08-08T00:00:00")
        #expect(ODataStorage.instant("/Date(-1)/") == "1969-12-31T23:59:59.999")
        #expect(ODataStorage.instant("2020-13-01T10:00Z") == nil)
        #expect(ODataStorage.localDateTime("/Date(1754611200000+0060)/") == "2025-08-08T01:00:00")
        #expect(ODataStorage.localDateTime("2020-01-01T10:00") == "2020-01-01T10:00:00")
        #expect(ODataStorage.timeOfDay("08:00") == "08:00:00")
        #expect(ODataStorage.timeOfDay("08:00:00.1200") == "08:00:00.12")
        #expect(ODataStorage.timeOfDay("25:00") == nil)
        // Sorting the stored texts bytewise sorts the instants.
        let instants = [
            "2019-12-31T23:59:59.999-00:30", "2020-01-01T08:00:00Z", "2020-01-01T10:00:00.0001+02:00",
            "2020-01-01T08:00:00.5Z", "2020-01-01T09:00:00Z",
        ].map { ODataStorage.instant($0)! }
        #expect(instants == instants.sorted())
    }

    @Test func encodeEveryType() {
        #expect(
            ODataStorage.encode(.string("9007199254740993"), as: .int64) == .integer(9_007_199_254_740_993))
        #expect(ODataStorage.encode(.number("3.0"), as: .int32) == .integer(3))
        #expect(ODataStorage.encode(.number("3.5"), as: .int32) == .null)
        #expect(ODataStorage.encode(.string("INF"), as: .double) == .real(.infinity))
        #expect(ODataStorage.encode(.string("NaN"), as: .double) == .null)
        #expect(ODataStorage.encode(.bool(true), as: .boolean) == .integer(1))
        #expect(ODataStorage.encode(.string("AB-C"), as: .guid) == .text("ab-c"))
        #expect(ODataStorage.encode(.string("AQID"), as: .binary) == .blob([1, 2, 3]))
        #expect(ODataStorage.encode(.string("AQL_"), as: .binary) == .blob([1, 2, 255]))
        #expect(
            ODataStorage.encode(.string("PT1H"), as: .time)
                == ODataStorage.encode(.string("PT60M"), as: .duration))
        #expect(ODataStorage.encode(.string("POINT(1 2)"), as: .geographyPoint) == .null)
        #expect(
            ODataStorage.columnType(.geographyPoint) == nil && ODataStorage.columnType(.decimal) == "TEXT")
        let color = ShopFixture.model.enumTypes["Shop.Model.Color"]!
        #expect(ODataStorage.encode(.string("Blue, Red"), as: color) == .integer(5))
        #expect(ODataStorage.encode(.number("6"), as: color) == .integer(6))
        #expect(ODataStorage.encode(.string("Purple"), as: color) == .null)
    }

    @Test func wireValuesBack() {
        let model = ShopFixture.model
        func wire(_ b: SQLBinding, _ type: String, _ e: SQLValueEncoding) -> RawJSON {
            ODataStorage.wireValue(b, type: EdmTypeRef(name: type), encoding: e, model: model)
        }
        #expect(wire(.text(ODataStorage.decimalKey("-1.50")!), "Edm.Decimal", .decimalKey) == .number("-1.5"))
        #expect(
            wire(.text(ODataStorage.durationKey("PT36H")!), "Edm.Duration", .durationKey)
                == .string("P1DT12H"))
        #expect(wire(.integer(5), "Shop.Model.Color", .enumValue) == .string("Red,Blue"))
        #expect(
            wire(.text("2020-01-01T08:00:00"), "Edm.DateTimeOffset", .native)
                == .string("2020-01-01T08:00:00Z"))
        #expect(wire(.integer(1), "Edm.Boolean", .native) == .bool(true))
        #expect(wire(.real(2.5), "Edm.Double", .native) == .number("2.5"))
        #expect(wire(.blob([1, 2, 255]), "Edm.Binary", .native) == .string("AQL_"))
        #expect(wire(.null, "Edm.String", .native) == .null)
    }
}
