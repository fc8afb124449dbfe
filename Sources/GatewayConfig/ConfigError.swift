/// One problem found in a configuration: where (file, 1-based line and column, dotted key path) and what.
///
/// `line` and `column` are 0 when the problem has no place in a file (e.g. a command-line override).
public struct ConfigIssue: Sendable, Hashable, CustomStringConvertible {
    public let file: String
    public let line: Int
    public let column: Int
    /// Dotted key path, e.g. `server.listen` or `algolia.hosts[1].url`; empty for the document itself.
    public let keyPath: String
    /// Human-readable message; it names the key path.
    public let message: String

    public init(file: String, line: Int, column: Int, keyPath: String, message: String) {
        self.file = file
        self.line = line
        self.column = column
        self.keyPath = keyPath
        self.message = message
    }

    /// `file:line: message`, e.g. `config/x.yaml:12: unknown key 'server.listn'`.
    public var description: String {
        line > 0 ? "\(file):\(line): \(message)" : "\(file): \(message)"
    }
}

/// Every problem found in one configuration, in file order; thrown by `MirrorgateConfiguration.load`
/// and `parse`. Never empty when thrown.
public struct ConfigError: Error, Sendable, CustomStringConvertible {
    public let issues: [ConfigIssue]

    public init(issues: [ConfigIssue]) { self.issues = issues }

    /// One issue per line.
    public var description: String { issues.map(\.description).joined(separator: "\n") }
}
