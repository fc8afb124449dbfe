import CFuzzDriver
import FuzzSupport
import GatewayConfig

// The YAML configuration (GatewayConfig): Yams composes the document, the tree builder substitutes
// `${VAR}` from the environment, the reader checks every section and cross-checks the keys; any problem must
// be a ConfigError listing issues. No file is read (no file checks, a base directory that does not exist).

@_cdecl("FuzzConfig_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
    mg_fuzz_main(argc, argv)
}

let environment = ["MG_FUZZ": "value", "MG_FUZZ_PORT": "8080", "MG_FUZZ_EMPTY": ""]

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    do {
        let configuration = try MirrorgateConfiguration.parse(
            yaml: text, fileName: "fuzz.yaml", environment: environment, baseDirectory: "/nonexistent-fuzz")
        try? configuration.validate(file: "fuzz.yaml")
    } catch {
        FuzzSupport.require(!error.issues.isEmpty, "a ConfigError without issues")
    }
    return 0
}
