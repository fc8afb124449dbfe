import Foundation
import GatewaySupport
import HTTPCore
import JSONCore
import Logging
import Upstream

/// What every part of one OData service shares: its mirror and request queue (one file), its settings,
/// the blocking upstream client, the upstream's reachability tracker, the CSRF sessions (the gateway's
/// token for clients, the upstream's per set of credentials, used by forwarded writes and uploads alike)
/// and the logger.
struct ODataServiceContext: Sendable {
    let mirror: ODataMirror
    let queue: ODataRequestQueue
    let settings: ODataServiceSettings
    let mirrorSettings: ODataMirrorSettings
    let client: UpstreamClient
    let reachability: ReachabilityTracker
    let csrf: ODataCSRF
    let logger: Logger
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
/// the ErrorArchive, and the downloads at start, after uploads, on demand and on an interval.
///
/// The parts, each owning what its name says and holding only the parts below it: ``ODataRouter`` (owns
/// the ``ODataForwarder`` and the CSRF sessions) → ``ODataLocalReader``, ``ODataOfflineWriter``,
/// ``ODataErrorArchive`` → ``ODataUploader`` → ``ODataDownloader`` → ``ODataRequestQueue`` and
/// ``ODataMirror``; ``ODataDownloadScheduler`` starts uploads and downloads.
///
/// Promises: ``handle(_:_:)`` never blocks; every response carries `X-Mirrorgate-Origin: remote|local`;
/// at most one download and one upload run at a time; ``stop()`` ends the scheduler and any upload
/// backoff at once.
public final class ODataService: Sendable {
    /// The router, through which every part is reached (it holds them all, none holds it).
    let router: ODataRouter
    let scheduler: ODataDownloadScheduler
    /// Stopped by ``stop()``: ends the scheduler's interval wait and any upload backoff at once.
    let stopSignal = StopSignal()

    /// Opens the mirror (creating it; installing `bootstrap.metadata` when nothing was mirrored yet) and
    /// the queue, and assembles the parts. Forwarding runs on `loop`, blocking upstream calls use
    /// `client`, local work runs on `pool`.
    public init(
        settings: ODataServiceSettings, mirrorSettings: ODataMirrorSettings, loop: CurlLoop,
        client: UpstreamClient, pool: WorkerPool, logger: Logger
    ) throws {
        let mirror = try ODataMirror(
            path: mirrorSettings.databasePath, encryption: mirrorSettings.storeEncryption)
        if mirror.model == nil, let file = mirrorSettings.bootstrapMetadata,
            let bytes = FileManager.default.contents(atPath: file)
        {
            try mirror.install(metadata: [UInt8](bytes))
        }
        let forwarder = ODataForwarder(settings: settings, loop: loop, client: client, logger: logger)
        let context = ODataServiceContext(
            mirror: mirror, queue: try ODataRequestQueue(pool: mirror.pool), settings: settings,
            mirrorSettings: mirrorSettings, client: client, reachability: forwarder.reachability,
            csrf: ODataCSRF(), logger: logger)
        // Requests wait for their writers' credentials only while those are what the upload sends.
        if mirrorSettings.uploadCredentials == .service { try context.queue.credentials.dropAll() }
        let reader = ODataLocalReader(
            mirror: mirror, mount: settings.mountPoint, version: settings.version,
            pageSize: mirrorSettings.pageSize)
        let downloader = ODataDownloader(context: context)
        let uploader = ODataUploader(
            context: context, downloader: downloader, stopSignal: stopSignal)
        scheduler = ODataDownloadScheduler(
            downloader: downloader, uploader: uploader, interval: mirrorSettings.interval,
            stopSignal: stopSignal)
        router = ODataRouter(
            context: context, forwarder: forwarder, reader: reader,
            writer: ODataOfflineWriter(context: context, reader: reader),
            archive: ODataErrorArchive(context: context, uploader: uploader), uploader: uploader, pool: pool)
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

    /// Routes one request under the mount without blocking.
    public func handle(_ request: HTTPRequest, _ responder: any Responder) {
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

    /// Starts the scheduler: a download now when the mirror was never downloaded, then every
    /// `interval`, and an upload whenever the upstream becomes reachable again.
    public func start() { scheduler.start() }

    /// Stops the scheduler and any upload backoff.
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
        // The last successful download of this run: full or delta, entities changed and removed, duration.
        o["lastDownload"] = s.last?.json ?? .null
        if let next = s.nextSyncAt {
            let f = ISO8601DateFormatter()
            o["nextSyncAt"] = .string(f.string(from: next))
        } else {
            o["nextSyncAt"] = .null
        }
        o["lastError"] = s.lastError.map(JSON.string) ?? .null
        o["downloading"] = .bool(s.running)
        o["version"] = mirror.model.map { .string($0.version.rawValue) } ?? .null
        var sets = JSONObject()
        for (k, v) in mirror.rowCounts().sorted(by: { $0.key < $1.key }) { sets[k] = .int(Int64(v)) }
        o["entitySets"] = .object(sets)
        return .object(o)
    }
}
