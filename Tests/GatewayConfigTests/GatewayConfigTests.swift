import Foundation
import Testing

@testable import GatewayConfig

/// Parses `yaml` as file `t.yaml` with an empty environment unless given.
private func parse(
    _ yaml: String, env: [String: String] = [:],
    unsupported: [String: String] = MirrorgateConfiguration.unsupportedKeys
) throws(ConfigError) -> MirrorgateConfiguration {
    try MirrorgateConfiguration.parse(
        yaml: yaml, fileName: "t.yaml", environment: env, unsupportedKeys: unsupported)
}

/// The issues of a configuration that must fail.
private func issues(
    _ yaml: String, env: [String: String] = [:],
    unsupported: [String: String] = MirrorgateConfiguration.unsupportedKeys
) -> [ConfigIssue] {
    do {
        _ = try parse(yaml, env: env, unsupported: unsupported)
        Issue.record("expected configuration errors")
        return []
    } catch {
        return error.issues
    }
}

private let repoRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()

@Suite struct DefaultsTests {
    @Test func emptyDocumentGivesDefaults() throws {
        let c = try parse("")
        #expect(c == MirrorgateConfiguration())
        #expect(c.server.listen == ListenAddress(host: "127.0.0.1", port: 8080))
        #expect(!c.server.allowRemote)
        #expect(c.server.maxBodySize == 10 * 1024 * 1024)
        #expect(c.server.maxConnections == 512)
        #expect(c.server.requestTimeout == .seconds(30))
        #expect(c.server.shutdownGrace == .seconds(5))
        #expect(c.server.cors.allowOrigins.isEmpty)
        #expect(c.dataDir == "./mirrorgate-data")
        #expect(c.admin.token == nil)
        #expect(c.admin.maxBodySize == 512 * 1024 * 1024)
        #expect(c.log.level == .info)
        #expect(c.log.format == .text)
        let p = try #require(c.policies["default"])
        #expect(p.activeInterval == .seconds(3600))
        #expect(p.idleInterval == .seconds(86400))
        #expect(p.activeWindow == .seconds(600))
        #expect(p.onlyWhenReachable)
        #expect(p.windows.isEmpty)
        #expect(p.maxRunDuration == .zero)
        #expect(p.condition == nil)
        #expect(p.jitter == .zero)
        #expect(p.retry.initial == .seconds(5))
        #expect(p.retry.max == .seconds(900))
        #expect(c.algolia.appId == nil && c.algolia.apiKey == nil && c.algolia.hosts == nil)
        #expect(c.algolia.connectTimeout == .seconds(1))
        #expect(c.algolia.timeout == .milliseconds(2500))
        #expect(c.algolia.writeTimeout == .seconds(25))
        #expect(c.algolia.unavailableStatus == 424)
        #expect(c.algolia.indices.isEmpty && c.algolia.offlineIndices.isEmpty)
        #expect(c.odata.services.isEmpty)
    }

    @Test func nullValuesTakeDefaults() throws {
        let c = try parse("server:\n  listen:\n  maxBodySize: null\nlog: ~\n")
        #expect(c.server == ServerConfig())
        #expect(c.log == LogConfig())
    }

    @Test func indexAndServiceDefaults() throws {
        let c = try parse(
            """
            algolia:
              appId: APP
              apiKey: key
              indices:
                products:
                  dataSelectionQueries: [{query: {}, maxObjects: 10}]
            odata:
              services:
                sales: {upstream: "https://odata.example.com/sales/"}
            """)
        let i = try #require(c.algolia.indices["products"])
        #expect(i.name == "products")
        #expect(i.mirrored)
        #expect(i.requestStrategy == .fallbackOnFailure)
        #expect(i.offlineFallbackTimeout == .seconds(1))
        #expect(i.preventiveOfflineSearchDelay == .milliseconds(200))
        #expect(i.delayBetweenSyncs == .seconds(86400))
        #expect(i.policy == "default")
        #expect(i.bootstrap == nil)
        let s = try #require(c.odata.services["sales"])
        #expect(s == ODataServiceConfig(name: "sales", upstream: "https://odata.example.com/sales/"))
        #expect(s.mount == "/odata/sales/")
        #expect(s.version == .auto && s.routing == .onlineFirst)
        #expect(s.uploadCredentials == .client && s.uploadIfMatch == .mirror)
        #expect(s.timeout == .seconds(30) && s.pageSize == nil)
        #expect(s.enableRepeatableRequests && s.repeatabilityHeaders == .both)
        #expect(s.upstreamSupportsRepeatability == .auto)
        #expect(s.policy == "default")
    }
}

