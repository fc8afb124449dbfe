import Foundation
import GatewaySupport
import HTTPCore
import JSONCore
import Logging
import ODataCore
import Synchronization
import Upstream

/// The result of one download.
public struct ODataDownloadStats: Sendable {
    /// How one defining request was read.
    public struct RequestRead: Sendable {
        /// `full` (every page of the defining request) or `delta` (only what changed since its delta link).
        public var kind: String
        /// Entities stored (full: every row; delta: added or changed).
        public var changed: Int
        /// Entities a delta removed; nil for a full read (it replaces the request's rows).
        public var removed: Int?
        /// Downloaded entities passed over because a local change of theirs waits in the queue.
        public var keptLocal: Int
        /// Why a full read was done where a delta link was stored (expired, refused, not applicable).
        public var fallback: String?
    }

    /// Rows stored per entity set (over all defining requests).
    public var entitySets: [String: Int]
    /// Wall time.
    public var durationMs: Int
    /// Per defining request, how it was read.
    public var requests: [String: RequestRead] = [:]

    /// `delta` when every defining request was read by its delta link, `full` when none was, else `mixed`.
    public var kind: String {
        let kinds = Set(requests.values.map(\.kind))
        return kinds.count > 1 ? "mixed" : kinds.first ?? "full"
    }

    /// `{"entitySets": {NAME: rows}, "durationMs": N, "kind", "changed", "removed", "keptLocal",
    /// "requests": {NAME: {kind, changed, removed, keptLocal, fallback}}}`; `removed` sums the delta reads
    /// (null when every request was read in full).
    public var json: JSON {
        var sets = JSONObject()
        for (k, v) in entitySets.sorted(by: { $0.key < $1.key }) { sets[k] = .int(Int64(v)) }
        var per = JSONObject()
        for (name, r) in requests.sorted(by: { $0.key < $1.key }) {
            per[name] = [
                "kind": .string(r.kind), "changed": .int(Int64(r.changed)),
                "removed": r.removed.map { .int(Int64($0)) } ?? .null, "keptLocal": .int(Int64(r.keptLocal)),
                "fallback": r.fallback.map(JSON.string) ?? .null,
            ]
        }
        let removed = requests.values.compactMap(\.removed)
        return [
            "entitySets": .object(sets), "durationMs": .int(Int64(durationMs)), "kind": .string(kind),
            "changed": .int(Int64(requests.values.reduce(0) { $0 + $1.changed })),
            "removed": removed.isEmpty ? .null : .int(Int64(removed.reduce(0, +))),
            "keptLocal": .int(Int64(requests.values.reduce(0) { $0 + $1.keptLocal })),
            "requests": .object(per),
        ]
    }
}

struct DownloadState: ExclusiveRunState {
    var running = false
    var lastError: String?
    var lastDurationMs: Int?
    /// The last successful download's figures.
    var last: ODataDownloadStats?
    /// Defining requests the upstream refused to track changes of (read without asking, until a restart).
    var untracked: Set<String> = []
    var nextSyncAt: Date?
}

/// The downloader: fills the mirror from the upstream — `$metadata` (byte-identical), then each defining
/// request with its pages (`@odata.nextLink`/`__next`) ingested into rows and link records and stored
/// atomically per request (``ODataMirror/replace(request:query:rows:links:queuedChanges:)``), or the
/// bootstrap files when the upstream never answered; single entities fetched back for a forwarded write
/// or a revert.
///
/// Promises: at most one download runs at a time, on a thread of its own; a download never overwrites
/// local changes that wait in the queue (those entities keep their local version, a locally deleted one
/// stays deleted, until the upload); a defining request read with `Prefer: odata.track-changes` keeps the
/// upstream's delta link (`@odata.deltaLink`, V2 `__delta`) and is read by it next time (see
/// ``ODataMirror/applyDelta(request:query:changed:removed:pending:deltaLink:)``), in full again when the
/// link expired (`410`) or was refused; every upstream call reports to the reachability tracker. It may touch the mirror, read the queue's count and call
/// the upstream with the blocking client; it knows nothing of routing or uploads.
final class ODataDownloader: ODataServicePart {
    let context: ODataServiceContext
    let state = Mutex(DownloadState())
    /// Called after every download with its outcome (for events).
    private let listeners = Mutex<[@Sendable (Result<ODataDownloadStats, MirrorError>) -> Void]>([])

