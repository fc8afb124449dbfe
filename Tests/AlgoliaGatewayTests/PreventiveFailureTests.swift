import AlgoliaGateway
import GatewayConfig
import JSONCore
import MirrorgateTesting
import Testing

/// A preventive stream whose upstream fails before the delay (issue 19, D5): the local answer is sent at
/// once, then the remote error line, as SPEC §3 says; a client error before the delay comes alone.
@Suite struct PreventiveFailureTests {
    func lines(_ upstream: ScriptedAlgoliaUpstream) throws -> [JSON] {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        // A delay no test waits for: every line below comes from the upstream's failure.
        let service = try AlgoliaFixtures.service(
            upstream: upstream, strategy: .preventive, preventiveDelay: .seconds(60), in: dir)
        let out = RecordingResponder()
        service.handle(
            AlgoliaFixtures.search(
                "products", key: AlgoliaFixtures.syncKey, headers: [MirrorgateHeader.strategy: "preventive"]),
            out)
        let response = try #require(out.wait(for: .seconds(10)))
        guard case .stream(let stream) = response.body else {
            Issue.record("expected a stream")
            return []
        }
        let (chunks, ended) = StreamCollector.collect(stream)
        #expect(ended)
        return try chunks.map { try JSON.parse(Array($0.dropLast())) }
    }

    @Test(arguments: [
        ScriptedAlgoliaUpstream.Outcome.serverError(500), .serverError(503), .rateLimited, .networkError,
        .answer(HTTPResponse(status: 200, body: .bytes(Array("garbage".utf8)))),
    ])
    func aFailureBeforeTheDelaySendsTheLocalAnswerThenTheError(_ outcome: ScriptedAlgoliaUpstream.Outcome)
        throws
    {
        let upstream = ScriptedAlgoliaUpstream(always: outcome)
        defer { upstream.markUp() }
        let lines = try lines(upstream)
        #expect(lines.map { $0["origin"]?.stringValue } == ["local", "remote"])
        let ids = (lines.first?["hits"]?.arrayValue ?? []).compactMap { $0["objectID"]?.stringValue }
        #expect(Set(ids) == ["p1", "p2", "p4"])
        #expect(lines.last?["status"] == 424)
    }

    @Test func aClientErrorBeforeTheDelayComesAlone() throws {
        let upstream = ScriptedAlgoliaUpstream(always: .answer(AlgoliaError.response(403, "Invalid key")))
        #expect(try lines(upstream) == [["origin": "remote", "status": 403, "message": "Invalid key"]])
    }
}
