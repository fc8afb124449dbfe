import AlgoliaGateway
import Foundation
import GatewayAdmin
import GatewayConfig
import GatewaySupport
import HTTPCore
import HTTPServer
import JSONCore
import Logging
import ODataGateway
import Observability
import Replication
import SearchEngine
import Storage
import Synchronization
import Upstream

/// The version string reported by `/_mirrorgate/health`, `status` and `--version`.
public let mirrorgateVersion = "0.1.0"

/// An error starting the gateway (exit code 1).
public struct GatewayStartError: Error, CustomStringConvertible {
    /// What went wrong.
    public let description: String
}

/// The running gateway: the HTTP server, the upstream forwarders with their reachability trackers,
/// metrics and the admin API, wired from one configuration. ``reload()`` re-reads the configuration;
/// stop it with `shutdown()`.
public final class Gateway: Sendable {
    /// The configuration in force (after command-line overrides and reloads).
    public var configuration: MirrorgateConfiguration { router.configuration }
    let server: Server
    let router: Router
    let loop: CurlLoop
    let client: UpstreamClient
    /// The index store (opened when an index first needs it, at start or on a reload).
    let store: StoreBox
    let state: DatabasePool
    let replication: ReplicationScheduler
    let logger: Logger
    let odataPool: WorkerPool
    let publish: @Sendable (String, JSON) -> Void
    /// Held while the gateway runs: `mirrorgate rekey` does not rewrite stores under it.
    let dataDirLock: DataDirectoryLock
    /// The stores' paths and encryption (the Algolia stores' key is fixed at start).
    let layout: StoreLayout
    /// Re-reads the configuration for a reload (the file, with the command line's overrides).
    let source: (@Sendable () throws(ConfigError) -> MirrorgateConfiguration)?
    /// Held while a reload runs (a second one gets 409).
    let reloading = Mutex<Bool>(false)

    /// Starts serving. Creates `dataDir` (mode 0700) if needed; opens the stores with their configured
    /// encryption (a wrong key, or a store encrypted or not against the configuration, stops the start).
    /// `source` re-reads the configuration on ``reload()`` (nil: reloads are refused).
    public init(
        configuration: MirrorgateConfiguration, logger: Logger = Logger(label: "mirrorgate"),
        source: (@Sendable () throws(ConfigError) -> MirrorgateConfiguration)? = nil
    ) throws {
        self.logger = logger
        self.source = source
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
        self.layout = layout
        UpstreamClient.globalInit()
        let metrics = GatewayMetrics.bootstrap()
        let client = UpstreamClient()
        self.client = client
        let loop: CurlLoop
        do {
            loop = try CurlLoop(threads: 2)
        } catch {
            throw GatewayStartError(description: "cannot start the upstream event loop: \(error)")
        }
        self.loop = loop
        let events = EventBus()
        let publish = Router.publisher(events, metrics)
        self.publish = publish
        let odataPool = WorkerPool(threads: 2, name: "mg-odata")
        self.odataPool = odataPool
        let store: IndexStore?
        let state: DatabasePool
        let schedules: ReplicationStore
        do {
            store =
                Self.needsStore(configuration)
                ? try IndexStore(directory: configuration.dataDir, encryption: layout.search.encryption) : nil
            state = try DatabasePool(
                path: layout.state.path, options: DatabaseOptions(encryption: layout.state.encryption),
                readers: 1)
            schedules = try ReplicationStore(pool: state)
        } catch {
            throw GatewayStartError(
                description: "cannot open the stores in \(configuration.dataDir): \(error)")
        }
        let storeBox = StoreBox(store)
        self.store = storeBox
        self.state = state
        let replicationMetrics = ReplicationMetrics()
        let replication = ReplicationScheduler(
            policies: configuration.policies, store: schedules, conditions: CommandCondition(),
            events: { name, data in
                replicationMetrics.observe(name, data)
                publish(name, data)
            })
        self.replication = replication
        var services: [ODataService] = []
        for name in configuration.odata.services.keys.sorted() {
            services.append(
                try ODataAssembly.make(
                    name: name, configuration: configuration, store: layout.odata[name]!, loop: loop,
                    client: client, pool: odataPool, replication: replication, events: publish))
        }
        for s in services { Self.announce(s, publish) }
        let algolia: AlgoliaService
        do {
            algolia = try AlgoliaService(
                configuration: configuration, loop: loop, client: client, store: store, state: state,
                replication: replication, events: publish)
        } catch {
            throw GatewayStartError(description: error.description)
        }
        let router = Router(
            services: ServiceSet(configuration: configuration, algolia: algolia, odata: services),
            replication: replication, replicationMetrics: replicationMetrics,
            events: events, metrics: metrics, logger: logger,
            storageCheck: {
                let indexStore = storeBox.withLock { $0 }
                return Self.answers(state) && (indexStore.map { Self.answers($0.pool) } ?? true)
            })
        self.router = router
        var serverConfig = ServerConfiguration(
            host: configuration.server.listen.host, port: configuration.server.listen.port,
            maxBodySize: configuration.server.maxBodySize,
            maxConnections: configuration.server.maxConnections,
            requestTimeout: configuration.server.requestTimeout, pollingThreads: 2)
        serverConfig.requestIDHeader = MirrorgateHeader.requestID
        server = try Server(
            configuration: serverConfig, handler: router,
            errors: { status, message, target in router.errorResponse(status, message, target: target) },
            observer: AccessLog.observer(router: router, metrics: metrics),
            logger: Logger(label: "mirrorgate.http"))
        router.admin.serving.store(true, ordering: .releasing)
        Self.installReloader(self)
    }

