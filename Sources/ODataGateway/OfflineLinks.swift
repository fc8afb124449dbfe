import Foundation
import GatewaySupport
import HTTPCore
import JSONCore
import ODataCore
import Storage

extension ODataOfflineWriter {
    /// Link changes applied locally: V4 `PUT/POST/DELETE …/Nav/$ref` and V2 `…/$links/Nav`. The link is
    /// the foreign key of the navigation's referential constraint: on the source row (a single-valued
    /// navigation to its principal) or on the target row (a collection of dependents). Returns nil when
    /// the path is no link change.
    func applyLinkChange(_ w: MirrorWriter, segments: [ODataPathSegment], _ input: LocalWriteInput) throws
        -> (QueuedRequest, LocalWriteOutcome)?
    {
        let m = w.model
        guard segments.count >= 3, case .entitySet(let setName, let type) = segments[0],
            case .key(let key) = segments[1]
        else { return nil }
        var rest = Array(segments.dropFirst(2))
        var isLinks = false
        if case .links? = rest.first {
            isLinks = true
            rest.removeFirst()
        }
        guard case .navigation(let navName, _, let isCollection, _)? = rest.first,
            let nav = m.model.navigationProperty(named: navName, in: type)
        else { return nil }
        rest.removeFirst()
        var targetKey: ODataKey?
        if case .key(let k)? = rest.first {
            targetKey = k
            rest.removeFirst()
        }
        if !isLinks {
            guard case .ref? = rest.first else { return nil }
            rest.removeFirst()
        }
        guard rest.isEmpty else { return nil }
        let method = input.method
        guard ["PUT", "POST", "DELETE"].contains(method) else {
            throw ODataServiceError(405, "MethodNotAllowed", "links are changed with PUT, POST or DELETE")
        }
        guard !nav.referentialConstraints.isEmpty, let sourceLayout = m.layouts[setName] else {
            throw ODataServiceError(
                501, "NotImplemented",
                "the link '\(navName)' has no referential constraint to store it offline")
        }
        guard let source = try w.entity(sourceLayout, key: key)?.members else {
            throw ODataServiceError(404, "NotFound", "no such entity")
        }
        let sourceKeys = Set(m.model.key(of: type))
        let sourceHoldsForeignKey = !nav.referentialConstraints.allSatisfy {
            sourceKeys.contains($0.property)
        }
        // The entity linked to: from the body (`@odata.id`, V2 `uri`), the key segment or V4 `$id`.
        var link: String?
        if method != "DELETE" {
            guard let body = try? RawJSON.parse(input.body) else {
                throw ODataServiceError(400, "BadRequest", "the request body is not JSON")
            }
            let object = body["d"] ?? body
            link = object["@odata.id"]?.string ?? object["uri"]?.string
            guard link != nil else {
                throw ODataServiceError(400, "BadRequest", "the body names no entity to link")
            }
        } else if let id = Self.queryParameter(input.query, "$id") {
            link = id
        }
        var target: (layout: MirrorSetLayout, key: ODataKey, members: [(String, RawJSON)])?
        if let link {
            let linked = try linkedEntity(w, link: link)
            // Only an entity of the navigation's target type can be linked (else the foreign key would be
            // written into an unrelated row of the mirror).
            guard m.model.isType(linked.layout.entityType, derivedFrom: nav.target) else {
                throw ODataServiceError(
                    400, "BadRequest", "'\(link)' is not an entity of the type '\(navName)' leads to")
            }
            target = linked
        } else if let targetKey,
            let targetSet = m.model.targetEntitySet(from: sourceLayout.set, navigationPath: navName),
            let layout = m.layouts[targetSet.name]
        {
            guard let members = try w.entity(layout, key: targetKey)?.members else {
                throw ODataServiceError(404, "NotFound", "the linked entity does not exist")
            }
            target = (layout, targetKey, members)
        }
        var ignored = QueuedRequest(
            id: 0, entitySet: "", method: "", url: "", body: [], contentType: nil, authorization: nil,
            ifMatch: nil, localKey: nil, gatewayRoot: "", requestID: "", firstSent: "", attempts: 0)
        if sourceHoldsForeignKey, !isCollection {
            var changes: [(String, RawJSON)] = []
            for c in nav.referentialConstraints {
                let value =
                    method == "DELETE"
                    ? RawJSON.null : target?.members.first { $0.0 == c.referencedProperty }?.1
                changes.append((c.property, value ?? .null))
            }
            _ = try applyToMirror(
                w, layout: sourceLayout, method: "PATCH", key: key, members: changes,
                keyProperties: m.model.keyProperties(of: type), clientIfMatch: Self.noIfMatch,
                queued: &ignored)
        } else {
            guard let target else {
                throw ODataServiceError(
                    400, "BadRequest", "name the entity whose link is removed ($id or a key)")
            }
            if method == "PUT", isCollection {
                throw ODataServiceError(400, "BadRequest", "a collection of links takes POST, not PUT")
            }
            var changes: [(String, RawJSON)] = []
            for c in nav.referentialConstraints {
                let value = method == "DELETE" ? RawJSON.null : source.first { $0.0 == c.property }?.1
                changes.append((c.referencedProperty, value ?? .null))
            }
            _ = try applyToMirror(
                w, layout: target.layout, method: "PATCH", key: target.key, members: changes,
                keyProperties: m.model.keyProperties(of: target.layout.entityType),
                clientIfMatch: Self.noIfMatch,
                queued: &ignored)
        }
        let queued = QueuedRequest(
            id: 0, entitySet: setName, method: method,
            url: input.path + (input.query.isEmpty ? "" : "?" + input.query), body: input.body,
            contentType: input.headers["Content-Type"], authorization: input.headers["Authorization"],
            ifMatch: input.headers["If-Match"], localKey: nil, gatewayRoot: input.gatewayRoot,
            requestID: UUID().uuidString.lowercased(), firstSent: Self.imfDate(Date()), attempts: 0)
        return (queued, LocalWriteOutcome(status: 204, set: setName, createdKey: nil))
    }

    /// The percent-decoded value of query parameter `name`.
    static func queryParameter(_ query: String, _ name: String) -> String? {
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            if parts.count == 2, (parts[0].removingPercentEncoding ?? String(parts[0])) == name {
                return parts[1].removingPercentEncoding ?? String(parts[1])
            }
        }
        return nil
    }
}