@Suite struct FullParseTests {
    @Test func everySection() throws {
        let c = try parse(
            """
            server:
              listen: "[::1]:9090"
              maxBodySize: 64KiB
              maxConnections: 10
              requestTimeout: 1m
              shutdownGrace: 0s
              cors: {allowOrigins: ["https://app.example.com", "*"]}
            dataDir: /var/lib/mg
            admin: {token: secret, maxBodySize: 1GiB}
            log: {level: debug, format: json}
            policies:
              nightly:
                idleInterval: 12h
                onlyWhenReachable: false
                retry: {initial: 1s, max: 1m}
            algolia:
              appId: APP
              apiKey: key
              hosts:
                - http://127.0.0.1:8081/
                - {url: "https://w.example.com", accept: write}
              unavailableStatus: 404
              indices:
                products:
                  requestStrategy: preventive
                  dataSelectionQueries:
                    - {query: {filters: "brand:Apple", hitsPerPage: 100, facets: ["*"]}, maxObjects: 1000}
                    - {params: "filters=brand%3AApple", maxObjects: 5}
                  policy: nightly
                  bootstrap: {settings: s.json, objects: [a.json, b.json]}
                online:
                  mirrored: false
                  requestStrategy: onlineOnly
              offlineIndices:
                notes: {bootstrap: {objects: notes.json, synonyms: syn.json, rules: rules.json}, apiKeys: [k1, k2]}
                empty:
            odata:
              services:
                sales:
                  mount: /sales/
                  upstream: https://odata.example.com/sales/
                  version: v2
                  routing: localFirst
                  definingRequests:
                    - {name: customers, query: "Customers?$top=10"}
                  uploadCredentials: service
                  uploadIfMatch: none
                  customHeaders: {X-Api-Key: abc, X-Num: 5}
                  customCookies: {session: s1}
                  urlSuffix: "sap-client=100"
                  timeout: 10s
                  pageSize: 50
                  enableRepeatableRequests: false
                  repeatabilityHeaders: sap
                  upstreamSupportsRepeatability: true
                  policy: nightly
                  bootstrap: {metadata: meta.xml, data: {Customers: customers.json}}
            """)
        #expect(c.server.listen == ListenAddress(host: "::1", port: 9090))
        #expect(c.server.listen.isLoopback)
        #expect(c.server.maxBodySize == 65536)
        #expect(c.server.requestTimeout == .seconds(60))
        #expect(c.server.shutdownGrace == .zero)
        #expect(c.server.cors.allowOrigins == ["https://app.example.com", "*"])
        #expect(c.dataDir == "/var/lib/mg")
        #expect(c.admin == AdminConfig(token: "secret", maxBodySize: 1 << 30))
        #expect(c.log == LogConfig(level: .debug, format: .json))
        #expect(c.policies.keys.sorted() == ["default", "nightly"])
        #expect(c.policies["nightly"]?.idleInterval == .seconds(43200))
        #expect(c.policies["nightly"]?.activeInterval == .seconds(3600))
        #expect(c.policies["nightly"]?.onlyWhenReachable == false)
        #expect(c.policies["nightly"]?.retry == RetryConfig(initial: .seconds(1), max: .seconds(60)))
        #expect(
            c.algolia.hosts == [
                AlgoliaHost(url: "http://127.0.0.1:8081", accept: .readWrite),
                AlgoliaHost(url: "https://w.example.com", accept: .write),
            ])
        #expect(c.algolia.effectiveHosts == c.algolia.hosts)
        #expect(c.algolia.unavailableStatus == 404)
        let p = try #require(c.algolia.indices["products"])
        #expect(p.requestStrategy == .preventive)
        #expect(p.policy == "nightly")
        #expect(p.dataSelectionQueries.count == 2)
        #expect(
            p.dataSelectionQueries[0].queryJSON
                == #"{"facets":["*"],"filters":"brand:Apple","hitsPerPage":100}"#)
        #expect(p.dataSelectionQueries[0].maxObjects == 1000)
        #expect(p.dataSelectionQueries[1].params == "filters=brand%3AApple")
        #expect(p.dataSelectionQueries[1].queryJSON == nil)
        #expect(p.bootstrap == AlgoliaBootstrap(settings: "s.json", objects: ["a.json", "b.json"]))
        #expect(c.algolia.indices["online"]?.mirrored == false)
        #expect(
            c.algolia.offlineIndices["notes"]?.bootstrap
                == AlgoliaBootstrap(objects: ["notes.json"], synonyms: "syn.json", rules: "rules.json"))
        let every = Set(AlgoliaACL.allCases)
        #expect(c.algolia.offlineIndices["notes"]?.apiKeys == ["k1": every, "k2": every])
        #expect(c.algolia.offlineIndices["empty"] == OfflineIndexConfig(name: "empty"))
        let s = try #require(c.odata.services["sales"])
        #expect(s.mount == "/sales/")
        #expect(s.version == .v2 && s.routing == .localFirst)
        #expect(s.definingRequests == [DefiningRequest(name: "customers", query: "Customers?$top=10")])
        #expect(s.uploadCredentials == .service && s.uploadIfMatch == .omit)
        #expect(s.customHeaders == ["X-Api-Key": "abc", "X-Num": "5"])
        #expect(s.customCookies == ["session": "s1"])
        #expect(s.urlSuffix == "sap-client=100")
        #expect(s.timeout == .seconds(10) && s.pageSize == 50)
        #expect(!s.enableRepeatableRequests && s.repeatabilityHeaders == .sap)
        #expect(s.upstreamSupportsRepeatability == .yes)
        #expect(s.bootstrap == ODataBootstrap(metadata: "meta.xml", data: ["Customers": "customers.json"]))
    }

    @Test func defaultAlgoliaHostsFromAppId() throws {
        let a = AlgoliaConfig(appId: "ABC")
        #expect(
            a.effectiveHosts.map(\.url) == [
                "https://ABC-dsn.algolia.net", "https://ABC.algolia.net", "https://ABC-1.algolianet.com",
                "https://ABC-2.algolianet.com", "https://ABC-3.algolianet.com",
            ])
        #expect(a.effectiveHosts.map(\.accept) == [.read, .write, .readWrite, .readWrite, .readWrite])
        #expect(AlgoliaConfig().effectiveHosts.isEmpty)
    }

    @Test func configValueJSON() {
        let v = ConfigValue.object([
            "s": .string("a\"b\\c\n\u{1}é"), "n": .null, "b": .bool(false), "i": .int(-3), "d": .double(1.5),
            "a": .array([.int(1), .string("x")]),
        ])
        #expect(v.jsonString == #"{"a":[1,"x"],"b":false,"d":1.5,"i":-3,"n":null,"s":"a\"b\\c\n\u0001é"}"#)
    }

    @Test func yamlScalarTypingInQueries() throws {
        let c = try parse(
            """
            algolia:
              appId: A
              apiKey: k
              indices:
                i:
                  dataSelectionQueries:
                    - query:
                        {a: "5", b: 5, c: 1.5, d: true, e: null, f: '~', g: !!str 7, i: "${N}"}
                      maxObjects: 1
                    - query:
                        h: ${N}
                      maxObjects: 1
            """, env: ["N": "42"])
        #expect(
            c.algolia.indices["i"]?.dataSelectionQueries.first?.queryJSON
                == #"{"a":"5","b":5,"c":1.5,"d":true,"e":null,"f":"~","g":"7","i":"42"}"#)
        #expect(c.algolia.indices["i"]?.dataSelectionQueries.last?.queryJSON == #"{"h":42}"#)
    }
}

