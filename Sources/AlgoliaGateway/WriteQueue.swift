import Foundation
import GatewayConfig
import GatewaySupport
import JSONCore
import Logging
import Storage
import Synchronization
import Upstream

/// How a queued write's replay ended.
public enum ReplayOutcome: Sendable {
    /// An upstream host answered (any status but a 5xx, which counts as unreachable).
    case answered(status: Int, body: [UInt8])
    /// No host could take the request, and none of it was sent: it can be sent again.
    case unreachable(String)
    /// The request was (partly) sent and no complete answer came back: the upstream may have applied it.
    case unknown(String)
}

/// Sends one queued write to the upstream. ``HostsReplayTransport`` is the real one; tests script one.
public protocol WriteReplayTransport: Sendable {
    /// Sends `method target` with `headers` and `body` (blocking; called from the replay thread).
    func send(method: String, target: String, headers: [(name: String, value: String)], body: [UInt8])
        -> ReplayOutcome
}

/// Replays on Algolia's write hosts in order, within `writeTimeout` per host.
public struct HostsReplayTransport: WriteReplayTransport {
    let hosts: [AlgoliaHost]
    let client: UpstreamClient
    let connectTimeout: Duration
    let timeout: Duration

    /// A transport over `hosts` (those accepting writes are used).
    public init(hosts: [AlgoliaHost], client: UpstreamClient, connectTimeout: Duration, timeout: Duration) {
        self.hosts = hosts.filter { $0.accept != .read }
        self.client = client
        self.connectTimeout = connectTimeout
        self.timeout = timeout
    }

    public func send(method: String, target: String, headers: [(name: String, value: String)], body: [UInt8])
        -> ReplayOutcome
    {
        var problem = "no Algolia write host configured"
        for host in hosts {
            var request = UpstreamRequest(
                method: method, url: host.url + target, headers: headers, body: body,
                connectTimeout: connectTimeout,
                timeout: timeout)
            request.idempotent = false
            do {
                let response = try client.perform(request)
                if response.status >= 500 {
                    problem = "\(host.url) answered \(response.status)"
                    continue
                }
                return .answered(status: response.status, body: response.body)
            } catch {
                if error.outcomeUnknown { return .unknown("\(host.url): \(error)") }
                problem = "\(host.url): \(error)"
            }
        }
        return .unreachable(problem)
    }
}

/// The writes to mirrored indices with `offlineWrites: queue` made while the upstream was unreachable:
/// each was applied to the mirror and stored here, in the same transaction, with the writer's own
/// application ID and key (in `search.sqlite`, mode 0600; never logged, deleted with the row). When the
/// upstream answers again they are replayed in the order they were made, one at a time.
///
/// Promises: a write is sent until an answer says what became of it (a 2xx: its task follows the
/// upstream's; a 4xx: listed at ``failedWrites(_:)``, its task ends); a network failure or a 5xx stops
/// the replay, which resumes later from the same write; a write whose outcome is unknown (sent, no
/// answer) is sent again only when that is harmless (everything but partial updates with `Increment`,
/// `Decrement`, `Add` or `Remove`), else listed as failed with status 0. Syncs of an index wait until its
/// queue is empty (they would replace the mirror without the queued writes); the index is synced as soon
/// as its queue drains, which repairs the mirror where a replay was refused.
public final class WriteQueue: Sendable {
    private let pool: DatabasePool
    private let tasks: TaskLog
    private let transport: (any WriteReplayTransport)?
    private let reachability: ReachabilityTracker?
    private let logger: Logger
    private let pending = Mutex<[String: Int]>([:])
    private let running = Mutex(false)
    private let ticker = Mutex<ScheduledWork?>(nil)
    /// Called with an index whose queue just became empty (and with every index that has writes at start).
    private let onDrained: @Sendable (String) -> Void
    private let onQueued: @Sendable (String) -> Void

