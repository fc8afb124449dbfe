import JSONCore
import Testing

@testable import SearchEngine

@Suite struct UnicodeFoldingTests {
    @Test func diacriticsBeyondLatin1FoldAndCaseFolds() throws {
        let index = SearchIndex(
            name: "u", settings: [:],
            records: [
                ["objectID": "vi", "t": "Phở Hà Nội ngằn"],
                ["objectID": "el", "t": "Άθήνα"],
                ["objectID": "ru", "t": "МОСКВА"],
            ])
        func ids(_ q: String) throws -> [String] {
            try index.search(["query": .string(q)])["hits"]?.arrayValue?.compactMap {
                $0["objectID"]?.stringValue
            } ?? []
        }
        #expect(try ids("ngan") == ["vi"])  // Latin Extended Additional: decomposed, marks dropped
        #expect(try ids("noi") == ["vi"])
        #expect(try ids("αθηνα") == ["el"])  // Greek tonos dropped, lowercased
        #expect(try ids("москва") == ["ru"])  // Cyrillic lowercased
    }
}
