import Foundation

/// Helpers shared by the fuzz targets (Tests/Fuzz/README.md).
public enum FuzzSupport {
    /// The repository's root: this file is `Tests/Fuzz/Targets/FuzzSupport/FuzzSupport.swift`. The fuzz
    /// executables run on the checkout they were built from, so fixtures are read from it.
    public static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// The bytes of a fixture file (`relative` to the repository's root); stops the fuzzer when missing.
    public static func fixture(_ relative: String) -> [UInt8] {
        let url = root.appendingPathComponent(relative)
        guard let data = FileManager.default.contents(atPath: url.path) else {
            fatalError("fuzz fixture missing: \(url.path)")
        }
        return Array(data)
    }

    /// Stops the run (a finding for libFuzzer) when an invariant of a parser does not hold.
    public static func require(_ condition: Bool, _ message: @autoclosure () -> String) {
        if !condition { fatalError("fuzz invariant: \(message())") }
    }
}
