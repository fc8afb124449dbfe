import HTTPCore
import JSONCore
import ODataCore
import Storage

// MARK: navigation through link tables, $ref / $links

extension LocalQueryPlanner {
    /// Whether `scope` holds at least one row.
    func exists(_ scope: LocalScope) throws(ODataServiceError) -> Bool {
        let condition = scope.condition("src")
        let sql = "SELECT 1 FROM \(q(scope.layout.set.name)) AS \"src\" WHERE " + condition.sql + " LIMIT 1"
        return try self.sql { try db.scalar(sql, condition.bindings.map(SQLValue.init)) } != nil
    }

    /// `(alias.k1, alias.k2)` over the target key columns.
    static func keyTuple(_ alias: String, _ columns: [String]) -> String {
        "(" + columns.map { "\(q(alias)).\(q($0))" }.joined(separator: ", ") + ")"
    }

    /// The links of `link` are known for a source row when the link table holds its marker row.
    static func linksKnown(_ link: MirrorLinkNavigation, source alias: String) -> String {
        "EXISTS (SELECT 1 FROM \(q(link.table)) AS \"lk\" WHERE "
            + link.sourceKey.map {
                "\"lk\".\(q(MirrorLinkNavigation.sourceColumn($0.name))) = \(q(alias)).\(q($0.name))"
            }.joined(separator: " AND ") + ")"
    }

    static func unknownLinks(_ link: MirrorLinkNavigation) -> ODataServiceError {
        ODataServiceError(
            501, "NotImplemented",
            "navigation '\(link.name)' from \(link.sourceSet) has no referential constraint and its links were "
                + "not downloaded for these entities (a defining request with $expand=\(link.name) records them)"
        )
    }

    /// The entities a link-table navigation reaches from the rows of `source`. Throws 501 when some
    /// source row's links were never downloaded: the mirror cannot know them, so it does not answer
    /// (a source row whose links were downloaded and are empty gives an empty answer).
    func linkScope(_ link: MirrorLinkNavigation, from source: LocalScope, isCollection: Bool)
        throws(ODataServiceError)
        -> LocalScope
    {
        guard let target = m.layouts[link.targetSet] else { throw Self.unknownLinks(link) }
        let previous = source.condition
        let sourceSet = source.layout.set.name
        let check = previous("src")
        let sql =
            "SELECT 1 FROM \(q(sourceSet)) AS \"src\" WHERE " + check.sql + " AND NOT "
            + Self.linksKnown(link, source: "src") + " LIMIT 1"
        if try self.sql({ try db.scalar(sql, check.bindings.map(SQLValue.init)) }) != nil {
            guard let back = try knownPartner(of: link) else { throw Self.unknownLinks(link) }
            let sourceKeys = link.sourceKey.map(\.name)
            return LocalScope(
                layout: target,
                condition: { a in
                    Self.partnerLinks(back, target: a) + " AND ("
                        + back.targetKey.map { "\"lk\".\(q(MirrorLinkNavigation.targetColumn($0.name)))" }
                        .joined(
                            separator: ", ")
                        + ") IN (SELECT " + sourceKeys.map { "\"src\".\(q($0))" }.joined(separator: ", ")
                        + " FROM \(q(sourceSet)) AS \"src\" WHERE " + previous("src") + "))"
                }, single: !isCollection)
        }
        let sourceKeys = link.sourceKey.map(\.name)
        let targetKeys = link.targetKey.map(\.name)
        return LocalScope(
            layout: target,
            condition: { a in
                Self.keyTuple(a, targetKeys) + " IN (SELECT "
                    + targetKeys.map { "\"lk\".\(q(MirrorLinkNavigation.targetColumn($0)))" }.joined(
                        separator: ", ")
                    + " FROM \(q(link.table)) AS \"lk\" WHERE ("
                    + sourceKeys.map { "\"lk\".\(q(MirrorLinkNavigation.sourceColumn($0)))" }.joined(
                        separator: ", ")
                    + ") IN (SELECT "
                    + sourceKeys.map { "\"src\".\(q($0))" }.joined(separator: ", ")
                    + " FROM \(q(sourceSet)) AS \"src\" WHERE " + previous("src") + "))"
            }, single: !isCollection)
    }

