import Foundation
import GatewaySupport
import HTTPCore
import Logging
import MirrorgateTesting
import Upstream

@testable import ODataGateway

/// A fresh directory under the temporary directory, named `<prefix>-<UUID>`.
func makeTemporaryDirectory(_ prefix: String) throws -> String { try TemporaryDirectory(prefix).path }

/// A service mounted at `/odata/s/` whose upstream never answers (port 9), mirrored from bootstrap files
/// written to `dir` (a new temporary directory when nil): `metadata` as `m.xml` and, per entity set, its
/// JSON payload. `configure` adjusts the mirror settings. Returns the service and its directory.
func makeBootstrappedService(
    _ prefix: String, metadata: String, data: [String: String], dir: String? = nil,
    timeout: Duration = .seconds(30), configure: (inout ODataMirrorSettings) -> Void = { _ in }
) throws -> (ODataService, String) {
    let dir = try dir ?? makeTemporaryDirectory(prefix)
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    try Data(metadata.utf8).write(to: URL(fileURLWithPath: dir + "/m.xml"))
    var files: [String: String] = [:]
    for (set, payload) in data {
        let path = dir + "/\(set.lowercased()).json"
        try Data(payload.utf8).write(to: URL(fileURLWithPath: path))
        files[set] = path
    }
    UpstreamClient.globalInit()
    var settings = ODataMirrorSettings(
        localFirst: true, definingRequests: [], pageSize: nil, bootstrapMetadata: dir + "/m.xml",
        bootstrapData: files, databasePath: dir + "/mirror.sqlite")
    configure(&settings)
    let service = try ODataService(
        settings: ODataServiceSettings(
            name: "s", mount: "/odata/s/", upstream: "http://127.0.0.1:9/svc/", timeout: timeout),
        mirrorSettings: settings, loop: try CurlLoop(), client: UpstreamClient(),
        pool: WorkerPool(threads: 1, name: "t"), logger: Logger(label: "test"))
    if service.mirror.lastDownloadAt == nil { _ = try service.downloader.loadBootstrap() }
    return (service, dir)
}

/// A mirror file in a new temporary directory with `metadata` installed.
func makeTemporaryMirror(_ prefix: String, metadata: String) throws -> (ODataMirror, String) {
    let dir = try makeTemporaryDirectory(prefix)
    let mirror = try ODataMirror(path: dir + "/m.sqlite")
    try mirror.install(metadata: Array(metadata.utf8))
    return (mirror, dir)
}

/// The body of a buffered response as text.
func bodyText(_ r: HTTPResponse) -> String {
    guard case .bytes(let b) = r.body else { return "" }
    return String(decoding: b, as: UTF8.self)
}

/// A local read of `target` through `service`: status and body.
func localGET(_ service: ODataService, _ target: String, headers: HTTPHeaders = ["Host": "gw"]) -> (
    Int, String
) {
    let r = service.reader.response(to: HTTPRequest(method: "GET", target: target, headers: headers))
    return (r.status, bodyText(r))
}

/// A multipart `$batch` (boundary `b`, lines joined with CRLF) answered by the offline writer; `extra`
/// headers are added to the batch request's.
func localBatch(_ service: ODataService, _ body: String, headers extra: HTTPHeaders = [:]) -> HTTPResponse {
    var headers: HTTPHeaders = ["Host": "gw", "Content-Type": "multipart/mixed; boundary=b"]
    for (k, v) in extra { headers.set(k, v) }
    return service.writer.batchResponse(
        to: HTTPRequest(
            method: "POST", target: "/odata/s/$batch", headers: headers,
            body: Array(body.replacingOccurrences(of: "\n", with: "\r\n").utf8)))
}

/// A `$batch` body (boundary `b`, LF line ends: ``localBatch(_:_:headers:)`` sends CRLF) with one changeset
/// (boundary `c`): part 1 creates customer `C1` (with `firstPartHeaders` as extra header lines of its
/// request), part 2 renames `ALFKI`.
func twoPartChangeset(firstPartHeaders: [String] = []) -> String {
    let extra = firstPartHeaders.map { $0 + "\n" }.joined()
    return """
        --b
        Content-Type: multipart/mixed; boundary=c

        --c
        Content-Type: application/http
        Content-ID: 1

        POST Customers HTTP/1.1
        Content-Type: application/json
        \(extra)
        {"CustomerID":"C1","Name":"one"}
        --c
        Content-Type: application/http
        Content-ID: 2

        PATCH Customers('ALFKI') HTTP/1.1
        Content-Type: application/json

        {"Name":"two"}
        --c--
        --b--

        """
}
