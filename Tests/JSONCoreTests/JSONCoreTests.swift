import HTTPCore
import Testing

@testable import JSONCore

@Suite struct ParserTests {
    @Test func parsesScalars() throws {
        #expect(try JSON.parse("null") == .null)
        #expect(try JSON.parse(" true ") == .bool(true))
        #expect(try JSON.parse("false") == .bool(false))
        #expect(try JSON.parse("0") == .int(0))
        #expect(try JSON.parse("-12") == .int(-12))
        #expect(try JSON.parse("9223372036854775807") == .int(Int64.max))
        #expect(try JSON.parse("-9223372036854775808") == .int(Int64.min))
        #expect(try JSON.parse("9223372036854775808") == .double(9_223_372_036_854_775_808))
        #expect(try JSON.parse("1.5") == .double(1.5))
        #expect(try JSON.parse("-1e3") == .double(-1000))
        #expect(try JSON.parse("2E-2") == .double(0.02))
        #expect(try JSON.parse("\"a\\\"b\"") == .string("a\"b"))
    }

    @Test func parsesEscapesAndUnicode() throws {
        #expect(try JSON.parse(#""\n\t\r\b\f\/\\""#) == .string("\n\t\r\u{8}\u{C}/\\"))
        #expect(try JSON.parse(#""\u00e9\u4e2d""#) == .string("é中"))
        #expect(try JSON.parse(#""\ud83d\ude00""#) == .string("😀"))
        #expect(try JSON.parse("\"héllo 😀\"") == .string("héllo 😀"))
    }

    @Test func preservesKeyOrderAndLookup() throws {
        let text = #"{"z":1,"a":2,"m":[1,2,{"k":null}],"b":{"y":true,"x":false}}"#
        let value = try JSON.parse(text)
        #expect(value.objectValue?.keys == ["z", "a", "m", "b"])
        #expect(value["a"] == .int(2))
        #expect(value["m"]?[2]?["k"] == .null)
        #expect(value["b"]?["x"]?.boolValue == false)
        #expect(value.serialized() == text)
    }

    @Test func largeObjectLookupAndDuplicates() throws {
        var object = JSONObject()
        for i in 0..<50 { object["k\(i)"] = .int(Int64(i)) }
        #expect(object["k37"] == .int(37))
        object["k3"] = nil
        #expect(object["k3"] == nil)
        #expect(object["k49"] == .int(49))
        #expect(object.count == 49)
        let dup = try JSON.parse(#"{"a":1,"b":2,"a":3}"#)
        #expect(dup.objectValue?.keys == ["a", "b"])
        #expect(dup["a"] == .int(3))
    }

    @Test(arguments: [
        "", " ", "{", "}", "[1,]", "[1 2]", "{\"a\"}", "{\"a\":}", "{a:1}", "{\"a\":1,}", "01", "1.", ".5",
        "-",
        "1e", "+1", "tru", "nul", "\"abc", "\"\\x\"", "\"\\u12\"", "\"\\ud800\"", "\"\\udc00\"", "\"a\u{1}\"",
        "[1]x", "NaN", "'a'", "{\"a\":1 \"b\":2}",
    ])
    func rejectsMalformed(_ text: String) {
        #expect(throws: JSONParseError.self) { try JSON.parse(text) }
    }

    @Test func errorCarriesPosition() {
        do {
            _ = try JSON.parse("[1, 2, x]")
            Issue.record("expected an error")
        } catch {
            #expect(error.offset == 7)
        }
    }

    @Test func rejectsInvalidUTF8() {
        #expect(throws: JSONParseError.self) { try JSON.parse([0x22, 0xC3, 0x28, 0x22]) }
        #expect(throws: JSONParseError.self) { try JSON.parse([0x22, 0xFF, 0x22]) }
        #expect(throws: JSONParseError.self) { try JSON.parse([0x22, 0x5C, 0x6E, 0xED, 0xA0, 0x80, 0x22]) }
    }

    @Test func depthLimit() throws {
        let deep = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        #expect(throws: JSONParseError.self) { try JSON.parse(deep) }
        let ok = String(repeating: "[", count: 500) + String(repeating: "]", count: 500)
        #expect(try JSON.parse(ok).arrayValue != nil)
    }

    @Test func parsesFromByteCollection() throws {
        let bytes: ArraySlice<UInt8> = Array("xx[1,2]".utf8)[2...]
        #expect(try JSON.parse(bytes: bytes) == [1, 2])
    }
}

@Suite struct SerializerTests {
    @Test func escapes() {
        let value: JSON = ["s": "a\"b\\c\n\u{1}é😀", "d": 1.5, "i": 2, "e": 3.0, "n": nil]
        #expect(value.serialized() == #"{"s":"a\"b\\c\n\u0001é😀","d":1.5,"i":2,"e":3,"n":null}"#)
        #expect(JSON.double(.nan).serialized() == "null")
    }

