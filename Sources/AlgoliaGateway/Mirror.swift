import Foundation
import GatewaySupport
import HTTPCore
import JSONCore
import Logging
import SearchEngine
import Storage
import Synchronization
import Upstream

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
public struct MirrorSettings: Sendable {
    /// How requests for the index are answered.
    public enum Strategy: String, Sendable {
        case onlineOnly, offlineOnly, fallbackOnFailure, fallbackOnTimeout, preventive
    }
    /// Index name.
    public var name: String
    /// Default strategy (a request may override it with `X-Mirrorgate-Strategy`).
    public var strategy: Strategy
    /// `fallbackOnTimeout`: answer locally when the upstream has not answered within this.
    public var offlineFallbackTimeout: Duration
    /// `preventive`: delay before the local answer.
    public var preventiveDelay: Duration
    /// The data to mirror.
    public var selections: [DataSelection]
    /// `syncIfNeeded` threshold.
    public var delayBetweenSyncs: Duration
    /// Backoff after a failed sync.
    public var retryInitial: Duration
    /// Backoff cap.
    public var retryMax: Duration

    /// Creates settings.
    public init(
        name: String, strategy: Strategy = .fallbackOnFailure, offlineFallbackTimeout: Duration = .seconds(1),
        preventiveDelay: Duration = .milliseconds(200), selections: [DataSelection] = [],
        delayBetweenSyncs: Duration = .seconds(86400), retryInitial: Duration = .seconds(5),
        retryMax: Duration = .seconds(900)
    ) {
        self.name = name
        self.strategy = strategy
        self.offlineFallbackTimeout = offlineFallbackTimeout
        self.preventiveDelay = preventiveDelay
        self.selections = selections
        self.delayBetweenSyncs = delayBetweenSyncs
        self.retryInitial = retryInitial
        self.retryMax = retryMax
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

/// Why a sync failed.
public struct SyncError: Error, CustomStringConvertible, Sendable {
    /// What went wrong (never contains keys).
    public let description: String
    /// Creates an error.
    public init(description: String) { self.description = description }
}

/// A mirrored index: its current local version (answering while a new one is built), its sync state
/// and statistics. At most one sync runs at a time.
public final class MirroredIndex: Sendable {
    /// Settings.
    public let settings: MirrorSettings
    private struct State {
        var current: SearchIndex?
        var syncing = false
        var lastSuccessfulSyncAt: Date?
        var lastError: String?
        var lastStats: SyncStats?
        var nextSyncAt: Date?
        var failures = 0
        var fingerprint: String?
        var lastUsed: Date?
    }
    private let state: Mutex<State>

    /// Creates the index with the version found at start (if any).
    public init(
        settings: MirrorSettings, current: SearchIndex?, lastSuccessfulSyncAt: Date?, fingerprint: String?
    ) {
        self.settings = settings
        state = Mutex(
            State(current: current, lastSuccessfulSyncAt: lastSuccessfulSyncAt, fingerprint: fingerprint))
    }

    /// The local version, if any.
    public var current: SearchIndex? { state.withLock { $0.current } }

    /// Notes a client request (for status and scheduling).
    public func touch() { state.withLock { $0.lastUsed = Date() } }

    /// Claims the right to sync; false while another sync runs.
    public func beginSync() -> Bool {
        state.withLock { s in
            if s.syncing { return false }
            s.syncing = true
            return true
        }
    }

    /// Whether a sync is running.
    public var isSyncing: Bool { state.withLock { $0.syncing } }

    /// Whether the last sync attempt failed.
    public var lastRunFailed: Bool { state.withLock { $0.lastError != nil } }

    /// Ends a sync with its result; schedules the next one.
    public func endSync(_ result: Result<(SearchIndex, SyncStats), SyncError>) {
        state.withLock { s in
            s.syncing = false
            switch result {
            case .success(let (index, stats)):
                s.current = index
                s.lastStats = stats
                s.lastSuccessfulSyncAt = Date()
                s.lastError = nil
                s.failures = 0
                s.fingerprint = settings.selectionFingerprint
                s.nextSyncAt = Date().addingTimeInterval(settings.delayBetweenSyncs.seconds)
            case .failure(let error):
                s.lastError = error.description
                s.failures += 1
                let backoff = min(
                    settings.retryMax.seconds, settings.retryInitial.seconds * pow(2, Double(s.failures - 1)))
                s.nextSyncAt = Date().addingTimeInterval(backoff * Double.random(in: 0.5...1.0))
            }
        }
    }

    /// Replaces the local version (manual build).
    public func install(_ index: SearchIndex) { state.withLock { $0.current = index } }

    /// Ends a manual build claimed with `beginSync`: installs `index` when it succeeded.
    public func endBuild(_ index: SearchIndex?) {
        state.withLock { s in
            s.syncing = false
            if let index { s.current = index }
        }
    }

    /// `syncIfNeeded`: never synced, data selection changed, or `delayBetweenSyncs` elapsed (or the
    /// retry time after a failure has come).
    public func isSyncDue(now: Date = Date()) -> Bool {
        state.withLock { s in
            if s.syncing { return false }
            if let next = s.nextSyncAt { return now >= next }
            guard let last = s.lastSuccessfulSyncAt, s.current != nil else { return true }
            if s.fingerprint != settings.selectionFingerprint { return true }
            return now.timeIntervalSince(last) >= settings.delayBetweenSyncs.seconds
        }
    }

    /// Status fields of SPEC §5.
    public func status() -> JSON {
        state.withLock { s in
            var o = JSONObject()
            o["mirrored"] = true
            o["hasOfflineData"] = .bool(s.current != nil)
            o["objects"] = .int(Int64(s.current?.objectCount ?? 0))
            o["lastSuccessfulSyncAt"] = s.lastSuccessfulSyncAt.map { .string(rfc3339($0)) } ?? .null
            o["nextSyncAt"] = s.nextSyncAt.map { .string(rfc3339($0)) } ?? .null
            o["syncing"] = .bool(s.syncing)
            o["lastError"] = s.lastError.map { .string($0) } ?? .null
            o["lastSync"] = s.lastStats?.json ?? .null
            return .object(o)
        }
    }
}

/// A date as RFC 3339 with milliseconds (`2026-11-22T05:00:00.000Z`), the format of every timestamp the
/// gateway reports.
public func rfc3339(_ date: Date) -> String {
    Timestamps.rfc3339(secondsSince1970: date.timeIntervalSince1970)
}

/// Fetches a mirrored index from the upstream: settings (`getVersion=1`), synonyms, then each data
/// selection with `browse` (`hitsPerPage` 1000, cursor in the POST body) until `maxObjects` or the end;
/// objects are merged by `objectID`. Blocking: runs on a background thread.
public struct MirrorFetcher: Sendable {
    /// Read hosts, tried in order.
    public var hosts: [AlgoliaHost]
    /// The gateway's own application ID.
    public var appId: String
    /// The gateway's own key (ACLs search, browse, settings).
    public var apiKey: String
    /// Connect budget per call.
    public var connectTimeout: Duration
    /// Budget per call.
    public var callTimeout: Duration
    /// The blocking client.
    public var client: UpstreamClient

    /// Creates a fetcher.
    public init(
        hosts: [AlgoliaHost], appId: String, apiKey: String, connectTimeout: Duration, callTimeout: Duration,
        client: UpstreamClient
    ) {
        self.hosts = hosts
        self.appId = appId
        self.apiKey = apiKey
        self.connectTimeout = connectTimeout
        self.callTimeout = callTimeout
        self.client = client
    }

    /// One JSON call, trying the hosts in order on network errors and 5xx.
    func call(_ method: String, _ path: String, body: JSON?) throws(SyncError) -> JSON {
        var problem = "no read host configured"
        for host in hosts where host.accept != .write {
            let request = UpstreamRequest(
                method: method, url: host.url + path,
                headers: [
                    ("X-Algolia-Application-Id", appId), ("X-Algolia-API-Key", apiKey),
                    ("Content-Type", "application/json"), ("Accept", "application/json"),
                ],
                body: body.map { $0.serializedBytes() } ?? [], connectTimeout: connectTimeout,
                timeout: callTimeout)
            do {
                let response = try client.perform(request)
                if response.status >= 500 {
                    problem = "\(host.url) answered \(response.status)"
                    continue
                }
                let json = try? JSON.parse(response.body)
                guard (200..<300).contains(response.status) else {
                    let message = json?["message"]?.stringValue ?? "status \(response.status)"
                    throw SyncError(description: "\(method) \(path): \(response.status) \(message)")
                }
                guard let json else { throw SyncError(description: "\(method) \(path): invalid JSON answer") }
                return json
            } catch let error as UpstreamError {
                problem = "\(host.url): \(error)"
            } catch let error as SyncError {
                throw error
            } catch {
                problem = "\(error)"
            }
        }
        throw SyncError(description: "upstream unavailable: \(problem)")
    }

    /// Fetches everything for `settings.name`; `progress` is called after each page with the object count.
    public func fetch(
        _ settings: MirrorSettings, checkpoints: (any SyncCheckpointStore)? = nil,
        progress: (Int) -> Void = { _ in }
    ) throws(SyncError) -> (settings: JSON, synonyms: [JSON], records: [JSON], pages: Int) {
        let name = FormEncoding.pathSegment(settings.name)
        let indexSettings = try call("GET", "/1/indexes/\(name)/settings?getVersion=1", body: nil)
        var synonyms: [JSON] = []
        if let synonymPage = try? call(
            "POST", "/1/indexes/\(name)/synonyms/search", body: ["hitsPerPage": 1000]),
            let hits = synonymPage["hits"]?.arrayValue
        {
            synonyms = hits.map { hit in
                guard case .object(var o) = hit else { return hit }
                o["_highlightResult"] = nil
                return .object(o)
            }
        }
        var order: [String] = []
        var records: [String: JSON] = [:]
        var pages = 0
        var start = SyncCheckpoint(selection: 0, cursor: nil, fetched: 0, pages: 0)
        // Resume an interrupted sync of the same data selection from its last stored page.
        if let checkpoints, let saved = checkpoints.resume(settings.settingsKey) {
            start = saved.checkpoint
            pages = saved.checkpoint.pages
            for record in saved.records {
                guard let id = record["objectID"]?.stringValue else { continue }
                if records[id] == nil { order.append(id) }
                records[id] = record
            }
        }
        for (position, selection) in settings.selections.enumerated() where position >= start.selection {
            var params = selection.parameters
            params["hitsPerPage"] = 1000
            var body: JSON = .object(params)
            var fetched = 0
            if position == start.selection, let cursor = start.cursor {
                body = ["cursor": .string(cursor)]
                fetched = start.fetched
            }
            var resumedCursor = position == start.selection && start.cursor != nil
            while true {
                let page: JSON
                do {
                    page = try call("POST", "/1/indexes/\(name)/browse", body: body)
                } catch {
                    if resumedCursor && !error.description.hasPrefix("upstream unavailable") {
                        // The stored cursor is no longer valid: start over cleanly.
                        checkpoints?.clear(settings.settingsKey)
                        return try fetch(settings, checkpoints: checkpoints, progress: progress)
                    }
                    throw error
                }
                resumedCursor = false
                pages += 1
                let hits = page["hits"]?.arrayValue ?? []
                for hit in hits {
                    guard let id = hit["objectID"]?.stringValue else { continue }
                    if records[id] == nil { order.append(id) }
                    records[id] = hit
                }
                fetched += hits.count
                progress(records.count)
                let cursor = page["cursor"]?.stringValue
                let more = fetched < selection.maxObjects && !(cursor ?? "").isEmpty
                checkpoints?.save(
                    settings.settingsKey,
                    SyncCheckpoint(
                        selection: more ? position : position + 1, cursor: more ? cursor : nil,
                        fetched: more ? fetched : 0, pages: pages),
                    page: hits)
                guard more, let cursor else { break }
                body = ["cursor": .string(cursor)]
            }
        }
        return (indexSettings, synonyms, order.compactMap { records[$0] }, pages)
    }
}

/// Where a sync stands: which data selection, its browse cursor, how many objects it fetched.
public struct SyncCheckpoint: Sendable, Equatable {
    /// Index of the data selection being browsed.
    public var selection: Int
    /// Browse cursor to continue with (nil: start the selection).
    public var cursor: String?
    /// Objects fetched so far for that selection.
    public var fetched: Int
    /// Pages fetched so far in the whole sync.
    public var pages: Int

    /// Creates a checkpoint.
    public init(selection: Int, cursor: String?, fetched: Int, pages: Int) {
        self.selection = selection
        self.cursor = cursor
        self.fetched = fetched
        self.pages = pages
    }
}

/// Durable progress of running syncs, so that a sync interrupted by a crash resumes from its last page.
public protocol SyncCheckpointStore: Sendable {
    /// The saved checkpoint and the records fetched before it, if a sync of `key` was interrupted.
    func resume(_ key: String) -> (checkpoint: SyncCheckpoint, records: [JSON])?
    /// Stores one fetched page and the checkpoint after it, atomically.
    func save(_ key: String, _ checkpoint: SyncCheckpoint, page: [JSON])
    /// Forgets the progress of `key` (after success, or when its cursor became invalid).
    func clear(_ key: String)
}

extension MirrorSettings {
    /// Identifies a sync's progress: the index and its data selection (a changed selection restarts).
    public var settingsKey: String { name + "\n" + selectionFingerprint }
}

/// Percent-encoding of one URL path segment.
public enum FormEncoding {
    /// Encodes everything but unreserved characters.
    public static func pathSegment(_ text: String) -> String {
        var out = ""
        for b in text.utf8 {
            switch b {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"),
                UInt8(ascii: "."),
                UInt8(ascii: "~"):
                out.unicodeScalars.append(UnicodeScalar(b))
            default:
                out += String(format: "%%%02X", b)
            }
        }
        return out
    }
}
