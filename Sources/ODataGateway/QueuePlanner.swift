/// One queued request as the queue planner sees it: what it does to which entity and what else it
/// touches. Entities are canonical `Set|Key=value` texts (``ODataKeyText/canonical(_:model:)``).
struct PlanRow: Sendable, Equatable {
    enum Kind: Sendable, Equatable {
        /// A create (of an entity set, or through a navigation).
        case create
        /// PATCH/MERGE (`replace` false) or PUT of one entity.
        case update(replace: Bool)
        /// DELETE of one entity.
        case delete
        /// Anything else: link changes, property or media writes, actions. Never combined.
        case other
    }

    /// An entity related to the row's: a parent of a created entity, or an entity created with it (deep
    /// insert), and whether deleting the parent deletes the child (`OnDelete Cascade`).
    struct Relation: Sendable, Hashable {
        var entity: String
        var cascade: Bool
    }

    /// Queue position.
    var id: Int64
    var kind: Kind
    /// The entity the request changes, when known.
    var entity: String?
    /// Other entities it names (links, bound entities, the parent of a create through a navigation).
    var refs: Set<String> = []
    /// Existing entities it makes dependents of its entity (collection links, links where its entity is the
    /// principal): a change to them.
    var dependents: Set<String> = []
    /// For a create: the entities the new one depends on.
    var parents: [Relation] = []
    /// For a deep insert: the entities created with it.
    var nested: [Relation] = []
    /// The changeset it is queued in (a client's, or one the transaction builder made: `tx:…`).
    var changeset: String?
    /// `OfflineOData.TransactionID`.
    var transactionID: String?
    /// `OfflineOData.NonMergeable`.
    var nonMergeable = false
    /// Sent before (outcome unknown), held behind the ErrorArchive or waiting for credentials: left as it is.
    var pinned = false
    /// Whose credentials it is sent with (a fingerprint; nil for the service's own).
    var credentials: String?
    /// The URL's query (requests with different queries are never combined).
    var query = ""
    /// Its body is a JSON object (creates and updates are combined only then).
    var jsonBody = true

    /// Everything the row changes or names.
    var touched: Set<String> {
        var all = refs.union(dependents)
        if let entity { all.insert(entity) }
        for p in parents { all.insert(p.entity) }
        for n in nested { all.insert(n.entity) }
        return all
    }
}

/// What the planner decided: rows removed, rows that absorb later ones, new changesets.
struct QueuePlan: Sendable, Equatable {
    /// A row that absorbs other rows of the same entity: those rows in order and what the row becomes (a
    /// delete absorbs the updates before it, which then are not sent; any other row the rows after it).
    struct Merge: Sendable, Equatable {
        var absorbed: [Int64]
        var result: PlanRow.Kind
    }

    /// Rows that leave the queue unsent (absorbed by another, combined away, or undone).
    var removed: Set<Int64> = []
    /// By absorbing row.
    var merges: [Int64: Merge] = [:]
    /// Rows whose changeset changes (the transaction builder): the new one, or nil for none.
    var changesets: [Int64: String?] = [:]
    /// Rows removed by undoing a local creation (``removed`` holds them too).
    var undone: Set<Int64> = []
    /// Creates undone with `enableUndoLocalCreation` (their entities leave the mirror).
    var undoneCreates: Set<Int64> = []
    /// Creates removed with the delete of their entity by request-queue optimisation.
    var combinedCreates: Set<Int64> = []

    var isEmpty: Bool { removed.isEmpty && merges.isEmpty && changesets.isEmpty }
}