    @Test func accessors() {
        let value: JSON = ["a": 1, "b": 2.5, "c": "x", "d": [true], "e": ["f": nil]]
        #expect(value["a"]?.intValue == 1)
        #expect(value["a"]?.doubleValue == 1)
        #expect(value["b"]?.intValue == nil)
        #expect(value["b"]?.doubleValue == 2.5)
        #expect(value["c"]?.stringValue == "x")
        #expect(value["d"]?.arrayValue == [true])
        #expect(value["d"]?[0]?.boolValue == true)
        #expect(value["e"]?.objectValue?.count == 1)
        #expect(value["zz"] == nil)
    }

    @Test func equalityIgnoresKeyOrder() throws {
        let a = try JSON.parse(#"{"a":1,"b":[1,{"c":2,"d":3}]}"#)
        let b = try JSON.parse(#"{"b":[1,{"d":3,"c":2}],"a":1}"#)
        #expect(a == b)
        #expect(a.hashValue == b.hashValue)
        #expect(a.serialized() != b.serialized())
    }

    /// Round trip on pseudo-random documents: parse(serialize(v)) == v and serialization is stable.
    @Test func roundTripProperty() throws {
        var generator = SplitMix(seed: 42)
        for _ in 0..<300 {
            let value = randomJSON(&generator, depth: 0)
            let text = value.serialized()
            let parsed = try JSON.parse(text)
            #expect(parsed == value, "round trip failed for \(text)")
            #expect(parsed.serialized() == text)
        }
    }
}

@Suite struct FormParamsTests {
    @Test func typedParams() {
        let params = JSON.parseAlgoliaParams(
            "query=123&hitsPerPage=5&facetFilters=%5B%22a%3Ab%22%2C%5B%22c%3Ad%22%5D%5D&getRankingInfo=true"
                + "&attributesToRetrieve=title,desc&filters=a%3A1+AND+b&aroundRadius=all&x=1.5&typoTolerance=min"
        )
        #expect(params["query"] == .string("123"))
        #expect(params["hitsPerPage"] == .int(5))
        #expect(params["facetFilters"] == ["a:b", ["c:d"]])
        #expect(params["getRankingInfo"] == .bool(true))
        #expect(params["attributesToRetrieve"] == .string("title,desc"))
        #expect(params["filters"] == .string("a:1 AND b"))
        #expect(params["aroundRadius"] == .string("all"))
        #expect(params["x"] == .double(1.5))
        #expect(params["typoTolerance"] == .string("min"))
        #expect(params.keys.first == "query")
    }

    @Test func encodeDecode() {
        let object: JSONObject = ["query": "a b&c", "hitsPerPage": 3, "facets": ["x", "y"]]
        let text = JSON.formEncode(object)
        #expect(text == "query=a+b%26c&hitsPerPage=3&facets=%5B%22x%22%2C%22y%22%5D")
        #expect(JSON.parseAlgoliaParams(text) == object)
        // Algolia's own echo (its API clients' end-to-end expectations).
        #expect(
            JSON.formEncode(["filters": "editor:'visual studio' OR editor:neovim"])
                == "filters=editor%3A%27visual+studio%27+OR+editor%3Aneovim")
        #expect(
            JSON.formEncode(["facetFilters": ["editor:'visual studio'", ["editor:neovim"]]])
                == "facetFilters=%5B%22editor%3A%27visual+studio%27%22%2C%5B%22editor%3Aneovim%22%5D%5D")
        #expect(FormCodec.formComponent("a*b-c._d~e/é") == "a*b-c._d%7Ee%2F%C3%A9")
    }

