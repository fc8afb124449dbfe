import Foundation
import GatewayConfig
import GatewaySupport
import HTTPCore
import JSONCore
import MirrorgateTesting
import SearchEngine
import Synchronization
import Testing
import Upstream

@testable import AlgoliaGateway

/// Writes to local indices through the service (issue 14): offline indices, and a mirrored index whose
/// writes are queued while the upstream is down and replayed by a scripted transport.
@Suite struct LocalWritesTests {
    func respond(_ body: (any Responder) -> Void) throws -> (status: Int, json: JSON) {
        let out = RecordingResponder()
        body(out)
        let response = try #require(out.wait(for: .seconds(20)), "no answer within 20 s")
        guard case .bytes(let bytes) = response.body else {
            Issue.record("expected a fixed body")
            return (response.status, .null)
        }
        return (response.status, bytes.isEmpty ? .null : try JSON.parse(bytes))
    }

    func call(
        _ service: AlgoliaService, _ method: String, _ path: String, _ body: JSON? = nil,
        key: String = AlgoliaFixtures.clientKey
    )
        throws -> (status: Int, json: JSON)
    {
        var request = AlgoliaFixtures.post(path, body ?? .null, key: key)
        request.method = method
        if body == nil { request.body = [] }
        return try respond { service.handle(request, $0) }
    }

    func ids(_ json: JSON) -> [String] {
        (json["hits"]?.arrayValue ?? []).compactMap { $0["objectID"]?.stringValue }
    }

