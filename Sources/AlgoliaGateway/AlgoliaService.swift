import GatewayConfig
import GatewaySupport
import HTTPCore
import JSONCore
import Logging
import Replication
import SearchEngine
import Storage
import Upstream

/// Everything under `/1/` and the Algolia side of the admin API: offline indices answered locally;
/// mirrored indices by their request strategy (forward, fall back to the local mirror on failure or
/// timeout, preventive NDJSON streams), kept in sync by the mirror coordinator and rebuilt by manual
/// builds; anything else forwarded unchanged.
///
/// Promises: never answers a 5xx under `/1/` (the upstream's unavailability is `unavailableStatus`);
/// `handle` never blocks (local work goes to the worker pool, upstream work to the upstream's own
/// threads); local answers go only to callers ``ReadAccess`` admits; the upstream never holds a reference
/// back to the service.
public final class AlgoliaService: Sendable {
    /// The configuration in force.
    public let configuration: MirrorgateConfiguration
    /// The upstream, nil when no Algolia host is configured.
    public let upstream: (any AlgoliaUpstream)?
    /// The indices answered locally (offline and mirrored).
    public let catalog: LocalCatalog
    /// Syncs of the mirrored indices.
    public let coordinator: MirrorCoordinator
    /// The keys the upstream accepted.
    public let keys: KeyMemory
    /// The scheduler of the mirrors' syncs (shared with the OData services).
    public let replication: ReplicationScheduler
    /// One replication per mirrored index (none when the gateway cannot sync).
    public let replicationJobs: [ReplicationJob]
    private let strategies: RequestStrategies
    private let builds: ManualBuilds
    private let pool: WorkerPool
    /// Writes to local indices (nil without an index store).
    private let writes: LocalWrites?

    /// The service over Algolia's real hosts: forwarding on `loop`, syncs and probes with `client`.
    /// `store` holds the indices (nil when no index is offline or mirrored), `state` the remembered keys
    /// and the sync state; `events` receives the admin API's events; `replication` schedules the syncs.
    /// With `previous` (a configuration reload) its upstream (when the forwarding settings are the same),
    /// worker pool, remembered keys, mirrors and offline indices are kept, and the mirrors' jobs are not
    /// registered (the reload passes ``replicationJobs`` to the scheduler once every service is built);
    /// stop `previous` once this one is in place.
    public convenience init(
        configuration: MirrorgateConfiguration, loop: CurlLoop, client: UpstreamClient, store: IndexStore?,
        state: DatabasePool?, replication: ReplicationScheduler,
        events: @escaping @Sendable (String, JSON) -> Void, previous: AlgoliaService? = nil
    ) throws(AlgoliaSetupError) {
        let a = configuration.algolia
        var forwarder: (any AlgoliaUpstream)?
        if !a.effectiveHosts.isEmpty {
            let settings = AlgoliaForwardingSettings(
                hosts: a.effectiveHosts, connectTimeout: a.connectTimeout, readTimeout: a.timeout,
                writeTimeout: a.writeTimeout, unavailableStatus: a.unavailableStatus)
            if let old = previous?.upstream as? AlgoliaForwarder, old.settings == settings {
                forwarder = old
            } else {
                forwarder = AlgoliaForwarder(
                    settings: settings, loop: loop, client: client,
                    logger: Logger(label: "mirrorgate.algolia"))
            }
        }
        try self.init(
            configuration: configuration, upstream: forwarder,
            fetcher: MirrorFetcher.configured(configuration, client: client), store: store, state: state,
            pool: previous?.pool ?? WorkerPool(threads: 4, name: "mg-local"), replication: replication,
            events: events,
            replay: HostsReplayTransport(
                hosts: a.effectiveHosts, client: client, connectTimeout: a.connectTimeout,
                timeout: a.writeTimeout),
            previous: previous)
    }

