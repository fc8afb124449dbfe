// swift-tools-version:6.1
// Benchmark of incremental writes (issue 14). The root package exports no library products, so this
// package compiles the same sources through symlinks (Sources/JSONCore, HTTPCore, GatewaySupport,
// SearchEngine, Storage, CSQLite); Storage needs swift-crypto (encryption at rest).
import PackageDescription

let package = Package(
    name: "write-bench",
    platforms: [.macOS(.v15)],
    dependencies: [.package(url: "https://github.com/apple/swift-crypto", exact: "3.12.3")],
    targets: [
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3"),
        .target(
            name: "Storage",
            dependencies: [
                "CSQLite", .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ]),
        .target(name: "GatewaySupport"),
        .target(name: "HTTPCore", dependencies: ["GatewaySupport"]),
        .target(name: "JSONCore", dependencies: ["HTTPCore"]),
        .target(name: "SearchEngine", dependencies: ["Storage", "JSONCore"]),
        .executableTarget(name: "WriteBench", dependencies: ["SearchEngine", "JSONCore", "Storage"]),
    ],
    swiftLanguageModes: [.v6]
)
