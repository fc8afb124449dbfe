import AlgoliaGateway
import GatewayConfig
import JSONCore
import MirrorgateTesting
import Testing

/// The request strategies of a mirrored index against a scripted upstream: who answers (the upstream or
/// the mirror), with which origin, and whether the upstream was asked at all.
@Suite struct StrategyTests {
    /// A remote search answer that no local index could give.
    static let remote: JSON = ["hits": [["objectID": "remote-1"]], "nbHits": 1, "page": 0]

    /// A service over `upstream` for the fixture configuration (`products` mirrored with `strategy`,
    /// `books` offline), built from bootstrap files in a directory removed again at once (the service
    /// keeps its indices in memory).
    func makeService(
        _ upstream: ScriptedAlgoliaUpstream?, strategy: RequestStrategy = .fallbackOnFailure,
        fallbackTimeout: Duration = .milliseconds(200), preventiveDelay: Duration = .milliseconds(100)
    ) throws -> AlgoliaService {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        return try AlgoliaFixtures.service(
            upstream: upstream, strategy: strategy, fallbackTimeout: fallbackTimeout,
            preventiveDelay: preventiveDelay, in: dir)
    }

    /// Sends `request` to `service` and waits (bounded) for the answer.
    func answer(_ service: AlgoliaService, _ request: HTTPRequest) throws -> HTTPResponse {
        let out = RecordingResponder()
        service.handle(request, out)
        return try #require(out.wait(for: .seconds(10)), "no answer within 10 s")
    }

    func body(_ response: HTTPResponse) throws -> JSON {
        guard case .bytes(let bytes) = response.body else {
            Issue.record("expected a fixed body")
            return .null
        }
        return try JSON.parse(bytes)
    }

    func objectIDs(_ json: JSON) -> [String] {
        (json["hits"]?.arrayValue ?? []).compactMap { $0["objectID"]?.stringValue }
    }

    /// A search of the mirrored index with the sync key (always admitted locally).
    func search(_ headers: HTTPHeaders = [:]) -> HTTPRequest {
        AlgoliaFixtures.search("products", key: AlgoliaFixtures.syncKey, headers: headers)
    }

    func expectLocal(_ response: HTTPResponse) throws {
        #expect(response.status == 200)
        #expect(response.headers[MirrorgateHeader.origin] == "local")
        let json = try body(response)
        #expect(json["origin"]?.stringValue == "local")
        #expect(Set(objectIDs(json)) == ["p1", "p2", "p4"])
    }

    func expectRemote(_ response: HTTPResponse) throws {
        #expect(response.status == 200)
        #expect(response.headers[MirrorgateHeader.origin] == "remote")
        let json = try body(response)
        #expect(json["origin"]?.stringValue == "remote")
        #expect(objectIDs(json) == ["remote-1"])
    }

    // MARK: offlineOnly, onlineOnly

    @Test func offlineOnlyAnswersFromTheMirrorWithoutAskingTheUpstream() throws {
        let upstream = ScriptedAlgoliaUpstream(always: ScriptedAlgoliaUpstream.ok(Self.remote))
        let service = try makeService(upstream, strategy: .offlineOnly)
        try expectLocal(try answer(service, search()))
        #expect(upstream.requests.isEmpty)
    }

    @Test func onlineOnlyForwardsAndTagsTheOrigin() throws {
        let upstream = ScriptedAlgoliaUpstream(always: ScriptedAlgoliaUpstream.ok(Self.remote))
        let service = try makeService(upstream, strategy: .onlineOnly)
        try expectRemote(try answer(service, search()))
        #expect(upstream.requests.count == 1)
    }

    @Test func onlineOnlyNeverFallsBack() throws {
        let upstream = ScriptedAlgoliaUpstream(always: .networkError)
        let service = try makeService(upstream, strategy: .onlineOnly)
        let response = try answer(service, search())
        #expect(response.status == 424)
        #expect(try body(response)["status"]?.intValue == 424)
    }

    @Test func theRequestsStrategyHeaderWinsOverTheIndexs() throws {
        let upstream = ScriptedAlgoliaUpstream(always: ScriptedAlgoliaUpstream.ok(Self.remote))
        let service = try makeService(upstream, strategy: .onlineOnly)
        try expectLocal(try answer(service, search([MirrorgateHeader.strategy: "offlineOnly"])))
        #expect(upstream.requests.isEmpty)
    }

    // MARK: fallbackOnFailure