@Suite struct ErrorTests {
    @Test func unknownKeyNamesFileLineAndPath() {
        let found = issues(
            """
            server:
              listen: 127.0.0.1:8080
              listn: 127.0.0.1:8081
            extra: 1
            """)
        #expect(
            found.map(\.description) == [
                "t.yaml:3: unknown key 'server.listn'", "t.yaml:4: unknown key 'extra'",
            ])
        #expect(found[0].keyPath == "server.listn")
        #expect(found[0].line == 3 && found[0].column == 3)
    }

    @Test func allErrorsAreCollected() {
        let found = issues(
            """
            server:
              maxConnections: lots
              allowRemote: yes
              requestTimeout: 30
              maxBodySize: ten
            log: {level: loud, format: xml}
            policies:
              default:
                retry: {initial: 1m, max: 1s}
            algolia:
              unavailableStatus: 503
              hosts: "http://x"
            odata:
              services:
                s:
                  mount: odata/s
                  version: v3
            """)
        let byKey = Dictionary(found.map { ($0.keyPath, $0) }, uniquingKeysWith: { a, _ in a })
        #expect(byKey["server.maxConnections"]?.line == 2)
        #expect(
            byKey["server.maxConnections"]?.message
                == "server.maxConnections: expected an integer, got 'lots'")
        #expect(
            byKey["server.allowRemote"]?.message == "server.allowRemote: expected true or false, got 'yes'")
        #expect(byKey["server.requestTimeout"]?.message.contains("needs a unit") == true)
        #expect(byKey["server.requestTimeout"]?.line == 4)
        #expect(byKey["server.maxBodySize"]?.line == 5)
        #expect(byKey["log.level"]?.line == 6)
        #expect(
            byKey["log.level"]?.message.contains("trace, debug, info, notice, warning, error, critical")
                == true)
        #expect(byKey["log.format"]?.line == 6)
        #expect(byKey["policies.default.retry.max"]?.line == 9)
        #expect(byKey["algolia.unavailableStatus"]?.line == 11)
        #expect(byKey["algolia.unavailableStatus"]?.message.contains("4xx") == true)
        #expect(byKey["algolia.hosts"]?.line == 12)
        #expect(byKey["odata.services.s.mount"]?.line == 16)
        #expect(byKey["odata.services.s.upstream"]?.message.contains("required") == true)
        #expect(byKey["odata.services.s.version"]?.line == 17)
        #expect(found.count == 12)
        // sorted by line
        #expect(found.map(\.line) == found.map(\.line).sorted())
        let error = ConfigError(issues: found)
        #expect(error.description.split(separator: "\n").count == found.count)
    }

    @Test func wrongShapes() {
        let found = issues(
            """
            server: 5
            admin: [a, b]
            algolia:
              indices:
                i: [1]
            """)
        #expect(
            found.contains {
                $0.keyPath == "server" && $0.message == "server: expected a mapping, got a number"
            })
        #expect(found.contains { $0.keyPath == "admin" && $0.line == 2 && $0.message.contains("got a list") })
        #expect(found.contains { $0.keyPath == "algolia.indices.i" && $0.line == 5 })
        #expect(issues("- a\n- b\n").contains { $0.message.contains("expected a mapping") })
        #expect(issues("just text").contains { $0.message.contains("top level") })
    }

    @Test func yamlSyntaxErrorsHaveLines() {
        let bad = issues("server:\n  listen: [1, 2\nlog: {}\n")
        #expect(bad.count == 1)
        #expect(bad[0].line > 0)
        #expect(bad[0].message.hasPrefix("invalid YAML"))
        let dup = issues("log:\n  level: info\n  level: debug\n")
        #expect(dup.count == 1)
        #expect(dup[0].message.contains("duplicate key 'level'"))
        #expect(dup[0].line == 2)
    }

    @Test func policyReferencesMustExist() {
        let found = issues(
            """
            algolia:
              appId: A
              apiKey: k
              indices:
                i: {policy: nightly, dataSelectionQueries: [{params: "", maxObjects: 1}]}
            odata:
              services:
                s: {upstream: "http://u.example.com/", policy: weekly}
            """)
        #expect(found.map(\.keyPath) == ["algolia.indices.i.policy", "odata.services.s.policy"])
        #expect(found[0].line == 5)
        #expect(found[0].message.contains("unknown policy 'nightly' (defined: default)"))
        #expect(found[1].line == 8)
    }

    @Test func mirroredIndexNeedsQueriesAndCredentials() {
        let found = issues(
            """
            algolia:
              indices:
                i: {}
                j:
                  dataSelectionQueries:
                    - {maxObjects: 5}
                    - {query: {}, params: "a=b", maxObjects: 5}
                    - {query: "text", maxObjects: 5}
                    - {query: {}}
                    - {query: {}, maxObjects: 0}
            """)
        let keys = Set(found.map(\.keyPath))
        #expect(keys.contains("algolia.indices.i.dataSelectionQueries"))
        #expect(keys.contains("algolia.indices.j.dataSelectionQueries[0]"))
        #expect(keys.contains("algolia.indices.j.dataSelectionQueries[1]"))
        #expect(keys.contains("algolia.indices.j.dataSelectionQueries[2].query"))
        #expect(keys.contains("algolia.indices.j.dataSelectionQueries[3].maxObjects"))
        #expect(keys.contains("algolia.indices.j.dataSelectionQueries[4].maxObjects"))
        #expect(keys.contains("algolia.appId"))
        #expect(keys.contains("algolia.apiKey"))
        #expect(found.first { $0.keyPath == "algolia.indices.i.dataSelectionQueries" }?.line == 3)
    }

    @Test func odataServiceChecks() {
        let found = issues(
            """
            odata:
              services:
                a: {upstream: "ftp://x/"}
                b: {upstream: "http://x.example.com/", mount: /odata/a/}
                c: {upstream: "http://x.example.com/", mount: /_mirrorgate/c/}
                d:
                  upstream: "http://x.example.com/"
                  pageSize: 0
                  definingRequests:
                    - {name: x, query: A}
                    - {name: x, query: B}
                    - {query: C}
                  customHeaders: {X: [1]}
            """)
        let keys = found.map(\.keyPath)
        #expect(keys.contains("odata.services.a.upstream"))
        #expect(keys.contains("odata.services.c.mount"))
        #expect(found.contains { $0.keyPath == "odata.services.b.mount" && $0.message.contains("overlaps") })
        #expect(keys.contains("odata.services.d.pageSize"))
        #expect(keys.contains("odata.services.d.definingRequests[1].name"))
        #expect(keys.contains("odata.services.d.definingRequests[2].name"))
        #expect(keys.contains("odata.services.d.customHeaders.X"))
    }

    @Test func sameNameInIndicesAndOfflineIndices() {
        let found = issues(
            """
            algolia:
              appId: A
              indices: {x: {mirrored: false}}
              offlineIndices: {x: {}}
            """)
        #expect(found.map(\.keyPath) == ["algolia.offlineIndices.x"])
    }

    @Test func apiKeysWithACLsPatternsAndOfflineWrites() throws {
        let c = try parse(
            """
            algolia:
              appId: A
              apiKey: K
              indices:
                products: {dataSelectionQueries: [{query: {}, maxObjects: 5}], offlineWrites: queue}
              offlineIndices:
                notes: {apiKeys: {reader: [search, browse], writer: [search, addObject, deleteObject]}}
                notes_tmp_*: {apiKeys: [admin]}
            """)
        #expect(c.algolia.indices["products"]?.offlineWrites == .queue)
        #expect(AlgoliaIndexConfig(name: "x").offlineWrites == .reject)
        let notes = try #require(c.algolia.offlineIndices["notes"])
        #expect(notes.apiKeys?["reader"] == [.search, .browse])
        #expect(notes.apiKeys?["writer"] == [.search, .addObject, .deleteObject])
        #expect(c.algolia.offlineIndices["notes_tmp_*"]?.apiKeys?["admin"] == Set(AlgoliaACL.allCases))
        #expect(c.algolia.offlineIndex(for: "notes")?.name == "notes")
        #expect(c.algolia.offlineIndex(for: "notes_tmp_123")?.name == "notes_tmp_*")
        #expect(c.algolia.offlineIndex(for: "notes_tm") == nil)
        #expect(c.algolia.offlineIndex(for: "products") == nil)
    }

    @Test func badACLsPatternsAndOfflineWrites() {
        let found = issues(
            """
            algolia:
              appId: A
              indices:
                online: {mirrored: false, offlineWrites: queue}
                cat_one: {mirrored: false}
              offlineIndices:
                a: {apiKeys: {k: [search, writeEverything]}}
                b: {apiKeys: key}
                c*d: {}
                "*": {}
                cat_*: {bootstrap: {objects: x.json}}
                e: {apiKeys: [k], bogus: 1}
            """)
        let keys = Set(found.map(\.keyPath))
        #expect(keys.contains("algolia.indices.online.offlineWrites"))
        #expect(keys.contains("algolia.offlineIndices.a.apiKeys.k[1]"))
        #expect(found.contains { $0.message.contains("unknown ACL 'writeEverything'") })
        #expect(keys.contains("algolia.offlineIndices.b.apiKeys"))
        #expect(keys.contains("algolia.offlineIndices.c*d"))
        #expect(keys.contains("algolia.offlineIndices.*"))
        #expect(keys.contains("algolia.offlineIndices.cat_*.bootstrap"))
        #expect(
            found.contains { $0.keyPath == "algolia.offlineIndices.cat_*" && $0.message.contains("cat_one") })
        #expect(keys.contains("algolia.offlineIndices.e.bogus"))
    }
}

