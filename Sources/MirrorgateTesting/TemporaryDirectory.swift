import Foundation

/// A fresh directory under the system's temporary directory (`<prefix>-<UUID>`), for a test's data
/// directory, bootstrap files or stores. Removed with everything in it by ``remove()`` (call it in a
/// `defer`); never shared between tests.
public final class TemporaryDirectory: Sendable {
    /// The directory's absolute path.
    public let path: String

    /// Creates the directory (mode 0700).
    public init(_ prefix: String = "mg-test") throws {
        path =
            FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
            .path
        try FileManager.default.createDirectory(
            atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    }

    /// `path/name`.
    public func file(_ name: String) -> String { path + "/" + name }

    /// Writes `text` to `path/name` and returns the file's path.
    @discardableResult
    public func write(_ name: String, _ text: String) throws -> String {
        let file = file(name)
        try Data(text.utf8).write(to: URL(fileURLWithPath: file))
        return file
    }

    /// Removes the directory and everything in it.
    public func remove() { try? FileManager.default.removeItem(atPath: path) }
}