    init(
        pool: DatabasePool, tasks: TaskLog, transport: (any WriteReplayTransport)?,
        reachability: ReachabilityTracker?,
        logger: Logger, onQueued: @escaping @Sendable (String) -> Void,
        onDrained: @escaping @Sendable (String) -> Void
    ) throws {
        self.pool = pool
        self.tasks = tasks
        self.transport = transport
        self.reachability = reachability
        self.logger = logger
        self.onQueued = onQueued
        self.onDrained = onDrained
        try WriteTables.migrator.migrate(pool)
        let counts = try pool.read { db in
            try db.query("SELECT index_name, count(*) FROM mg_algolia_write_queue GROUP BY index_name")
        }
        var loaded: [String: Int] = [:]
        for row in counts { if let name = row[0].string { loaded[name] = row[1].int ?? 0 } }
        pending.withLock { $0 = loaded }
        for name in loaded.keys { onQueued(name) }
    }

    /// Whether writes of `index` wait for the upstream.
    public func hasPending(_ index: String) -> Bool { pending.withLock { ($0[index] ?? 0) > 0 } }

    /// Writes waiting, by index.
    public var counts: [String: Int] { pending.withLock { $0 } }

    /// One write to queue.
    struct Entry {
        var index: String
        var method: String
        var target: String
        var body: [UInt8]
        var appId: String
        var apiKey: String
        var idempotent: Bool
    }

    /// Stores `entry` with task `task` (inside the write's transaction).
    func insert(_ entry: Entry, task: Int64, in db: Database) throws {
        try db.run(
            """
            INSERT INTO mg_algolia_write_queue
                (index_name, task_id, method, target, body, app_id, api_key, idempotent, queued_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [
                .text(entry.index), .integer(task), .text(entry.method), .text(entry.target),
                .blob(entry.body),
                .text(entry.appId), .text(entry.apiKey), .integer(entry.idempotent ? 1 : 0),
                .real(Date().timeIntervalSince1970),
            ])
    }

    /// Notes a committed queued write of `index` (after its transaction).
    func queued(_ index: String) {
        pending.withLock { $0[index, default: 0] += 1 }
        onQueued(index)
    }

    /// Starts replaying: now, whenever the upstream becomes reachable, and every `interval` while writes
    /// wait and the upstream is believed reachable.
    func start(interval: Duration = .milliseconds(500)) {
        reachability?.onChange { [self] up in if up { kick() } }
        let work = Scheduler.shared.repeating(every: interval) { [self] in
            if !counts.isEmpty && (reachability?.isReachable ?? true) { kick() }
        }
        ticker.withLock { $0 = work }
        kick()
    }

    func stop() { ticker.withLock { $0?.cancel() } }

    /// Starts a replay thread unless one runs or nothing waits.
    func kick() {
        guard transport != nil, !counts.isEmpty else { return }
        let start = running.withLock { r -> Bool in
            if r { return false }
            r = true
            return true
        }
        guard start else { return }
        let thread = Thread { [self] in
            drain()
            running.withLock { $0 = false }
        }
        thread.name = "mg-replay"
        thread.start()
    }

    private struct Row {
        var seq: Int64
        var entry: Entry
        var task: Int64
        var queuedAt: Double
    }

    private func head() -> Row? {
        let rows = try? pool.read { db in
            try db.query(
                """
                SELECT seq, index_name, task_id, method, target, body, app_id, api_key, idempotent, queued_at
                FROM mg_algolia_write_queue ORDER BY seq LIMIT 1
                """)
        }
        guard let row = rows?.first, let seq = row[0].int64, let index = row[1].string,
            let task = row[2].int64
        else { return nil }
        let entry = Entry(
            index: index, method: row[3].string ?? "POST", target: row[4].string ?? "/",
            body: row[5].bytes ?? [],
            appId: row[6].string ?? "", apiKey: row[7].string ?? "", idempotent: row[8].int64 == 1)
        return Row(seq: seq, entry: entry, task: task, queuedAt: row[9].double ?? 0)
    }

    /// Replays from the head until the queue is empty or the upstream cannot take more now.
    func drain() {
        guard let transport else { return }
        while let row = head() {
            let e = row.entry
            let headers: [(name: String, value: String)] = [
                ("X-Algolia-Application-Id", e.appId), ("X-Algolia-API-Key", e.apiKey),
                ("Content-Type", "application/json; charset=UTF-8"),
            ]
            let outcome = transport.send(method: e.method, target: e.target, headers: headers, body: e.body)
            switch outcome {
            case .answered(let status, let body) where (200..<300).contains(status):
                reachability?.reportSuccess()
                let upstreamTask = (try? JSON.parse(body))?["taskID"]?.intValue.map(Int64.init)
                finish(row) { db in try tasks.replayed(row.task, upstreamTask: upstreamTask, in: db) }
                logger.info(
                    "queued write replayed", metadata: ["index": "\(e.index)", "status": "\(status)"])
            case .answered(429, _):
                return
            case .answered(let status, let body):
                reachability?.reportSuccess()
                let message = (try? JSON.parse(body))?["message"]?.stringValue ?? "status \(status)"
                fail(row, status: status, message: message)
            case .unreachable(let problem):
                reachability?.reportFailure(problem)
                return
            case .unknown(let problem):
                if e.idempotent { return }
                fail(
                    row, status: 0,
                    message:
                        "outcome unknown (\(problem)): the upstream may or may not have applied it; not sent again because its built-in operations are not idempotent"
                )
            }
        }
    }

    /// Removes the row (and its credentials) with `also` in one transaction; reports a drained index.
    private func finish(_ row: Row, also: (Database) throws -> Void) {
        do {
            try pool.write { db in
                try db.transaction {
                    try also(db)
                    try db.run("DELETE FROM mg_algolia_write_queue WHERE seq = ?", [.integer(row.seq)])
                }
            }
        } catch {
            logger.error("cannot update the write queue", metadata: ["error": "\(error)"])
            return
        }
        let drained = pending.withLock { p -> Bool in
            let left = (p[row.entry.index] ?? 1) - 1
            p[row.entry.index] = left > 0 ? left : nil
            return left <= 0
        }
        if drained { onDrained(row.entry.index) }
    }

    private func fail(_ row: Row, status: Int, message: String) {
        let e = row.entry
        logger.warning(
            "queued write refused on replay", metadata: ["index": "\(e.index)", "status": "\(status)"])
        finish(row) { db in
            try db.run(
                """
                INSERT INTO mg_algolia_failed_writes
                    (index_name, task_id, method, target, body, status, message, queued_at, failed_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
                [
                    .text(e.index), .integer(row.task), .text(e.method), .text(e.target), .blob(e.body),
                    .integer(Int64(status)), .text(message), .real(row.queuedAt),
                    .real(Date().timeIntervalSince1970),
                ])
            try tasks.publish(row.task, in: db)
        }
    }