@Suite struct InterpolationTests {
    @Test func substitutesVariablesAndDefaults() throws {
        let c = try parse(
            """
            server:
              listen: ${HOST:-127.0.0.1}:${PORT}
            admin:
              token: "${TOKEN:-}"
            dataDir: ${DIR:-/tmp/x}/data
            algolia:
              appId: pre-${APP}-post
              apiKey: "$${LITERAL} and $HOME"
            """, env: ["PORT": "9999", "APP": "abc"])
        #expect(c.server.listen == ListenAddress(host: "127.0.0.1", port: 9999))
        #expect(c.admin.token == nil)
        #expect(c.dataDir == "/tmp/x/data")
        #expect(c.algolia.appId == "pre-abc-post")
        #expect(c.algolia.apiKey == "${LITERAL} and $HOME")
    }

    @Test func unsetVariableIsAnErrorNamingItAndTheLine() {
        let found = issues("log:\n  level: info\nadmin:\n  token: ${MG_TOKEN}\n")
        #expect(found.count == 1)
        #expect(found[0].line == 4)
        #expect(found[0].keyPath == "admin.token")
        #expect(found[0].message.contains("environment variable 'MG_TOKEN' is not set"))
        #expect(found[0].description.hasPrefix("t.yaml:4: admin.token: environment variable 'MG_TOKEN'"))
    }