    @Test func fallbackOnFailureKeepsTheRemoteAnswer() throws {
        let upstream = ScriptedAlgoliaUpstream(always: ScriptedAlgoliaUpstream.ok(Self.remote))
        let service = try makeService(upstream)
        try expectRemote(try answer(service, search()))
    }

    @Test(arguments: [
        ScriptedAlgoliaUpstream.Outcome.serverError(503), .serverError(500), .rateLimited, .networkError,
    ])
    func fallbackOnFailureAnswersLocallyOnATransientFailure(_ failure: ScriptedAlgoliaUpstream.Outcome) throws
    {
        let upstream = ScriptedAlgoliaUpstream(always: failure)
        let service = try makeService(upstream)
        try expectLocal(try answer(service, search()))
        #expect(upstream.requests.count == 1)
    }

    @Test func fallbackOnFailureRelaysAClientError() throws {
        let upstream = ScriptedAlgoliaUpstream(
            always: .answer(AlgoliaError.response(400, "Unknown parameter: frobnicate")))
        let service = try makeService(upstream)
        let response = try answer(service, search())
        #expect(response.status == 400)
        #expect(response.headers[MirrorgateHeader.origin] == "remote")
        #expect(try body(response)["message"]?.stringValue == "Unknown parameter: frobnicate")
    }

    @Test func aKnownDownUpstreamIsNotAsked() throws {
        let upstream = ScriptedAlgoliaUpstream(always: ScriptedAlgoliaUpstream.ok(Self.remote))
        upstream.markDown()
        defer { upstream.markUp() }
        for strategy in [RequestStrategy.fallbackOnFailure, .fallbackOnTimeout] {
            let service = try makeService(upstream, strategy: strategy)
            try expectLocal(try answer(service, search()))
        }
        #expect(upstream.requests.isEmpty)
    }

    @Test func withoutAnyHostTheMirrorAnswers() throws {
        let service = try makeService(nil)
        try expectLocal(try answer(service, search()))
        let other = try answer(service, AlgoliaFixtures.search("not_mirrored"))
        #expect(other.status == 424)
    }

    // MARK: fallbackOnTimeout

    @Test func fallbackOnTimeoutAnswersLocallyWhenTheUpstreamIsSilent() throws {
        let upstream = ScriptedAlgoliaUpstream(always: .silent)
        let service = try makeService(
            upstream, strategy: .fallbackOnTimeout, fallbackTimeout: .milliseconds(50))
        try expectLocal(try answer(service, search()))
        #expect(upstream.requests.count == 1)
    }

