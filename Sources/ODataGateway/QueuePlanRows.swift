import Foundation
import JSONCore
import ODataCore

/// Reads a queued request the way the queue planner needs it (``PlanRow``): its kind, the entity it
/// changes, and the entities it names, links as dependents or depends on, from its URL and body against
/// the mirrored model (foreign keys, `@odata.bind`, V2 `__metadata.uri` links, `$ref`/`$links`, creates
/// through a navigation, deep inserts). Pure: a function of the model and the request.
struct ODataPlanRowReader {
    let model: MirrorModel

    /// `request` as a plan row; `pinned` when it must stay as it is, `credentials` its writer's.
    func row(_ request: QueuedRequest, pinned: Bool, credentials: WriterCredentials?) -> PlanRow {
        var row = PlanRow(id: request.id, kind: .other)
        row.changeset = request.changeset
        row.transactionID = request.transactionID
        row.nonMergeable = request.nonMergeable
        row.pinned = pinned || request.sentAt != nil
        row.credentials = credentials.flatMap {
            $0.authorization == nil && $0.cookie == nil ? nil : $0.fingerprint
        }
        var path = Substring(request.url)
        if let q = path.firstIndex(of: "?") {
            row.query = String(path[path.index(after: q)...])
            path = path[..<q]
        }
        row.entity = request.affectedEntity(model: model).map { ODataKeyText.canonical($0, model: model) }
        guard let parsed = try? ODataResourcePath.parse(String(path), model: model.model) else { return row }
        let segments = parsed.segments
        var object: [(String, RawJSON)]?
        if let json = try? RawJSON.parse(request.body) {
            var o = json
            if let d = json["d"], json.members?.count == 1 { o = d }
            object = o.members
        }
        row.jsonBody = object != nil
        switch (request.method, segments.count) {
        case ("POST", 1):
            if case .entitySet(let set, let type) = segments[0] {
                row.kind = .create
                readBody(object ?? [], set: set, type: type, create: true, into: &row)
                readNested(request, into: &row)
            }
        case ("POST", 3):
            if case .entitySet(let parentSet, let parentType) = segments[0], case .key(let key) = segments[1],
                case .navigation(let navName, let target, true, let targetSet) = segments[2],
                let nav = model.model.navigationProperty(named: navName, in: parentType)
            {
                row.kind = .create
                let parent = canonical(parentSet, key)
                row.refs.insert(parent)
                row.parents.append(.init(entity: parent, cascade: nav.cascadesOnDelete))
                let set = targetSet ?? model.layouts.values.first { $0.entityType == target }?.set.name ?? ""
                readBody(object ?? [], set: set, type: target, create: true, into: &row)
                readNested(request, into: &row)
            }
        case ("PUT", 2), ("PATCH", 2), ("MERGE", 2), ("DELETE", 2):
            if case .entitySet(let set, let type) = segments[0], case .key(let key) = segments[1] {
                row.entity = canonical(set, key)
                if request.method == "DELETE" {
                    row.kind = .delete
                } else {
                    row.kind = .update(replace: request.method == "PUT")
                    readBody(object ?? [], set: set, type: type, create: false, into: &row)
                }
            }
        default:
            readLinkChange(segments, object, into: &row)
        }
        return row
    }

    /// A link change (`Set(key)/Nav/$ref`, V2 `$links`): the entity whose link changes, and the linked one
    /// (a change to it when it becomes a dependent).
    private func readLinkChange(
        _ segments: [ODataPathSegment], _ body: [(String, RawJSON)]?, into row: inout PlanRow
    ) {
        guard segments.count >= 3, case .entitySet(let set, let type) = segments[0],
            case .key(let key) = segments[1]
        else { return }
        row.entity = canonical(set, key)
        var rest = segments.dropFirst(2)
        if case .links? = rest.first { rest = rest.dropFirst() }
        guard case .navigation(let navName, _, _, _)? = rest.first,
            let nav = model.model.navigationProperty(named: navName, in: type)
        else { return }
        var targets: [String] = []
        if let link = body?.first(where: { $0.0 == "@odata.id" || $0.0 == "uri" })?.1.string {
            targets.append(link)
        }
        if let id = ODataOfflineWriter.queryParameter(row.query, "$id") { targets.append(id) }
        var linked = targets.compactMap { entity(fromLink: $0) }
        if case .key(let targetKey)? = rest.dropFirst().first,
            let layout = model.model.entitySet(named: set).flatMap({
                model.model.targetEntitySet(from: $0, navigationPath: navName)
            })
        {
            linked.append(canonical(layout.name, targetKey))
        }
        for target in linked {
            if makesDependent(nav, of: type) {
                row.dependents.insert(target)
            } else {
                row.refs.insert(target)
            }
        }
    }