    @Test func malformedReferences() {
        #expect(issues("dataDir: ${1BAD}\n").first?.message.contains("invalid variable reference") == true)
        #expect(issues("dataDir: ${OPEN\n").first?.message.contains("unterminated") == true)
    }

    @Test func environmentValueIsTypedByTheField() throws {
        let c = try parse(
            "server: {allowRemote: \"${R}\", maxConnections: '${N}', listen: '0.0.0.0:1'}\nadmin: {token: t}\n",
            env: ["R": "true", "N": "7"])
        #expect(c.server.allowRemote)
        #expect(c.server.maxConnections == 7)
    }
}

@Suite struct ValueSyntaxTests {
    @Test(arguments: [
        ("200ms", Duration.milliseconds(200)), ("5s", .seconds(5)), ("24h", .seconds(86400)),
        ("1m", .seconds(60)),
        ("10m", .seconds(600)), ("0s", .zero), ("0", .zero), ("1h30m", .seconds(5400)),
        ("1.5s", .milliseconds(1500)),
        ("2d", .seconds(172_800)), ("250us", .microseconds(250)), ("7ns", .nanoseconds(7)),
    ])
    func durations(text: String, expected: Duration) {
        #expect(ConfigSyntax.duration(text) == expected)
    }

    @Test(arguments: ["", "5", "s", "5x", "5 s s", "-1s", "1.2.3s", "abc"])
    func badDurations(text: String) {
        #expect(ConfigSyntax.duration(text) == nil)
    }

    @Test(arguments: [
        ("10MiB", 10_485_760), ("512MiB", 536_870_912), ("64KiB", 65536), ("1024", 1024),
        ("1GiB", 1_073_741_824),
        ("2KB", 2000), ("3MB", 3_000_000), ("10 MiB", 10_485_760), ("10mib", 10_485_760), ("0.5KiB", 512),
        ("100B", 100),
    ])
    func sizes(text: String, expected: Int) {
        #expect(ConfigSyntax.size(text) == expected)
    }

    @Test(arguments: ["", "MiB", "10XB", "ten", "-5"])
    func badSizes(text: String) {
        #expect(ConfigSyntax.size(text) == nil)
    }

    @Test func numberForDurationIsAClearError() {
        let found = issues("server:\n  requestTimeout: 30\n")
        #expect(
            found.first?.message
                == "server.requestTimeout: duration '30' needs a unit (ms, s, m, h, d), e.g. '30s'")
    }

    @Test func timeWindows() {
        #expect(TimeWindow("22:00-06:00") == TimeWindow(startMinute: 1320, endMinute: 360))
        #expect(TimeWindow("22:00-06:00")?.contains(minuteOfDay: 23 * 60) == true)
        #expect(TimeWindow("22:00-06:00")?.contains(minuteOfDay: 12 * 60) == false)
        #expect(TimeWindow("09:30-17:00")?.contains(minuteOfDay: 10 * 60) == true)
        #expect(TimeWindow("09:30-17:00")?.description == "09:30-17:00")
        for bad in ["", "9:00-10:00", "24:00-01:00", "10:00-10:00", "10:00", "10:60-11:00", "a-b"] {
            #expect(TimeWindow(bad) == nil, "\(bad)")
        }
    }
}