    @Test func aRemoteAnswerAfterTheLocalOneIsDropped() throws {
        let gate = ScriptedAlgoliaUpstream.Gate()
        let upstream = ScriptedAlgoliaUpstream(always: .held(gate, ScriptedAlgoliaUpstream.ok(Self.remote)))
        let service = try makeService(
            upstream, strategy: .fallbackOnTimeout, fallbackTimeout: .milliseconds(20))
        let out = RecordingResponder()
        service.handle(search(), out)
        try expectLocal(try #require(out.wait(for: .seconds(10))))
        gate.open()
        #expect(out.responses.count == 1)
        #expect(upstream.requests.count == 1)
    }

    @Test func fallbackOnTimeoutKeepsARemoteAnswerThatComesFirst() throws {
        let upstream = ScriptedAlgoliaUpstream(always: ScriptedAlgoliaUpstream.ok(Self.remote))
        let service = try makeService(upstream, strategy: .fallbackOnTimeout, fallbackTimeout: .seconds(30))
        try expectRemote(try answer(service, search()))
    }

    @Test func fallbackOnTimeoutStillFallsBackOnAFailure() throws {
        let upstream = ScriptedAlgoliaUpstream(always: .serverError(502))
        let service = try makeService(upstream, strategy: .fallbackOnTimeout, fallbackTimeout: .seconds(30))
        try expectLocal(try answer(service, search()))
    }

    // MARK: preventive

    /// The lines of a preventive stream, parsed; `gate` (holding the upstream's answer) is opened once the
    /// first line came, so that the order of the lines does not depend on timing.
    func lines(_ response: HTTPResponse, opening gate: ScriptedAlgoliaUpstream.Gate? = nil) throws -> [JSON] {
        #expect(response.status == 200)
        #expect(response.headers["Content-Type"] == "application/x-ndjson")
        guard case .stream(let stream) = response.body else {
            Issue.record("expected a stream")
            return []
        }
        let reader = StreamCollector(stream)
        var chunks: [[UInt8]] = []
        for _ in 0..<10 {
            guard let chunk = reader.next(timeout: .seconds(10)) else { break }
            chunks.append(chunk)
            gate?.open()
        }
        #expect(reader.ended)
        return try chunks.map { chunk in
            #expect(chunk.last == 0x0A)
            return try JSON.parse(Array(chunk.dropLast()))
        }
    }

    @Test func preventiveSendsTheMirrorsAnswerThenTheUpstreams() throws {
        let gate = ScriptedAlgoliaUpstream.Gate()
        let upstream = ScriptedAlgoliaUpstream(always: .held(gate, ScriptedAlgoliaUpstream.ok(Self.remote)))
        let service = try makeService(upstream, strategy: .preventive, preventiveDelay: .milliseconds(20))
        let response = try answer(service, search([MirrorgateHeader.strategy: "preventive"]))
        #expect(response.headers[MirrorgateHeader.origin] == "remote")
        let lines = try lines(response, opening: gate)
        #expect(lines.map { $0["origin"]?.stringValue } == ["local", "remote"])
        #expect(Set(objectIDs(lines[0])) == ["p1", "p2", "p4"])
        #expect(lines.count == 2 ? objectIDs(lines[1]) == ["remote-1"] : false)
    }

    @Test func preventiveSendsTheUpstreamsAnswerAloneWhenItComesBeforeTheDelay() throws {
        let upstream = ScriptedAlgoliaUpstream(always: ScriptedAlgoliaUpstream.ok(Self.remote))
        let service = try makeService(upstream, strategy: .preventive, preventiveDelay: .seconds(30))
        let lines = try lines(try answer(service, search(["Accept": "application/x-ndjson"])))
        #expect(lines.map { $0["origin"]?.stringValue } == ["remote"])
    }

    @Test func preventiveEndsWithAnErrorDocumentWhenTheUpstreamFails() throws {
        let gate = ScriptedAlgoliaUpstream.Gate()
        let upstream = ScriptedAlgoliaUpstream(always: .held(gate, .networkError))
        defer { upstream.markUp() }
        let service = try makeService(upstream, strategy: .preventive, preventiveDelay: .milliseconds(20))
        let lines = try lines(
            try answer(service, search([MirrorgateHeader.strategy: "preventive"])), opening: gate)
        #expect(lines.count == 2)
        #expect(lines.first?["origin"]?.stringValue == "local")
        #expect(
            lines.last == ["origin": "remote", "status": 424, "message": "upstream unavailable"])
    }

    @Test func preventiveRelaysAClientErrorAsTheRemoteLine() throws {
        let gate = ScriptedAlgoliaUpstream.Gate()
        let upstream = ScriptedAlgoliaUpstream(
            always: .held(gate, .answer(AlgoliaError.response(400, "bad filter"))))
        let service = try makeService(upstream, strategy: .preventive, preventiveDelay: .milliseconds(20))
        let lines = try lines(
            try answer(service, search([MirrorgateHeader.strategy: "preventive"])), opening: gate)
        #expect(lines.last == ["origin": "remote", "status": 400, "message": "bad filter"])
    }

    @Test func preventiveWithAKnownDownUpstreamSendsTheLocalLineOnly() throws {
        let upstream = ScriptedAlgoliaUpstream(always: ScriptedAlgoliaUpstream.ok(Self.remote))
        upstream.markDown()
        defer { upstream.markUp() }
        let service = try makeService(upstream, strategy: .preventive)
        let response = try answer(service, search([MirrorgateHeader.strategy: "preventive"]))
        #expect(response.headers[MirrorgateHeader.origin] == "local")
        let lines = try lines(response)
        #expect(lines.map { $0["origin"]?.stringValue } == ["local"])
        #expect(upstream.requests.isEmpty)
    }