    /// Whether linking an entity through `nav` (of `type`) changes the linked entity: a collection, or a
    /// single navigation whose foreign key the target holds.
    private func makesDependent(_ nav: EdmNavigationProperty, of type: String) -> Bool {
        if nav.isCollection { return true }
        let keys = Set(model.model.key(of: type))
        return !nav.referentialConstraints.isEmpty
            && nav.referentialConstraints.allSatisfy { keys.contains($0.property) }
    }

    /// The links, foreign keys and nested entities of a create or update body.
    private func readBody(
        _ members: [(String, RawJSON)], set: String, type: String, create: Bool, into row: inout PlanRow
    ) {
        for (name, value) in members {
            var navName = name
            var links: [String] = []
            if name.hasSuffix("@odata.bind") {
                navName = String(name.dropLast("@odata.bind".count))
                links = value.elements?.compactMap(\.string) ?? value.string.map { [$0] } ?? []
            } else if model.model.navigationProperty(named: name, in: type) != nil {
                let items =
                    value.elements ?? value["results"]?.elements ?? (value.members != nil ? [value] : [])
                links = items.compactMap { item in
                    item.members?.count == 1 ? item["__metadata"]?["uri"]?.string : nil
                }
            } else {
                continue
            }
            guard let nav = model.model.navigationProperty(named: navName, in: type) else { continue }
            for link in links {
                guard let target = entity(fromLink: link) else { continue }
                if makesDependent(nav, of: type) {
                    row.dependents.insert(target)
                } else {
                    row.refs.insert(target)
                    if create {
                        row.parents.append(.init(entity: target, cascade: cascades(from: nav, type)))
                    }
                }
            }
        }
        // Foreign keys given as values name their principal (a local key minted for it, say).
        guard let layout = model.layouts[set] else { return }
        let ownKeys = Set(model.model.key(of: type))
        for nav in model.model.navigationProperties(of: type) where !nav.isCollection {
            let constraints = nav.referentialConstraints
            guard !constraints.isEmpty, !constraints.allSatisfy({ ownKeys.contains($0.property) }),
                let target = model.model.targetEntitySet(from: layout.set, navigationPath: nav.name)
            else { continue }
            var values: [(String, RawJSON)] = []
            for c in constraints {
                guard let v = members.first(where: { $0.0 == c.property })?.1, v != .null else { break }
                values.append((c.referencedProperty, v))
            }
            guard values.count == constraints.count else { continue }
            let keys = model.model.keyProperties(of: target.entityType)
            guard keys.allSatisfy({ k in values.contains { $0.0 == k.name } }) else { continue }
            let principal = ODataKeyText.canonical(
                target.name + ODataKeyText.predicate(values, keys, version: model.version), model: model)
            row.refs.insert(principal)
            if create, !row.parents.contains(where: { $0.entity == principal }) {
                row.parents.append(.init(entity: principal, cascade: cascades(from: nav, type)))
            }
        }
    }

    /// Whether deleting the principal `nav` (of a dependent of `type`) leads to deletes the dependent: the
    /// principal's navigation back (the partner) has `OnDelete Cascade`.
    private func cascades(from nav: EdmNavigationProperty, _ type: String) -> Bool {
        guard let partner = nav.partner else { return false }
        return model.model.navigationProperty(named: partner, in: nav.target)?.cascadesOnDelete ?? false
    }

    /// A deep insert's nested entities created locally, with whether deleting the parent deletes them.
    private func readNested(_ request: QueuedRequest, into row: inout PlanRow) {
        guard let text = request.nested, let records = try? RawJSON.parse(text).elements else { return }
        let type = model.layouts[request.entitySet]?.entityType ?? ""
        for record in records {
            guard let set = record["set"]?.string, let key = record["key"]?.string else { continue }
            let nav = record["nav"]?.string.flatMap { model.model.navigationProperty(named: $0, in: type) }
            row.nested.append(
                .init(
                    entity: ODataKeyText.canonical(set + key, model: model),
                    cascade: nav?.cascadesOnDelete ?? false))
        }
    }

    /// `Set|Key=value` of an entity addressed by a link (relative, absolute under any root, or `$N`-free).
    func entity(fromLink link: String) -> String? {
        var path = Substring(link)
        if let q = path.firstIndex(of: "?") { path = path[..<q] }
        let segment = path.split(separator: "/").last(where: { $0.contains("(") }) ?? path
        guard let open = segment.firstIndex(of: "("), segment.hasSuffix(")") else { return nil }
        let set = String(segment[..<open])
        guard model.layouts[set] != nil else { return nil }
        return ODataKeyText.canonical(String(segment), model: model)
    }

    private func canonical(_ set: String, _ key: ODataKey) -> String {
        set + "|" + key.values.map { "\($0.name)=\($0.value)" }.joined(separator: ",")
    }
}