@Suite struct ListenTests {
    @Test(arguments: [
        ("127.0.0.1:8080", "127.0.0.1", 8080, true), ("[::1]:8080", "::1", 8080, true),
        ("localhost:8080", "localhost", 8080, true), ("127.1.2.3:1", "127.1.2.3", 1, true),
        ("0.0.0.0:80", "0.0.0.0", 80, false), ("[::]:8080", "::", 8080, false),
        ("192.168.1.5:8080", "192.168.1.5", 8080, false), ("example.com:443", "example.com", 443, false),
        ("[::ffff:127.0.0.1]:80", "::ffff:127.0.0.1", 80, true), ("LOCALHOST:0", "LOCALHOST", 0, true),
    ])
    func parsesAndClassifies(text: String, host: String, port: Int, loopback: Bool) throws {
        let a = try #require(ListenAddress(text))
        #expect(a.host == host)
        #expect(Int(a.port) == port)
        #expect(a.isLoopback == loopback)
    }

    @Test(arguments: [
        "8080", "127.0.0.1", ":8080", "::1:8080", "[::1]", "[::1]8080", "1.2.3:80", "h:99999", "h:x",
    ])
    func rejects(text: String) {
        #expect(ListenAddress(text) == nil)
    }

    @Test func descriptionBracketsIPv6() {
        #expect(ListenAddress(host: "::1", port: 1).description == "[::1]:1")
        #expect(ListenAddress(host: "127.0.0.1", port: 1).description == "127.0.0.1:1")
    }

    @Test func remoteListenNeedsAllowRemoteAndToken() throws {
        let none = issues("server:\n  listen: 0.0.0.0:8080\n")
        #expect(none.count == 1)
        #expect(none[0].keyPath == "server.listen")
        #expect(none[0].line == 2)
        #expect(none[0].message.contains("server.allowRemote: true and admin.token"))
        let noToken = issues("server:\n  listen: 0.0.0.0:8080\n  allowRemote: true\n")
        #expect(noToken.count == 1)
        #expect(noToken[0].message.hasSuffix("needs admin.token"))
        let noAllow = issues("server:\n  listen: 0.0.0.0:8080\nadmin:\n  token: t\n")
        #expect(noAllow.count == 1)
        #expect(noAllow[0].message.hasSuffix("needs server.allowRemote: true"))
        let ok = try parse("server:\n  listen: 0.0.0.0:8080\n  allowRemote: true\nadmin:\n  token: t\n")
        #expect(ok.server.listen.host == "0.0.0.0")
        #expect(issues("server:\n  listen: nohost\n").first?.message.contains("no port") == true)
    }

    @Test func validateAfterOverride() throws {
        var c = try parse("")
        try c.validate()
        c.server.listen = ListenAddress(host: "0.0.0.0", port: 80)
        let error = try #require(throws: ConfigError.self) { try c.validate(file: "--listen") }
        #expect(error.issues.first?.keyPath == "server.listen")
        #expect(error.description.hasPrefix("--listen: server.listen:"))
    }
}

@Suite struct UnsupportedKeyTests {
    private let yaml = """
        policies:
          default:
            window: "22:00-06:00"
            maxRunDuration: 10m
          other:
            window: null
            maxRunDuration: 0s
        odata:
          services:
            s:
              upstream: http://u.example.com/
              storeEncryptionKey: a long enough secret
              enableRequestQueueOptimization: true
              enableUndoLocalCreation: true
              enableTransactionBuilder: true
              enableIndividualErrorArchiveDeletion: true
            t:
              upstream: http://u.example.com/
              mount: /t/
              enableRequestQueueOptimization: false
              storeEncryptionKey: null
        """

    /// Every feature this table gated is implemented (sync windows and run budgets, the request-queue
    /// options): the default table is empty, and the file parses with it.
    @Test func everyGatedFeatureIsImplemented() throws {
        #expect(MirrorgateConfiguration.unsupportedKeys.isEmpty)
        let c = try parse(yaml)
        #expect(c.policies["default"]?.maxRunDuration == .seconds(600))
        #expect(c.odata.services["s"]?.enableRequestQueueOptimization == true)
    }