    /// `GET /_mirrorgate/algolia/indices/{i}/failedWrites`: the writes of `index` the upstream refused,
    /// oldest first (never with credentials).
    public func failedWrites(_ index: String) -> JSON {
        let rows =
            (try? pool.read { db in
                try db.query(
                    """
                    SELECT task_id, method, target, body, status, message, queued_at, failed_at
                    FROM mg_algolia_failed_writes WHERE index_name = ? ORDER BY id
                    """, [.text(index)])
            }) ?? []
        let items: [JSON] = rows.map { row in
            let body = row[3].bytes.flatMap { try? JSON.parse($0) } ?? .null
            return [
                "taskID": .int(row[0].int64 ?? 0), "method": .string(row[1].string ?? ""),
                "path": .string(row[2].string ?? ""), "body": body, "status": .int(row[4].int64 ?? 0),
                "message": .string(row[5].string ?? ""),
                "queuedAt": .string(Timestamps.rfc3339(secondsSince1970: row[6].double ?? 0)),
                "failedAt": .string(Timestamps.rfc3339(secondsSince1970: row[7].double ?? 0)),
            ]
        }
        return [
            "index": .string(index), "pending": .int(Int64(counts[index] ?? 0)),
            "failedWrites": .array(items),
        ]
    }
}
