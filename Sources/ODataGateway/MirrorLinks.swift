import JSONCore
import ODataCore
import Storage
import Synchronization

/// A navigation property without referential constraints, answered locally through a link table that
/// records the links `$expand` showed in defining requests.
///
/// The link table (`_mg_link/<SourceSet>/<Nav>`) has one typed column per source key property (`s_<Key>`),
/// one per target key property (`t_<Key>`) and `_dr`, the defining request that showed the link. A row
/// whose target columns are all NULL is a *marker*: the links of that source entity are known (the
/// request expanded the navigation for it), even when there are none.
public struct MirrorLinkNavigation: Sendable, Hashable {
    /// Source entity set (the table the navigation starts from).
    public var sourceSet: String
    /// Navigation property name.
    public var name: String
    /// Target entity set.
    public var targetSet: String
    /// Target entity type (qualified as in the model).
    public var targetType: String
    /// Whether the navigation is collection-valued.
    public var isCollection: Bool
    /// Source key properties (name, type) in key order.
    public var sourceKey: [(name: String, type: EdmPrimitiveType)]
    /// Target key properties (name, type) in key order.
    public var targetKey: [(name: String, type: EdmPrimitiveType)]
    /// The partner navigation back from the target set, when it is single-valued and also a link
    /// navigation: each link shown here is also the partner's one link of the target (`Customers('A')`
    /// showing `Orders(1)` tells that `Orders(1)/Customer` is `Customers('A')`).
    public var singlePartner: String?

    /// The link table's name (raw; quote it).
    public var table: String { "_mg_link/" + sourceSet + "/" + name }
    /// Link-table column of a source key property.
    public static func sourceColumn(_ key: String) -> String { "s_" + key }
    /// Link-table column of a target key property.
    public static func targetColumn(_ key: String) -> String { "t_" + key }

    /// The translator's view: source key → link `s_` columns, link `t_` columns → target key.
    public var sqlMapping: SQLNavigationMapping {
        SQLNavigationMapping(
            table: targetSet, entityType: targetType,
            joins: sourceKey.map {
                SQLJoinColumns(sourceColumn: $0.name, targetColumn: Self.sourceColumn($0.name))
            },
            linkTable: table,
            linkJoins: targetKey.map {
                SQLJoinColumns(sourceColumn: Self.targetColumn($0.name), targetColumn: $0.name)
            })
    }

    public static func == (a: Self, b: Self) -> Bool { a.sourceSet == b.sourceSet && a.name == b.name }
    public func hash(into h: inout Hasher) {
        h.combine(sourceSet)
        h.combine(name)
    }

    /// Every navigation of `model` that has no referential constraint and whose source and target sets
    /// have primitive keys: source set name → navigation name → link navigation.
    static func all(in model: EdmModel) -> [String: [String: MirrorLinkNavigation]] {
        func key(_ type: String) -> [(name: String, type: EdmPrimitiveType)]? {
            let props = model.keyProperties(of: type)
            guard !props.isEmpty, props.count == model.key(of: type).count else { return nil }
            var out: [(name: String, type: EdmPrimitiveType)] = []
            for p in props {
                guard let prim = model.primitiveType(of: p.type) else { return nil }
                out.append((p.name, prim))
            }
            return out
        }
        var result: [String: [String: MirrorLinkNavigation]] = [:]
        for set in model.entitySets where !set.isSingleton {
            guard let sourceKey = key(set.entityType) else { continue }
            for nav in model.navigationProperties(of: set.entityType) where nav.referentialConstraints.isEmpty
            {
                guard
                    let target = model.targetEntitySet(from: set, navigationPath: nav.name)
                        ?? model.entitySets.first(where: { $0.entityType == nav.target && !$0.isSingleton }),
                    !target.isSingleton, let targetKey = key(nav.target)
                else { continue }
                result[set.name, default: [:]][nav.name] = MirrorLinkNavigation(
                    sourceSet: set.name, name: nav.name, targetSet: target.name, targetType: nav.target,
                    isCollection: nav.isCollection, sourceKey: sourceKey, targetKey: targetKey,
                    singlePartner: nav.partner)
            }
        }
        for (set, navs) in result {
            for (name, link) in navs {
                guard let partner = link.singlePartner else { continue }
                if let back = result[link.targetSet]?[partner], back.targetSet == set, !back.isCollection {
                    continue
                }
                result[set]?[name]?.singlePartner = nil
            }
        }
        return result
    }
}

/// One link shown by a defining request: `target == nil` records that the source entity's links for the
/// navigation are known (the marker row), whatever they are.
public struct MirrorLinkRecord: Sendable, Hashable {
    /// Source entity set.
    public var sourceSet: String
    /// Navigation property name.
    public var navigation: String
    /// Source key values, in key order (typed as the key columns).
    public var source: [SQLValue]
    /// Target key values, in key order; nil for the marker.
    public var target: [SQLValue]?