    /// The entities a link-table navigation reaches from one source row (for `$expand`); 501 when that
    /// row's links were never downloaded.
    func linkScope(_ link: MirrorLinkNavigation, fromRow row: Row) throws(ODataServiceError) -> LocalScope {
        guard let target = m.layouts[link.targetSet] else { throw Self.unknownLinks(link) }
        let keys: [(String, SQLBinding)] = link.sourceKey.map {
            (MirrorLinkNavigation.sourceColumn($0.name), SQLBinding(row[$0.name] ?? .null))
        }
        let probe =
            "SELECT 1 FROM \(q(link.table)) WHERE "
            + keys.map { "\(q($0.0)) = ?" }.joined(separator: " AND ") + " LIMIT 1"
        let values = keys.map { SQLValue($0.1) }
        if try self.sql({ try db.scalar(probe, values) }) == nil {
            guard let back = try knownPartner(of: link) else { throw Self.unknownLinks(link) }
            let partnerKeys: [(String, SQLBinding)] = back.targetKey.map {
                (MirrorLinkNavigation.targetColumn($0.name), SQLBinding(row[$0.name] ?? .null))
            }
            return LocalScope(
                layout: target,
                condition: { a in
                    var f = SQLFragment(Self.partnerLinks(back, target: a))
                    for (column, value) in partnerKeys {
                        f = f + " AND \"lk\".\(q(column)) = ?" + SQLFragment("", [value])
                    }
                    return f + ")"
                }, single: !link.isCollection)
        }
        let targetKeys = link.targetKey.map(\.name)
        return LocalScope(
            layout: target,
            condition: { a in
                var f =
                    SQLFragment(
                        Self.keyTuple(a, targetKeys) + " IN (SELECT "
                            + targetKeys.map { "\"lk\".\(q(MirrorLinkNavigation.targetColumn($0)))" }.joined(
                                separator: ", ")
                            + " FROM \(q(link.table)) AS \"lk\" WHERE 1")
                for (column, value) in keys {
                    f = f + " AND \"lk\".\(q(column)) = ?" + SQLFragment("", [value])
                }
                return f + ")"
            }, single: !link.isCollection)
    }

    /// The partner of a collection-valued link navigation, read from the other side, when that answers it
    /// exactly: the partner is a single-valued link navigation back (`Customers/Orders` ↔
    /// `Orders/Customer`), a defining request reads the whole target set, and every target row has its
    /// partner link known (`Orders?$expand=Customer` downloaded whole). The entities the navigation
    /// reaches from a source are then the target rows whose partner link names the source. Nil otherwise.
    func knownPartner(of link: MirrorLinkNavigation) throws(ODataServiceError) -> MirrorLinkNavigation? {
        guard link.isCollection, let partner = link.singlePartner,
            let back = m.links[link.targetSet]?[partner],
            back.targetSet == link.sourceSet, !back.isCollection
        else { return nil }
        let sql =
            "SELECT 1 FROM \(q(link.targetSet)) AS \"src\" WHERE NOT " + Self.linksKnown(back, source: "src")
            + " LIMIT 1"
        if try self.sql({ try db.scalar(sql) }) != nil { return nil }
        let whole = try self.sql { try MirrorWriter(db: db, model: m).holdsWholeSet(link.targetSet) }
        return whole ? back : nil
    }

    /// `EXISTS (SELECT 1 FROM <partner link table> AS lk WHERE lk.s_<key> = target.<key> …` — open: the
    /// caller adds the condition on the partner's target columns and the closing parenthesis.
    static func partnerLinks(_ back: MirrorLinkNavigation, target alias: String) -> String {
        "EXISTS (SELECT 1 FROM \(q(back.table)) AS \"lk\" WHERE "
            + back.sourceKey.map {
                "\"lk\".\(q(MirrorLinkNavigation.sourceColumn($0.name))) = \(q(alias)).\(q($0.name))"
            }.joined(separator: " AND ")
    }

    /// A filter or order through link-table navigation is answered only when every row of each source
    /// set has its links downloaded (otherwise rows without links would silently not match).
    func requireLinks(_ used: Set<MirrorLinkNavigation>) throws(ODataServiceError) {
        for link in used.sorted(by: { $0.table < $1.table }) {
            let sql =
                "SELECT 1 FROM \(q(link.sourceSet)) AS \"src\" WHERE NOT "
                + Self.linksKnown(link, source: "src")
                + " LIMIT 1"
            if try self.sql({ try db.scalar(sql) }) != nil { throw Self.unknownLinks(link) }
        }
    }

    /// V4 `…/$ref` (`Collection($ref)` or one `@odata.id`), V2 `…/$links/Nav` (`results` of `uri`s or
    /// one `uri`).
    mutating func references(_ scope: LocalScope, options: ODataQueryOptions) throws(ODataServiceError)
        -> LocalResult
    {
        var o = options
        o.select = nil
        o.expand = nil
        if scope.single {
            o.top = nil
            o.skip = nil
            o.filter = nil
            o.orderBy = nil
            guard let e = try fetch(scope, options: o, paging: nil).entries.first else {
                throw ODataServiceError(404, "NotFound", "no entity is linked")
            }
            return .reference(e)
        }
        let offset = try skipTokenOffset(options)
        let result = try fetch(scope, options: o, paging: (offset, request.pageSize))
        var total: Int?
        if options.wantsCount { total = try count(scope, options: o) }
        let next = result.more ? nextLink(offset: offset + result.entries.count) : nil
        return .references(result.entries, total: total, next: next)
    }
}