    @Test func aBatchAppliesItsActionsInOrderAndSurvivesARestart() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let store = try IndexStore(directory: dir.path)
        let service = try AlgoliaFixtures.service(upstream: nil, store: store, in: dir)
        let batch: JSON = [
            "requests": [
                ["action": "addObject", "body": ["objectID": "x", "title": "lost"]],
                ["action": "clear", "body": [:]],
                ["action": "addObject", "body": ["objectID": "a", "title": "alpha book", "price": 1]],
                ["action": "updateObject", "body": ["objectID": "b", "title": "beta book"]],
                [
                    "action": "partialUpdateObject",
                    "body": ["objectID": "a", "price": ["_operation": "Increment", "value": 2]],
                ],
                ["action": "partialUpdateObjectNoCreate", "body": ["objectID": "ghost", "title": "never"]],
                ["action": "deleteObject", "body": ["objectID": "b"]],
                ["action": "addObject", "body": ["title": "gamma book"]],
            ]
        ]
        let answer = try call(service, "POST", "/1/indexes/books/batch", batch)
        #expect(answer.status == 200)
        let objectIDs = answer.json["objectIDs"]?.arrayValue?.compactMap(\.stringValue) ?? []
        #expect(objectIDs.count == 7 && objectIDs.prefix(6) == ["x", "a", "b", "a", "ghost", "b"])
        let task = try #require(answer.json["taskID"]?.intValue)
        #expect(task >= 1 << 52)
        #expect(try call(service, "GET", "/1/indexes/books/task/\(task)").json["status"] == "published")
        let found = try call(service, "POST", "/1/indexes/books/query", ["query": "book"])
        #expect(Set(ids(found.json)) == ["a", objectIDs[6]])
        #expect(try call(service, "GET", "/1/indexes/books/a").json["price"]?.intValue == 3)
        // A new service on the same store (a restart) answers the same.
        let again = try AlgoliaFixtures.service(upstream: nil, store: store, in: dir)
        #expect(
            Set(ids(try call(again, "POST", "/1/indexes/books/query", ["query": "book"]).json)) == [
                "a", objectIDs[6],
            ])
        #expect(try call(again, "GET", "/1/indexes/books/task/\(task)").json["status"] == "published")
    }

    @Test func concurrentWritesAreSerializedInArrivalOrder() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let service = try AlgoliaFixtures.service(
            upstream: nil, store: try IndexStore(directory: dir.path), in: dir)
        let outs = (0..<50).map { i -> RecordingResponder in
            let out = RecordingResponder()
            var request = AlgoliaFixtures.post(
                "/1/indexes/books/counter/partial",
                ["n": ["_operation": "Increment", "value": 1], "last": .int(Int64(i))])
            request.method = "POST"
            service.handle(request, out)
            return out
        }
        for out in outs { #expect(out.wait(for: .seconds(20))?.status == 200) }
        let counter = try call(service, "GET", "/1/indexes/books/counter").json
        #expect(counter["n"]?.intValue == 50)
        #expect(counter["last"]?.intValue == 49)
    }

    @Test func writeRoutesAndTheirACLs() {
        let cases: [(String, String, String?)] = [
            ("POST", "/1/indexes/i", "addObject"), ("PUT", "/1/indexes/i/o%2F1", "addObject"),
            ("DELETE", "/1/indexes/i/o", "deleteObject"), ("POST", "/1/indexes/i/o/partial", "addObject"),
            ("POST", "/1/indexes/i/batch", "addObject"), ("POST", "/1/indexes/*/batch", "addObject"),
            ("POST", "/1/indexes/i/deleteByQuery", "deleteIndex"),
            ("POST", "/1/indexes/i/clear", "deleteIndex"),
            ("DELETE", "/1/indexes/i", "deleteIndex"), ("PUT", "/1/indexes/i/settings", "editSettings"),
            ("PUT", "/1/indexes/i/synonyms/s", "editSettings"),
            ("POST", "/1/indexes/i/synonyms/batch", "editSettings"),
            ("GET", "/1/indexes/i/synonyms/s", "settings"), ("GET", "/1/indexes/i/rules/r", "settings"),
            ("POST", "/1/indexes/i/rules/clear", "editSettings"),
            ("POST", "/1/indexes/i/operation", "addObject"),
            ("GET", "/1/indexes/i/task/12", "addObject"), ("GET", "/1/task/12", "addObject"),
            ("POST", "/1/indexes/i/query", nil), ("GET", "/1/indexes/i/o", nil),
            ("DELETE", "/1/indexes/i/settings", nil),
            ("POST", "/1/indexes/i/rules/search", nil), ("POST", "/1/indexes/*/queries", nil),
        ]
        for (method, path, acl) in cases {
            let request = HTTPRequest(method: method, target: path, headers: [:], body: [])
            #expect(
                WriteRoute.parse(method: method, path: request.path)?.acl.rawValue == acl, "\(method) \(path)"
            )
        }
    }

    @Test func queuedMirrorWritesReplayInOrderAndRefusalsAreListed() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        var configuration = try AlgoliaFixtures.configuration(in: dir)
        configuration.algolia.indices["products"]?.offlineWrites = .queue
        let upstream = ScriptedAlgoliaUpstream(always: ScriptedAlgoliaUpstream.ok(["taskID": 77]))
        upstream.markDown()
        let transport = ScriptedReplay()
        let store = try IndexStore(directory: dir.path)
        let service = try AlgoliaService(
            configuration: configuration, upstream: upstream, fetcher: nil, store: store, state: nil,
            pool: AlgoliaFixtures.pool, events: { _, _ in }, replay: transport)
        // The upstream accepted the client's key before (a forwarded answer remembered it).
        service.keys.accept(appId: AlgoliaFixtures.appId, index: "products", key: AlgoliaFixtures.clientKey)
        let first = try call(
            service, "POST", "/1/indexes/products/batch",
            ["requests": [["action": "addObject", "body": ["objectID": "q1", "name": "queued phone"]]]])
        #expect(first.status == 200)
        let second = try call(service, "POST", "/1/indexes/products", ["name": "auto phone"])
        #expect(second.status == 201)
        let unknown = try call(
            service, "POST", "/1/indexes/products/batch", ["requests": []], key: "stranger")
        #expect(unknown.status == 424)
        let found = try call(
            service, "POST", "/1/indexes/products/query", ["query": "phone"], key: AlgoliaFixtures.syncKey)
        #expect(Set(ids(found.json)).isSuperset(of: ["q1", second.json["objectID"]?.stringValue ?? "?"]))
        let task = try #require(first.json["taskID"]?.intValue)
        #expect(try call(service, "GET", "/1/indexes/products/task/\(task)").json["status"] == "notPublished")
        #expect(service.failedWrites("products")?["pending"]?.intValue == 2)
        #expect(service.catalog.mirrors["products"]?.syncsHeld == true)

        // The upstream is back: the first replay is accepted, the second refused.
        transport.answers.withLock {
            $0 = [
                (200, #"{"taskID":501}"#),
                (403, #"{"message":"Invalid Application-ID or API key","status":403}"#),
            ]
        }
        service.start()
        upstream.markUp()
        defer { service.stop() }
        _ = StopSignal().wait(for: .seconds(10)) {
            service.failedWrites("products")?["pending"]?.intValue == 0
        }
        let sent = transport.sent.withLock { $0 }
        #expect(sent.map(\.method) == ["POST", "PUT"])
        #expect(sent.first?.target == "/1/indexes/products/batch")
        #expect(sent.last?.target == "/1/indexes/products/\(second.json["objectID"]?.stringValue ?? "?")")
        #expect(sent.allSatisfy { $0.key == AlgoliaFixtures.clientKey })
        let failed = try #require(service.failedWrites("products"))
        #expect(failed["failedWrites"]?.arrayValue?.count == 1)
        #expect(failed["failedWrites"]?[0]?["status"]?.intValue == 403)
        #expect(!failed.serialized().contains(AlgoliaFixtures.clientKey))
        #expect(service.catalog.mirrors["products"]?.syncsHeld == false)
    }
}