    init(context: ODataServiceContext) { self.context = context }

    /// Registers a listener for download outcomes.
    func onDownload(_ body: @escaping @Sendable (Result<ODataDownloadStats, MirrorError>) -> Void) {
        listeners.withLock { $0.append(body) }
    }

    /// Starts a download on a background thread; false when one is already running.
    public func download(completion: (@Sendable (Result<ODataDownloadStats, MirrorError>) -> Void)?) -> Bool {
        guard state.withLock({ $0.claim() }) else { return false }
        startThread(named: "mg-odata-download") { [self] in
            let begin = Date()
            let result: Result<ODataDownloadStats, MirrorError>
            do {
                var stats = try runDownload()
                stats.durationMs = Int(Date().timeIntervalSince(begin) * 1000)
                result = .success(stats)
            } catch let e as MirrorError {
                result = .failure(e)
            } catch {
                result = .failure(MirrorError("\(error)"))
            }
            state.withLock { s in
                s.running = false
                switch result {
                case .success(let st):
                    s.lastError = nil
                    s.lastDurationMs = st.durationMs
                    s.last = st
                case .failure(let e): s.lastError = e.description
                }
            }
            if case .failure(let e) = result {
                logger.warning(
                    "odata download failed",
                    metadata: ["service": "\(settings.name)", "error": "\(e)"])
            }
            for l in listeners.withLock({ $0 }) { l(result) }
            completion?(result)
        }
        return true
    }

    func upstreamGET(
        _ url: String, accept: String = "application/json", extraHeaders: [(name: String, value: String)] = []
    ) throws(MirrorError) -> UpstreamResponse {
        let s = settings
        let headers: [(name: String, value: String)] =
            [("Accept", accept)] + extraHeaders
            + ODataVersionHeaders.download(configured: s.version, accept: accept) + s.customFields
        let full = s.urlSuffix.map { url.contains($0) } == true ? url : s.withSuffix(url)
        do {
            let r = try client.perform(
                UpstreamRequest(
                    method: "GET", url: full, headers: headers, connectTimeout: s.connectTimeout,
                    timeout: s.timeout))
            reachability.reportSuccess()
            return r
        } catch {
            reachability.reportFailure(error.description)
            throw MirrorError("upstream unreachable: \(error)")
        }
    }

    func runDownload() throws -> ODataDownloadStats {
        let s = settings
        var metadataError: MirrorError?
        do {
            let r = try upstreamGET(s.upstream + "$metadata", accept: "application/xml")
            guard r.status == 200 else { throw MirrorError("$metadata answered \(r.status)") }
            try mirror.install(metadata: r.body)
        } catch let e as MirrorError {
            metadataError = e
        } catch {
            metadataError = MirrorError("$metadata does not parse: \(error)")
        }
        if let metadataError {
            if mirror.model == nil, let file = mirrorSettings.bootstrapMetadata {
                guard let bytes = FileManager.default.contents(atPath: file) else {
                    throw MirrorError("cannot read bootstrap metadata \(file)")
                }
                try mirror.install(metadata: [UInt8](bytes))
            }
            if mirror.lastDownloadAt == nil, !mirrorSettings.bootstrapData.isEmpty {
                return try loadBootstrap()
            }
            throw metadataError
        }
        var stats = ODataDownloadStats(entitySets: [:], durationMs: 0)
        for request in mirrorSettings.definingRequests {
            let read = try download(request)
            stats.requests[request.name] = read.read
            for (k, v) in read.stored { stats.entitySets[k, default: 0] += v }
        }
        if !mirrorSettings.definingRequests.isEmpty { try mirror.dropBootstrap() }
        return stats
    }

