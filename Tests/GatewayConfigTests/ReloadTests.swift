import Testing

@testable import GatewayConfig

/// `ConfigurationReload`: which keys a reload applies and which need a restart.
@Suite struct ReloadTests {
    func config(_ yaml: String) throws -> MirrorgateConfiguration {
        try MirrorgateConfiguration.parse(yaml: yaml, fileName: "t.yaml", environment: [:])
    }

    @Test func addedRemovedAndChangedKeysAreNamedWithoutValues() throws {
        let a = try config(
            """
            admin: {token: old-secret}
            algolia:
              offlineIndices: {a: {}, b: {}}
            odata:
              services:
                s1: {upstream: "http://127.0.0.1:1/s1/"}
                s2: {upstream: "http://127.0.0.1:1/s2/"}
            """)
        let b = try config(
            """
            admin: {token: new-secret}
            log: {level: debug}
            algolia:
              offlineIndices: {a: {}, c: {}}
            odata:
              services:
                s1: {upstream: "http://127.0.0.1:1/s1/", timeout: 5s}
                s3: {upstream: "http://127.0.0.1:1/s3/"}
            """)
        let plan = ConfigurationReload(running: a, loaded: b)
        let changes = Set(plan.applied.map { "\($0.key) \($0.kind)" })
        #expect(
            changes == [
                "admin.token changed", "log.level changed", "algolia.offlineIndices.b removed",
                "algolia.offlineIndices.c added", "odata.services.s1 changed", "odata.services.s2 removed",
                "odata.services.s3 added",
            ])
        #expect(plan.restartRequired.isEmpty)
        #expect(plan.effective == b)
        #expect(plan.algoliaChanged)
        #expect(!plan.applied.description.contains("secret"))
    }

    @Test func restartOnlyKeysKeepTheirRunningValues() throws {
        let a = try config("server: {listen: 127.0.0.1:8080, maxConnections: 100}\ndataDir: /a")
        let b = try config(
            "server: {listen: 127.0.0.1:9090, maxConnections: 10, shutdownGrace: 1s}\ndataDir: /b")
        let plan = ConfigurationReload(running: a, loaded: b)
        #expect(plan.restartRequired == ["server.listen", "server.maxConnections", "dataDir"])
        #expect(plan.effective.server.listen.port == 8080 && plan.effective.dataDir == "/a")
        #expect(plan.effective.server.maxConnections == 100)
        #expect(plan.effective.server.shutdownGrace == .seconds(1))
        #expect(plan.applied.map(\.key) == ["server.shutdownGrace"])
        #expect(!plan.algoliaChanged)
    }

    @Test func aNonLoopbackListenerKeptFromTheCommandLineStillNeedsAToken() throws {
        var a = try config("server: {allowRemote: true}\nadmin: {token: t}")
        a.server.listen = ListenAddress(host: "0.0.0.0", port: 8080)
        var b = try config("server: {allowRemote: true}")
        b.server.listen = a.server.listen
        #expect(!ConfigurationReload(running: a, loaded: b).issues.isEmpty)
        #expect(ConfigurationReload(running: a, loaded: a).issues.isEmpty)
    }

    @Test func aPolicyChangeDoesNotRebuildTheAlgoliaService() throws {
        let a = try config(
            """
            policies: {p: {idleInterval: 1h}}
            algolia:
              offlineIndices: {a: {}}
            """)
        let b = try config(
            """
            policies: {p: {idleInterval: 2s, activeInterval: 1s}}
            algolia:
              offlineIndices: {a: {}}
            """)
        let plan = ConfigurationReload(running: a, loaded: b)
        #expect(plan.applied.map(\.key) == ["policies.p"])
        #expect(plan.restartRequired.isEmpty)
        #expect(!plan.algoliaChanged)  // the replication scheduler applies it
    }
}

/// Which reload reopens an OData service.
@Suite struct ReloadODataTests {
    func config(_ yaml: String) throws -> MirrorgateConfiguration {
        try MirrorgateConfiguration.parse(yaml: yaml, fileName: "t.yaml", environment: [:])
    }

    @Test func aNewPolicyAloneDoesNotReopenAService() throws {
        let a = try config(
            """
            policies: {p: {idleInterval: 1h}, q: {idleInterval: 2s, activeInterval: 1s}}
            odata:
              services:
                s: {upstream: "http://127.0.0.1:1/s/", policy: p}
            """)
        let renamed = try config(
            """
            policies: {p: {idleInterval: 1h}, q: {idleInterval: 2s, activeInterval: 1s}}
            odata:
              services:
                s: {upstream: "http://127.0.0.1:1/s/", policy: q}
            """)
        let retimed = try config(
            """
            policies: {p: {idleInterval: 5s, activeInterval: 1s}}
            odata:
              services:
                s: {upstream: "http://127.0.0.1:1/s/", policy: p}
            """)
        let moved = try config(
            """
            policies: {p: {idleInterval: 1h}}
            odata:
              services:
                s: {upstream: "http://127.0.0.1:2/s/", policy: p}
            """)
        #expect(!ConfigurationReload.odataServiceChanged("s", a, renamed))
        #expect(!ConfigurationReload.odataServiceChanged("s", a, retimed))
        #expect(ConfigurationReload.odataServiceChanged("s", a, moved))
        #expect(ConfigurationReload.odataServiceChanged("t", a, moved))
    }
}
