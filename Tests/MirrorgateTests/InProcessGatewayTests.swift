import GatewayConfig
import JSONCore
import MirrorgateTesting
import SearchEngine
import Testing

/// The whole gateway in the test process on port 0, with an in-process fake Algolia: a fallback search
/// through the real server, router, service, forwarder and curl loop.
@Suite struct InProcessGatewayTests {
    func objectIDs(_ json: JSON?) -> Set<String> {
        Set((json?["hits"]?.arrayValue ?? []).compactMap { $0["objectID"]?.stringValue })
    }

    @Test func aFallbackSearchIsAnsweredByTheMirrorOnceTheUpstreamIsGone() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let upstream = try FakeAlgoliaServer(indices: [
            SearchIndex(
                name: "products", settings: ["attributesForFaceting": ["brand"]],
                records: [
                    ["objectID": "remote-1", "name": "Remote phone", "brand": "Fake"]
                ])
        ])
        defer { upstream.stop() }
        let configuration = try AlgoliaFixtures.configuration(
            in: dir, hosts: [AlgoliaHost(url: upstream.url)])
        let gateway = try TestGateway(configuration: configuration)
        defer { gateway.stop() }

        let remote = try gateway.send(AlgoliaFixtures.search("products"))
        #expect(remote.status == 200)
        #expect(remote.header("X-Mirrorgate-Origin") == "remote")
        #expect(remote.json?["origin"]?.stringValue == "remote")
        #expect(objectIDs(remote.json) == ["remote-1"])
        #expect(upstream.count("/1/indexes/products/query") == 1)

        upstream.stop()
        // The client's key was accepted upstream, so the mirror (bootstrapped from files) answers it.
        let local = try gateway.send(AlgoliaFixtures.search("products"))
        #expect(local.status == 200)
        #expect(local.header("X-Mirrorgate-Origin") == "local")
        #expect(local.json?["origin"]?.stringValue == "local")
        #expect(objectIDs(local.json) == ["p1", "p2", "p4"])
        let refused = try gateway.send(AlgoliaFixtures.search("products", key: "never-seen-key"))
        #expect(refused.status == 403)
    }

    @Test func anOfflineIndexAnswersWithoutAnyUpstream() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let gateway = try TestGateway(configuration: try AlgoliaFixtures.configuration(in: dir))
        defer { gateway.stop() }
        let response = try gateway.send(AlgoliaFixtures.search("books", ["query": "dumas"]))
        #expect(response.status == 200)
        #expect(response.header("X-Mirrorgate-Origin") == "local")
        #expect(objectIDs(response.json) == ["1", "2"])
    }
}
