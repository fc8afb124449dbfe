// swift-tools-version:6.1
import PackageDescription

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny")
]

let package = Package(
    name: "mirrorgate",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "mirrorgate", targets: ["mirrorgate"])
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", exact: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", exact: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics", exact: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", exact: "2.4.1"),
        .package(url: "https://github.com/jpsim/Yams", exact: "6.2.2"),
        .package(url: "https://github.com/apple/swift-crypto", exact: "3.12.3"),
    ],
    targets: [
        // C libraries fixed by the design card, each behind a small shim of mg_-prefixed wrappers.
        .systemLibrary(
            name: "CMicroHTTPD", pkgConfig: "libmicrohttpd", providers: [.apt(["libmicrohttpd-dev"])]),
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        // libxml2's reader: the one parser of XML input (Atom bodies, $metadata), behind ODataCore's SafeXML.
        .systemLibrary(
            name: "CLibXML2", pkgConfig: "libxml-2.0", providers: [.apt(["libxml2-dev"])]),
        // Linux calls whose C types Swift cannot use (epoll_event), wrapped without error handling.
        .systemLibrary(name: "CLinux"),
        // Sees libmicrohttpd's own error answers (its HTML pages), so that the server answers in the
        // API's format instead (issue 23).
        .target(name: "CMHDOwnErrors", dependencies: ["CMicroHTTPD"]),

        // Support: pure Swift, known to every module above it.
        // Locks, the worker pool, the timer facility, the monotonic clock, Duration helpers.
        .target(name: "GatewaySupport", swiftSettings: strict),
        // HTTP values and decorators without I/O: request, response, headers, streams, responders, the
        // form codec, the reason-phrase table, the gateway's header names, the error protocol.
        .target(name: "HTTPCore", dependencies: ["GatewaySupport"], swiftSettings: strict),
        // The one choke point for system calls (errno to a typed error naming the call), epoll, eventfd,
        // numeric socket addresses. Only adapters import it.
        .target(name: "SystemCalls", dependencies: ["CLinux"], swiftSettings: strict),

        // Adapters: each knows one C library and nothing about Algolia or OData.
        .target(
            name: "HTTPServer",
            dependencies: [
                "CMicroHTTPD", "CMHDOwnErrors", "HTTPCore", "GatewaySupport", "SystemCalls",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict),
        .target(
            name: "Upstream",
            dependencies: [
                "CCurl", "GatewaySupport", "SystemCalls", .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
            ],
            swiftSettings: strict),
        .target(
            name: "Storage",
            dependencies: [
                "CSQLite", .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: strict),
        // Relaying upstream responses to server responses (shared by both APIs).
        .target(
            name: "Proxying",
            dependencies: [
                "HTTPCore", "GatewaySupport", "Upstream", .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict),

        // Domain modules: pure Swift.
        .target(name: "JSONCore", dependencies: ["HTTPCore"], swiftSettings: strict),
        .target(name: "SearchEngine", dependencies: ["Storage", "JSONCore"], swiftSettings: strict),
        // OData protocol pieces without I/O: CSDL model, resource paths, $filter, literals, serializers.
        .target(name: "ODataCore", dependencies: ["JSONCore", "CLibXML2"], swiftSettings: strict),
        .target(
            name: "GatewayConfig", dependencies: [.product(name: "Yams", package: "Yams")],
            swiftSettings: strict),
        // Replication policies: the one scheduler of every sync, upload and download (below both APIs).
        .target(
            name: "Replication",
            dependencies: [
                "GatewaySupport", "GatewayConfig", "Storage", "JSONCore",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict),
        .target(
            name: "AlgoliaGateway",
            dependencies: [
                "HTTPCore", "GatewaySupport", "Upstream", "Proxying", "Storage", "SearchEngine",
                "GatewayConfig", "Replication",
                "JSONCore",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
            ],
            swiftSettings: strict),
        .target(
            name: "ODataGateway",
            dependencies: [
                "HTTPCore", "GatewaySupport", "Upstream", "Proxying", "Storage", "GatewayConfig", "JSONCore",
                "ODataCore", "Replication",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
            ],
            swiftSettings: strict),

        // The admin API (SPEC §5) over the services in force: probes, status, runs, policies, archives.
        .target(
            name: "GatewayAdmin",
            dependencies: [
                "HTTPCore", "JSONCore", "GatewayConfig", "Upstream", "Replication", "AlgoliaGateway",
                "ODataGateway", "Observability",
            ],
            swiftSettings: strict),

        // Log lines (JSON, logfmt) and Prometheus metrics with help, process and scrape-time families.
        .target(
            name: "Observability",
            dependencies: [
                "GatewayConfig", "JSONCore", "HTTPCore", .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            swiftSettings: strict),

        // Assembly and the executable.
        .target(
            name: "Mirrorgate",
            dependencies: [
                "HTTPServer", "HTTPCore", "GatewaySupport", "Upstream", "Storage", "GatewayConfig",
                "AlgoliaGateway", "ODataGateway", "ODataCore", "JSONCore", "SearchEngine", "Observability",
                "Replication", "SystemCalls", "GatewayAdmin",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            swiftSettings: strict),
        // Test support: fixtures, fakes and the gateway in-process for the unit tests; only test targets
        // import it.
        .target(
            name: "MirrorgateTesting",
            dependencies: [
                "Mirrorgate", "Observability", "AlgoliaGateway", "HTTPServer", "HTTPCore", "GatewaySupport",
                "Upstream",
                "GatewayConfig", "JSONCore", "SearchEngine", .product(name: "Logging", package: "swift-log"),
            ],
            resources: [.copy("Resources/OData")],
            swiftSettings: strict),
        .executableTarget(
            name: "mirrorgate",
            dependencies: [
                "Mirrorgate", "Observability", "GatewayConfig", "Upstream", "JSONCore", "HTTPCore",
                "GatewaySupport", "Storage",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict),

        .testTarget(name: "GatewaySupportTests", dependencies: ["GatewaySupport"], swiftSettings: strict),
        .testTarget(
            name: "HTTPCoreTests", dependencies: ["HTTPCore", "GatewaySupport"], swiftSettings: strict),
        .testTarget(name: "SystemCallsTests", dependencies: ["SystemCalls"], swiftSettings: strict),
        .testTarget(
            name: "HTTPServerTests", dependencies: ["HTTPServer", "HTTPCore", "GatewaySupport", "Upstream"],
            swiftSettings: strict),
        .testTarget(name: "UpstreamTests", dependencies: ["Upstream"], swiftSettings: strict),
        .testTarget(name: "ProxyingTests", dependencies: ["Proxying", "HTTPCore"], swiftSettings: strict),
        .testTarget(
            name: "AlgoliaGatewayTests",
            dependencies: [
                "AlgoliaGateway", "MirrorgateTesting", "JSONCore", "SearchEngine", "HTTPCore",
                "GatewaySupport",
                "GatewayConfig",
            ],
            swiftSettings: strict),
        .testTarget(
            name: "StorageTests",
            dependencies: [
                "Storage", .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: strict),
        .testTarget(name: "JSONCoreTests", dependencies: ["JSONCore", "HTTPCore"], swiftSettings: strict),
        .testTarget(
            name: "ODataCoreTests", dependencies: ["ODataCore", "JSONCore", "Storage"], swiftSettings: strict),
        .testTarget(
            name: "ODataGatewayTests",
            dependencies: [
                "ODataGateway", "MirrorgateTesting", "ODataCore", "JSONCore", "Storage", "HTTPCore",
                "GatewaySupport",
                "Upstream",
            ],
            swiftSettings: strict),
        .testTarget(
            name: "SearchEngineTests", dependencies: ["SearchEngine", "JSONCore", "MirrorgateTesting"],
            swiftSettings: strict),
        .testTarget(name: "GatewayConfigTests", dependencies: ["GatewayConfig"], swiftSettings: strict),
        .testTarget(
            name: "ReplicationTests",
            dependencies: ["Replication", "GatewayConfig", "GatewaySupport", "JSONCore", "Storage"],
            swiftSettings: strict),
        .testTarget(
            name: "ObservabilityTests", dependencies: ["Observability", "HTTPCore", "JSONCore"],
            swiftSettings: strict),
        .testTarget(
            name: "MirrorgateTests",
            dependencies: ["Mirrorgate", "MirrorgateTesting", "AlgoliaGateway", "GatewayConfig", "JSONCore"],
            swiftSettings: strict),
    ],
    swiftLanguageModes: [.v6]
)

// Fuzzing (issue 23): libFuzzer executables, declared only when MIRRORGATE_FUZZ=1 so that the normal build and
// tests never see them. Built by scripts/fuzz.sh with its own scratch path (.build-fuzz) and
// `-sanitize=fuzzer,address`; each target exports LLVMFuzzerTestOneInput and drives one parser surface.
// See Tests/Fuzz/README.md.
if Context.environment["MIRRORGATE_FUZZ"] == "1" {
    let fuzzTargets: [(name: String, dependencies: [Target.Dependency])] = [
        ("FuzzHTTP", ["HTTPCore", "HTTPServer"]),
        ("FuzzJSON", ["JSONCore"]),
        ("FuzzAlgolia", ["AlgoliaGateway", "SearchEngine", "JSONCore", "Storage", "HTTPCore"]),
        ("FuzzODataQuery", ["ODataCore", "JSONCore"]),
        ("FuzzODataBatch", ["ODataGateway", "ODataCore", "JSONCore", "HTTPCore"]),
        ("FuzzODataXML", ["ODataGateway", "ODataCore", "JSONCore"]),
        ("FuzzODataPayload", ["ODataCore", "JSONCore"]),
        ("FuzzConfig", ["GatewayConfig"]),
    ]
    package.targets.append(.target(name: "CFuzzDriver", path: "Tests/Fuzz/Targets/CFuzzDriver"))
    package.targets.append(
        .target(name: "FuzzSupport", path: "Tests/Fuzz/Targets/FuzzSupport", swiftSettings: strict))
    for fuzz in fuzzTargets {
        package.targets.append(
            .executableTarget(
                name: fuzz.name, dependencies: ["CFuzzDriver", "FuzzSupport"] + fuzz.dependencies,
                path: "Tests/Fuzz/Targets/\(fuzz.name)",
                swiftSettings: strict))
    }
}
