import Foundation
import JSONCore
import Logging
import ODataCore
import Storage

/// What one preparation of the queue did.
public struct ODataQueuePreparation: Sendable, Equatable {
    /// Queued requests before.
    public var before = 0
    /// Queued requests after (what the upload sends, changesets counted per request).
    public var after = 0
    /// Requests combined away by request-queue optimisation (absorbed by an earlier request of the same
    /// entity, or a create and its delete).
    public var combined = 0
    /// Requests removed by undoing a local creation.
    public var undone = 0
    /// Changesets the transaction builder made.
    public var transactions = 0

    /// `{before, after, combined, undone, transactions}`.
    public var json: JSON {
        [
            "before": .int(Int64(before)), "after": .int(Int64(after)), "combined": .int(Int64(combined)),
            "undone": .int(Int64(undone)), "transactions": .int(Int64(transactions)),
        ]
    }
}

/// Prepares the request queue for an upload with the options of `OfflineODataParameters` that rewrite it
/// (`enableUndoLocalCreation`, `enableTransactionBuilder`, `enableRequestQueueOptimization`): reads the
/// queue, lets ``ODataQueuePlanner`` decide, and applies the plan in one fsynced transaction — requests
/// removed (with their key references, cookies and tags), absorbing requests rewritten with the combined
/// method and body, changesets assigned, entities whose local creation was undone removed from the mirror.
///
/// Promises: requests sent before (outcome unknown), held behind the ErrorArchive or waiting for
/// credentials are never changed; nothing changes when an option is off or the plan is empty; the plan is
/// applied whole or not at all. It touches the queue and the mirror (through ``MirrorWriter``) only.
struct ODataQueuePreparer: ODataServicePart {
    let context: ODataServiceContext

    var planner: ODataQueuePlanner {
        ODataQueuePlanner(
            undoLocalCreation: mirrorSettings.enableUndoLocalCreation,
            transactionBuilder: mirrorSettings.enableTransactionBuilder,
            optimization: mirrorSettings.enableRequestQueueOptimization)
    }

    /// Whether any option that rewrites the queue is on.
    var isEnabled: Bool {
        mirrorSettings.enableUndoLocalCreation || mirrorSettings.enableTransactionBuilder
            || mirrorSettings.enableRequestQueueOptimization
    }

    /// Blocking: plans and applies (see the type); nil when no option is on or nothing is queued.
    func prepare() throws -> ODataQueuePreparation? {
        guard isEnabled, queue.count > 0, mirror.model != nil else { return nil }
        let planner = self.planner
        var left: [QueuedRequest] = []
        var outcome = ODataQueuePreparation()
        try mirror.pool.write { db in
            try db.execute("PRAGMA synchronous=FULL")
            defer { try? db.execute("PRAGMA synchronous=NORMAL") }
            try db.transaction(.immediate) {
                guard let m = mirror.model else { return }
                let w = MirrorWriter(db: db, model: m)
                let reader = ODataPlanRowReader(model: m)
                var rows: [PlanRow] = []
                let statement = try db.prepare(
                    "SELECT " + ODataRequestQueue.selectColumns
                        + #", heldBy, (SELECT cookie FROM "_mg_cookie" c WHERE c.requestID = q.requestID) FROM "_mg_queue" q ORDER BY id"#
                )
                let columns = statement.columnCount
                try statement.forEachRow { s in
                    let raw = Row(columnNames: [], values: (0..<columns).map { s.value($0) })
                    let request = ODataRequestQueue.request(raw)
                    let pinned = raw[22].string != nil || request.waitingFor != nil
                    let credentials = WriterCredentials(
                        authorization: request.authorization, cookie: raw[23].string)
                    rows.append(reader.row(request, pinned: pinned, credentials: credentials))
                }
                outcome.before = rows.count
                let plan = planner.plan(rows) { tid in "tx:" + tid + ":" + UUID().uuidString.lowercased() }
                outcome.after = rows.count - plan.removed.count
                guard !plan.isEmpty else { return }
                for (id, merge) in plan.merges.sorted(by: { $0.key < $1.key }) {
                    try combine(id, merge, w)
                }
                for id in plan.undoneCreates.sorted() {
                    if let request = try Self.request(id, db) { try removeLocalEntities(request, w) }
                }
                for id in plan.removed.sorted() {
                    guard let request = try Self.request(id, db) else { continue }
                    try queue.remove(request, in: db)
                    left.append(request)
                }
                outcome.undone = plan.undone.count
                outcome.combined = plan.removed.count - plan.undone.count
                var built = Set<String>()
                for (id, changeset) in plan.changesets.sorted(by: { $0.key < $1.key }) {
                    guard !plan.removed.contains(id) else { continue }
                    try db.run(
                        #"UPDATE "_mg_queue" SET changeset = ?, contentID = NULL WHERE id = ?"#,
                        [SQLValue(changeset), .integer(id)])
                    if let changeset { built.insert(changeset) }
                }
                outcome.transactions = built.count
                try ODataRequestQueue.dropOrphanTags(db)
            }
        }
        for request in left { queue.didLeave(request) }
        if outcome.before != outcome.after || outcome.transactions > 0 {
            queue.logEvent("QueueOptimization", details: outcome.json)
            logger.info(
                "odata upload: queue prepared",
                metadata: [
                    "service": "\(settings.name)", "before": "\(outcome.before)", "after": "\(outcome.after)",
                    "transactions": "\(outcome.transactions)",
                ])
        }
        return outcome
    }