    /// Loads `bootstrap.data` files (each a V4 `{"value":[…]}`, a V2 `{"d":{"results":[…]}}` or a bare array).
    func loadBootstrap() throws -> ODataDownloadStats {
        guard let m = mirror.model else { throw MirrorError("no $metadata for the bootstrap data") }
        var total: [String: Int] = [:]
        for (set, file) in mirrorSettings.bootstrapData.sorted(by: { $0.key < $1.key }) {
            guard let layout = m.layouts[set] else { throw MirrorError("bootstrap: no entity set \(set)") }
            guard let bytes = FileManager.default.contents(atPath: file) else {
                throw MirrorError("cannot read bootstrap data \(file)")
            }
            let body: RawJSON
            do { body = try RawJSON.parse([UInt8](bytes)) } catch { throw MirrorError("\(file): \(error)") }
            var rows: [String: [MirrorEntity]] = [set: []]
            var links: [MirrorLinkRecord] = []
            for item in Self.entities(in: body).items {
                if let members = item.members {
                    Self.ingest(
                        members, set: set, type: layout.entityType, model: m, into: &rows, links: &links)
                }
            }
            let stored = try mirror.replace(request: "bootstrap:" + set, query: set, rows: rows, links: links)
            for (k, v) in stored { total[k, default: 0] += v }
        }
        return ODataDownloadStats(entitySets: total, durationMs: 0)
    }

    /// Every page of defining request `request` (with `Prefer: odata.track-changes` when `track`): its rows,
    /// links, the delta link of its last page, and the page size the upstream used for the set.
    func fetchDefiningRequest(_ request: ODataMirrorSettings.DefiningRequest, track: Bool = false) throws -> (
        rows: [String: [MirrorEntity]], links: [MirrorLinkRecord], deltaLink: String?,
        paging: (set: String, pageSize: Int?)
    ) {
        guard let m = mirror.model else { throw MirrorError("no $metadata") }
        let s = settings
        let (set, type) = try definingTarget(request, model: m)
        var rows: [String: [MirrorEntity]] = [set: []]
        var links: [MirrorLinkRecord] = []
        var url: String? = s.upstream + Self.encodeQuery(request.query)
        var pages = 0
        var deltaLink: String?
        var pageSize: Int?
        while let current = url {
            pages += 1
            guard pages <= 100_000 else {
                throw MirrorError("defining request \(request.name): too many pages")
            }
            let r = try upstreamGET(current, extraHeaders: track ? [Self.trackChanges] : [])
            if track, pages == 1, (400..<500).contains(r.status), ![401, 403, 408, 429].contains(r.status) {
                throw TrackingRefused(status: r.status)
            }
            guard r.status == 200 else {
                throw MirrorError(
                    "defining request \(request.name) answered \(r.status): \(String(decoding: r.body.prefix(300), as: UTF8.self))"
                )
            }
            let body: RawJSON
            do { body = try RawJSON.parse(r.body) } catch {
                throw MirrorError("defining request \(request.name): \(error)")
            }
            let (items, next) = Self.entities(in: body)
            for item in items {
                if let members = item.members {
                    Self.ingest(members, set: set, type: type, model: m, into: &rows, links: &links)
                }
            }
            if track, let link = Self.deltaLink(in: body) { deltaLink = link }
            if pages == 1, let next, !next.isEmpty, !items.isEmpty { pageSize = items.count }
            url = next.flatMap { $0.isEmpty ? nil : absolute($0) }
        }
        return (rows, links, deltaLink, (set, pageSize))
    }

    /// A link the upstream gave, absolute (relative ones are taken from the service root).
    func absolute(_ link: String) -> String {
        link.hasPrefix("http://") || link.hasPrefix("https://") ? link : settings.upstream + link
    }