    @Test func nonDefaultValuesAreRejected() {
        let table = [
            "policies.*.window": "sync windows are not implemented",
            "odata.services.*.enableTransactionBuilder": "the transaction builder is not implemented",
        ]
        let found = issues(yaml, unsupported: table)
        #expect(
            found.map(\.keyPath) == ["policies.default.window", "odata.services.s.enableTransactionBuilder"])
        #expect(found.allSatisfy { $0.message.hasPrefix("\($0.keyPath): not supported in this version") })
        #expect(found[0].line == 3)
        #expect(
            found[0].description.hasPrefix("t.yaml:3: policies.default.window: not supported in this version")
        )
    }

    @Test func individualErrorArchiveDeletionIsSupported() throws {
        let c = try parse(
            "odata:\n  services:\n    s:\n      upstream: http://u.example.com/\n"
                + "      enableIndividualErrorArchiveDeletion: true\n      uploadIfMatch: none\n"
                + "      uploadCredentials: service\n")
        #expect(c.odata.services["s"]?.enableIndividualErrorArchiveDeletion == true)
        #expect(c.odata.services["s"]?.uploadIfMatch == UploadIfMatch.omit)
        #expect(c.odata.services["s"]?.uploadCredentials == UploadCredentials.service)
    }

    /// Issue 16: the request-queue options are accepted with their documented defaults (false).
    @Test func requestQueueOptionsAreSupported() throws {
        let defaults = try parse("odata:\n  services:\n    s:\n      upstream: http://u.example.com/\n")
        let d = try #require(defaults.odata.services["s"])
        #expect(
            !d.enableRequestQueueOptimization && !d.enableUndoLocalCreation && !d.enableTransactionBuilder)
        let c = try parse(
            "odata:\n  services:\n    s:\n      upstream: http://u.example.com/\n"
                + "      enableRequestQueueOptimization: true\n      enableUndoLocalCreation: true\n"
                + "      enableTransactionBuilder: true\n")
        let s = try #require(c.odata.services["s"])
        #expect(s.enableRequestQueueOptimization && s.enableUndoLocalCreation && s.enableTransactionBuilder)
    }

    @Test func liftingAnEntryAcceptsTheKey() throws {
        let c = try parse(yaml, unsupported: [:])
        #expect(c.policies["default"]?.windows == [TimeWindow(startMinute: 1320, endMinute: 360)])
        #expect(c.policies["default"]?.maxRunDuration == .seconds(600))
        #expect(c.odata.services["s"]?.storeEncryptionKey == "a long enough secret")
        #expect(c.odata.services["s"]?.enableTransactionBuilder == true)
    }

    @Test func storeEncryptionKeysAreSupported() throws {
        let c = try parse(
            "algolia:\n  storeEncryptionKey: ${ALGOLIA_STORE_KEY}\nodata:\n  services:\n    s:\n"
                + "      upstream: http://u.example.com/\n      storeEncryptionKey: odata secret 42\n"
                + "    t:\n      upstream: http://u.example.com/\n      mount: /t/\n      storeEncryptionKey: null\n",
            env: ["ALGOLIA_STORE_KEY": "from the environment"])
        #expect(c.algolia.storeEncryptionKey == "from the environment")
        #expect(c.odata.services["s"]?.storeEncryptionKey == "odata secret 42")
        #expect(c.odata.services["t"]?.storeEncryptionKey == nil)
        #expect(try parse("").algolia.storeEncryptionKey == nil)
    }

    @Test func anEmptyOrShortStoreEncryptionKeyIsAnErrorNeverNoEncryption() {
        // An unset `${VAR:-}` gives an empty string: that must not quietly store plaintext.
        let found = issues(
            "algolia:\n  storeEncryptionKey: ${UNSET_KEY:-}\nodata:\n  services:\n    s:\n"
                + "      upstream: http://u.example.com/\n      storeEncryptionKey: short\n")
        #expect(
            found.map(\.keyPath) == ["algolia.storeEncryptionKey", "odata.services.s.storeEncryptionKey"])
        #expect(found[0].message.contains("is empty"))
        #expect(found[1].message.contains("at least 8 characters"))
        #expect(!found[1].description.contains("short"))
    }

    @Test func tableCanGateAnyKey() {
        let found = issues(
            "server:\n  cors: {allowOrigins: ['*']}\n",
            unsupported: ["server.cors.allowOrigins": "CORS is off"])
        #expect(
            found.map(\.message) == ["server.cors.allowOrigins: not supported in this version (CORS is off)"])
        #expect(
            (try? parse(
                "server:\n  cors: {allowOrigins: []}\n", unsupported: ["server.cors.allowOrigins": "x"]))
                != nil)
    }
}

@Suite struct PolicyKeyTests {
    @Test func theSeedsExampleIsAPolicy() throws {
        let c = try parse(
            """
            policies:
              wifiOnly:
                activeInterval: 5m
                idleInterval: 24h
                activeWindow: 2m
                onlyWhenReachable: true
                window: ["22:00-06:00", "12:00-13:30"]
                maxRunDuration: 30s
                condition: {command: ["/usr/local/bin/on-unmetered-link", "--quiet"], timeout: 3s}
                jitter: 90s
                retry: {initial: 10s, max: 1h}
            """)
        let p = try #require(c.policies["wifiOnly"])
        #expect(p.activeInterval == .seconds(300))
        #expect(p.idleInterval == .seconds(86400))
        #expect(p.activeWindow == .seconds(120))
        #expect(
            p.windows == [
                TimeWindow(startMinute: 1320, endMinute: 360), TimeWindow(startMinute: 720, endMinute: 810),
            ])
        #expect(p.maxRunDuration == .seconds(30))
        #expect(
            p.condition
                == ConditionConfig(
                    command: ["/usr/local/bin/on-unmetered-link", "--quiet"], timeout: .seconds(3)))
        #expect(p.jitter == .seconds(90))
        #expect(p.retry == RetryConfig(initial: .seconds(10), max: .seconds(3600)))
        #expect(c.policies["default"] == PolicyConfig())
    }

    @Test func oneWindowStringMayHoldSeveral() throws {
        let c = try parse("policies:\n  p:\n    window: \"22:00-06:00, 12:00-13:00\"\n")
        #expect(c.policies["p"]?.windows.map(\.description) == ["22:00-06:00", "12:00-13:00"])
    }

    @Test func badPolicyValuesAreReportedWithTheirLine() {
        let found = issues(
            """
            policies:
              p:
                window: ["22:00-06:00", "25:00-01:00"]
                condition: {timeout: 2s}
              q:
                condition: {command: [], timeout: 0s}
                jitter: soon
            """)
        #expect(
            found.map(\.keyPath) == [
                "policies.p.window", "policies.p.condition.command", "policies.q.condition.command",
                "policies.q.condition.timeout", "policies.q.jitter",
            ])
        #expect(found[0].line == 3)
    }
}

@Suite struct FilesTests {
    @Test func demoYAMLMatchesTheFile() throws {
        let file = try String(
            contentsOf: repoRoot.appendingPathComponent("config/demo.yaml"), encoding: .utf8)
        #expect(file == MirrorgateConfiguration.demoYAML)
    }

