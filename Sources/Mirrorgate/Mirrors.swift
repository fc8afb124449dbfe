import AlgoliaGateway
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
final class MirrorCoordinator: Sendable {
    let mirrors: [String: MirroredIndex]
    /// Where mirror versions are stored (nil only when the data directory has none).
    let store: IndexStore?
    private let state: DatabasePool?
    private let fetcher: MirrorFetcher?
    private let checkpoints: SQLiteCheckpoints?
    private let reachability: ReachabilityTracker?
    private let events: EventBus
    private let logger: Logger
    /// The scheduler's periodic check, cancelled by `stop`.
    private let ticker = Mutex<ScheduledWork?>(nil)

    init(
        configuration: MirrorgateConfiguration, store: IndexStore?, state: DatabasePool?,
        client: UpstreamClient,
        reachability: ReachabilityTracker?, events: EventBus, logger: Logger
    ) throws {
        self.store = store
        self.state = state
        self.reachability = reachability
        self.events = events
        self.logger = logger
        let a = configuration.algolia
        if let appId = a.appId, let apiKey = a.apiKey, !a.effectiveHosts.isEmpty {
            fetcher = MirrorFetcher(
                hosts: a.effectiveHosts.map {
                    AlgoliaGateway.AlgoliaHost(
                        url: $0.url, accept: .init(rawValue: $0.accept.rawValue) ?? .readWrite)
                },
                appId: appId, apiKey: apiKey, connectTimeout: a.connectTimeout,
                callTimeout: max(a.timeout, .seconds(30)), client: client)
        } else {
            fetcher = nil
        }
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
                name: name, strategy: .init(rawValue: index.requestStrategy.rawValue) ?? .fallbackOnFailure,
                offlineFallbackTimeout: index.offlineFallbackTimeout,
                preventiveDelay: index.preventiveOfflineSearchDelay, selections: selections,
                delayBetweenSyncs: min(index.delayBetweenSyncs, policy.idleInterval),
                retryInitial: policy.retry.initial, retryMax: policy.retry.max)
            var current = try? store?.load(name: name)
            if current == nil, index.bootstrap != nil {
                let (s, records) = try BootstrapFiles.read(index.bootstrap, configuration)
                var made = SearchIndex(name: name, settings: s, records: records)
                if let store { made = (try? store.save(made)) ?? made }
                current = made
                logger.info(
                    "mirror bootstrapped from files",
                    metadata: ["index": "\(name)", "objects": "\(made.objectCount)"])
            }
            let last = saved[name].map { Date(timeIntervalSince1970: $0.0) }
            built[name] = MirroredIndex(
                settings: settings, current: current, lastSuccessfulSyncAt: current == nil ? nil : last,
                fingerprint: saved[name]?.1)
        }
        mirrors = built
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
    func start() {
        guard !mirrors.isEmpty, fetcher != nil else { return }
        reachability?.onChange { [self] up in
            guard up else { return }
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

    func stop() { ticker.withLock { $0?.cancel() } }

    /// Starts a sync in the background; false if one is running.
    @discardableResult
    func launch(
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
        events.publish("syncDidStart", ["index": .string(name)])
        let start = ContinuousClock.now
        guard let fetcher else {
            let error = SyncError(description: "algolia.appId, apiKey and hosts are needed to sync")
            mirror.endSync(.failure(error))
            return .failure(error)
        }
        do {
            let fetched = try fetcher.fetch(mirror.settings, checkpoints: checkpoints) { [events] objects in
                events.publish("syncProgress", ["index": .string(name), "objects": .int(Int64(objects))])
            }
            let fetchDone = ContinuousClock.now
            events.publish("buildDidStart", ["index": .string(name)])
            var index = SearchIndex(
                name: name, settings: fetched.settings, synonyms: fetched.synonyms, records: fetched.records)
            if let store {
                do {
                    index = try store.save(index)
                } catch {
                    throw SyncError(description: "storing the new version failed: \(error)")
                }
            }
            let end = ContinuousClock.now
            let stats = SyncStats(
                objects: index.objectCount, pages: fetched.pages,
                fetchMs: Int((fetchDone - start).seconds * 1000),
                buildMs: Int((end - fetchDone).seconds * 1000), durationMs: Int((end - start).seconds * 1000))
            events.publish(
                "buildDidFinish", ["index": .string(name), "objects": .int(Int64(index.objectCount))])
            mirror.endSync(.success((index, stats)))
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
            events.publish("syncDidFinish", .object(details))
            logger.info(
                "sync finished",
                metadata: ["index": "\(name)", "objects": "\(stats.objects)", "ms": "\(stats.durationMs)"])
            return .success(stats)
        } catch let error as SyncError {
            if error.description.hasPrefix("upstream unavailable") {
                reachability?.reportFailure(error.description)
            }
            mirror.endSync(.failure(error))
            events.publish("syncDidFinish", ["index": .string(name), "error": .string(error.description)])
            logger.warning("sync failed", metadata: ["index": "\(name)", "error": "\(error)"])
            return .failure(error)
        } catch {
            let e = SyncError(description: "\(error)")
            mirror.endSync(.failure(e))
            return .failure(e)
        }
    }
}

/// Server-Sent Events of the gateway (`GET /_mirrorgate/events`): every subscriber gets each event
/// published after it subscribed, in order.
final class EventBus: Sendable {
    private let subscribers = Mutex<[UInt64: @Sendable (String) -> Bool]>([:])
    private let nextID = Atomic<UInt64>(0)

    /// Publishes `name` with `data`; subscribers whose sink refuses are dropped.
    func publish(_ name: String, _ data: JSON) {
        var payload = data.objectValue ?? JSONObject()
        payload["at"] = .string(ISO8601DateFormatter().string(from: Date()))
        let text = "event: \(name)\ndata: \(JSON.object(payload).serialized())\n\n"
        let sinks = subscribers.withLock { $0 }
        for (id, sink) in sinks where !sink(text) {
            _ = subscribers.withLock { $0.removeValue(forKey: id) }
        }
    }

    /// Adds a subscriber; returns its id.
    func subscribe(_ sink: @escaping @Sendable (String) -> Bool) -> UInt64 {
        let id = nextID.add(1, ordering: .relaxed).newValue
        subscribers.withLock { $0[id] = sink }
        return id
    }

    func unsubscribe(_ id: UInt64) { _ = subscribers.withLock { $0.removeValue(forKey: id) } }
}

/// Sync progress in `state.sqlite`: the checkpoint and the pages fetched so far, written together after
/// each page, so that a sync interrupted by a crash resumes where it stopped.
final class SQLiteCheckpoints: SyncCheckpointStore {
    private let pool: DatabasePool

    /// The checkpoint tables in `state.sqlite`; the first migration accepts those of releases before
    /// migrations.
    static let migrator = Migrator(
        table: "mg_migrations_sync_checkpoints",
        [
            Migration(
                "1-checkpoint-and-staging",
                sql: """
                    CREATE TABLE IF NOT EXISTS mg_sync_checkpoint (
                        key TEXT PRIMARY KEY, selection INTEGER NOT NULL, cursor TEXT, fetched INTEGER NOT NULL,
                        pages INTEGER NOT NULL);
                    CREATE TABLE IF NOT EXISTS mg_sync_staging (
                        key TEXT NOT NULL, seq INTEGER NOT NULL, body BLOB NOT NULL, PRIMARY KEY (key, seq));
                    """)
        ])

    init(pool: DatabasePool) throws {
        self.pool = pool
        try Self.migrator.migrate(pool)
    }

    func resume(_ key: String) -> (checkpoint: SyncCheckpoint, records: [JSON])? {
        try? pool.read { db -> (checkpoint: SyncCheckpoint, records: [JSON])? in
            let rows = try db.query(
                "SELECT selection, cursor, fetched, pages FROM mg_sync_checkpoint WHERE key = ?", [.text(key)]
            )
            guard let row = rows.first else { return nil }
            let checkpoint = SyncCheckpoint(
                selection: row[0].int ?? 0, cursor: row[1].string, fetched: row[2].int ?? 0,
                pages: row[3].int ?? 0)
            var records: [JSON] = []
            let statement = try db.prepare("SELECT body FROM mg_sync_staging WHERE key = ? ORDER BY seq")
            try statement.bind([.text(key)])
            try statement.forEachRow { s in
                if let bytes = s.blob(0), let json = try? JSON.parse(bytes) { records.append(json) }
            }
            return (checkpoint, records)
        } ?? nil
    }

    func save(_ key: String, _ checkpoint: SyncCheckpoint, page: [JSON]) {
        try? pool.write { db in
            try db.transaction {
                let next = try db.scalar(
                    "SELECT COALESCE(MAX(seq), 0) FROM mg_sync_staging WHERE key = ?", [.text(key)])
                var seq = next?.int64 ?? 0
                for record in page {
                    seq += 1
                    try db.run(
                        "INSERT INTO mg_sync_staging (key, seq, body) VALUES (?, ?, ?)",
                        [.text(key), .integer(seq), .blob(record.serializedBytes())])
                }
                try db.run(
                    """
                    INSERT OR REPLACE INTO mg_sync_checkpoint (key, selection, cursor, fetched, pages)
                    VALUES (?, ?, ?, ?, ?)
                    """,
                    [
                        .text(key), .integer(Int64(checkpoint.selection)),
                        checkpoint.cursor.map { .text($0) } ?? .null,
                        .integer(Int64(checkpoint.fetched)), .integer(Int64(checkpoint.pages)),
                    ])
            }
        }
    }

    func clear(_ key: String) {
        try? pool.write { db in
            try db.transaction {
                try db.run("DELETE FROM mg_sync_staging WHERE key = ?", [.text(key)])
                try db.run("DELETE FROM mg_sync_checkpoint WHERE key = ?", [.text(key)])
            }
        }
    }
}
