import Foundation
import GatewaySupport
import HTTPCore
import JSONCore
import Logging
import Replication
import Synchronization
import Upstream

/// What every part of one OData service shares: its mirror and request queue (one file), its settings,
/// the blocking upstream client, the upstream's reachability tracker, the CSRF sessions (the gateway's
/// token for clients, the upstream's per set of credentials, used by forwarded writes and uploads alike),
/// the download's checkpoints, the way to ask the replication scheduler for a run, and the logger.
struct ODataServiceContext: Sendable {
    let mirror: ODataMirror
    let queue: ODataRequestQueue
    let checkpoints: DownloadCheckpoints
    let runs: RunRequests
    let settings: ODataServiceSettings
    let mirrorSettings: ODataMirrorSettings
    let client: UpstreamClient
    let reachability: ReachabilityTracker
    let csrf: ODataCSRF
    let logger: Logger
}

/// Where the service's parts ask for a replication run now (a write queued while the upstream answers,
/// a reverted ErrorArchive entry): the scheduler decides, under the service's policy.
final class RunRequests: Sendable {
    private let target = Mutex<(@Sendable () -> Void)?>(nil)
    func connect(_ body: @escaping @Sendable () -> Void) { target.withLock { $0 = body } }
    /// Asks for a run (nothing when no scheduler is connected).
    func request() { target.withLock { $0 }?() }
}

/// A part of an OData service: reaches the shared pieces through its ``ODataServiceContext``.
protocol ODataServicePart: Sendable {
    var context: ODataServiceContext { get }
}

extension ODataServicePart {
    var mirror: ODataMirror { context.mirror }
    var queue: ODataRequestQueue { context.queue }
    var settings: ODataServiceSettings { context.settings }
    var mirrorSettings: ODataMirrorSettings { context.mirrorSettings }
    var client: UpstreamClient { context.client }
    var reachability: ReachabilityTracker { context.reachability }
    var csrf: ODataCSRF { context.csrf }
    var logger: Logger { context.logger }
    /// The service's version (configured, else from the mirrored `$metadata`, else V4).
    var version: ODataVersion { mirror.version(configured: settings.version) }
    var mount: ODataMount { settings.mountPoint }
}

/// One OData service behind one facade: its SQLite mirror filled by defining requests (or bootstrap
/// files), the routing of reads and writes, offline writes into a durable request queue, their upload,
/// the ErrorArchive, and its replication runs: upload, then download (push, then pull), scheduled by the
/// gateway's ``ReplicationScheduler`` under the service's policy, and on demand.
///
/// The parts, each owning what its name says and holding only the parts below it: ``ODataRouter`` (owns
/// the ``ODataForwarder`` and the CSRF sessions) → ``ODataLocalReader``, ``ODataOfflineWriter``,
/// ``ODataErrorArchive`` → ``ODataUploader`` → ``ODataDownloader`` → ``ODataRequestQueue`` and
/// ``ODataMirror``; ``replicationRun(_:)`` is one scheduled run.
///
/// Promises: ``handle(_:_:)`` never blocks; every response carries `X-Mirrorgate-Origin: remote|local`;
/// at most one download and one upload run at a time; a run pushes before it pulls.
public final class ODataService: Sendable {
    /// The router, through which every part is reached (it holds them all, none holds it).
    let router: ODataRouter
    /// The scheduler of the service's runs (shared with the other mirrors).
    public let replication: ReplicationScheduler
    /// Client requests mark the service in use here.
    let usage = ReplicationUsage()
    /// Stopped by ``stop()``: manual uploads stop between two requests.
    let stopSignal = StopSignal()
    /// The service's replication (registered with ``replication`` by `init`, unless a configuration
    /// reload registers it with the others).
    public let replicationJob: ReplicationJob

