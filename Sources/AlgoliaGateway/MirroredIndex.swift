import Foundation
import GatewayConfig
import GatewaySupport
import JSONCore
import Replication
import SearchEngine
import Synchronization

/// One data selection query of a mirrored index: browse parameters and a cap.
public struct DataSelection: Sendable, Hashable {
    /// Browse parameters as a JSON object (`params` strings are parsed into it).
    public var parameters: JSONObject
    /// Stop after this many objects (one page of overshoot allowed).
    public var maxObjects: Int

    /// Creates a selection.
    public init(parameters: JSONObject, maxObjects: Int) {
        self.parameters = parameters
        self.maxObjects = maxObjects
    }
}

/// What a mirrored index needs to sync and answer (mapped from `algolia.indices.NAME`).
public struct MirrorSettings: Sendable, Equatable {
    /// Index name.
    public var name: String
    /// Default strategy (a request may override it with `X-Mirrorgate-Strategy`).
    public var strategy: RequestStrategy
    /// `fallbackOnTimeout`: answer locally when the upstream has not answered within this.
    public var offlineFallbackTimeout: Duration
    /// `preventive`: delay before the local answer.
    public var preventiveDelay: Duration
    /// The data to mirror.
    public var selections: [DataSelection]
    /// `syncIfNeeded` threshold: while the index is in use, syncs come at least this often (the policy's
    /// `activeInterval` when shorter); the policy's scheduler applies it.
    public var delayBetweenSyncs: Duration

    /// Creates settings.
    public init(
        name: String, strategy: RequestStrategy = .fallbackOnFailure,
        offlineFallbackTimeout: Duration = .seconds(1),
        preventiveDelay: Duration = .milliseconds(200), selections: [DataSelection] = [],
        delayBetweenSyncs: Duration = .seconds(86400)
    ) {
        self.name = name
        self.strategy = strategy
        self.offlineFallbackTimeout = offlineFallbackTimeout
        self.preventiveDelay = preventiveDelay
        self.selections = selections
        self.delayBetweenSyncs = delayBetweenSyncs
    }

    /// A stable fingerprint of the data selection (a change triggers a sync).
    public var selectionFingerprint: String {
        selections.map { "\($0.maxObjects):\(JSON.object($0.parameters).serialized())" }.joined(
            separator: "\n")
    }
}

/// Statistics of one successful sync.
public struct SyncStats: Sendable {
    /// Objects in the new mirror.
    public var objects: Int
    /// Browse pages fetched.
    public var pages: Int
    /// Time spent fetching.
    public var fetchMs: Int
    /// Time spent building and storing.
    public var buildMs: Int
    /// Whole duration.
    public var durationMs: Int

    /// Creates statistics.
    public init(objects: Int, pages: Int, fetchMs: Int, buildMs: Int, durationMs: Int) {
        self.objects = objects
        self.pages = pages
        self.fetchMs = fetchMs
        self.buildMs = buildMs
        self.durationMs = durationMs
    }

    /// The admin API's JSON.
    public var json: JSON {
        [
            "objects": .int(Int64(objects)), "pages": .int(Int64(pages)), "fetchMs": .int(Int64(fetchMs)),
            "buildMs": .int(Int64(buildMs)), "durationMs": .int(Int64(durationMs)),
        ]
    }
}

/// Why a sync failed, or that it stopped at its run's budget (its checkpoint kept).
public struct SyncError: Error, CustomStringConvertible, Sendable {
    /// What went wrong (never contains keys).
    public let description: String
    /// The sync stopped because its run had to (budget, pause, shutdown), not because of a failure.
    public let stopped: Bool
    /// Creates an error.
    public init(description: String, stopped: Bool = false) {
        self.description = description
        self.stopped = stopped
    }
}

/// A mirrored index's local version: the primary index and its replicas (by name; virtual ones answer
/// as virtual replicas), installed together.
public struct MirrorVersion: Sendable {
    /// The mirrored index itself.
    public var primary: SearchIndex
    /// Its replicas, by name.
    public var replicas: [String: SearchIndex]

    /// Creates a version.
    public init(primary: SearchIndex, replicas: [String: SearchIndex] = [:]) {
        self.primary = primary
        self.replicas = replicas
    }
}

/// A mirrored index: its current local version and its replicas' (answering while a new one is built),
/// its sync state and statistics. At most one sync runs at a time; when it runs is the replication
/// scheduler's decision (its policy), for which client requests mark the index in use (``usage``).
public final class MirroredIndex: Sendable {
    /// Settings (a reload may change them, see ``update(settings:)``).
    public var settings: MirrorSettings { settingsBox.withLock { $0 } }
    private let settingsBox: Mutex<MirrorSettings>
    private struct State {
        var current: SearchIndex?
        var replicas: [String: SearchIndex] = [:]
        var syncing = false
        var lastSuccessfulSyncAt: Date?
        var lastError: String?
        var lastStats: SyncStats?
        var fingerprint: String?
        /// Local writes wait for the upstream (`offlineWrites: queue`): no sync may replace the mirror.
        var held = false
    }
    private let state: Mutex<State>
    /// Where client requests mark the index in use.
    public let usage = ReplicationUsage()

