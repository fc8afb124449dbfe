// swift-tools-version:6.1
// Benchmark package for the durable request-queue append. The root package exports no library products,
// so this package compiles the same Storage sources through symlinks (Sources/Storage, CSQLite), as
// bench/search does.
import PackageDescription

let package = Package(
    name: "queue-bench",
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
        .executableTarget(name: "QueueBench", dependencies: ["Storage", "CSQLite"]),
    ],
    swiftLanguageModes: [.v6]
)
