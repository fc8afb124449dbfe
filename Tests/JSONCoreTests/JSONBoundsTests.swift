import Testing

@testable import JSONCore

/// Issue 23: the one JSON parser refuses, with an error and never a stack overflow or a conversion sized by
/// the input, what is nested deeper than its limit or has an absurdly long number.
@Suite struct JSONBoundsTests {
    @Test func nestingFarPastTheLimitIsAnErrorNotACrash() {
        for (open, close) in [("[", "]"), (#"{"a":"#, "}")] {
            let deep =
                String(repeating: open, count: 100_000) + "1" + String(repeating: close, count: 100_000)
            let error = #expect(throws: JSONParseError.self) { try JSON.parse(deep) }
            #expect(error?.message == "Nesting deeper than \(JSON.defaultMaxDepth) levels")
            #expect(throws: RawJSONError.self) { try RawJSON.parse(deep) }
            // Unclosed, as a truncated or hostile body would be.
            #expect(throws: JSONParseError.self) { try JSON.parse(String(repeating: open, count: 100_000)) }
        }
        // At the limit: parsed.
        let limit = JSON.defaultMaxDepth
        let fits = String(repeating: "[", count: limit) + String(repeating: "]", count: limit)
        #expect((try? JSON.parse(fits)) != nil)
    }

    @Test func numbersLongerThanTheLimitAreRefused() throws {
        let long = String(repeating: "9", count: JSON.maxNumberLength + 1)
        for text in [long, "[" + long + "]", "-" + long, "1." + long, "1e" + long] {
            let error = #expect(throws: JSONParseError.self, "\(text.prefix(10))") { try JSON.parse(text) }
            #expect(error?.message.hasPrefix("Number longer than") == true)
            #expect(throws: RawJSONError.self) { try RawJSON.parse(text) }
        }
        let fits = String(repeating: "9", count: JSON.maxNumberLength)
        #expect(try RawJSON.parse(fits).serialized() == fits)
        #expect(try JSON.parse("12345678901234567890").doubleValue == Double("12345678901234567890"))
    }
}