    /// Creates the index with the version found at start (if any) and its replicas.
    public init(
        settings: MirrorSettings, current: SearchIndex?, replicas: [String: SearchIndex] = [:],
        lastSuccessfulSyncAt: Date?, fingerprint: String?
    ) {
        self.settingsBox = Mutex(settings)
        state = Mutex(
            State(
                current: current, replicas: replicas, lastSuccessfulSyncAt: lastSuccessfulSyncAt,
                fingerprint: fingerprint))
    }

    /// Applies new settings (a configuration reload). A changed data selection makes the mirror need a
    /// sync (``needsSync``: the scheduler runs it now); a changed `delayBetweenSyncs` reaches the
    /// scheduler with the mirror's new job.
    public func update(settings new: MirrorSettings) {
        settingsBox.withLock { $0 = new }
    }

    /// The local version, if any.
    public var current: SearchIndex? { state.withLock { $0.current } }

    /// The local version of the replica `name`, if the primary's last version has one by that name.
    public func replica(_ name: String) -> SearchIndex? { state.withLock { $0.replicas[name] } }

    /// The names of the replicas of the local version, sorted.
    public var replicaNames: [String] { state.withLock { $0.replicas.keys.sorted() } }

    /// Notes a client request (for status and scheduling).
    public func touch() { usage.touch() }

    /// Holds syncs (and manual builds) while queued local writes wait for the upstream, or lets them
    /// run again.
    public func holdSyncs(_ hold: Bool) { state.withLock { $0.held = hold } }

    /// Whether syncs are held (``holdSyncs(_:)``).
    public var syncsHeld: Bool { state.withLock { $0.held } }

    /// Claims the right to sync; false while another sync runs or syncs are held.
    public func beginSync() -> Bool {
        state.withLock { s in
            if s.syncing || s.held { return false }
            s.syncing = true
            return true
        }
    }

    /// Whether a sync is running.
    public var isSyncing: Bool { state.withLock { $0.syncing } }

    /// Whether the last sync attempt failed.
    public var lastRunFailed: Bool { state.withLock { $0.lastError != nil } }

    /// Ends a sync with its result (a stopped sync ends without one: nothing changes but the claim).
    public func endSync(_ result: Result<(MirrorVersion, SyncStats), SyncError>) {
        state.withLock { s in
            s.syncing = false
            switch result {
            case .success(let (version, stats)):
                s.current = version.primary
                s.replicas = version.replicas
                s.lastStats = stats
                s.lastSuccessfulSyncAt = Date()
                s.lastError = nil
                s.fingerprint = settings.selectionFingerprint
            case .failure(let error):
                if !error.stopped { s.lastError = error.description }
            }
        }
    }

    /// Replaces the local version (manual build).
    public func install(_ version: MirrorVersion) {
        state.withLock { s in
            s.current = version.primary
            s.replicas = version.replicas
        }
    }

    /// Replaces the primary's local version and keeps its replicas' (a local write to the mirror while the
    /// upstream is unreachable; the sync after the queued writes are replayed brings the replicas up to
    /// date).
    public func installPrimary(_ index: SearchIndex) { state.withLock { $0.current = index } }

    /// Ends a manual build claimed with `beginSync`: installs `version` when it succeeded.
    public func endBuild(_ version: MirrorVersion?) {
        state.withLock { s in
            s.syncing = false
            if let version {
                s.current = version.primary
                s.replicas = version.replicas
            }
        }
    }

    /// Whether the mirror cannot answer as configured: never synced (no local version), or its data
    /// selection changed since the last sync. Such a mirror syncs as soon as its policy allows.
    public var needsSync: Bool {
        state.withLock { s in
            s.current == nil || s.lastSuccessfulSyncAt == nil
                || s.fingerprint != settings.selectionFingerprint
        }
    }

    /// The statistics of the last successful sync.
    public var lastStats: SyncStats? { state.withLock { $0.lastStats } }

    /// When the last sync succeeded (as stored by the coordinator).
    public var lastSuccessfulSyncAt: Date? { state.withLock { $0.lastSuccessfulSyncAt } }

    /// Status fields of SPEC §5.
    public func status() -> JSON {
        state.withLock { s in
            var o = JSONObject()
            o["mirrored"] = true
            o["hasOfflineData"] = .bool(s.current != nil)
            o["objects"] = .int(Int64(s.current?.objectCount ?? 0))
            o["lastSuccessfulSyncAt"] = s.lastSuccessfulSyncAt.map { .string(rfc3339($0)) } ?? .null
            o["syncing"] = .bool(s.syncing)
            o["lastError"] = s.lastError.map { .string($0) } ?? .null
            o["lastSync"] = s.lastStats?.json ?? .null
            if !s.replicas.isEmpty {
                var replicas = JSONObject()
                for (name, index) in s.replicas.sorted(by: { $0.key < $1.key }) {
                    replicas[name] = [
                        "virtual": .bool(index.isVirtualReplica), "objects": .int(Int64(index.objectCount)),
                    ]
                }
                o["replicas"] = .object(replicas)
            }
            return .object(o)
        }
    }
}

/// A date as RFC 3339 with milliseconds (`2026-11-22T05:00:00.000Z`), the format of every timestamp the
/// gateway reports.
public func rfc3339(_ date: Date) -> String {
    Timestamps.rfc3339(secondsSince1970: date.timeIntervalSince1970)
}