    /// Opens the mirror (creating it; installing `bootstrap.metadata` when nothing was mirrored yet) and
    /// the queue, and assembles the parts. Forwarding runs on `loop`, blocking upstream calls use
    /// `client`, local work runs on `pool`. The service's runs are registered with `replication` under
    /// `policy` (a scheduler of its own, never started, when nil: runs then happen only when asked);
    /// with `register` false the caller registers ``replicationJob`` (a reload, all jobs at once).
    public init(
        settings: ODataServiceSettings, mirrorSettings: ODataMirrorSettings, loop: CurlLoop,
        client: UpstreamClient, pool: WorkerPool, logger: Logger, replication: ReplicationScheduler? = nil,
        policy: String = "default", register: Bool = true
    ) throws {
        let mirror = try ODataMirror(
            path: mirrorSettings.databasePath, encryption: mirrorSettings.storeEncryption)
        if mirror.model == nil, let file = mirrorSettings.bootstrapMetadata,
            let bytes = FileManager.default.contents(atPath: file)
        {
            try mirror.install(metadata: [UInt8](bytes))
        }
        let forwarder = ODataForwarder(settings: settings, loop: loop, client: client, logger: logger)
        let runs = RunRequests()
        let context = ODataServiceContext(
            mirror: mirror, queue: try ODataRequestQueue(pool: mirror.pool),
            checkpoints: try DownloadCheckpoints(pool: mirror.pool), runs: runs, settings: settings,
            mirrorSettings: mirrorSettings, client: client, reachability: forwarder.reachability,
            csrf: ODataCSRF(), logger: logger)
        // Requests wait for their writers' credentials only while those are what the upload sends.
        if mirrorSettings.uploadCredentials == .service { try context.queue.credentials.dropAll() }
        let reader = ODataLocalReader(
            mirror: mirror, mount: settings.mountPoint, version: settings.version,
            pageSize: mirrorSettings.pageSize)
        let downloader = ODataDownloader(context: context)
        // The bootstrap rows answer from the first request on: loaded here, before the server listens,
        // not by the first (asynchronous) replication run, while nothing was ever downloaded or loaded.
        if mirror.model != nil, mirror.lastDownloadAt == nil, !mirrorSettings.bootstrapData.isEmpty,
            mirror.rowCounts().values.allSatisfy({ $0 == 0 })
        {
            do { _ = try downloader.loadBootstrap() } catch {
                logger.warning("odata \(settings.name): bootstrap data not loaded: \(error)")
            }
        }
        let uploader = ODataUploader(
            context: context, downloader: downloader, stopSignal: stopSignal)
        router = ODataRouter(
            context: context, forwarder: forwarder, reader: reader,
            writer: ODataOfflineWriter(context: context, reader: reader),
            archive: ODataErrorArchive(context: context, uploader: uploader), uploader: uploader, pool: pool)
        let replication = replication ?? ReplicationScheduler(policies: [:], store: nil)
        self.replication = replication
        let id = "odata:\(settings.name)"
        replicationJob = ReplicationJob(
            api: .odata, name: settings.name, policy: policy,
            // Bootstrap rows are no download: the first run starts at once (and retries with backoff).
            lastSuccess: mirror.holdsBootstrap ? nil : mirror.lastDownloadAt.flatMap(Self.date), usage: usage,
            isReachable: { [forwarder] in forwarder.reachability.isReachable },
            urgency: { [context] in
                if context.mirror.lastDownloadAt == nil { return .required }
                return context.queue.count > 0 ? .pending : .none
            },
            run: { [uploader, downloader] run in Self.replicationRun(run, uploader, downloader) })
        if register { replication.register(replicationJob) }
        runs.connect { replication.requestRun(id) }
        forwarder.reachability.onChange { up in replication.reachabilityChanged(id, reachable: up) }
    }

    /// Forwarding settings (name, mount, upstream, version, custom headers, timeouts).
    public var settings: ODataServiceSettings { router.settings }
    /// Mirror, routing and upload settings.
    public var mirrorSettings: ODataMirrorSettings { router.mirrorSettings }
    /// The mirror.
    public var mirror: ODataMirror { router.mirror }
    /// The durable request queue (offline writes) and the ErrorArchive.
    public var queue: ODataRequestQueue { router.queue }
    var reader: ODataLocalReader { router.reader }
    var writer: ODataOfflineWriter { router.writer }
    var archive: ODataErrorArchive { router.archive }
    var uploader: ODataUploader { router.uploader }
    var downloader: ODataDownloader { router.downloader }

    /// The service's name.
    public var name: String { settings.name }
    /// Tracks whether the upstream answers.
    public var reachability: ReachabilityTracker { router.forwarder.reachability }
    /// The service's version (configured, else from the mirrored `$metadata`, else V4).
    public var version: ODataVersion { mirror.version(configured: settings.version) }

    /// Routes one request under the mount without blocking (and marks the service in use).
    public func handle(_ request: HTTPRequest, _ responder: any Responder) {
        usage.touch()
        router.handle(request, responder)
    }

    /// The separate service at `/_mirrorgate/odata/{service}/` (`path` relative to it): its service
    /// document, `$metadata`, the ErrorArchive/RequestQueue/EventLog sets, and `DELETE
    /// ErrorArchive('<RequestID>')`; answered on the pool.
    public func answerArchiveService(
        _ request: HTTPRequest, path: String, serviceRoot: String, _ responder: any Responder
    ) {
        let entityRoot = settings.mountPoint.gatewayRoot(for: request)
        router.local(responder) { [archive] in
            archive.response(
                request, path: path, serviceRoot: serviceRoot, entityRoot: entityRoot, isService: true)
        }
    }

