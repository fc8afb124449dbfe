import Foundation
import GatewaySupport
import HTTPCore
import JSONCore
import Logging
import ODataCore
import Storage
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
    /// The rows came from the bootstrap files: the upstream did not answer (not in ``json``).
    public var fromBootstrap = false
    /// Per defining request, how it was read (in this pull: a download resumed by a later run reports the
    /// requests that run read).
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
}

/// The downloader: fills the mirror from the upstream — `$metadata` (byte-identical), then each defining
/// request with its pages (`@odata.nextLink`/`__next`), each page staged in ``DownloadCheckpoints`` as it
/// arrives (so that a download stopped at its run's budget, or killed, resumes from its last request and
/// page), and, once all are fetched, ingested into rows and link records and stored in one transaction
/// (``ODataMirror/replaceCounting(_:pending:)``); or the bootstrap files when the upstream never answered;
/// single entities fetched back for a forwarded write or a revert. A defining request with a stored delta
/// link is read by it as one unit, not staged: its changes are applied at once in a transaction of their own
/// (``ODataMirror/applyDelta(request:query:changed:removed:pending:deltaLink:)``) and the download moves on
/// to the next request; a refused or expired (`410`) link makes it a full, staged read.
///
/// Promises: at most one download runs at a time, on a thread of its own; a download runs also while
/// local changes wait in the queue, and never overwrites them (those entities keep their local version, a
/// locally deleted one stays deleted, until the upload); a request's delta link is stored with its rows;
/// every upstream call reports to the reachability tracker. It may touch the mirror, read the queue's count and call
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
            let result: Result<ODataDownloadStats, MirrorError>
            switch claimedDownload(shouldStop: { false }, progress: { _, _ in }) {
            case .done(let stats): result = .success(stats)
            case .failed(let error): result = .failure(error)
            case .stopped: result = .failure(MirrorError("the download stopped"))
            }
            completion?(result)
        }
        return true
    }

    /// How a download ended.
    enum Outcome {
        /// Every defining request is stored.
        case done(ODataDownloadStats)
        /// `shouldStop` said so after `pages` pages; the next download resumes there.
        case stopped(pages: Int)
        /// It failed (the staged pages are kept when the next download may continue them).
        case failed(MirrorError)
    }

    /// The pull of a replication run (blocking): resumes a stopped download, asks `shouldStop` after each
    /// stored page, reports each page to `progress` (the defining request, pages so far). Nil when a
    /// download is already running.
    func pull(shouldStop: @escaping () -> Bool, progress: @escaping (String, Int) -> Void) -> Outcome? {
        guard state.withLock({ $0.claim() }) else { return nil }
        return claimedDownload(shouldStop: shouldStop, progress: progress)
    }

    /// One download whose claim is held; releases it and tells the listeners (not for a stopped one).
    private func claimedDownload(shouldStop: () -> Bool, progress: (String, Int) -> Void) -> Outcome {
        let begin = Date()
        var outcome: Outcome
        do {
            outcome = try runDownload(shouldStop: shouldStop, progress: progress)
        } catch let e as MirrorError {
            outcome = .failed(e)
        } catch {
            outcome = .failed(MirrorError("\(error)"))
        }
        if case .done(var stats) = outcome {
            stats.durationMs = Int(Date().timeIntervalSince(begin) * 1000)
            outcome = .done(stats)
        }
        state.withLock { s in
            s.running = false
            switch outcome {
            case .done(let st):
                s.lastError = nil
                s.lastDurationMs = st.durationMs
                s.last = st
            case .failed(let e): s.lastError = e.description
            case .stopped: break
            }
        }
        let result: Result<ODataDownloadStats, MirrorError>
        switch outcome {
        case .done(let stats): result = .success(stats)
        case .failed(let e):
            logger.warning(
                "odata download failed", metadata: ["service": "\(settings.name)", "error": "\(e)"])
            result = .failure(e)
        case .stopped: return outcome
        }
        for l in listeners.withLock({ $0 }) { l(result) }
        return outcome
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

    func runDownload(shouldStop: () -> Bool = { false }, progress: (String, Int) -> Void = { _, _ in })
        throws -> Outcome
    {
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
                return .done(try loadBootstrap())
            }
            throw metadataError
        }
        guard let model = mirror.model else { throw MirrorError("no $metadata") }
        // Requests that leave the queue (an upload) while the download runs make what was read stale: it is
        // read again (the staged pages are dropped), at most three times.
        for attempt in 1...3 {
            do {
                return try stagedDownload(model, pending: try pendingChanges(), shouldStop, progress)
            } catch is MirrorDownloadRaced {
                context.checkpoints.clear()
                if attempt == 3 {
                    throw MirrorError(
                        "requests were uploaded during each of 3 downloads; it is retried later")
                }
            }
        }
        throw MirrorError("unreachable")
    }

    /// The defining requests of a download, resumed from the checkpoints or from the first: delta reads
    /// applied as they come, full reads staged page by page and stored together at the end.
    private func stagedDownload(
        _ model: MirrorModel, pending: @escaping (Database) throws -> MirrorPendingChanges,
        _ shouldStop: () -> Bool, _ progress: (String, Int) -> Void
    ) throws -> Outcome {
        let s = settings
        let requests = mirrorSettings.definingRequests
        // Resume a download of the same $metadata and defining requests; else start over.
        let fingerprint = DownloadCheckpoints.fingerprint(
            metadata: model.metadata, requests: requests.map { ($0.name, $0.query) })
        var position: DownloadCheckpoints.Position
        if let saved = context.checkpoints.position(), saved.fingerprint == fingerprint {
            position = saved
        } else {
            try context.checkpoints.start(fingerprint)
            position = .init(fingerprint: fingerprint, request: 0, next: nil, pages: 0)
        }
        var stats = ODataDownloadStats(entitySets: [:], durationMs: 0)
        var fallbacks: [String: String] = [:]
        while position.request < requests.count {
            let request = requests[position.request]
            let track = Self.tracksChanges(request.query)
            // A request with a delta link: the delta is one unit, applied at once (not staged).
            if position.next == nil, track,
                let link = mirror.deltaLink(request: request.name, query: request.query)
            {
                switch try fetchDelta(request, link: link) {
                case .changes(let rows, let removed, let next):
                    let o = try mirror.applyDelta(
                        request: request.name, query: request.query, changed: rows, removed: removed,
                        pending: pending, deltaLink: next)
                    stats.requests[request.name] = .init(
                        kind: "delta", changed: o.changed, removed: o.removed, keptLocal: o.keptLocal)
                    for (k, v) in o.stored { stats.entitySets[k, default: 0] += v }
                    position = try context.checkpoints.skip(at: position)
                    progress(request.name, position.pages)
                    if position.request < requests.count, shouldStop() {
                        return .stopped(pages: position.pages)
                    }
                    continue
                case .refused(let why):
                    fallbacks[request.name] = why
                    logger.notice(
                        "odata download: delta link not used; the defining request is read in full",
                        metadata: [
                            "service": "\(settings.name)", "request": "\(request.name)", "reason": "\(why)",
                        ])
                }
            }
            var asked = track && !state.withLock { $0.untracked.contains(request.name) }
            var url = position.next ?? (s.upstream + Self.encodeQuery(request.query))
            while true {
                guard position.pages <= 100_000 else {
                    context.checkpoints.clear()
                    throw MirrorError("defining request \(request.name): too many pages")
                }
                var r = try upstreamGET(url, extraHeaders: asked ? [Self.trackChanges] : [])
                if asked, position.next == nil, (400..<500).contains(r.status),
                    ![401, 403, 408, 429].contains(r.status)
                {
                    // The upstream refuses change tracking for this request (mock-sap: 400 for a set without a
                    // change property): read it without, and do not ask again until the gateway restarts.
                    logger.notice(
                        "odata download: the upstream refuses change tracking for this defining request; it is read in full",
                        metadata: [
                            "service": "\(settings.name)", "request": "\(request.name)",
                            "status": "\(r.status)",
                        ])
                    _ = state.withLock { $0.untracked.insert(request.name) }
                    asked = false
                    r = try upstreamGET(url)
                }
                guard r.status == 200 else {
                    if position.next != nil, r.status >= 400, r.status < 500 {
                        // The stored next link expired: the next download starts over.
                        context.checkpoints.clear()
                    }
                    throw MirrorError(
                        "defining request \(request.name) answered \(r.status): \(String(decoding: r.body.prefix(300), as: UTF8.self))"
                    )
                }
                let body: RawJSON
                do { body = try RawJSON.parse(r.body) } catch {
                    throw MirrorError("defining request \(request.name): \(error)")
                }
                let next = Self.entities(in: body).next.flatMap { $0.isEmpty ? nil : absolute($0) }
                position = try context.checkpoints.save(page: r.body, at: position, next: next)
                progress(request.name, position.pages)
                guard let next else { break }
                if shouldStop() { return .stopped(pages: position.pages) }
                url = next
            }
            if position.request < requests.count, shouldStop() { return .stopped(pages: position.pages) }
        }
        // Every full read is staged: they replace the previous ones in one transaction, each with the delta
        // link of its last page. (A request without staged pages was read by its delta link, and is stored.)
        var replacements: [ODataMirror.Replacement] = []
        var pageSizes: [(set: String, size: Int?)] = []
        for (i, request) in requests.enumerated() {
            let pages = try context.checkpoints.pages(request: i)
            if pages.isEmpty { continue }
            let (set, type) = try definingTarget(request, model: model)
            let track = Self.tracksChanges(request.query)
            var rows: [String: [MirrorEntity]] = [set: []]
            var links: [MirrorLinkRecord] = []
            var deltaLink: String?
            for (n, page) in pages.enumerated() {
                let body: RawJSON
                do { body = try RawJSON.parse(page) } catch {
                    throw MirrorError("defining request \(request.name): \(error)")
                }
                let (items, next) = Self.entities(in: body)
                for item in items {
                    if let members = item.members {
                        Self.ingest(members, set: set, type: type, model: model, into: &rows, links: &links)
                    }
                }
                if track, let link = Self.deltaLink(in: body) { deltaLink = link }
                // The page size the upstream used for the set (a first page with a next link): offline
                // answers page the same way.
                if n == 0 {
                    pageSizes.append(
                        (set, next.map { !$0.isEmpty && !items.isEmpty } == true ? items.count : nil))
                }
            }
            replacements.append(
                .init(
                    request: request.name, query: request.query, rows: rows, links: links,
                    deltaLink: deltaLink))
        }
        if !replacements.isEmpty {
            let outcomes = try mirror.replaceCounting(replacements, pending: pending)
            for (r, o) in zip(replacements, outcomes) {
                stats.requests[r.request] = .init(
                    kind: "full", changed: o.changed, removed: nil, keptLocal: o.keptLocal,
                    fallback: fallbacks[r.request])
                for (k, v) in o.stored { stats.entitySets[k, default: 0] += v }
            }
        }
        context.checkpoints.clear()
        for p in pageSizes { try mirror.setUpstreamPageSize(p.set, p.size) }
        if !requests.isEmpty { try mirror.dropBootstrap() }
        return .done(stats)
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
        return ODataDownloadStats(entitySets: total, durationMs: 0, fromBootstrap: true)
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
