import CFuzzDriver
import FuzzSupport
import JSONCore

// The JSON parser (JSONCore): both representations, the streaming array reader, the serializer (what parses
// must serialize to text that parses again) and Algolia `params` strings.

@_cdecl("FuzzJSON_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
    mg_fuzz_main(argc, argv)
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    if let value = try? JSON.parse(bytes) {
        let text = value.serializedBytes()
        FuzzSupport.require((try? JSON.parse(text)) != nil, "JSON serialization does not parse again")
    }
    if let raw = try? RawJSON.parse(bytes) {
        var out: [UInt8] = []
        raw.write(to: &out)
        FuzzSupport.require((try? RawJSON.parse(out)) == raw, "RawJSON does not round-trip")
    }
    try? JSON.forEachArrayElement(bytes) { value, slice in
        FuzzSupport.require(
            (try? JSON.parse(buffer: slice)) == value, "an array element's bytes parse differently")
    }
    let params = JSON.parseAlgoliaParams(String(decoding: bytes, as: UTF8.self))
    _ = JSON.formEncode(params)
    return 0
}