    /// Lets `POST /_mirrorgate/reload` reach `gateway` (without keeping it alive).
    private static func installReloader(_ gateway: Gateway) {
        gateway.router.admin.reloader.withLock { r in
            r = { [weak gateway] in gateway?.reload() ?? .failed("the gateway is stopping") }
        }
    }

    /// Starts background work once the server listens: the replication scheduler, the replay of queued
    /// writes, and a first probe of every upstream (so that status and metrics tell the truth about one
    /// that nothing else calls).
    public func startBackground() {
        let services = router.services
        replication.start()
        services.algolia.start()
        services.algolia.upstream?.reachability.probeNow()
        for s in services.odata { s.reachability.probeNow() }
    }

    /// The port actually bound.
    public var port: UInt16 { server.port }

    /// Stops accepting, lets in-flight requests finish within `server.shutdownGrace`, then closes the rest.
    public func shutdown() {
        router.admin.serving.store(false, ordering: .releasing)
        router.admin.reloader.withLock { $0 = nil }
        server.shutdown(grace: configuration.server.shutdownGrace)
        replication.stop()
        router.stop()
        loop.stop()
        if let store = store.withLock({ $0 }) { try? store.pool.checkpoint() }
        try? state.checkpoint()
    }

    static func needsStore(_ configuration: MirrorgateConfiguration) -> Bool {
        !configuration.algolia.offlineIndices.isEmpty
            || configuration.algolia.indices.values.contains { $0.mirrored }
    }

    /// Whether a store answers a trivial query (readiness).
    static func answers(_ pool: DatabasePool) -> Bool {
        (try? pool.read { db in try db.scalar("SELECT 1") }) != nil
    }

    /// Publishes the reachability changes of an OData upstream as admin events.
    static func announce(_ s: ODataService, _ publish: @escaping @Sendable (String, JSON) -> Void) {
        s.reachability.onChange { up in
            publish(
                "reachabilityChanged",
                ["upstream": .string("odata:\(s.settings.name)"), "reachable": .bool(up)])
        }
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

/// The index store, opened at start or by the first reload that needs it.
final class StoreBox: Sendable {
    private let value: Mutex<IndexStore?>
    init(_ store: IndexStore?) { value = Mutex(store) }
    func withLock<T>(_ body: (inout IndexStore?) throws -> T) rethrows -> T {
        try value.withLock { try body(&$0) }
    }
}

/// The access log line and the request metrics of each answered request.
enum AccessLog {
    static func observer(router: Router, metrics: GatewayMetrics) -> ResponseObserver {
        let accessLogger = Logger(label: "mirrorgate.access")
        return { method, target, status, headers, nanos in
            let route = router.routeName(target)
            let origin = headers[MirrorgateHeader.origin] ?? "none"
            metrics.record(route: route, origin: origin, status: status, durationNanos: nanos)
            guard accessLogger.logLevel <= .info else { return }
            var path = Substring(target)
            if let q = path.firstIndex(of: "?") { path = path[..<q] }
            accessLogger.info(
                "\(method) \(path) \(status)",
                metadata: AccessLine.fields(
                    method: method, path: String(path), status: status, nanos: nanos, route: route,
                    origin: origin,
                    headers: headers))
        }
    }

}

extension StoreLayout {
    /// The layout of `configuration`'s data directory, with the secrets it configures.
    public init(configuration: MirrorgateConfiguration, cost: KeyDerivationCost = .standard) throws {
        try self.init(
            dataDir: configuration.dataDir, algoliaSecret: configuration.algolia.storeEncryptionKey,
            odataSecrets: configuration.odata.services.mapValues(\.storeEncryptionKey), cost: cost)
    }
}
