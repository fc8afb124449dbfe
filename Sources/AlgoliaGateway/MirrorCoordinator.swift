import Foundation
import GatewayConfig
import GatewaySupport
import JSONCore
import Logging
import SearchEngine
import Storage
import Synchronization
import Upstream

/// Keeps the mirrored Algolia indices (`algolia.indices.NAME` with `mirrored: true`) in sync: loads each
/// stored version at start (or builds it from its bootstrap files), syncs at start when due, on schedule,
/// when the upstream becomes reachable again, and on admin request; never two syncs of one index at once.
/// A failed sync leaves the previous version answering and retries with backoff and jitter.
public final class MirrorCoordinator: Sendable {
    /// The mirrored indices by name.
    public let mirrors: [String: MirroredIndex]
    /// Where mirror versions are stored (nil only when the data directory has none).
    public let store: IndexStore?
    private let state: DatabasePool?
    private let fetcher: MirrorFetcher?
    private let checkpoints: SQLiteCheckpoints?
    private let reachability: ReachabilityTracker?
    private let events: @Sendable (String, JSON) -> Void
    private let logger: Logger
    /// The scheduler's periodic check, cancelled by `stop`.
    private let ticker = Mutex<ScheduledWork?>(nil)
    /// Set by `stop`: a reachability observer of a stopped coordinator (after a reload) does nothing.
    private let stopped = Atomic<Bool>(false)
    /// Mirrors kept from the coordinator this one replaces, with their new settings (applied by `start`,
    /// so that a reload that fails later leaves them as they were).
    private let adopted: [(MirroredIndex, MirrorSettings)]
    /// Index names a replica may not take (configured mirrored or offline indices answer as themselves).
    let reservedNames: Set<String>

    /// Loads (or bootstraps) every mirrored index of `configuration`; `fetcher` is nil when the gateway
    /// cannot sync (no appId, apiKey or hosts). Throws ``AlgoliaSetupError`` for a bootstrap file that
    /// cannot be read, and the store's error when the state tables cannot be prepared. A mirror of
    /// `previous` (a configuration reload) is kept, with its data and sync state, under its new settings.
    public init(
        configuration: MirrorgateConfiguration, store: IndexStore?, state: DatabasePool?,
        fetcher: MirrorFetcher?,
        reachability: ReachabilityTracker?, events: @escaping @Sendable (String, JSON) -> Void,
        logger: Logger,
        previous: [String: MirroredIndex] = [:]
    ) throws {
        self.store = store
        self.state = state
        self.reachability = reachability
        self.events = events
        self.logger = logger
        self.fetcher = fetcher
        let a = configuration.algolia
        let reserved = Set(a.indices.keys).union(a.offlineIndices.keys)
        reservedNames = reserved
        checkpoints = try state.map { try SQLiteCheckpoints(pool: $0) }
        var saved: [String: (Double, String)] = [:]
        if let state {
            try Self.migrator.migrate(state)
            try state.read { db in
                for row in try db.query("SELECT name, last_success, fingerprint FROM mg_mirror_state") {
                    if let n = row[0].string { saved[n] = (row[1].double ?? 0, row[2].string ?? "") }
                }
            }
        }
        var built: [String: MirroredIndex] = [:]
        var adopted: [(MirroredIndex, MirrorSettings)] = []
        for (name, index) in a.indices.sorted(by: { $0.key < $1.key }) where index.mirrored {
            let policy = configuration.policy(named: index.policy)
            let selections = index.dataSelectionQueries.map { q -> DataSelection in
                var params = JSONObject()
                if let text = q.params {
                    params = JSON.parseAlgoliaParams(text)
                } else if let text = q.queryJSON, let parsed = try? JSON.parse(text),
                    let o = parsed.objectValue
                {
                    params = o
                }
                return DataSelection(parameters: params, maxObjects: q.maxObjects)
            }
            let settings = MirrorSettings(
                name: name, strategy: index.requestStrategy,
                offlineFallbackTimeout: index.offlineFallbackTimeout,
                preventiveDelay: index.preventiveOfflineSearchDelay, selections: selections,
                delayBetweenSyncs: min(index.delayBetweenSyncs, policy.idleInterval),
                retryInitial: policy.retry.initial, retryMax: policy.retry.max)
            if let kept = previous[name] {
                adopted.append((kept, settings))
                built[name] = kept
                continue
            }
            var current = store.flatMap { Self.loadVersion(name, store: $0, reserved: reserved) }
            if current == nil, index.bootstrap != nil {
                let files = try BootstrapFiles.read(index.bootstrap, configuration)
                var made = SearchIndex(
                    name: name, settings: files.settings, synonyms: files.synonyms, rules: files.rules,
                    records: files.records)
                if let store { made = (try? store.save(made)) ?? made }
                current = MirrorVersion(primary: made)
                logger.info(
                    "mirror bootstrapped from files",
                    metadata: ["index": "\(name)", "objects": "\(made.objectCount)"])
            }
            let last = saved[name].map { Date(timeIntervalSince1970: $0.0) }
            built[name] = MirroredIndex(
                settings: settings, current: current?.primary, replicas: current?.replicas ?? [:],
                lastSuccessfulSyncAt: current == nil ? nil : last,
                fingerprint: saved[name]?.1)
        }
        mirrors = built
        self.adopted = adopted
    }

