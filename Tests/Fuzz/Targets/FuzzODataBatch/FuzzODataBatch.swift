import CFuzzDriver
import FuzzSupport
import HTTPCore
import JSONCore
import ODataCore

@testable import ODataGateway

// An OData `$batch` request: the first line of the input is its Content-Type (`multipart/mixed;
// boundary=...` or `application/json`), the rest its body. Parsed into items as the gateway does
// (multipart with changesets, V4 JSON with atomicity groups), Content-ID references resolved in URLs and
// bodies, each part turned into a request under a mount, and a response written for every part; the same
// body is also read as an upstream's multipart batch response.

@_cdecl("FuzzODataBatch_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
    mg_fuzz_main(argc, argv)
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = UnsafeBufferPointer(start: data, count: size)
    let newline = input.firstIndex(of: 10) ?? input.count
    let contentType = String(decoding: input[..<newline], as: UTF8.self)
    let body = Array(input[min(newline + 1, input.count)...])
    let outer = HTTPRequest(
        method: "POST", target: "/odata/svc/$batch", version: "HTTP/1.1",
        headers: ["Host": "127.0.0.1", "Content-Type": contentType], body: body)

    _ = ODataBatchCodec.responses(body, contentType: contentType)
    guard let items = try? ODataBatchCodec.items(outer) else { return 0 }
    _ = ODataBatchCodec.hasChanges(items)
    var references: [String: String] = [:]
    var answers: [(changeset: Bool, parts: [(id: String?, response: HTTPResponse)])] = []
    for item in items {
        let (parts, changeset): ([BatchPart], Bool)
        switch item {
        case .single(let part): (parts, changeset) = ([part], false)
        case .changeset(let list, _): (parts, changeset) = (list, true)
        }
        var responses: [(id: String?, response: HTTPResponse)] = []
        for part in parts {
            let url = ODataBatchCodec.resolveURL(part.url, references)
            _ = ODataBatchCodec.resolveBody(part.body, references)
            let request = ODataBatchCodec.request(
                part, url: url, outer: outer, mount: "/odata/svc/", gatewayRoot: "http://127.0.0.1:8080")
            if let id = part.contentID { references[id] = url }
            responses.append(
                (part.contentID, HTTPResponse.json(200, "{\"target\":\"\(request.target.count)\"}")))
        }
        answers.append((changeset, responses))
    }
    let json = contentType.lowercased().hasPrefix("application/json")
    for version in [ODataVersion.v2, .v4] {
        _ = ODataBatchCodec.response(answers, json: json, items: items, version: version)
    }
    return 0
}
