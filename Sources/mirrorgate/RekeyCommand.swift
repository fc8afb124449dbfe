import ArgumentParser
import Foundation
import GatewayConfig
import Mirrorgate
import Storage

/// `mirrorgate rekey [--config FILE] [--data-dir DIR] [--old-key-env VAR | --old-key-file FILE]`: brings
/// every store of the configuration to its configured `storeEncryptionKey` (encrypt, re-encrypt with a new
/// key, or decrypt), one line per store. The gateway must be stopped (the data directory is locked).
/// Exits 0 when every store is in its configured state, 1 otherwise.
struct Rekey: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Encrypt, re-encrypt or decrypt the stores to match the configured storeEncryptionKey values.",
        discussion: """
            The configuration names the keys the stores must have; the key they have now, when it is not \
            the configured one, comes from --old-key-env or --old-key-file (never from the command line, \
            where other users could read it). Stop the gateway first. Each store is rewritten into a \
            verified copy that replaces it whole; run the command again after an interruption.
            """)

    @OptionGroup var options: ConfigOptions

    @Option(name: .customLong("data-dir"), help: "Data directory (overrides dataDir).")
    var dataDir: String?

    @Option(
        name: .customLong("old-key-env"),
        help: "Name of an environment variable holding the key the stores are encrypted with now.")
    var oldKeyEnv: String?

    @Option(
        name: .customLong("old-key-file"),
        help: "File holding the key the stores are encrypted with now (a trailing newline is ignored).")
    var oldKeyFile: String?

    func validate() throws {
        if oldKeyEnv != nil && oldKeyFile != nil {
            throw ValidationError("give --old-key-env or --old-key-file, not both")
        }
    }

    func run() throws {
        var (config, _) = try options.load()
        if let dataDir { config.dataDir = dataDir }
        let oldSecret = try self.oldSecret()
        try runtime {
            guard FileManager.default.fileExists(atPath: config.dataDir) else {
                throw CommandFailure(description: "no data directory at \(config.dataDir)")
            }
            let outcomes: [StoreLayout.RekeyOutcome]
            do {
                outcomes = try StoreLayout(configuration: config).rekey(oldSecret: oldSecret)
            } catch {
                throw CommandFailure(description: "\(error)")
            }
            for outcome in outcomes {
                if outcome.failed {
                    printError("mirrorgate: \(outcome.message)")
                } else {
                    print(outcome.message)
                }
            }
            if outcomes.contains(where: \.failed) { throw ExitCode(1) }
        }
    }

    private func oldSecret() throws -> String? {
        if let oldKeyEnv {
            guard let value = ProcessInfo.processInfo.environment[oldKeyEnv], !value.isEmpty else {
                throw ValidationError("--old-key-env: \(oldKeyEnv) is not set or empty")
            }
            return value
        }
        if let oldKeyFile {
            guard let data = FileManager.default.contents(atPath: oldKeyFile),
                var text = String(data: data, encoding: .utf8)
            else {
                throw ValidationError("--old-key-file: cannot read \(oldKeyFile) as UTF-8")
            }
            if let last = text.last, last.isNewline { text.removeLast() }
            guard !text.isEmpty else { throw ValidationError("--old-key-file: \(oldKeyFile) is empty") }
            return text
        }
        return nil
    }
}