    /// The coordinator's table in `state.sqlite` (the last successful sync of each mirror); the first
    /// migration accepts the table of releases before migrations.
    static let migrator = Migrator(
        table: "mg_migrations_mirror_state",
        [
            Migration(
                "1-mirror-state",
                sql: """
                    CREATE TABLE IF NOT EXISTS mg_mirror_state (
                        name TEXT PRIMARY KEY, last_success REAL, fingerprint TEXT)
                    """)
        ])

    /// Starts the scheduler (a timer that checks every 250 ms what is due; syncs run on threads of their
    /// own), and syncs every mirror whose last run failed as soon as the upstream is reachable again.
    public func start() {
        for (mirror, settings) in adopted { mirror.update(settings: settings) }
        guard !mirrors.isEmpty, fetcher != nil else { return }
        reachability?.onChange { [self] up in
            guard up, !stopped.load(ordering: .relaxed) else { return }
            for mirror in mirrors.values where mirror.lastRunFailed || mirror.isSyncDue() { launch(mirror) }
        }
        let work = Scheduler.shared.repeating(every: .milliseconds(250)) { [self] in
            for mirror in mirrors.values.sorted(by: { $0.settings.name < $1.settings.name })
            where mirror.isSyncDue() && (reachability?.isReachable ?? true) {
                launch(mirror)
            }
        }
        ticker.withLock { $0 = work }
    }

    /// Stops scheduling syncs (a sync already running finishes).
    public func stop() {
        stopped.store(true, ordering: .relaxed)
        ticker.withLock { $0?.cancel() }
    }

    /// Starts a sync in the background; false if one is running.
    @discardableResult
    public func launch(
        _ mirror: MirroredIndex, completion: (@Sendable (Result<SyncStats, SyncError>) -> Void)? = nil
    ) -> Bool {
        guard mirror.beginSync() else { return false }
        let thread = Thread { [self] in
            let result = self.run(mirror)
            completion?(result)
        }
        thread.name = "mg-sync-\(mirror.settings.name)"
        thread.start()
        return true
    }

    private func run(_ mirror: MirroredIndex) -> Result<SyncStats, SyncError> {
        let name = mirror.settings.name
        events("syncDidStart", ["index": .string(name)])
        let start = ContinuousClock.now
        guard let fetcher else {
            let error = SyncError(description: "algolia.appId, apiKey and hosts are needed to sync")
            mirror.endSync(.failure(error))
            return .failure(error)
        }
        do {
            let fetched = try fetcher.fetch(mirror.settings, checkpoints: checkpoints) { [events] objects in
                events("syncProgress", ["index": .string(name), "objects": .int(Int64(objects))])
            }
            let fetchDone = ContinuousClock.now
            events("buildDidStart", ["index": .string(name)])
            let version: MirrorVersion
            do {
                version = try storeVersion(
                    name, metadata: fetched.metadata, records: fetched.records, replicas: fetched.replicas,
                    replacing: mirror.replicaNames)
            } catch {
                throw SyncError(description: "storing the new version failed: \(error)")
            }
            let index = version.primary
            let end = ContinuousClock.now
            let stats = SyncStats(
                objects: index.objectCount, pages: fetched.pages,
                fetchMs: Int((fetchDone - start).seconds * 1000),
                buildMs: Int((end - fetchDone).seconds * 1000), durationMs: Int((end - start).seconds * 1000))
            events(
                "buildDidFinish", ["index": .string(name), "objects": .int(Int64(index.objectCount))])
            mirror.endSync(.success((version, stats)))
            checkpoints?.clear(mirror.settings.settingsKey)
            try? state?.write { db in
                try db.run(
                    "INSERT OR REPLACE INTO mg_mirror_state (name, last_success, fingerprint) VALUES (?, ?, ?)",
                    [
                        SQLValue.text(name), SQLValue.real(Date().timeIntervalSince1970),
                        SQLValue.text(mirror.settings.selectionFingerprint),
                    ])
            }
            var details = stats.json.objectValue ?? JSONObject()
            details["index"] = .string(name)
            events("syncDidFinish", .object(details))
            logger.info(
                "sync finished",
                metadata: ["index": "\(name)", "objects": "\(stats.objects)", "ms": "\(stats.durationMs)"])
            return .success(stats)
        } catch let error as SyncError {
            if error.description.hasPrefix("upstream unavailable") {
                reachability?.reportFailure(error.description)
            }
            mirror.endSync(.failure(error))
            events("syncDidFinish", ["index": .string(name), "error": .string(error.description)])
            logger.warning("sync failed", metadata: ["index": "\(name)", "error": "\(error)"])
            return .failure(error)
        } catch {
            let e = SyncError(description: "\(error)")
            mirror.endSync(.failure(e))
            return .failure(e)
        }
    }
}
