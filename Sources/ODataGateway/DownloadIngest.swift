import JSONCore
import ODataCore

extension ODataDownloader {
    /// The entities of a payload (V4 `value`, V2 `d.results`, V2 `d` as one entity or an array, a bare
    /// array) and its next-page link.
    static func entities(in body: RawJSON) -> (items: [RawJSON], next: String?) {
        if let a = body.elements { return (a, nil) }
        if let d = body["d"] {
            if let a = d.elements { return (a, nil) }
            if let r = d["results"]?.elements { return (r, d["__next"]?.string) }
            return ([d], nil)
        }
        if let v = body["value"]?.elements { return (v, body["@odata.nextLink"]?.string) }
        return ([body], nil)
    }

    /// Splits one wire entity into its structural properties (stored for `set`) and the entities expanded
    /// inside it (stored for their own sets); the links an expanded navigation without referential
    /// constraints shows go to `links`.
    static func ingest(
        _ object: [(String, RawJSON)], set: String, type: String, model m: MirrorModel,
        into rows: inout [String: [MirrorEntity]], links: inout [MirrorLinkRecord],
        parent: [(String, RawJSON)]? = nil
    ) {
        var properties: [(String, RawJSON)] = []
        var expanded: [(String, [[(String, RawJSON)]])] = []
        var etag: String?
        // The entity's own type when the upstream names one deriving from the expected type.
        var wireType: String?
        for (name, value) in object {
            if name == "__metadata" { wireType = value["type"]?.string }
            if name == "@odata.type" || name == "@type" { wireType = value.string }
        }
        let type = m.wireType(wireType, base: type) ?? type
        for (name, value) in object {
            if name == "__metadata" {
                etag = value["etag"]?.string
                continue
            }
            if name == "@odata.etag" || name == "@etag" {
                etag = value.string
                continue
            }
            if name.hasPrefix("@") || name.contains("@") { continue }
            if let nav = m.model.navigationProperty(named: name, in: type), nav.containsTarget {
                // Contained entities go to the `Set/Nav` table with their parent's key; an expansion
                // (even an empty one) records that the set's contained entities were downloaded.
                let targetSet = set + "/" + name
                guard m.layouts[targetSet] != nil, value["__deferred"] == nil else { continue }
                if rows[targetSet] == nil { rows[targetSet] = [] }
                for item in value.navigationItems {
                    if let members = item.members {
                        Self.ingest(
                            members, set: targetSet, type: nav.target, model: m, into: &rows, links: &links,
                            parent: object)
                    }
                }
                continue
            }
            if let nav = m.model.navigationProperty(named: name, in: type) {
                let setObject = m.layouts[set]?.set
                let targetSet =
                    setObject.flatMap { m.model.targetEntitySet(from: $0, navigationPath: name) }?.name
                    ?? m.layouts.values.first(where: { $0.entityType == nav.target })?.set.name
                guard let targetSet else { continue }
                let items = value.navigationItems
                let deferred = value["__deferred"] != nil
                var related: [[(String, RawJSON)]] = []
                for item in items {
                    if let members = item.members {
                        Self.ingest(
                            members, set: targetSet, type: nav.target, model: m, into: &rows, links: &links)
                        related.append(members)
                    }
                }
                if !deferred { expanded.append((name, related)) }
                continue
            }
            properties.append((name, value))
        }
        rows[set, default: []].append(
            MirrorEntity(properties: properties, etag: etag, type: type, parent: parent))
        for (name, related) in expanded {
            links += ODataMirror.linkRecords(
                model: m, set: set, properties: properties, navigation: name, related: related)
        }
    }
}

extension RawJSON {
    /// The entities an inline navigation value holds: a V4 array, a V2 `{"results":[…]}`, one entity
    /// object; none for a V2 `{"__deferred":…}` or anything else.
    var navigationItems: [RawJSON] {
        if let a = elements { return a }
        if let r = self["results"]?.elements { return r }
        if members != nil, self["__deferred"] == nil { return [self] }
        return []
    }
}
