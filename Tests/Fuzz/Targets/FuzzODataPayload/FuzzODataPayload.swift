import CFuzzDriver
import FuzzSupport
import JSONCore
import ODataCore

// An OData write body (JSON) checked by ODataPayloadValidator as the offline writer does: the type it
// declares (`@odata.type`, V2 `__metadata.type`), then its members against every entity type of the V4 Shop
// model and the V2 customers/orders model, for a create, a replace and an update, and each member against
// each declared property of the type.

@_cdecl("FuzzODataPayload_main")
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

let models = [model("shopV4.xml"), model("customersOrdersV2.xml")]
let entityTypes = models.map { m in m.structuredTypes.values.filter(\.isEntity).map(\.qualifiedName).sorted()
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard let payload = try? RawJSON.parse(Array(UnsafeBufferPointer(start: data, count: size))),
        let members = payload.members
    else { return 0 }
    for (m, types) in zip(models, entityTypes) {
        let validator = ODataPayloadValidator(model: m)
        for base in types {
            let type = (try? validator.declaredType(of: members, base: base)) ?? base
            for operation in [ODataPayloadValidator.Operation.create, .replace, .update] {
                _ = try? validator.validate(members, ofType: type, for: operation)
            }
            for (name, value) in members {
                if let property = m.property(named: name, in: type) {
                    _ = try? validator.validate(value, for: property, path: name)
                }
            }
        }
    }
    return 0
}