/// The queue planner: SAP's request-queue algorithms, run on the queue before an upload, as a pure
/// function of the queued rows (seed `002_…`, `OfflineODataParameters`):
///
/// 1. **Undo local creation** (`enableUndoLocalCreation`): the delete of an entity created locally and not
///    yet uploaded removes its create, its updates and the delete, with the entities created locally
///    that depend on it through a cascading delete — whatever their changesets or `NonMergeable` flags —
///    unless that would change the upstream's end state: a request to remove changes or links an entity
///    that is not being undone (the seed's motherboard/CPU), a dependent does not cascade, or a request
///    was sent or is held.
/// 2. **Transaction builder** (`enableTransactionBuilder`): requests with the same transaction ID form one
///    changeset placed at the first one's position, in queue order; a request that cannot move there
///    (a request in between changes or names one of its entities, its credentials differ, or its entity
///    already has an unmodifiable request in the changeset) starts the next changeset of that ID.
/// 3. **Request-queue optimisation** (`enableRequestQueueOptimization`): within one changeset, and among
///    requests outside changesets, a create followed by updates becomes one create with the final values,
///    updates of one entity merge into the first (a PUT replaces what came before), updates followed by a
///    delete are dropped (the delete, where it is, carries the first update's `If-Match`), and a create
///    followed by its delete disappear when no other request names the entity. A later request joins an
///    earlier one only when no request in between touches what it touches (its entity, the entities it
///    links), so order and the upstream's final state are those of the queue as written.
///
/// A delete never moves before another request, and no request moves past a delete or past a request
/// whose entity is unknown: what a delete takes with it upstream (cascading deletes of entities the queue
/// does not name) cannot all be known.
struct ODataQueuePlanner: Sendable {
    var undoLocalCreation = false
    var transactionBuilder = false
    var optimization = false

    /// The plan for `rows` (in queue order); `changesetID` names a new changeset for a transaction ID.
    func plan(_ rows: [PlanRow], changesetID: (String) -> String) -> QueuePlan {
        var plan = QueuePlan()
        var rows = rows
        if undoLocalCreation { undo(rows, &plan) }
        if transactionBuilder { build(&rows, &plan, changesetID: changesetID) }
        if optimization { optimize(rows, &plan) }
        return plan
    }

    // MARK: undo local creation

    private func undo(_ rows: [PlanRow], _ plan: inout QueuePlan) {
        /// Per entity, the rows creating it (as their own entity or nested), in order.
        var creates: [String: [Int]] = [:]
        var children: [String: [PlanRow.Relation]] = [:]
        var rowsOf: [String: [Int]] = [:]
        for (i, r) in rows.enumerated() {
            if r.kind == .create, let e = r.entity {
                creates[e, default: []].append(i)
                for n in r.nested {
                    creates[n.entity, default: []].append(i)
                    children[e, default: []].append(n)
                }
                for p in r.parents {
                    children[p.entity, default: []].append(.init(entity: e, cascade: p.cascade))
                }
            }
            for e in r.touched { rowsOf[e, default: []].append(i) }
        }
        for (i, d) in rows.enumerated() where d.kind == .delete && !d.pinned && !plan.removed.contains(d.id) {
            guard let e = d.entity, let c = creates[e]?.last(where: { $0 < i }), rows[c].entity == e,
                !plan.removed.contains(rows[c].id)
            else { continue }
            // The entities that go with it: created locally and deleted with it by cascade.
            var undone: Set<String> = [e]
            var pending = [e]
            var possible = true
            while possible, let x = pending.popLast() {
                for child in children[x] ?? [] where !undone.contains(child.entity) {
                    guard child.cascade, creates[child.entity]?.contains(where: { $0 < i }) == true else {
                        possible = false
                        break
                    }
                    undone.insert(child.entity)
                    pending.append(child.entity)
                }
            }
            guard possible else { continue }
            // The rows up to the delete (a later create of the same key is another entity).
            let involved = Set(undone.flatMap { rowsOf[$0] ?? [] }).filter { $0 <= i && $0 >= c }
            for j in involved {
                let r = rows[j]
                // Every request to remove changes only entities being undone, and was never sent.
                guard !r.pinned, let entity = r.entity, undone.contains(entity),
                    r.dependents.isSubset(of: undone), r.nested.allSatisfy({ undone.contains($0.entity) })
                else {
                    possible = false
                    break
                }
            }
            guard possible else { continue }
            for j in involved where !plan.removed.contains(rows[j].id) {
                plan.removed.insert(rows[j].id)
                plan.undone.insert(rows[j].id)
                if rows[j].kind == .create { plan.undoneCreates.insert(rows[j].id) }
            }
        }
    }

