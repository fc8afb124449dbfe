import JSONCore
import ODataCore
import Storage

/// The local changes a download must not overwrite, as seen inside its transaction.
public struct MirrorPendingChanges: Sendable {
    /// Whether any request is queued (rows written through the gateway then stay, even outside the
    /// downloaded rows).
    public var queued: Bool
    /// The entities queued requests change or name (``ODataKeyText/canonical(_:model:)`` form, `Set|K=v`),
    /// also those whose requests left the queue while the download ran: their downloaded versions are not
    /// stored.
    public var entities: Set<String>
    /// Of ``entities``, those whose requests left the queue (uploaded, archived, undone) while the
    /// download ran: the downloaded rows may predate the upload, so the download is not stored
    /// (``MirrorDownloadRaced``) and is read again.
    public var settled: Set<String>

    /// Nothing queued.
    public static let none = MirrorPendingChanges(queued: false, entities: [], settled: [])

    /// Creates the description of what is pending.
    public init(queued: Bool, entities: Set<String>, settled: Set<String>) {
        self.queued = queued
        self.entities = entities
        self.settled = settled
    }
}

/// What one defining request's download did to the mirror.
public struct MirrorDownloadOutcome: Sendable {
    /// Entities stored (a full read: every row it brought; a delta: added or changed entities).
    public var changed = 0
    /// Entities a delta removed (tombstones applied); nil for a full read.
    public var removed: Int?
    /// Downloaded entities passed over because a local change of theirs waits in the queue.
    public var keptLocal = 0
    /// Rows the request holds per entity set after the download.
    public var stored: [String: Int] = [:]
    /// Whether a delta link was kept for the next download.
    public var deltaLinkKept = false
}

/// Thrown inside a download's transaction (rolled back) when requests left the queue while the download
/// ran: what was downloaded may predate their upload, and the rows written locally may since carry server
/// keys no queued request names. The download reads the defining request again.
public struct MirrorDownloadRaced: Error, Sendable {}

/// An entity a delta says is gone: its set and its key (the `Set(key)` text the upstream named, or the
/// key properties it sent).
struct MirrorRemoval: Sendable {
    var set: String
    /// `Set(key)` as addressed by the upstream (`@id`, `id`, `__metadata.uri`, or built from key values).
    var entity: String
}

extension ODataMirror {
    /// The delta link stored for defining request `request` when it was last downloaded with `query`.
    public func deltaLink(request: String, query: String) -> String? {
        ((try? pool.read { db in
            try db.scalar(
                #"SELECT link FROM "_mg_delta" WHERE request = ? AND query = ?"#,
                [.text(request), .text(query)])
        }) ?? nil)?.string
    }