    /// The service over any upstream (tests script one); `fetcher` nil disables syncs, `replay` nil the
    /// replay of queued mirrored-index writes. Each mirrored index is registered with `replication` (a
    /// scheduler of its own, not started, when nil: syncs then run only when asked). `logger` gets the
    /// index and build events, `syncLogger` the syncs'.
    public init(
        configuration: MirrorgateConfiguration, upstream: (any AlgoliaUpstream)?, fetcher: MirrorFetcher?,
        store: IndexStore?, state: DatabasePool?, pool: WorkerPool, replication: ReplicationScheduler? = nil,
        events: @escaping @Sendable (String, JSON) -> Void,
        logger: Logger = Logger(label: "mirrorgate.algolia"),
        syncLogger: Logger = Logger(label: "mirrorgate.sync"),
        replay: (any WriteReplayTransport)? = nil, previous: AlgoliaService? = nil
    ) throws(AlgoliaSetupError) {
        self.configuration = configuration
        self.upstream = upstream
        self.pool = pool
        let offline = try OfflineIndexRegistry.load(
            configuration, store: store, logger: logger, previous: previous?.catalog.offline)
        if let upstream, upstream.reachability !== previous?.upstream?.reachability {
            upstream.reachability.onChange { up in
                events("reachabilityChanged", ["upstream": "algolia", "reachable": .bool(up)])
            }
        }
        do {
            keys = try previous?.keys ?? KeyMemory(pool: state)
            coordinator = try MirrorCoordinator(
                configuration: configuration, store: store, state: state, fetcher: fetcher,
                reachability: upstream?.reachability, events: events,
                logger: Logger(label: "mirrorgate.sync"),
                previous: previous?.coordinator.mirrors ?? [:]
            )
        } catch let error as AlgoliaSetupError {
            throw error
        } catch {
            throw AlgoliaSetupError(description: "cannot prepare the mirrored indices: \(error)")
        }
        let replication =
            replication ?? ReplicationScheduler(policies: configuration.policies, store: nil, events: events)
        self.replication = replication
        replicationJobs = coordinator.replicationJobs(configuration: configuration)
        if previous == nil {
            for job in replicationJobs { replication.register(job) }
        }
        if let upstream, upstream.reachability !== previous?.upstream?.reachability {
            // The mirrors registered when it changes (a reload may add or drop some).
            upstream.reachability.onChange { up in
                for id in replication.jobIDs where id.hasPrefix("algolia:") {
                    replication.reachabilityChanged(id, reachable: up)
                }
            }
        }
        catalog = LocalCatalog(offline: offline, mirrors: coordinator.mirrors)
        let local = LocalAlgolia(
            catalog: catalog,
            access: ReadAccess(
                appId: configuration.algolia.appId, syncKey: configuration.algolia.apiKey, keys: keys))
        let paths = AnswerPaths(
            upstream: upstream, local: local, pool: pool, keys: keys, appId: configuration.algolia.appId,
            unavailableStatus: configuration.algolia.unavailableStatus)
        strategies = RequestStrategies(
            paths: paths, catalog: catalog, readTimeout: configuration.algolia.timeout)
        builds = ManualBuilds(
            coordinator: coordinator, offline: offline, configuration: configuration, events: events,
            logger: logger)
        if let store {
            do {
                let writer = try IndexWriter(store: store, registry: offline, mirrors: coordinator.mirrors)
                let queued = configuration.algolia.indices.values.contains {
                    $0.mirrored && $0.offlineWrites == .queue
                }
                var queue: WriteQueue?
                if queued {
                    let coordinator = self.coordinator
                    queue = try WriteQueue(
                        pool: store.pool, tasks: writer.tasks, transport: replay,
                        reachability: upstream?.reachability,
                        logger: logger,
                        onQueued: { coordinator.mirrors[$0]?.holdSyncs(true) },
                        onDrained: { name in
                            guard let mirror = coordinator.mirrors[name] else { return }
                            mirror.holdSyncs(false)
                            replication.requestRun("algolia:\(name)")
                        })
                }
                writes = LocalWrites(
                    writer: writer, queue: queue, configuration: configuration, upstream: upstream,
                    keys: keys, logger: logger, paths: paths)
            } catch {
                throw AlgoliaSetupError(description: "cannot prepare the local write tables: \(error)")
            }
        } else {
            writes = nil
        }
    }