    // MARK: transaction builder

    private struct Group {
        var tid: String
        var members: [Int]
        /// What the rows between the group's start and now (not in it) touch.
        var between: Set<String> = []
        /// A row between deletes, or touches what the planner cannot name: nothing may move past it (a
        /// delete's cascading effects upstream are not all known).
        var blocked = false
        var credentials: String?
        var unmodifiable: Set<String> = []
    }

    private func build(_ rows: inout [PlanRow], _ plan: inout QueuePlan, changesetID: (String) -> String) {
        // Changesets an earlier run built are rebuilt (nothing of them was sent), with the requests since.
        var pinnedBuilt = Set<String>()
        for r in rows where r.pinned { if let c = r.changeset, c.hasPrefix("tx:") { pinnedBuilt.insert(c) } }
        var original: [Int64: String?] = [:]
        for i in rows.indices {
            original[rows[i].id] = rows[i].changeset
            if let c = rows[i].changeset, c.hasPrefix("tx:"), !pinnedBuilt.contains(c) {
                rows[i].changeset = nil
            }
        }
        var open: [String: Int] = [:]
        var groups: [Group] = []
        for (i, r) in rows.enumerated() where !plan.removed.contains(r.id) {
            let touched = r.touched
            var joined: Int?
            if let tid = r.transactionID, r.changeset == nil, !r.pinned {
                if let g = open[tid], canJoin(r, touched, groups[g]) {
                    joined = g
                } else {
                    groups.append(Group(tid: tid, members: [], credentials: r.credentials))
                    joined = groups.count - 1
                    open[tid] = joined
                }
                groups[joined!].members.append(i)
                if r.nonMergeable, let e = r.entity { groups[joined!].unmodifiable.insert(e) }
            }
            for g in open.values where g != joined {
                groups[g].between.formUnion(touched)
                if r.kind == .delete || r.entity == nil { groups[g].blocked = true }
            }
        }
        for g in groups where g.members.count > 1 {
            let id = changesetID(g.tid)
            for i in g.members { rows[i].changeset = id }
        }
        for r in rows where original[r.id] != .some(r.changeset) {
            plan.changesets[r.id] = .some(r.changeset)
        }
    }

    /// Whether `r` may join `g` (move to its start): same credentials, nothing between touches what it
    /// touches, nothing between is a delete, a delete (or a request on an unknown entity) only when nothing
    /// is between, one unmodifiable request per entity.
    private func canJoin(_ r: PlanRow, _ touched: Set<String>, _ g: Group) -> Bool {
        guard r.credentials == g.credentials, !g.blocked, touched.isDisjoint(with: g.between) else {
            return false
        }
        if r.kind == .delete || r.entity == nil, !g.between.isEmpty { return false }
        if r.nonMergeable, let e = r.entity, g.unmodifiable.contains(e) { return false }
        return true
    }

    // MARK: request-queue optimisation

    private struct Accumulator {
        var index: Int
        var result: PlanRow.Kind
        var absorbed: [Int] = []
        var members: [Int] { [index] + absorbed }
    }

    private struct Slot: Hashable {
        var changeset: String?
        var entity: String
    }

