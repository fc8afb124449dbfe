import CFuzzDriver
import FuzzSupport
import JSONCore

@testable import ODataCore

// An OData read URL relative to the service root, `path?query` (a leading `~` picks the V2 model): the
// resource path with its key predicates and literals, the query options ($filter, $orderby, $select,
// $expand with nested options, $apply, $compute, $search, $top/$skip...) parsed, validated against the
// model of the target and planned into SQL as the offline reader does. The whole text is also read as a
// literal, a key predicate, a $filter, a $search and a $compute list, so each parser gets raw input too.
// Models: Sources/MirrorgateTesting/Resources/OData/shopV4.xml and customersOrdersV2.xml.

@_cdecl("FuzzODataQuery_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
    mg_fuzz_main(argc, argv)
}

func model(_ file: String) -> EdmModel {
    do {
        return try CSDLParser.parse(FuzzSupport.fixture("Sources/MirrorgateTesting/Resources/OData/" + file))
    } catch {
        fatalError("\(file): \(error)")
    }
}

let v4 = model("shopV4.xml")
let v2 = model("customersOrdersV2.xml")
let v4Mapping = ModelSQLMapping(model: v4)
let v2Mapping = ModelSQLMapping(model: v2)

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    var (model, mapping) = (v4, v4Mapping)
    if text.hasPrefix("~") {
        text.removeFirst()
        (model, mapping) = (v2, v2Mapping)
    }
    let version = model.version
    let parts = text.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
    let rawPath = String(parts.first ?? "")
    let rawQuery = parts.count > 1 ? String(parts[1]) : ""

    // The target's entity type and set (the first set when the path does not parse or names no entities).
    var entityType = model.entitySets.first?.entityType ?? ""
    var table = model.entitySets.first?.name ?? ""
    if let path = try? ODataResourcePath.parse(rawPath, model: model) {
        switch path.target {
        case .entityCollection(let type, let set), .entity(let type, let set):
            entityType = type
            if let set { table = set }
        default: break
        }
        _ = path.isContained(in: model)
    }
    if let options = try? ODataQueryOptions.parse(rawQuery: rawQuery, version: version),
        (try? options.validate(against: model, entityType: entityType)) != nil
    {
        let planner = ODataQueryPlanner(model: model, mapping: mapping, table: table, entityType: entityType)
        if let plan = try? planner.plan(apply: options.apply, options: options) {
            for fragment in [plan.sql, plan.countSQL] {
                FuzzSupport.require(
                    fragment.sql.filter { $0 == "?" }.count == fragment.bindings.count,
                    "SQL placeholders and bindings differ: \(fragment)")
            }
        }
        if let search = options.searchExpression {
            _ = try? ODataSearchTranslator(model: model, mapping: mapping, entityType: entityType).translate(
                search)
        }
    }

    // Each parser on the raw text.
    if let literal = try? ODataLiteral.parse(text, version: version) {
        _ = literal.urlText(version: version)
    }
    _ = try? ODataKey.parse(text, entityType: entityType, model: model)
    let filter = ODataFilterParser(model: model, entityType: entityType)
    _ = try? filter.parseFilter(text)
    _ = try? filter.parseOrderBy(text)
    _ = try? ODataSearchExpression.parse(text)
    _ = try? ODataApply.parse(text)
    _ = try? ODataComputeItem.parseList(text)
    _ = try? PercentDecoding.decode(text, plusAsSpace: true)
    return 0
}
