import Foundation
import GatewayConfig
import GatewaySupport
import JSONCore
import Logging
import Replication
import SearchEngine
import Storage
import Synchronization
import Upstream

/// Keeps the mirrored Algolia indices (`algolia.indices.NAME` with `mirrored: true`) in sync: loads each
/// stored version at start (or builds it from its bootstrap files) and runs their syncs — when, is the
/// replication scheduler's decision (each index is one ``ReplicationJob`` of its policy, see
/// ``replicationJobs(configuration:)``); never two syncs of one index at once. A failed or stopped sync
/// leaves the previous version answering; a stopped one resumes from its last stored page.
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
    /// Mirrors kept from the coordinator this one replaces, with their new settings (applied by
    /// ``applyAdoptedSettings()``, so that a reload that fails later leaves them as they were).
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
                delayBetweenSyncs: index.delayBetweenSyncs)
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

    /// One job per mirrored index for the replication scheduler: its policy, `delayBetweenSyncs` as the
    /// cap of the in-use interval, the upstream's reachability, and a sync as its run. No job when the
    /// gateway cannot sync (no appId, apiKey or hosts).
    public func replicationJobs(configuration: MirrorgateConfiguration) -> [ReplicationJob] {
        guard fetcher != nil else { return [] }
        return mirrors.values.sorted { $0.settings.name < $1.settings.name }.map { mirror in
            let name = mirror.settings.name
            return ReplicationJob(
                api: .algolia, name: name, policy: configuration.algolia.indices[name]?.policy ?? "default",
                activeIntervalCap: configuration.algolia.indices[name]?.delayBetweenSyncs
                    ?? mirror.settings.delayBetweenSyncs,
                lastSuccess: mirror.lastSuccessfulSyncAt,
                usage: mirror.usage, isReachable: { [reachability] in reachability?.isReachable ?? true },
                urgency: { mirror.needsSync ? .required : .none }, isHeld: { mirror.syncsHeld },
                run: { [self] context in run(mirror, context) })
        }
    }

    /// Gives the mirrors kept from the coordinator this one replaces (a configuration reload) their new
    /// settings; called once the new service is in place.
    public func applyAdoptedSettings() {
        for (mirror, settings) in adopted { mirror.update(settings: settings) }
    }

    /// One sync of `mirror` as a replication run (blocking): `.busy` when a sync or build holds the
    /// index, `.stopped` when the run had to stop (its last page stored, the old version answering).
    public func run(_ mirror: MirroredIndex, _ context: RunContext) -> RunOutcome {
        guard mirror.beginSync() else { return .busy }
        switch run(mirror, context: context) {
        case .success(let stats): return .completed(stats.json)
        case .failure(let error) where error.stopped:
            return .stopped(["message": .string(error.description)])
        case .failure(let error): return .failed(error.description)
        }
    }

    private func run(_ mirror: MirroredIndex, context: RunContext) -> Result<SyncStats, SyncError> {
        let name = mirror.settings.name
        events("syncDidStart", ["index": .string(name), "resumed": .bool(context.resumed)])
        let start = ContinuousClock.now
        guard let fetcher else {
            let error = SyncError(description: "algolia.appId, apiKey and hosts are needed to sync")
            mirror.endSync(.failure(error))
            return .failure(error)
        }
        do {
            let fetched = try fetcher.fetch(
                mirror.settings, checkpoints: checkpoints,
                progress: { [events] objects in
                    events("syncProgress", ["index": .string(name), "objects": .int(Int64(objects))])
                    context.progress(["objects": .int(Int64(objects))])
                }, shouldStop: { context.shouldStop })
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
        } catch let error as SyncError where error.stopped {
            mirror.endSync(.failure(error))
            events(
                "syncDidFinish",
                [
                    "index": .string(name), "stopped": true,
                    "error": .string("\(error.description); the next run resumes from there"),
                ])
            logger.info("sync stopped", metadata: ["index": "\(name)", "at": "\(error.description)"])
            return .failure(error)
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