    static func request(_ id: Int64, _ db: Database) throws -> QueuedRequest? {
        try ODataRequestQueue.requests("WHERE id = ?", [.integer(id)], in: db).first
    }

    /// Rewrites request `id` as the combination of itself and the requests it absorbs (later ones, or for a
    /// delete the updates before it).
    private func combine(_ id: Int64, _ merge: QueuePlan.Merge, _ w: MirrorWriter) throws {
        guard let first = try Self.request(id, w.db) else { return }
        var later: [QueuedRequest] = []
        for a in merge.absorbed { if let r = try Self.request(a, w.db) { later.append(r) } }
        let layout = w.model.layouts[first.entitySet]
        let keys = layout.map { w.model.model.key(of: $0.entityType) } ?? []
        let navigations = Set(
            layout.map { w.model.model.navigationProperties(of: $0.entityType).map(\.name) } ?? [])
        var method = first.method
        var body = first.body
        var contentType = first.contentType
        var ifMatch = first.ifMatch
        switch merge.result {
        case .delete:
            // The updates before the delete are not sent: the delete carries the first one's precondition.
            method = "DELETE"
            body = []
            contentType = nil
            if let earliest = later.min(by: { $0.id < $1.id }), earliest.id < first.id {
                ifMatch = earliest.ifMatch
            }
        case .create, .update, .other:
            guard
                let folded = Self.fold(
                    first.body, later.map { ($0.method, $0.body) }, keys: Set(keys), navigations: navigations)
            else { return }
            body = folded
            if case .update(true) = merge.result, first.method != "POST" { method = "PUT" }
        }
        let removeAfterUpload = ([first] + later).contains(where: \.removeAfterUpload)
        try w.db.run(
            #"UPDATE "_mg_queue" SET method = ?, body = ?, contentType = ?, ifMatch = ?, removeAfterUpload = ? WHERE id = ?"#,
            [
                .text(method), .blob(body), SQLValue(contentType), SQLValue(ifMatch),
                .integer(removeAfterUpload ? 1 : 0), .integer(id),
            ])
        try ODataKeyReferences.drop(id: id, in: w.db)
        try ODataKeyReferences.index(id: id, url: first.url, body: body, in: w.db)
    }

    /// The body of a create or update combined with later updates of the same entity: PATCH/MERGE members
    /// replace or add members; a PUT replaces every structural property (the key, links, annotations and
    /// nested entities of what came before stay). V2's `{"d": …}` wrapper of the first body is kept. Nil
    /// when a body is not a JSON object.
    static func fold(
        _ first: [UInt8], _ later: [(method: String, body: [UInt8])], keys: Set<String>,
        navigations: Set<String>
    ) -> [UInt8]? {
        guard let json = try? RawJSON.parse(first) else { return nil }
        let wrapped = json["d"] != nil && json.members?.count == 1
        guard var members = (wrapped ? json["d"] : json)?.members else { return nil }
        for (method, body) in later {
            guard let parsed = try? RawJSON.parse(body) else { return nil }
            let object = parsed["d"] != nil && parsed.members?.count == 1 ? parsed["d"] : parsed
            guard let given = object?.members else { return nil }
            if method == "PUT" {
                members = members.filter { name, _ in
                    keys.contains(name) || name == "__metadata" || name.contains("@")
                        || navigations.contains(name)
                }
            }
            for (name, value) in given where name != "__metadata" && !name.hasPrefix("@") {
                ODataOfflineWriter.setMember(&members, name, value)
            }
        }
        let result = RawJSON.object(members)
        return Array((wrapped ? RawJSON.object([("d", result)]) : result).serialized().utf8)
    }

    /// After an undo: the entities the create made (its own and nested ones) leave the mirror.
    private func removeLocalEntities(_ create: QueuedRequest, _ w: MirrorWriter) throws {
        var entities: [String] = []
        if let e = create.affectedEntity(model: w.model) { entities.append(e) }
        if let text = create.nested, let records = try? RawJSON.parse(text).elements {
            for r in records {
                if let set = r["set"]?.string, let key = r["key"]?.string { entities.append(set + key) }
            }
        }
        for entity in entities {
            guard let (layout, key) = ODataKeyText.locate(entity, model: w.model) else { continue }
            try w.delete(layout, key: key)
        }
    }
}