    @Test func demoParses() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent(
            "mg-demo-\(UUID().uuidString)")
        try FileManager.default.createDirectory(
            at: dir.appendingPathComponent("config"), withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let c = try MirrorgateConfiguration.demo(currentDirectory: dir.path)
        #expect(c.server.listen == ListenAddress(host: "127.0.0.1", port: 8080))
        #expect(c.dataDir == "./mirrorgate-data")
        #expect(c.algolia.appId == "DEMOAPP")
        #expect(c.algolia.apiKey == "demo-search-key")
        #expect(c.algolia.effectiveHosts == [AlgoliaHost(url: "http://127.0.0.1:9", accept: .readWrite)])
        let idx = try #require(c.algolia.offlineIndices["demo_packages"])
        #expect(
            idx.bootstrap
                == AlgoliaBootstrap(settings: "demo/packages.settings.json", objects: ["demo/packages.json"]))
        #expect(c.baseDirectory == dir.path + "/config")
        #expect(c.resolve(path: "demo/packages.json") == dir.path + "/config/demo/packages.json")
        #expect(c.resolve(path: "/abs/x.json") == "/abs/x.json")
        let s = try #require(c.odata.services["demo"])
        #expect(s.mount == "/odata/demo/")
        #expect(s.upstream == "http://127.0.0.1:9/odata/")
        // without a config/ directory, paths resolve against the current directory
        let bare = try MirrorgateConfiguration.demo(
            currentDirectory: dir.appendingPathComponent("config").path)
        #expect(bare.baseDirectory == dir.path + "/config")
    }

    @Test func demoBootstrapFilesShipInTheRepo() throws {
        let c = try MirrorgateConfiguration.demo(currentDirectory: repoRoot.path)
        let bootstrap = try #require(c.algolia.offlineIndices["demo_packages"]?.bootstrap)
        let settings = try Data(
            contentsOf: URL(fileURLWithPath: c.resolve(path: try #require(bootstrap.settings))))
        #expect(try JSONSerialization.jsonObject(with: settings) is [String: Any])
        for file in bootstrap.objects {
            let objects = try Data(contentsOf: URL(fileURLWithPath: c.resolve(path: file)))
            let records = try #require(try JSONSerialization.jsonObject(with: objects) as? [[String: Any]])
            #expect(records.count > 100)
            #expect(records.allSatisfy { $0["objectID"] is String })
        }
    }

    @Test func exampleParsesWithEveryDefault() throws {
        let path = repoRoot.appendingPathComponent("config/mirrorgate.example.yaml").path
        let c = try MirrorgateConfiguration.load(path: path, environment: [:])
        #expect(c.server == ServerConfig())
        #expect(c.dataDir == MirrorgateConfiguration().dataDir)
        #expect(c.admin == AdminConfig())
        #expect(c.log == LogConfig())
        #expect(c.policies["default"] == PolicyConfig())
        // The seed's example written out as a policy.
        #expect(
            c.policies["wifiOnly"]
                == PolicyConfig(
                    activeInterval: .seconds(300), idleInterval: .seconds(86400), activeWindow: .seconds(300),
                    maxRunDuration: .seconds(30),
                    condition: ConditionConfig(
                        command: ["/usr/local/bin/on-unmetered-link"], timeout: .seconds(5)),
                    jitter: .seconds(30)))
        #expect(c.algolia.appId == "YourApplicationID")
        #expect(c.algolia.hosts == nil)
        #expect(c.algolia.timeout == AlgoliaConfig().timeout)
        let p = try #require(c.algolia.indices["products"])
        #expect(
            p
                == AlgoliaIndexConfig(
                    name: "products", dataSelectionQueries: p.dataSelectionQueries))
        #expect(p.dataSelectionQueries.count == 2)
        #expect(c.algolia.offlineIndices["local_notes"] == OfflineIndexConfig(name: "local_notes"))
        let s = try #require(c.odata.services["sales"])
        #expect(
            s
                == ODataServiceConfig(
                    name: "sales", upstream: "https://odata.example.com/sales/",
                    definingRequests: [DefiningRequest(name: "customers", query: "Customers")]))
        let env = try MirrorgateConfiguration.load(
            path: path,
            environment: ["SALES_ODATA_URL": "http://127.0.0.1:1/s/", "MIRRORGATE_ADMIN_TOKEN": "tok"])
        #expect(env.odata.services["sales"]?.upstream == "http://127.0.0.1:1/s/")
        #expect(env.admin.token == "tok")
        #expect(env.baseDirectory == repoRoot.appendingPathComponent("config").standardizedFileURL.path)
    }

    @Test func loadErrorsNameTheFile() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("mg-cfg-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("x.yaml").path
        try "server:\n  listen: 127.0.0.1:8080\n\n\n\n\n\n\n\n\n\n  listn: 1\n".write(
            toFile: file, atomically: true, encoding: .utf8)
        let error = try #require(throws: ConfigError.self) {
            try MirrorgateConfiguration.load(path: file, environment: [:])
        }
        #expect(error.description == "\(file):12: unknown key 'server.listn'")
        let missing = try #require(throws: ConfigError.self) {
            try MirrorgateConfiguration.load(
                path: dir.appendingPathComponent("nope.yaml").path, environment: [:])
        }
        #expect(missing.issues.first?.message.contains("cannot read configuration") == true)
    }
}
