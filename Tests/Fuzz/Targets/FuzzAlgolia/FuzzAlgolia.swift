import AlgoliaGateway
import CFuzzDriver
import FuzzSupport
import JSONCore
import SearchEngine

// An Algolia read against a small in-memory index (Tests/Fuzz/fixtures/algolia-index.json: settings with
// facets, custom ranking and snippets, synonyms, rules, a dozen records): the body of a query (a JSON object,
// or when it is not JSON, a `params` string: query, filters, numericFilters, facetFilters, optionalFilters,
// typo tolerance, pagination, highlighting...) runs through search, facet search, browse, rule and synonym
// search as LocalAlgolia does; every refusal must be a 4xx. The same text is read as a secured API key and
// as a request path.

@_cdecl("FuzzAlgolia_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
    mg_fuzz_main(argc, argv)
}

let index: SearchIndex = {
    guard let fixture = try? JSON.parse(FuzzSupport.fixture("Tests/Fuzz/fixtures/algolia-index.json")) else {
        fatalError("Tests/Fuzz/fixtures/algolia-index.json does not parse")
    }
    return SearchIndex(
        name: "books", settings: fixture["settings"] ?? [:], synonyms: fixture["synonyms"]?.arrayValue ?? [],
        rules: fixture["rules"]?.arrayValue ?? [], records: fixture["records"]?.arrayValue ?? [])
}()

func refusalIsA4xx(_ body: () throws(SearchError) -> Void) {
    do {
        try body()
    } catch {
        FuzzSupport.require((400..<500).contains(error.status), "search answered \(error)")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let text = String(decoding: bytes, as: UTF8.self)
    let params: JSON
    if let json = try? JSON.parse(bytes), json.objectValue != nil {
        params = json
    } else {
        params = ["params": .string(text)]
    }
    _ = index.ignoredParameters(params)
    refusalIsA4xx { () throws(SearchError) in _ = try index.searchSerialized(params) }
    let merged = SearchIndex.mergedParameters(params)
    refusalIsA4xx { () throws(SearchError) in
        _ = try index.searchForFacetValues(facet: merged["facetName"]?.stringValue ?? "genre", params: params)
    }
    refusalIsA4xx { () throws(SearchError) in
        _ = try index.browse(params, cursor: merged["cursor"]?.stringValue)
    }
    _ = index.searchRules(params: params)
    _ = index.searchSynonyms(params: params)
    _ = SecuredKey.restrictions(text)
    _ = AlgoliaRoute.parse(method: "POST", path: Substring(text))
    return 0
}