extension LocalWritesTests {
    /// A service whose mirrored `products` queues writes, over `upstream` (believed reachable), the client's
    /// key accepted before.
    func queueingService(_ upstream: ScriptedAlgoliaUpstream, in dir: TemporaryDirectory) throws
        -> AlgoliaService
    {
        var configuration = try AlgoliaFixtures.configuration(in: dir)
        configuration.algolia.indices["products"]?.offlineWrites = .queue
        let service = try AlgoliaService(
            configuration: configuration, upstream: upstream, fetcher: nil,
            store: IndexStore(directory: dir.path),
            state: nil, pool: AlgoliaFixtures.pool, events: { _, _ in }, replay: ScriptedReplay())
        service.keys.accept(appId: AlgoliaFixtures.appId, index: "products", key: AlgoliaFixtures.clientKey)
        return service
    }

    @Test func aWriteThatReachedNoHostIsQueuedWhateverTheTrackerSaid() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let upstream = ScriptedAlgoliaUpstream(always: .notSent)
        let service = try queueingService(upstream, in: dir)
        #expect(upstream.reachability.isReachable)
        let batch: JSON = [
            "requests": [["action": "addObject", "body": ["objectID": "q1", "name": "queued phone"]]]
        ]
        let first = try call(service, "POST", "/1/indexes/products/batch", batch)
        #expect(first.status == 200)
        #expect((first.json["taskID"]?.intValue ?? 0) >= 1 << 52)
        #expect(upstream.requests.count == 1)  // it was forwarded first
        #expect(service.failedWrites("products")?["pending"]?.intValue == 1)
        let found = try call(
            service, "POST", "/1/indexes/products/query", ["query": "queued"], key: AlgoliaFixtures.syncKey)
        #expect(ids(found.json) == ["q1"])
        // A key the upstream never accepted: not queued, even though nothing was sent.
        upstream.markUp()
        let stranger = try call(service, "POST", "/1/indexes/products/batch", batch, key: "stranger")
        #expect(stranger.status == 424)
    }

    @Test func aWriteThatMayHaveReachedTheUpstreamIsNotQueued() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let upstream = ScriptedAlgoliaUpstream(always: .networkError)
        let service = try queueingService(upstream, in: dir)
        let answer = try call(
            service, "POST", "/1/indexes/products/batch",
            ["requests": [["action": "addObject", "body": ["objectID": "d1", "name": "doubtful phone"]]]])
        #expect(answer.status == 424)
        #expect(service.failedWrites("products")?["pending"]?.intValue == 0)
        let found = try call(
            service, "POST", "/1/indexes/products/query", ["query": "doubtful"], key: AlgoliaFixtures.syncKey)
        #expect(ids(found.json).isEmpty)
    }
}

/// A replay transport that records what it is sent and answers from a list (then 503).
final class ScriptedReplay: WriteReplayTransport {
    struct Sent: Sendable {
        var method: String
        var target: String
        var key: String?
    }
    let answers = Mutex<[(Int, String)]>([])
    let sent = Mutex<[Sent]>([])

    func send(method: String, target: String, headers: [(name: String, value: String)], body: [UInt8])
        -> ReplayOutcome
    {
        sent.withLock {
            $0.append(
                Sent(
                    method: method, target: target,
                    key: headers.first { $0.name == "X-Algolia-API-Key" }?.value))
        }
        guard let (status, text) = answers.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) else {
            return .unreachable("scripted: no more answers")
        }
        return .answered(status: status, body: Array(text.utf8))
    }
}
