import CFuzzDriver
import FuzzSupport
import JSONCore
import ODataCore

@testable import ODataGateway

// XML from clients and upstreams: a V2 Atom entry (the body of an offline POST/PUT/PATCH or of a `$batch`
// part, `Content-Type: application/atom+xml`) read by ODataAtomBody for each entity type of the V2
// customers/orders model, and the same bytes as a `$metadata` document (CSDLParser, MirrorModel).

@_cdecl("FuzzODataXML_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
    mg_fuzz_main(argc, argv)
}

let model: MirrorModel = {
    do {
        return try MirrorModel(
            metadata: FuzzSupport.fixture("Sources/MirrorgateTesting/Resources/OData/customersOrdersV2.xml"))
    } catch {
        fatalError("customersOrdersV2.xml: \(error)")
    }
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    for type in ["S.Customer", "S.Order"] {
        do {
            _ = try ODataAtomBody.object(bytes, type: type, model: model)
        } catch {
            FuzzSupport.require(error.status == 400, "Atom body refused with \(error.status)")
        }
    }
    _ = try? CSDLParser.parse(bytes)
    _ = try? MirrorModel(metadata: bytes)
    return 0
}
