import Foundation
import JSONCore
import ODataCore

/// The checks every local write path makes before it touches the mirror (single writes, deep inserts,
/// `$batch` parts, link changes): payloads against the model (``ODataPayloadValidator``) and the request's
/// path, with the status the upstream would have answered (`400` for a payload or key predicate it would
/// refuse, `404` for what does not exist).
enum WriteChecks {
    /// Checks `members` of an entity of `type` for `operation`; a violation is a `400` naming the property.
    /// `exempt`: properties the gateway supplies itself (not required from the client). A value that is a
    /// key the gateway minted (`local-<uuid>`, in a key or a foreign key) is a placeholder the upload
    /// replaces with the upstream's key: it is not held to the property's facets.
    static func check(
        _ members: [(String, RawJSON)], ofType type: String, model: EdmModel,
        for operation: ODataPayloadValidator.Operation, exempt: Set<String> = []
    ) throws(ODataServiceError) {
        let placeholders = Set(members.filter { isMintedLocalKey($0.1) }.map(\.0))
        do {
            try ODataPayloadValidator(model: model).validate(
                members.filter { !placeholders.contains($0.0) }, ofType: type, for: operation,
                exempt: exempt.union(placeholders))
        } catch { throw ODataServiceError(payload: error) }
    }

    /// Whether `value` is a string key minted by the gateway for an offline create (`local-` and a UUID).
    static func isMintedLocalKey(_ value: RawJSON) -> Bool {
        guard let s = value.string, s.hasPrefix("local-") else { return false }
        return UUID(uuidString: String(s.dropFirst("local-".count))) != nil
    }

    /// The error for a write path that does not parse: `400` when the path names an entity set and only
    /// its key predicate is wrong (`Products('abc')` for an `Edm.Int32` key, `Products(1099511627776)`),
    /// `404` otherwise (no such set, property or navigation).
    static func pathError(_ path: String, model: EdmModel, _ error: ODataError) -> ODataServiceError {
        let first = path.prefix { $0 != "/" }
        if let open = first.firstIndex(of: "("), first.hasSuffix(")") {
            let set = String(first[..<open])
            if (try? ODataResourcePath.parse(set, model: model)) != nil {
                return ODataServiceError(400, "BadRequest", error.message)
            }
        }
        return ODataServiceError(404, "NotFound", "\(error)")
    }
}