    /// Creates a record.
    public init(sourceSet: String, navigation: String, source: [SQLValue], target: [SQLValue]?) {
        self.sourceSet = sourceSet
        self.navigation = navigation
        self.source = source
        self.target = target
    }
}

extension ODataMirror {
    /// Creates the link tables `model` needs (idempotent).
    static func createLinkTables(_ db: Database, _ model: MirrorModel) throws {
        for (_, navs) in model.links.sorted(by: { $0.key < $1.key }) {
            for (_, link) in navs.sorted(by: { $0.key < $1.key }) {
                let s = link.sourceKey.map { q(MirrorLinkNavigation.sourceColumn($0.name)) }
                let t = link.targetKey.map { q(MirrorLinkNavigation.targetColumn($0.name)) }
                let columns =
                    [#""_dr" TEXT NOT NULL"#]
                    + link.sourceKey.map {
                        q(MirrorLinkNavigation.sourceColumn($0.name)) + " "
                            + (ODataStorage.columnType($0.type) ?? "TEXT")
                            + " NOT NULL"
                    }
                    + link.targetKey.map {
                        q(MirrorLinkNavigation.targetColumn($0.name)) + " "
                            + (ODataStorage.columnType($0.type) ?? "TEXT")
                    }
                try db.execute(
                    "CREATE TABLE IF NOT EXISTS \(q(link.table)) (\(columns.joined(separator: ", ")))")
                try db.execute(
                    "CREATE UNIQUE INDEX IF NOT EXISTS \(q(link.table + "/dr")) ON \(q(link.table)) "
                        + "(\(([#""_dr""#] + s + t).joined(separator: ", ")))")
                try db.execute(
                    "CREATE INDEX IF NOT EXISTS \(q(link.table + "/s")) ON \(q(link.table)) "
                        + "(\((s + t).joined(separator: ", ")))")
                try db.execute(
                    "CREATE INDEX IF NOT EXISTS \(q(link.table + "/t")) ON \(q(link.table)) "
                        + "(\((t + s).joined(separator: ", ")))")
            }
        }
    }

    /// Drops the link tables of `model`.
    static func dropLinkTables(_ db: Database, _ model: MirrorModel) throws {
        for navs in model.links.values {
            for link in navs.values { try db.execute("DROP TABLE IF EXISTS \(q(link.table))") }
        }
    }

    /// Inside `replace`'s transaction: removes the links `request` stored before and stores `links`.
    static func replaceLinks(
        _ db: Database, _ model: MirrorModel, request: String, links: [MirrorLinkRecord]
    ) throws {
        for navs in model.links.values {
            for link in navs.values {
                try db.run("DELETE FROM \(q(link.table)) WHERE \"_dr\" = ?", [.text(request)])
            }
        }
        try addLinks(db, model, scope: request, links: links)
    }

    /// Inside a transaction: stores `links` under `scope` (a defining request's name, or
    /// ``MirrorWriter/createdScope`` for links the gateway made itself in an offline write).
    static func addLinks(
        _ db: Database, _ model: MirrorModel, scope request: String, links: [MirrorLinkRecord]
    )
        throws
    {
        var seen = Set<MirrorLinkRecord>()
        for record in links where seen.insert(record).inserted {
            guard let link = model.links[record.sourceSet]?[record.navigation],
                record.source.count == link.sourceKey.count,
                record.target == nil || record.target?.count == link.targetKey.count
            else { continue }
            let names =
                [#""_dr""#] + link.sourceKey.map { q(MirrorLinkNavigation.sourceColumn($0.name)) }
                + link.targetKey.map { q(MirrorLinkNavigation.targetColumn($0.name)) }
            let values: [SQLValue] =
                [.text(request)] + record.source
                + (record.target ?? Array(repeating: .null, count: link.targetKey.count))
            try db.run(
                "INSERT OR IGNORE INTO \(q(link.table)) (\(names.joined(separator: ", "))) VALUES ("
                    + Array(repeating: "?", count: names.count).joined(separator: ", ") + ")", values)
        }
    }

    /// Inside a transaction: forgets what the link table of `link` says about the entity whose key is
    /// `key` — as the source (`target` false: its links become unknown) or as a target (it leaves the
    /// lists that named it). An offline write that changes a link without a referential constraint
    /// calls it, so that the mirror answers 501 rather than a link it no longer knows.
    static func forgetLinks(_ db: Database, _ link: MirrorLinkNavigation, key: [SQLValue], asTarget: Bool)
        throws
    {
        let columns =
            asTarget
            ? link.targetKey.map { MirrorLinkNavigation.targetColumn($0.name) }
            : link.sourceKey.map { MirrorLinkNavigation.sourceColumn($0.name) }
        guard columns.count == key.count, !key.isEmpty else { return }
        try db.run(
            "DELETE FROM \(q(link.table)) WHERE " + columns.map { "\(q($0)) = ?" }.joined(separator: " AND "),
            key)
    }

    /// Inside a transaction: removes the links offline writes recorded (once nothing is queued and a
    /// download has the upstream's own).
    static func dropLocalLinks(_ db: Database, _ model: MirrorModel) throws {
        for navs in model.links.values {
            for link in navs.values {
                try db.run(
                    "DELETE FROM \(q(link.table)) WHERE \"_dr\" = ?", [.text(MirrorWriter.createdScope)])
            }
        }
    }

    /// The key values of `members` for `key`'s properties, encoded as link-table columns; nil when one is
    /// missing.
    static func linkKey(_ members: [(String, RawJSON)], _ key: [(name: String, type: EdmPrimitiveType)])
        -> [SQLValue]?
    {
        var out: [SQLValue] = []
        for k in key {
            let v = MirrorColumn.encode(MirrorColumn.lookup(members, [k.name]), k.type)
            if case .null = v { return nil }
            out.append(v)
        }
        return out
    }

    /// The link records one wire entity of `set` shows for its expanded navigation `name` (the marker
    /// plus one per related entity), or nothing when the navigation has no link table.
    static func linkRecords(
        model m: MirrorModel, set: String, properties: [(String, RawJSON)], navigation name: String,
        related: [[(String, RawJSON)]]
    ) -> [MirrorLinkRecord] {
        guard let link = m.links[set]?[name] else { return [] }
        func key(_ props: [(String, RawJSON)], _ key: [(name: String, type: EdmPrimitiveType)]) -> [SQLValue]?
        {
            var out: [SQLValue] = []
            for k in key {
                let v = MirrorColumn.encode(MirrorColumn.lookup(props, [k.name]), k.type)
                if case .null = v { return nil }
                out.append(v)
            }
            return out
        }
        guard let source = key(properties, link.sourceKey) else { return [] }
        var records = [MirrorLinkRecord(sourceSet: set, navigation: name, source: source, target: nil)]
        for r in related {
            // A related entity without its key (a nested `$select` left it out): the links are not known.
            guard let target = key(r, link.targetKey) else { return [] }
            records.append(MirrorLinkRecord(sourceSet: set, navigation: name, source: source, target: target))
            if let partner = link.singlePartner {
                records.append(
                    MirrorLinkRecord(
                        sourceSet: link.targetSet, navigation: partner, source: target, target: nil))
                records.append(
                    MirrorLinkRecord(
                        sourceSet: link.targetSet, navigation: partner, source: target, target: source))
            }
        }
        return records
    }
}

/// Records which link-table navigations and contained entity sets (`Set/Nav`) a translation used, so the
/// caller can check that their links or entities were downloaded.
final class LinkUsage: Sendable {
    private let used = Mutex<Set<MirrorLinkNavigation>>([])
    private let usedContained = Mutex<Set<String>>([])
    func record(_ link: MirrorLinkNavigation) { _ = used.withLock { $0.insert(link) } }
    func recordContained(_ set: String) { _ = usedContained.withLock { $0.insert(set) } }
    var all: Set<MirrorLinkNavigation> { used.withLock { $0 } }
    var contained: Set<String> { usedContained.withLock { $0 } }
}

/// The mirror's SQL mapping: the model's (referential constraints) first, then link tables.
struct MirrorSQLMapping: SQLMapping {
    let base: ModelSQLMapping
    let links: [String: [String: MirrorLinkNavigation]]
    let usage = LinkUsage()

    let layouts: [String: MirrorSetLayout]

    init(_ m: MirrorModel) {
        base = m.mapping
        links = m.links
        layouts = m.layouts
    }

    func column(for path: [String], in entityType: String) -> String? {
        base.column(for: path, in: entityType)
    }

    func navigation(_ name: String, from entityType: String) -> SQLNavigationMapping? {
        if let nav = base.navigation(name, from: entityType) { return nav }
        if let table = base.table(for: entityType), let contained = layouts[table + "/" + name],
            let container = contained.container
        {
            // Contained entities: their `_p_` columns hold the parent's key.
            usage.recordContained(contained.set.name)
            return SQLNavigationMapping(
                table: contained.set.name, entityType: contained.entityType,
                joins: container.parentKey.map {
                    SQLJoinColumns(sourceColumn: $0.path[0], targetColumn: $0.name)
                })
        }
        guard let table = base.table(for: entityType), let link = links[table]?[name] else { return nil }
        usage.record(link)
        return link.sqlMapping
    }

    func binding(for literal: ODataLiteral, type: EdmTypeRef?) -> SQLBinding {
        if case .guid(let g) = literal { return .text(g.lowercased()) }
        return base.binding(for: literal, type: type)
    }

    var profile: SQLStorageProfile { base.profile }
    func typeColumn(for entityType: String) -> String? { base.typeColumn(for: entityType) }
    func documentColumn(for entityType: String) -> String? { base.documentColumn(for: entityType) }
    func collection(for path: [String], in entityType: String) -> SQLCollectionMapping? {
        base.collection(for: path, in: entityType)
    }
    func encoding(for path: [String], in entityType: String) -> SQLValueEncoding? {
        base.encoding(for: path, in: entityType)
    }
}
