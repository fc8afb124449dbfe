import Foundation
import GatewayConfig
import HTTPCore
import JSONCore
import Upstream

/// Fetches a mirrored index from the upstream: settings (`getVersion=1`), synonyms and query rules (every
/// page), then each data selection with `browse` (`hitsPerPage` 1000, cursor in the POST body) until
/// `maxObjects` or the end (objects merged by `objectID`), then the settings, synonyms and rules of each
/// replica the settings name (their records are the primary's). Blocking: runs on a background thread.
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
    /// `shouldStop` is asked after each stored page: when it says so, the fetch throws a ``SyncError``
    /// with `stopped` set and the next fetch resumes from that page (with `checkpoints`).
    public func fetch(
        _ settings: MirrorSettings, checkpoints: (any SyncCheckpointStore)? = nil,
        progress: (Int) -> Void = { _ in }, shouldStop: () -> Bool = { false }
    ) throws(SyncError) -> FetchedMirror {
        let metadata = try metadata(settings.name)
        let (records, pages) = try fetchRecords(
            settings, checkpoints: checkpoints, progress: progress, shouldStop: shouldStop)
        let replicas = try replicas(of: settings.name, primary: metadata.settings)
        return FetchedMirror(metadata: metadata, records: records, pages: pages, replicas: replicas)
    }

    /// The records of every data selection, and the number of browse pages fetched.
    private func fetchRecords(
        _ settings: MirrorSettings, checkpoints: (any SyncCheckpointStore)?, progress: (Int) -> Void,
        shouldStop: () -> Bool
    ) throws(SyncError) -> ([JSON], Int) {
        let name = FormCodec.percentEncode(settings.name)
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
                        return try fetchRecords(
                            settings, checkpoints: checkpoints, progress: progress, shouldStop: shouldStop)
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
                if shouldStop() {
                    throw SyncError(
                        description: "stopped after \(pages) pages (\(records.count) objects)", stopped: true)
                }
                body = ["cursor": .string(cursor)]
            }
        }
        return (order.compactMap { records[$0] }, pages)
    }
}

/// What one sync fetched: the index's metadata and records, and its replicas' metadata.
public struct FetchedMirror: Sendable {
    /// Settings, synonyms and rules.
    public var metadata: IndexMetadata
    /// The records of the data selection, in browse order.
    public var records: [JSON]
    /// Browse pages fetched.
    public var pages: Int
    /// The replicas the settings name.
    public var replicas: [FetchedReplica]
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

extension MirrorFetcher {
    /// The fetcher of `configuration`, calling with `client`: nil unless `algolia.appId`, `algolia.apiKey`
    /// and at least one host are set.
    public static func configured(_ configuration: MirrorgateConfiguration, client: UpstreamClient)
        -> MirrorFetcher?
    {
        let a = configuration.algolia
        guard let appId = a.appId, let apiKey = a.apiKey, !a.effectiveHosts.isEmpty else { return nil }
        return MirrorFetcher(
            hosts: a.effectiveHosts, appId: appId, apiKey: apiKey, connectTimeout: a.connectTimeout,
            callTimeout: max(a.timeout, .seconds(30)), client: client)
    }
}