    @Test func aPreventiveLocalAnswerThatFailsIsAnErrorLine() throws {
        let upstream = ScriptedAlgoliaUpstream(always: ScriptedAlgoliaUpstream.ok(Self.remote))
        upstream.markDown()
        defer { upstream.markUp() }
        let service = try makeService(upstream, strategy: .preventive)
        // The client's key was never accepted by the upstream: the mirror refuses it.
        let request = AlgoliaFixtures.search(
            "products", key: AlgoliaFixtures.clientKey, headers: [MirrorgateHeader.strategy: "preventive"])
        let lines = try lines(try answer(service, request))
        #expect(
            lines == [["origin": "local", "status": 403, "message": "Invalid Application-ID or API key"]])
    }

    // MARK: split calls

    @Test func aMultiQueryOverLocalAndRemoteOnlyIndicesIsSplitAndMergedInOrder() throws {
        let upstream = ScriptedAlgoliaUpstream { request in
            // The forwarded part names the mirrored and the remote-only index, in request order.
            let names = (try? JSON.parse(request.body))?["requests"]?.arrayValue?.compactMap {
                $0["indexName"]?.stringValue
            }
            guard names == ["products", "elsewhere"] else {
                return .answer(AlgoliaError.response(400, "\(names ?? [])"))
            }
            return ScriptedAlgoliaUpstream.ok([
                "results": [["index": "products", "hits": [], "nbHits": 0], Self.remote]
            ])
        }
        let service = try makeService(upstream)
        let request = AlgoliaFixtures.post(
            "/1/indexes/*/queries",
            [
                "requests": [
                    ["indexName": "books", "query": "count"], ["indexName": "products", "query": "phone"],
                    ["indexName": "elsewhere", "query": "x"],
                ]
            ], key: AlgoliaFixtures.syncKey)
        let response = try answer(service, request)
        #expect(response.status == 200)
        #expect(response.headers[MirrorgateHeader.origin] == "local")
        let json = try body(response)
        #expect(json["origin"]?.stringValue == "local")
        let results = try #require(json["results"]?.arrayValue)
        #expect(results.map { $0["origin"]?.stringValue } == ["local", "remote", "remote"])
        #expect(objectIDs(results[0]) == ["2"])
        #expect(objectIDs(results[2]) == ["remote-1"])
    }

    @Test func aMirroredPartIsAnsweredLocallyWhenTheUpstreamIsDown() throws {
        let upstream = ScriptedAlgoliaUpstream(always: ScriptedAlgoliaUpstream.ok(["results": [Self.remote]]))
        upstream.markDown()
        defer { upstream.markUp() }
        let service = try makeService(upstream)
        let request = AlgoliaFixtures.post(
            "/1/indexes/*/queries",
            ["requests": [["indexName": "products", "query": "tablet"], ["indexName": "elsewhere"]]],
            key: AlgoliaFixtures.syncKey)
        let results = try #require(try body(try answer(service, request))["results"]?.arrayValue)
        #expect(results.map { $0["origin"]?.stringValue } == ["local", "remote"])
        #expect(objectIDs(results[0]) == ["p3"])
        let forwarded = try #require(upstream.requests.first)
        #expect(try JSON.parse(forwarded.body)["requests"]?.arrayValue?.count == 1)
    }

    @Test func aRemoteOnlyPartThatCannotBeAnsweredFailsTheWholeCall() throws {
        let upstream = ScriptedAlgoliaUpstream(always: .networkError)
        defer { upstream.markUp() }
        let service = try makeService(upstream)
        let request = AlgoliaFixtures.post(
            "/1/indexes/*/objects",
            [
                "requests": [
                    ["indexName": "books", "objectID": "1"], ["indexName": "elsewhere", "objectID": "x"],
                ]
            ])
        let response = try answer(service, request)
        #expect(response.status == 424)
        #expect(
            try body(response)["message"]?.stringValue
                == "upstream unavailable and no local data for a part of this call")
    }

    @Test func getObjectsOverLocalAndRemoteIndicesKeepsTheRecordsInOrder() throws {
        let upstream = ScriptedAlgoliaUpstream(
            always: ScriptedAlgoliaUpstream.ok(["results": [["objectID": "x", "name": "remote record"]]]))
        let service = try makeService(upstream)
        let request = AlgoliaFixtures.post(
            "/1/indexes/*/objects",
            [
                "requests": [
                    ["indexName": "elsewhere", "objectID": "x"], ["indexName": "books", "objectID": "2"],
                ]
            ])
        let json = try body(try answer(service, request))
        let results = try #require(json["results"]?.arrayValue)
        #expect(results.map { $0["objectID"]?.stringValue } == ["x", "2"])
        // getObjects results are records: only the envelope says where they came from.
        #expect(results.allSatisfy { $0["origin"] == nil })
        #expect(json["origin"]?.stringValue == "local")
    }

    // MARK: key memory and origin tags

    @Test func aClientKeyReadsTheMirrorOnlyAfterTheUpstreamAcceptedIt() throws {
        let upstream = ScriptedAlgoliaUpstream(always: ScriptedAlgoliaUpstream.ok(Self.remote))
        let service = try makeService(upstream)
        let offline: HTTPHeaders = [MirrorgateHeader.strategy: "offlineOnly"]
        let client = AlgoliaFixtures.search("products", key: AlgoliaFixtures.clientKey, headers: offline)
        #expect(try answer(service, client).status == 403)
        // A remote answer with that key (2xx) remembers it for the index…
        try expectRemote(
            try answer(service, AlgoliaFixtures.search("products", key: AlgoliaFixtures.clientKey)))
        #expect(
            service.keys.isAccepted(
                appId: AlgoliaFixtures.appId, index: "products", key: AlgoliaFixtures.clientKey))
        try expectLocal(try answer(service, client))
        // …and no other key, nor the same key for another application.
        #expect(
            try answer(service, AlgoliaFixtures.search("products", key: "other-key", headers: offline)).status
                == 403)
        var otherApp = client
        otherApp.headers.set("X-Algolia-Application-Id", "OTHERAPP")
        #expect(try answer(service, otherApp).status == 403)
    }

    @Test func aRefusedKeyIsNotRemembered() throws {
        let upstream = ScriptedAlgoliaUpstream(
            always: .answer(AlgoliaError.response(403, "Invalid Application-ID or API key")))
        let service = try makeService(upstream)
        #expect(try answer(service, AlgoliaFixtures.search("products")).status == 403)
        #expect(
            !service.keys.isAccepted(
                appId: AlgoliaFixtures.appId, index: "products", key: AlgoliaFixtures.clientKey))
    }

    @Test func aRemoteMultiQueryIsTaggedPerResult() throws {
        let upstream = ScriptedAlgoliaUpstream(
            always: ScriptedAlgoliaUpstream.ok(["results": [Self.remote, ["hits": [], "nbHits": 0]]]))
        let service = try makeService(upstream, strategy: .onlineOnly)
        let request = AlgoliaFixtures.post(
            "/1/indexes/*/queries",
            [
                "requests": [
                    ["indexName": "products", "query": "a"], ["indexName": "products", "query": "b"],
                ]
            ])
        let json = try body(try answer(service, request))
        #expect(json["origin"]?.stringValue == "remote")
        #expect(json["results"]?.arrayValue?.map { $0["origin"]?.stringValue } == ["remote", "remote"])
    }

    @Test func callsOnIndicesNeitherOfflineNorMirroredAreForwardedUntagged() throws {
        let upstream = ScriptedAlgoliaUpstream(always: ScriptedAlgoliaUpstream.ok(Self.remote))
        let service = try makeService(upstream)
        let response = try answer(service, AlgoliaFixtures.search("elsewhere"))
        #expect(response.headers[MirrorgateHeader.origin] == nil)
        #expect(try body(response)["origin"] == nil)
    }

    @Test func offlineIndicesAreAnsweredLocallyWhateverTheUpstream() throws {
        let upstream = ScriptedAlgoliaUpstream(always: ScriptedAlgoliaUpstream.ok(Self.remote))
        let service = try makeService(upstream)
        let response = try answer(service, AlgoliaFixtures.search("books", ["query": "count"]))
        #expect(response.headers[MirrorgateHeader.origin] == "local")
        #expect(objectIDs(try body(response)) == ["2"])
        #expect(upstream.requests.isEmpty)
    }
}

@Suite struct ServiceLoggingTests {
    @Test func startingNamesEachOfflineIndexAndNeverAKey() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let recorder = LogRecorder()
        _ = try AlgoliaFixtures.service(upstream: nil, logger: recorder.logger("mirrorgate.algolia"), in: dir)
        let built = recorder.entries.filter { $0.message == "offline index built from bootstrap" }
        #expect(built.map { $0.metadata["index"] } == ["books"])
        #expect(built.first?.metadata["objects"] == "\(AlgoliaFixtures.books.count)")
        #expect(built.first?.level.rawValue == "info")
        let keys = [AlgoliaFixtures.syncKey, AlgoliaFixtures.clientKey]
        for entry in recorder.entries {
            let text = entry.message + entry.metadata.values.joined()
            #expect(!keys.contains { text.contains($0) }, "\(entry)")
        }
    }
}
