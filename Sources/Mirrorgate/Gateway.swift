import AlgoliaGateway
import Foundation
import GatewayConfig
import GatewaySupport
import HTTPCore
import HTTPServer
import JSONCore
import Logging
import ODataGateway
import SearchEngine
import Storage
import Upstream

/// The version string reported by `/_mirrorgate/health`, `status` and `--version`.
public let mirrorgateVersion = "0.1.0"

/// An error starting the gateway (exit code 1).
public struct GatewayStartError: Error, CustomStringConvertible {
    /// What went wrong.
    public let description: String
}

/// The running gateway: the HTTP server, the upstream forwarders with their reachability trackers,
/// metrics and the admin API, wired from one configuration. Stop it with `shutdown()`.
public final class Gateway: Sendable {
    /// The configuration in force (after command-line overrides).
    public let configuration: MirrorgateConfiguration
    let server: Server
    let router: Router
    let loop: CurlLoop
    let store: IndexStore?
    let state: DatabasePool
    let logger: Logger
    /// Held while the gateway runs: `mirrorgate rekey` does not rewrite stores under it.
    let dataDirLock: DataDirectoryLock

    /// Starts serving. Creates `dataDir` (mode 0700) if needed; opens the stores with their configured
    /// encryption (a wrong key, or a store encrypted or not against the configuration, stops the start).
    public init(configuration: MirrorgateConfiguration, logger: Logger = Logger(label: "mirrorgate")) throws {
        self.configuration = configuration
        self.logger = logger
        try Self.prepareDataDir(configuration.dataDir)
        do {
            dataDirLock = try DataDirectoryLock(directory: configuration.dataDir, exclusive: false)
        } catch {
            throw GatewayStartError(description: "\(error)")
        }
        let layout: StoreLayout
        do {
            layout = try StoreLayout(configuration: configuration)
            try layout.verifyKeys()
        } catch {
            throw GatewayStartError(
                description: "cannot open the stores in \(configuration.dataDir):\n\(error)")
        }
        UpstreamClient.globalInit()
        let metrics = GatewayMetrics.bootstrap()
        let client = UpstreamClient()
        let loop: CurlLoop
        do {
            loop = try CurlLoop(threads: 2)
        } catch {
            throw GatewayStartError(description: "cannot start the upstream event loop: \(error)")
        }
        var services: [ODataService] = []
        let events = EventBus()
        let odataPool = WorkerPool(threads: 2, name: "mg-odata")
        for name in configuration.odata.services.keys.sorted() {
            services.append(
                try ODataAssembly.make(
                    name: name, configuration: configuration, store: layout.odata[name]!, loop: loop,
                    client: client, pool: odataPool,
                    events: { events.publish($0, $1) }))
        }
        services.sort { $0.settings.mount.count > $1.settings.mount.count }
        let store: IndexStore?
        let state: DatabasePool
        do {
            let needsStore =
                !configuration.algolia.offlineIndices.isEmpty
                || configuration.algolia.indices.values.contains { $0.mirrored }
            store =
                needsStore
                ? try IndexStore(directory: configuration.dataDir, encryption: layout.search.encryption) : nil
            state = try DatabasePool(
                path: layout.state.path, options: DatabaseOptions(encryption: layout.state.encryption),
                readers: 1)
        } catch {
            throw GatewayStartError(
                description: "cannot open the stores in \(configuration.dataDir): \(error)")
        }
        self.store = store
        self.state = state
        for s in services {
            s.reachability.onChange { up in
                events.publish(
                    "reachabilityChanged",
                    ["upstream": .string("odata:\(s.settings.name)"), "reachable": .bool(up)])
            }
        }
        let algolia: AlgoliaService
        do {
            algolia = try AlgoliaService(
                configuration: configuration, loop: loop, client: client, store: store, state: state,
                events: { events.publish($0, $1) })
        } catch {
            throw GatewayStartError(description: error.description)
        }
        let router = Router(
            configuration: configuration, algolia: algolia, odata: services, events: events,
            metrics: metrics, logger: logger)
        self.router = router
        self.loop = loop
        let serverConfig = ServerConfiguration(
            host: configuration.server.listen.host, port: configuration.server.listen.port,
            maxBodySize: configuration.server.maxBodySize,
            maxConnections: configuration.server.maxConnections,
            requestTimeout: configuration.server.requestTimeout, pollingThreads: 2)
        let accessLogger = Logger(label: "mirrorgate.access")
        server = try Server(
            configuration: serverConfig, handler: router,
            errors: { status, message, target in router.errorResponse(status, message, target: target) },
            observer: { method, target, status, headers, nanos in
                let route = router.routeName(target)
                let origin = headers[MirrorgateHeader.origin] ?? "none"
                metrics.record(route: route, origin: origin, status: status, durationNanos: nanos)
                if accessLogger.logLevel <= .info {
                    var path = Substring(target)
                    if let q = path.firstIndex(of: "?") { path = path[..<q] }
                    accessLogger.info(
                        "\(method) \(path) \(status)",
                        metadata: [
                            "origin": "\(origin)", "ms": "\(String(format: "%.2f", Double(nanos) / 1e6))",
                        ])
                }
            }, logger: Logger(label: "mirrorgate.http"))
    }

    /// Starts background work (the sync scheduler) once the server listens.
    public func startBackground() { router.algolia.start() }

    /// The port actually bound.
    public var port: UInt16 { server.port }

    /// Stops accepting, lets in-flight requests finish within `server.shutdownGrace`, then closes the rest.
    public func shutdown() {
        server.shutdown(grace: configuration.server.shutdownGrace)
        router.stop()
        loop.stop()
        if let store { try? store.pool.checkpoint() }
        try? state.checkpoint()
    }

    static func prepareDataDir(_ path: String) throws {
        var isDir: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDir) {
            guard isDir.boolValue else {
                throw GatewayStartError(description: "dataDir \(path) is not a directory")
            }
            return
        }
        do {
            try FileManager.default.createDirectory(
                atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw GatewayStartError(description: "cannot create dataDir \(path): \(error)")
        }
    }
}