    /// Starts background work (the replay of queued writes; syncs are the replication scheduler's); call
    /// once the server listens.
    public func start() {
        coordinator.applyAdoptedSettings()
        writes?.queue?.start()
    }

    /// Stops the replay, the writer (after the writes it has) and the upstream's probe (at shutdown; the
    /// replication scheduler is stopped by its owner).
    public func stop() {
        retire()
        upstream?.reachability.stop()
    }

    /// Stops what this service runs in the background when a configuration reload replaces it: the replay
    /// of queued writes and the writer (after the writes it has). Its mirrors' syncs are the replication
    /// scheduler's (the reload gives it the new service's jobs). The upstream's probe is left running
    /// (the service that replaces it may share it).
    public func retire() {
        writes?.queue?.stop()
        writes?.writer.stop()
    }

    /// Answers a request under `/1/` (CORS and the path check are the caller's).
    public func handle(_ request: HTTPRequest, _ out: any Responder) {
        if let writes, writes.handle(request, out) { return }
        let route = AlgoliaRoute.parse(method: request.method, path: request.path)
        let parts = route.parts(body: request.body)
        if let refusal = AlgoliaLimits.refusal(route, parts: parts) {
            out.respond(refusal)
            return
        }
        if route == .listIndices {
            IndexListing(paths: strategies.paths, catalog: catalog, store: coordinator.store).start(
                request, out)
            return
        }
        let names = route.index.map { [$0] } ?? (parts ?? []).compactMap { $0["indexName"]?.stringValue }
        if !names.isEmpty && names.allSatisfy({ catalog.offline.isOffline($0) }) {
            strategies.paths.answerLocally(request, route, out)
            return
        }
        let mirrored = names.filter { catalog.mirror(for: $0) != nil }
        for name in mirrored { catalog.mirror(for: name)?.touch() }
        let allLocal = names.allSatisfy { catalog.contains($0) }
        let isSplittable = route == .multiQuery || route == .getObjects
        if isSplittable && names.contains(where: { catalog.offline.lookup($0) != nil }) {
            // Offline parts are never forwarded (the upstream does not know them): answered per part.
            strategies.split(request, route, out)
        } else if !mirrored.isEmpty && route.isLocalRead && allLocal {
            strategies.run(request, route, mirrored: mirrored, out)
        } else if isSplittable && names.contains(where: catalog.contains) {
            strategies.split(request, route, out)
        } else {
            strategies.paths.forward(request, out, mirrored: mirrored, tag: false, onUnavailable: nil)
        }
    }

    /// An error of the gateway's own (a body too large, a timeout, shutdown) in Algolia's format; a 5xx
    /// becomes `unavailableStatus`, because Algolia's clients shun a host after a 5xx.
    public func errorResponse(_ status: Int, _ message: String) -> HTTPResponse {
        AlgoliaError.response(status >= 500 ? configuration.algolia.unavailableStatus : status, message)
    }

    // MARK: admin