    /// Last in a download's transaction: stores `link` as `request`'s delta link (or forgets it when nil) and
    /// the time of the download.
    static func finishDownload(_ db: Database, request: String, query: String, link: String?, at now: String)
        throws
    {
        if let link {
            try db.run(
                #"INSERT OR REPLACE INTO "_mg_delta" (request, query, link) VALUES (?, ?, ?)"#,
                [.text(request), .text(query), .text(link)])
        } else {
            try db.run(#"DELETE FROM "_mg_delta" WHERE request = ?"#, [.text(request)])
        }
        try db.run(
            #"INSERT OR REPLACE INTO "_mg_meta" (key, value) VALUES ('lastDownloadAt', ?)"#, [.text(now)])
    }

    /// The canonical name (`Set|K=v`) of a downloaded entity of `set`.
    static func canonicalName(_ m: MirrorModel, set: String, _ properties: [(String, RawJSON)]) -> String? {
        guard let layout = m.layouts[set] else { return nil }
        let keys = m.model.keyProperties(of: layout.entityType)
        guard !keys.isEmpty else { return nil }
        return ODataKeyText.canonical(
            set + ODataKeyText.predicate(properties, keys, version: m.version), model: m)
    }

    /// The mark a protected row's scope (`_dr`) carries while a download replaces its request's rows.
    static let keptMark = "_mg_kept:"

    /// Marks the rows of the protected entities of `sets` (their `_dr` prefixed with ``keptMark``) so that
    /// replacing a request's rows leaves them as they are. Canonical names do not read back into keys, so
    /// each row of a set that holds a protected entity is named from its JSON (only while changes wait).
    static func markProtected(_ db: Database, _ m: MirrorModel, _ entities: Set<String>, sets: Set<String>)
        throws
    {
        let protectedSets = Set(entities.compactMap { e in e.firstIndex(of: "|").map { String(e[..<$0]) } })
        for set in sets.intersection(protectedSets).sorted() where m.layouts[set] != nil {
            for r in try db.query("SELECT rowid, \"_json\" FROM \(q(set))") {
                guard let rowid = r[0].int64, let json = r[1].string,
                    let members = (try? RawJSON.parse(json))?.members,
                    let name = canonicalName(m, set: set, members), entities.contains(name)
                else { continue }
                try db.run(
                    "UPDATE \(q(set)) SET \"_dr\" = ? || \"_dr\" WHERE rowid = ?",
                    [.text(keptMark), .integer(rowid)])
            }
        }
    }

    /// Gives the rows ``markProtected(_:_:_:sets:)`` marked their scope back.
    static func unmarkProtected(_ db: Database, _ m: MirrorModel, sets: Set<String>) throws {
        for set in sets.sorted() where m.layouts[set] != nil {
            try db.run(
                "UPDATE \(q(set)) SET \"_dr\" = substr(\"_dr\", ?) WHERE substr(\"_dr\", 1, ?) = ?",
                [
                    .integer(Int64(keptMark.count + 1)), .integer(Int64(keptMark.count)), .text(keptMark),
                ])
        }
    }

    /// Inside a download's transaction: stores `entities` of `set` for `request` (replacing rows with their
    /// keys), passing over those with local changes pending in `p`; counts into `outcome`.
    static func storeDownloaded(
        _ db: Database, _ m: MirrorModel, request: String, set: String, _ entities: [MirrorEntity],
        _ p: MirrorPendingChanges, _ outcome: inout MirrorDownloadOutcome
    ) throws {
        guard let layout = m.layouts[set] else { return }
        let statement = try db.prepare(MirrorWriter.storeSQL(layout, replacing: true))
        var n = 0
        for e in entities {
            if !p.entities.isEmpty, let name = canonicalName(m, set: set, e.properties),
                p.entities.contains(name)
            {
                outcome.keptLocal += 1
                continue
            }
            try statement.bind(
                MirrorWriter.rowValues(
                    m, layout, e.properties, etag: e.etag, scope: request, type: e.type, parent: e.parent))
            _ = try statement.step()
            statement.reset()
            n += 1
        }
        outcome.stored[set, default: 0] += n
        outcome.changed += n
    }

    /// Applies one delta of defining request `request` (`query`) in one transaction: `changed` entities
    /// are stored (replacing the rows with their keys, scoped to the request), `removed` ones deleted,
    /// except entities with a local change still queued (`pending`, evaluated inside the transaction:
    /// pending local changes win until they are uploaded); then `deltaLink` becomes the request's delta
    /// link. Throws ``MirrorDownloadRaced`` (nothing stored) when requests left the queue during the
    /// download. Applying the same delta twice changes nothing more.
    func applyDelta(
        request: String, query: String, changed: [String: [MirrorEntity]], removed: [MirrorRemoval],
        pending: ((Database) throws -> MirrorPendingChanges)?, deltaLink: String?
    ) throws -> MirrorDownloadOutcome {
        guard let m = model else { throw MirrorError("no $metadata") }
        let now = iso8601Now()
        var outcome = MirrorDownloadOutcome()
        outcome.removed = 0
        try pool.write { db in
            try db.transaction {
                let p = try pending?(db) ?? .none
                if !p.settled.isEmpty { throw MirrorDownloadRaced() }
                for (set, entities) in changed.sorted(by: { $0.key < $1.key }) {
                    try Self.storeDownloaded(
                        db, m, request: request, set: set, entities, p, &outcome)
                }
                for r in removed {
                    let name = ODataKeyText.canonical(r.entity, model: m)
                    if p.entities.contains(name) {
                        outcome.keptLocal += 1
                        continue
                    }
                    guard let (layout, key) = ODataKeyText.locate(r.entity, model: m) else { continue }
                    let (whereSQL, values) = m.keyPredicate(key, in: layout)
                    try db.run("DELETE FROM \(q(layout.set.name)) WHERE \(whereSQL)", values)
                    outcome.removed! += db.changes
                }
                let sets = Set(
                    try db.query(#"SELECT entitySet FROM "_mg_scope" WHERE request = ?"#, [.text(request)])
                        .compactMap { $0[0].string }
                ).union(changed.keys)
                for set in sets where m.layouts[set] != nil {
                    // As after a full read: once nothing is queued, rows written through the gateway give way
                    // to the server's (an uploaded create came back in this delta under its server key).
                    if !p.queued {
                        try db.run("DELETE FROM \(q(set)) WHERE \"_dr\" IN " + MirrorWriter.localScopesSQL)
                    }
                    let count =
                        try db.scalar(
                            "SELECT COUNT(*) FROM \(q(set)) WHERE \"_dr\" = ?", [.text(request)])?.int ?? 0
                    outcome.stored[set] = count  // rows the request holds now, as after a full read
                    try db.run(
                        #"INSERT OR REPLACE INTO "_mg_scope" (request, entitySet, query, rows, downloadedAt) VALUES (?, ?, ?, ?, ?)"#,
                        [.text(request), .text(set), .text(query), .integer(Int64(count)), .text(now)])
                }
                outcome.deltaLinkKept = deltaLink != nil
                try Self.finishDownload(
                    db, request: request, query: query, link: outcome.deltaLinkKept ? deltaLink : nil, at: now
                )
            }
        }
        return outcome
    }
}
