import JSONCore
import ODataCore
import Storage

/// The rows a read addresses, as a condition on the table of `layout` (aliased by the caller).
struct LocalScope {
    var layout: MirrorSetLayout
    var condition: @Sendable (String) -> SQLFragment
    var single: Bool
    /// The type the rows are read as: the set's, or a type cast to in the path.
    var entityType: String
    /// The type the path declares when it differs from `entityType` (a navigation property's type, say
    /// `Customer` for `Orders(1)/Customer` into the `People` set): `@odata.type` and the context's cast
    /// are written only for entities of another type than this one.
    var declaredType: String?
    /// Set when the rows are contained entities the mirror did not download for some parent: the 501
    /// to answer a read of the collection, or a lookup of one entity that finds no row. (A row the
    /// mirror holds, written through the gateway, is still answered.)
    var unheld: ODataServiceError?

    init(
        layout: MirrorSetLayout, condition: @escaping @Sendable (String) -> SQLFragment, single: Bool,
        entityType: String? = nil
    ) {
        self.layout = layout
        self.condition = condition
        self.single = single
        self.entityType = entityType ?? layout.entityType
    }
}

/// One entity read from the mirror, with the entities expanded inside it.
struct LocalEntry: Sendable {
    var set: String
    var entityType: String
    var properties: [(String, RawJSON)]
    var etag: String?
    var row: Row
    var expanded: [(String, LocalExpansion)] = []
    /// The type the context names for this entry (the set's or a cast's): `@odata.type` is written when
    /// the entity's own type differs.
    var expectedType: String = ""
    /// An aggregated `$apply` result (no identity, no metadata of an entity).
    var aggregated: Bool = false
    /// The primitive type of each top-level computed or aggregated value (`$compute`, `$apply`), which
    /// the entity type does not declare (`IEEE754Compatible` writes Int64 and Decimal ones as strings).
    var columnTypes: [String: EdmPrimitiveType] = [:]
    /// The names a `$select` chose (properties and navigation): only these are written; the key
    /// properties stay in `properties` for the entity's id.
    var selected: Set<String>?
}

/// What an expanded navigation holds.
enum LocalExpansion: Sendable {
    case many([LocalEntry], count: Int?)
    case one(LocalEntry?)
}

/// What a local read found, before it is written in a version's format.
enum LocalResult {
    /// `$metadata`, byte-identical.
    case metadata([UInt8])
    /// The service document.
    case serviceDocument
    /// `…/$count`.
    case count(Int)
    /// `…/Property/$value`.
    case rawValue(RawJSON)
    /// `…/Property`.
    case property(name: String, type: EdmTypeRef, value: RawJSON, context: String?)
    /// One entity of `set`, its `$select` in `options`.
    case entity(LocalEntry, set: String, options: ODataQueryOptions, context: String?)
    /// A page of a collection of `set`, the total count when asked for, the next page's link.
    case collection(
        [LocalEntry], total: Int?, next: String?, set: String, options: ODataQueryOptions, context: String?)
    /// V4 `$ref` / V2 `$links` of a single-valued navigation.
    case reference(LocalEntry)
    /// V4 `$ref` / V2 `$links` of a collection.
    case references([LocalEntry], total: Int?, next: String?)
}
