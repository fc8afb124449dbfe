import AlgoliaGateway
import HTTPCore
import HTTPServer
import JSONCore
import SearchEngine
import Synchronization

/// An in-process fake Algolia on the gateway's own HTTP server adapter, on an ephemeral loopback port:
/// `GET /1/isalive`, search (`POST …/query`), multi-query, browse, settings, synonym and rule search of
/// the indices it serves, for the credentials it accepts (else `403` in Algolia's format). ``fail(with:)``
/// makes every call but `isalive` answer a status; ``stop()`` closes the port (connections refused).
public final class FakeAlgoliaServer: Sendable {
    private let handler: FakeAlgoliaHandler
    private let server = Mutex<Server?>(nil)
    /// The port it listens on.
    public let port: UInt16

    /// Serves `indices` to `appId` with any of `keys`.
    public init(
        indices: [SearchIndex], appId: String = AlgoliaFixtures.appId,
        keys: Set<String> = [AlgoliaFixtures.syncKey, AlgoliaFixtures.clientKey]
    ) throws {
        handler = FakeAlgoliaHandler(
            indices: Dictionary(uniqueKeysWithValues: indices.map { ($0.name, $0) }), appId: appId, keys: keys
        )
        let server = try Server(
            configuration: ServerConfiguration(host: "127.0.0.1", port: 0), handler: handler,
            errors: { status, message, _ in AlgoliaError.response(status, message) })
        port = server.port
        self.server.withLock { $0 = server }
    }

    /// The base URL (`http://127.0.0.1:PORT`), for `algolia.hosts`.
    public var url: String { "http://127.0.0.1:\(port)" }

    /// From now on every call but `isalive` answers `status` (nil: answer normally again).
    public func fail(with status: Int?) { handler.failure.withLock { $0 = status } }

    /// How many calls of `path` (without query) it received.
    public func count(_ path: String) -> Int { handler.counts.withLock { $0[path] ?? 0 } }

    /// Closes the port; later connections are refused.
    public func stop() {
        let s = server.withLock { s -> Server? in
            defer { s = nil }
            return s
        }
        s?.shutdown(grace: .milliseconds(100))
    }
}

/// The fake's answers.
private final class FakeAlgoliaHandler: HTTPHandler {
    let indices: [String: SearchIndex]
    let appId: String
    let keys: Set<String>
    let failure = Mutex<Int?>(nil)
    let counts = Mutex<[String: Int]>([:])

    init(indices: [String: SearchIndex], appId: String, keys: Set<String>) {
        self.indices = indices
        self.appId = appId
        self.keys = keys
    }

    func handle(_ request: HTTPRequest, _ responder: any Responder) {
        counts.withLock { $0[String(request.path), default: 0] += 1 }
        responder.respond(answer(request))
    }
    private func answer(_ request: HTTPRequest) -> HTTPResponse {
        if request.path == "/1/isalive" { return .json(200, #"{"message":"server is alive"}"#) }
        if let status = failure.withLock({ $0 }) { return AlgoliaError.response(status, "scripted failure") }
        let credentials = AlgoliaCredentials(request)
        guard credentials.appId == appId, let key = credentials.apiKey, keys.contains(key) else {
            return AlgoliaError.response(403, "Invalid Application-ID or API key")
        }
        let body = (try? JSON.parse(request.body)) ?? .object(JSONObject())
        do {
            switch AlgoliaRoute.parse(method: request.method, path: request.path) {
            case .search(let name):
                return try json(index(name).search(body))
            case .browse(let name):
                return try json(index(name).browse(body))
            case .getSettings(let name):
                return try json(index(name).settings(getVersion: 1))
            case .synonymSearch(let name):
                return try json(index(name).searchSynonyms(params: body))
            case .ruleSearch(let name):
                return try json(index(name).searchRules(params: body))
            case .multiQuery:
                var results: [JSON] = []
                for item in body["requests"]?.arrayValue ?? [] {
                    let name = item["indexName"]?.stringValue ?? ""
                    var params = item.objectValue ?? JSONObject()
                    params["indexName"] = nil
                    var result = try index(name).search(.object(params))
                    if case .object(var o) = result {
                        o["index"] = .string(name)
                        result = .object(o)
                    }
                    results.append(result)
                }
                return json(["results": .array(results)])
            default:
                return AlgoliaError.response(404, "not served by the fake: \(request.method) \(request.path)")
            }
        } catch let error as SearchError {
            return AlgoliaError.response(error.status, error.message)
        } catch {
            return AlgoliaError.response(400, "\(error)")
        }
    }

    private func index(_ name: String) throws -> SearchIndex {
        guard let index = indices[name] else {
            throw SearchError(status: 404, message: "Index \(name) does not exist")
        }
        return index
    }

    private func json(_ body: JSON) -> HTTPResponse { .json(200, body.serialized()) }
}