    @Test func echoedParametersKeepAParamsStringAsSent() {
        #expect(JSON.echoedParameters(["query": "vim", "hitsPerPage": 2]) == "query=vim&hitsPerPage=2")
        #expect(JSON.echoedParameters(.object(JSONObject())) == "")
        #expect(
            JSON.echoedParameters(["params": "query=only for test&page=0"]) == "query=only for test&page=0")
        #expect(JSON.echoedParameters(["params": "query=a", "page": 1, "cursor": "x"]) == "query=a&page=1")
        #expect(JSON.echoedParameters(["params": "", "page": 1]) == "page=1")
        #expect(FormCodec.percentDecode(bytes: Array("%zz%4".utf8), plusAsSpace: true) == "%zz%4")
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
    mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }
}

func randomString(_ g: inout SplitMix) -> String {
    let alphabet: [Character] = ["a", "Z", "0", " ", "\"", "\\", "\n", "\u{1}", "é", "中", "😀", "/", "\u{7F}"]
    return String((0..<g.below(8)).map { _ in alphabet[g.below(alphabet.count)] })
}

func randomJSON(_ g: inout SplitMix, depth: Int) -> JSON {
    let kind = depth > 3 ? g.below(5) : g.below(7)
    switch kind {
    case 0: return .null
    case 1: return .bool(g.below(2) == 0)
    case 2: return .int(Int64(bitPattern: g.next()) >> Int64(g.below(63)))
    case 3:
        let value = Double(Int64(bitPattern: g.next()) >> 20) / Double(1 << g.below(40)) + 0.5
        // Integral doubles serialize as integers and come back as `.int`, by design.
        return value == value.rounded() ? .int(Int64(value)) : .double(value)
    case 4: return .string(randomString(&g))
    case 5: return .array((0..<g.below(5)).map { _ in randomJSON(&g, depth: depth + 1) })
    default:
        var object = JSONObject()
        for _ in 0..<g.below(12) { object[randomString(&g)] = randomJSON(&g, depth: depth + 1) }
        return .object(object)
    }
}

@Suite struct StreamingTests {
    @Test func forEachArrayElement() throws {
        let text = #" [ {"a":1} , "x", [2,3] ] "#
        var values: [JSON] = []
        var slices: [String] = []
        try JSON.forEachArrayElement(Array(text.utf8)) { value, bytes in
            values.append(value)
            slices.append(String(decoding: bytes, as: UTF8.self))
        }
        #expect(values == [["a": 1], "x", [2, 3]])
        #expect(slices == [#"{"a":1}"#, #""x""#, "[2,3]"])
        #expect(throws: JSONParseError.self) { try JSON.forEachArrayElement(Array("[1,".utf8)) { _, _ in } }
        #expect(throws: JSONParseError.self) { try JSON.forEachArrayElement(Array("{}".utf8)) { _, _ in } }
    }
}

@Suite struct RawJSONTests {
    @Test func numbersStayAsWrittenAndMembersInOrderWithDuplicates() throws {
        let raw = try RawJSON.parse(
            #"{"b":22.00,"a":12345678901234567890,"b":-0.5e+3,"s":"x\u00e9\ud83d\ude00"}"#)
        #expect(raw.serialized() == #"{"b":22.00,"a":12345678901234567890,"b":-0.5e+3,"s":"xé😀"}"#)
        #expect(raw.members?.map(\.0) == ["b", "a", "b", "s"])
        // The same text through the JSON representation: numbers typed, the last duplicate wins.
        let json = try JSON.parse(#"{"b":22.00,"a":12,"b":-0.5e+3}"#)
        #expect(json == ["b": -500.0, "a": 12])
    }

    @Test func theOneParserIsStrictForBothRepresentations() {
        for bad in ["01", "1.", "-", "1e", #""\ud800""#, "\"a\u{01}b\"", "[1,]", "{", "nul", "[1] 2"] {
            #expect(throws: RawJSONError.self, "\(bad)") { try RawJSON.parse(bad) }
            #expect(throws: JSONParseError.self, "\(bad)") { try JSON.parse(bad) }
        }
        let deep =
            String(repeating: "[", count: RawJSON.maxDepth + 1)
            + String(repeating: "]", count: RawJSON.maxDepth + 1)
        #expect(throws: RawJSONError.self) { try RawJSON.parse(deep) }
        #expect((try? JSON.parse(deep)) != nil)  // JSON's own limit is deeper
    }
}