    /// The status of every index (SPEC §5: `mirrored`, `hasOfflineData`, `objects`, and the sync fields
    /// of mirrored indices), by name.
    /// Each index also says what its local answers do not apply (`notApplied`: the settings the engine
    /// ignores and the search parameters local answers reported), its replicas too.
    public func indexStatus() -> JSON {
        var indices = JSONObject()
        for (name, mirror) in coordinator.mirrors.sorted(by: { $0.key < $1.key }) {
            guard case .object(var status) = mirror.status() else { continue }
            status["notApplied"] = notApplied(name, mirror.current)
            if case .object(var replicas)? = status["replicas"] {
                for (replica, value) in replicas {
                    guard case .object(var entry) = value else { continue }
                    entry["notApplied"] = notApplied(replica, mirror.replica(replica))
                    replicas[replica] = .object(entry)
                }
                status["replicas"] = .object(replicas)
            }
            let replication = self.replication.status("algolia:\(name)")
            status["nextSyncAt"] = replication?["nextRunAt"] ?? .null
            status["replication"] = replication ?? .null
            indices[name] = .object(status)
        }
        for name in catalog.offline.names {
            let index = catalog.offline.lookup(name)?.index
            let count = index?.objectCount ?? 0
            indices[name] = [
                "mirrored": false, "hasOfflineData": .bool(count > 0), "objects": .int(Int64(count)),
                "notApplied": notApplied(name, index),
            ]
        }
        return .object(indices)
    }

    /// `GET /_mirrorgate/algolia/indices/{i}/failedWrites`: the queued writes of the mirrored index `name`
    /// that the upstream refused on replay (`{"index", "pending", "failedWrites": […]}`); nil when `name`
    /// is not a mirrored index.
    public func failedWrites(_ name: String) -> JSON? {
        guard coordinator.mirrors[name] != nil else { return nil }
        return writes?.queue?.failedWrites(name) ?? [
            "index": .string(name), "pending": 0, "failedWrites": [],
        ]
    }

    private func notApplied(_ name: String, _ index: SearchIndex?) -> JSON {
        [
            "settings": .array((index?.ignoredSettings ?? []).map { .string($0) }),
            "parameters": .array(strategies.paths.local.notApplied.parameters(name).map { .string($0) }),
        ]
    }

    /// What asking for a sync did.
    public enum SyncLaunch: Sendable {
        /// No mirrored index has that name.
        case unknownIndex
        /// A sync or build of the index is running.
        case alreadyRunning
        /// The sync runs in the background; `completion` will be called.
        case started
    }

    /// Starts a sync of the mirrored index `name` (`POST /_mirrorgate/algolia/indices/{i}/sync`): a
    /// manual run of its replication (no window, condition, pause or budget applies).
    public func sync(
        _ name: String, completion: (@Sendable (Result<SyncStats, SyncError>) -> Void)?
    ) -> SyncLaunch {
        guard let mirror = coordinator.mirrors[name] else { return .unknownIndex }
        if mirror.isSyncing { return .alreadyRunning }
        let id = "algolia:\(name)"
        if !replication.jobIDs.contains(id) {
            // No job: the gateway cannot sync (no appId, apiKey or hosts); the run says why.
            let outcome = coordinator.run(mirror, .unscheduled())
            if case .failed(let message) = outcome { completion?(.failure(SyncError(description: message))) }
            return .started
        }
        let result = replication.trigger(id) { outcome in
            switch outcome {
            case .completed:
                let stats =
                    mirror.lastStats ?? SyncStats(objects: 0, pages: 0, fetchMs: 0, buildMs: 0, durationMs: 0)
                completion?(.success(stats))
            case .failed(let message): completion?(.failure(SyncError(description: message)))
            case .stopped(let details):
                completion?(
                    .failure(
                        SyncError(description: details["message"]?.stringValue ?? "stopped", stopped: true)))
            case .busy:
                completion?(.failure(SyncError(description: "a sync or build of \(name) is already running")))
            }
        }
        switch result {
        case .started: return .started
        case .alreadyRunning: return .alreadyRunning
        case .unknown: return .unknownIndex
        }
    }

    /// A manual build of the mirrored index `name` from an admin request's body
    /// (`POST /_mirrorgate/algolia/indices/{i}/build`, SPEC §5); answers through `out` when the new
    /// version is installed, or at once with `{"message","status"}` when it cannot start.
    public func build(_ name: String, body: [UInt8], _ out: any Responder) {
        builds.start(name, body: body, out)
    }
}