    /// Percent-encodes spaces and other characters not allowed in a URL, leaving `%XX` escapes as they are.
    static func encodeQuery(_ q: String) -> String { FormCodec.percentEncode(q, keeping: .url) }

    /// The upstream's version of one entity (`path` relative to the service root, e.g. `Products(2)`),
    /// ingested as stored: `.found` with its ETag (the body's, else the `ETag` header), `.gone` on 404,
    /// `.unknown` when the upstream cannot tell (unreachable, another status, a body that is no entity).
    func fetchEntity(
        _ path: String, set: String, type: String, extraHeaders: [(name: String, value: String)] = []
    ) -> FetchedEntity {
        guard let m = mirror.model,
            let r = try? upstreamGET(settings.upstream + path, extraHeaders: extraHeaders)
        else { return .unknown }
        if r.status == 404 { return .gone }
        guard r.status == 200, let body = try? RawJSON.parse(r.body) else { return .unknown }
        var object = body
        if let d = body["d"] { object = d["results"] ?? d }
        guard let members = object.members else { return .unknown }
        var rows: [String: [MirrorEntity]] = [:]
        var links: [MirrorLinkRecord] = []
        Self.ingest(members, set: set, type: type, model: m, into: &rows, links: &links)
        guard var entity = rows[set]?.last else { return .unknown }
        if entity.etag == nil { entity.etag = r.header("ETag") }
        return .found(entity)
    }
}

/// What the upstream said of one entity.
enum FetchedEntity {
    case found(MirrorEntity)
    case gone
    case unknown
}

/// The download scheduler: a download at start when the mirror was never downloaded (an upload when
/// changes were queued before a restart), then every `interval` (an upload first while changes wait),
/// and an upload whenever the upstream becomes reachable again (the upload downloads after a complete
/// run, also when held requests remain).
final class ODataDownloadScheduler: ODataServicePart {
    let downloader: ODataDownloader
    let uploader: ODataUploader
    let interval: Duration
    let stopSignal: StopSignal

    init(downloader: ODataDownloader, uploader: ODataUploader, interval: Duration, stopSignal: StopSignal) {
        self.downloader = downloader
        self.uploader = uploader
        self.interval = interval
        self.stopSignal = stopSignal
    }

    var context: ODataServiceContext { downloader.context }

    /// Starts the scheduler thread and the reachability trigger.
    func start() {
        reachability.onChange { [self] up in
            // Upload first; the upload starts the download when it leaves the queue empty.
            if up { uploader.upload(completion: nil) }
        }
        startThread(named: "mg-odata-\(downloader.settings.name)") { [self] in run() }
    }

    private func run() {
        if mirror.lastDownloadAt == nil {
            _ = downloader.download(completion: nil)
        } else if queue.count > 0 {
            // Changes queued before a restart: upload them (the upload then downloads).
            uploader.upload(completion: nil)
        }
        while true {
            let interval = self.interval
            downloader.state.withLock { $0.nextSyncAt = Date().addingTimeInterval(interval.seconds) }
            if !stopSignal.sleep(for: max(interval, .seconds(1))) { return }
            if reachability.isReachable {
                if queue.count > 0 {
                    uploader.upload(completion: nil)
                } else {
                    _ = downloader.download(completion: nil)
                }
            }
        }
    }
}

/// A run of which at most one goes on at a time (a download, an upload).
protocol ExclusiveRunState {
    var running: Bool { get set }
}

extension ExclusiveRunState {
    /// Claims the run: false when one is going on.
    mutating func claim() -> Bool {
        if running { return false }
        running = true
        return true
    }
}

/// Runs `body` on a new thread named `name`.
func startThread(named name: String, _ body: @escaping @Sendable () -> Void) {
    let thread = Thread(block: body)
    thread.name = name
    thread.start()
}