    private func optimize(_ rows: [PlanRow], _ plan: inout QueuePlan) {
        // Who names an entity without changing it (a create+delete may disappear only when nobody does).
        var namedBy: [String: Set<Int>] = [:]
        for (i, r) in rows.enumerated() where !plan.removed.contains(r.id) {
            for e in r.touched where e != r.entity { namedBy[e, default: []].insert(i) }
        }
        var open: [Slot: Accumulator] = [:]
        var slotsOf: [String: Set<Slot>] = [:]
        /// Per entity, the rows seen so far that touch it.
        var touchedBy: [String: [Int]] = [:]
        /// Stops the accumulators of `entity` (but the one at `keep`) from absorbing later rows.
        func close(_ entity: String, except keep: Slot? = nil) {
            guard let slots = slotsOf[entity] else { return }
            var kept = Set<Slot>()
            for slot in slots {
                if slot == keep {
                    kept.insert(slot)
                } else if let a = open[slot] {
                    flush(a, rows, &plan)
                    open[slot] = nil
                }
            }
            slotsOf[entity] = kept.isEmpty ? nil : kept
        }
        /// Whether a row after `a`'s first (and not one of its) touches what `r` touches: `r` cannot move.
        func crossed(_ a: Accumulator, _ r: PlanRow) -> Bool {
            r.touched.contains { x in
                (touchedBy[x] ?? []).contains { $0 > a.index && !a.members.contains($0) }
            }
        }
        for (i, r) in rows.enumerated() where !plan.removed.contains(r.id) {
            defer { for x in r.touched { touchedBy[x, default: []].append(i) } }
            guard r.entity != nil || r.kind != .other else {
                // Effects the planner cannot name: nothing combines across it.
                for a in open.values { flush(a, rows, &plan) }
                open = [:]
                slotsOf = [:]
                continue
            }
            let mergeable =
                !r.pinned && !r.nonMergeable && r.kind != .other && r.entity != nil
                && (r.kind == .delete || r.jsonBody)
            guard mergeable, let e = r.entity else {
                for x in r.touched { close(x) }
                continue
            }
            let slot = Slot(changeset: r.changeset, entity: e)
            // Another changeset's accumulators for this entity must not absorb anything past this row.
            close(e, except: slot)
            for x in r.touched where x != e { close(x) }
            if var a = open[slot], compatible(rows[a.index], r), !crossed(a, r) {
                switch (a.result, r.kind) {
                case (.create, .update):
                    a.absorbed.append(i)
                    open[slot] = a
                    continue
                case (.create, .delete):
                    let create = rows[a.index]
                    let others = (namedBy[e] ?? []).subtracting(a.members + [i])
                        .filter { !plan.removed.contains(rows[$0].id) }
                    if create.nested.isEmpty, create.dependents.isEmpty, others.isEmpty {
                        for j in a.members + [i] { plan.removed.insert(rows[j].id) }
                        plan.combinedCreates.insert(create.id)
                        open[slot] = nil
                        continue
                    }
                case (.update(let replaced), .update(let replace)):
                    a.absorbed.append(i)
                    a.result = .update(replace: replaced || replace)
                    open[slot] = a
                    continue
                case (.update, .delete):
                    // The delete stays where it is (what it deletes with it upstream is not all known); the
                    // updates before it go, when they only changed the entity's own properties.
                    let updates = a.members.map { rows[$0] }
                    if updates.allSatisfy({ $0.refs.isEmpty && $0.dependents.isEmpty }) {
                        for j in a.members { plan.removed.insert(rows[j].id) }
                        plan.merges[r.id] = QueuePlan.Merge(
                            absorbed: a.members.map { rows[$0].id }, result: .delete)
                        open[slot] = nil
                        continue
                    }
                default: break
                }
                flush(a, rows, &plan)
            } else if let a = open[slot] {
                flush(a, rows, &plan)
            }
            open[slot] = Accumulator(index: i, result: r.kind)
            slotsOf[e, default: []].insert(slot)
        }
        for a in open.values { flush(a, rows, &plan) }
    }

    private func compatible(_ a: PlanRow, _ r: PlanRow) -> Bool {
        a.credentials == r.credentials && a.query == r.query
    }

    private func flush(_ a: Accumulator, _ rows: [PlanRow], _ plan: inout QueuePlan) {
        guard !a.absorbed.isEmpty, !plan.removed.contains(rows[a.index].id) else { return }
        plan.merges[rows[a.index].id] = QueuePlan.Merge(
            absorbed: a.absorbed.map { rows[$0].id }, result: a.result)
        for j in a.absorbed { plan.removed.insert(rows[j].id) }
    }
}