    /// Stops manual uploads between two requests (the scheduler is stopped by its owner).
    public func stop() { stopSignal.stop() }

    /// Starts a download on a background thread; false when one is already running.
    public func download(completion: (@Sendable (Result<ODataDownloadStats, MirrorError>) -> Void)?) -> Bool {
        downloader.download(completion: completion)
    }

    /// Starts an upload of the queue on a background thread (then a download when the queue is left
    /// empty); false when one is already running.
    @discardableResult
    public func upload(completion: (@Sendable (ODataUploadStats) -> Void)?) -> Bool {
        uploader.upload(completion: completion)
    }

    /// Registers a listener for uploads: called with nil when a run starts, then with its outcome.
    public func onUpload(_ body: @escaping @Sendable (ODataUploadStats?) -> Void) { uploader.onUpload(body) }

    /// Registers a listener for download outcomes.
    public func onDownload(_ body: @escaping @Sendable (Result<ODataDownloadStats, MirrorError>) -> Void) {
        downloader.onDownload(body)
    }

    /// `DELETE …/ErrorArchive('<RequestID>')`: see ``ODataErrorArchive``. Nil when no entry has that
    /// RequestID; throws ``ErrorArchiveBusy`` while an upload runs.
    public func revertErrorArchive(_ requestID: String) throws -> ErrorArchiveRevert? {
        try archive.revert(requestID)
    }

    /// `{reachable, pendingRequests, inFlight, inDoubt, held, waitingForCredentials, credentialHolds,
    /// errorArchive, uploading, lastUploadAt, lastUpload, lastDownloadAt, lastDownload, nextSyncAt, lastError,
    /// downloading, version, entitySets}`; `lastUpload` is the last run with something queued: its counts,
    /// requests before and after the queue was prepared, and what the preparation did; `lastDownload` the
    /// last successful download since the start: its kind (`full`, `delta`, `mixed`), entities changed and
    /// removed, local versions kept, duration, and the same per defining request.
    public func status() -> JSON {
        let s = downloader.state.withLock { $0 }
        let replication = self.replication.status("odata:\(name)")
        var o = JSONObject()
        o["reachable"] = .bool(reachability.isReachable)
        let u = uploader.state.withLock { $0 }
        o["pendingRequests"] = .int(Int64(queue.count))
        o["inFlight"] = .int(u.running ? 1 : 0)
        o["inDoubt"] = .int(Int64(queue.inDoubtCount()))
        o["held"] = .int(Int64(queue.heldCount()))
        o["waitingForCredentials"] = .int(Int64(queue.credentials.waitingCount()))
        // Why requests wait: per writer whose credentials the upstream refused (no credentials shown).
        o["credentialHolds"] = .array(
            queue.credentials.all().map { h in
                [
                    "writer": .string(h.writer), "status": .int(Int64(h.status)), "since": .string(h.since),
                    "newerCredentialsOffered": .bool(h.candidate != nil),
                    "reason": .string(
                        "the upstream answered \(h.status) to this writer's credentials at upload; its requests wait until a newer request brings credentials the upstream accepts"
                    ),
                ]
            })
        o["errorArchive"] = .int(Int64(queue.archivedCount()))
        o["uploading"] = .bool(u.running)
        o["lastUploadAt"] = u.lastUploadAt.map(JSON.string) ?? .null
        if let last = u.last {
            var l = last.json.objectValue ?? JSONObject()
            if let p = last.preparation { l["preparation"] = p.json }
            o["lastUpload"] = .object(l)
        } else {
            o["lastUpload"] = .null
        }
        o["lastDownloadAt"] = mirror.lastDownloadAt.map(JSON.string) ?? .null
        // The last successful download since the start: full or delta, entities changed and removed, duration.
        o["lastDownload"] = s.last?.json ?? .null
        o["nextSyncAt"] = replication?["nextRunAt"] ?? .null
        o["lastError"] = s.lastError.map(JSON.string) ?? .null
        o["resumePending"] = .bool(router.context.checkpoints.position() != nil)
        o["downloading"] = .bool(s.running)
        o["version"] = mirror.model.map { .string($0.version.rawValue) } ?? .null
        var sets = JSONObject()
        for (k, v) in mirror.rowCounts().sorted(by: { $0.key < $1.key }) { sets[k] = .int(Int64(v)) }
        o["entitySets"] = .object(sets)
        o["replication"] = replication ?? .null
        return .object(o)
    }
}
