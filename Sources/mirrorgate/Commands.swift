import ArgumentParser
import Dispatch
import Foundation
import GatewayConfig
import Logging
import Mirrorgate
import Observability

/// `mirrorgate` — a local gateway that keeps Algolia search and OData services working offline.
struct MirrorgateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mirrorgate",
        abstract:
            "A local gateway that keeps Algolia search and OData services working when the network does not.",
        discussion: """
            Unmodified Algolia and OData clients point at the gateway instead of the real service: it forwards \
            while the upstream answers and answers from local SQLite mirrors when it cannot, queueing OData \
            writes for an exactly-once upload.

            Configuration: --config FILE, else config/mirrorgate.yaml in the current directory, else the \
            built-in demo (its data is compiled in). ${NAME} in the file is replaced by the environment \
            variable NAME. Validate a file with `mirrorgate check --config FILE`.

            Exit status: 0 success, 1 runtime error (e.g. the gateway or an upstream unreachable), 2 bad usage \
            or configuration (each problem as file:line: key: message).

            Signals (serve): SIGTERM and SIGINT stop gracefully: in-flight requests get server.shutdownGrace, \
            SQLite is checkpointed, the exit status is 0. SIGHUP reloads the configuration (as POST \
            /_mirrorgate/reload): valid changes apply without dropping connections or local data, an invalid \
            file is logged and the running configuration kept, keys that need a restart (server.listen, \
            dataDir, …) are logged as such.
            """,
        version: mirrorgateVersion,
        subcommands: [
            Serve.self, Status.self, Sync.self, Upload.self, Build.self, Check.self, Rekey.self, Pause.self,
            Resume.self,
        ],
        defaultSubcommand: nil)

    /// Runs the command line with the SPEC's exit codes: 0 ok, 1 runtime error, 2 bad usage or config.
    static func main() {
        do {
            var command = try parseAsRoot()
            try command.run()
        } catch let error as ConfigError {
            FileHandle.standardError.write(Data("mirrorgate: configuration error\n\(error)\n".utf8))
            Foundation.exit(2)
        } catch let error as GatewayStartError {
            FileHandle.standardError.write(Data("mirrorgate: \(error)\n".utf8))
            Foundation.exit(1)
        } catch {
            let code = exitCode(for: error)
            if code == .success {
                exit(withError: error)
            }
            let message = fullMessage(for: error)
            if !message.isEmpty { FileHandle.standardError.write(Data("\(message)\n".utf8)) }
            Foundation.exit(code == ExitCode(1) ? 1 : 2)
        }
    }
}

/// Where the configuration comes from: `--config`, else `config/mirrorgate.yaml`, else the built-in demo.
struct ConfigOptions: ParsableArguments {
    @Option(
        name: .long,
        help: "Configuration file (YAML). Default: config/mirrorgate.yaml, else the built-in demo.",
        completion: .file(extensions: ["yaml", "yml"]))
    var config: String?

    /// The label of the compiled-in demo configuration in messages.
    static let builtInDemo = "<built-in demo>"

    /// The configuration and where it came from, after `fileChecks` (`check`: bootstrap files readable,
    /// `dataDir` writable). The built-in demo's bootstrap files are compiled in (checked by a unit test);
    /// `serve` writes them out (`MirrorgateConfiguration.writeDemoFiles`).
    func load(fileChecks: FileChecks = []) throws -> (MirrorgateConfiguration, String) {
        let env = ProcessInfo.processInfo.environment
        if let config {
            return (
                try MirrorgateConfiguration.load(path: config, environment: env, fileChecks: fileChecks),
                config
            )
        }
        let fallback = "config/mirrorgate.yaml"
        if FileManager.default.fileExists(atPath: fallback) {
            return (
                try MirrorgateConfiguration.load(path: fallback, environment: env, fileChecks: fileChecks),
                fallback
            )
        }
        let demo = try MirrorgateConfiguration.parse(
            yaml: MirrorgateConfiguration.demoYAML, fileName: Self.builtInDemo, environment: env)
        if fileChecks.contains(.dataDir) {
            let issues = demo.dataDirIssues(file: Self.builtInDemo)
            if !issues.isEmpty { throw ConfigError(issues: issues) }
        }
        return (demo, Self.builtInDemo)
    }
}

struct Serve: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run the gateway.")

    @OptionGroup var options: ConfigOptions

    @Option(name: .long, help: "Listen address HOST:PORT (overrides server.listen).")
    var listen: String?

    @Option(
        name: .customLong("data-dir"), help: "Data directory (overrides dataDir).", completion: .directory)
    var dataDir: String?

    func run() throws {
        // an unwritable dataDir is one clean line (file:line), not a Foundation error dump at first write
        var (config, source) = try options.load(fileChecks: dataDir == nil ? .dataDir : [])
        let overrides = try commandLineOverrides()
        try overrides(&config)
        let options = self.options
        var demoDirectory: String?
        if source == ConfigOptions.builtInDemo {
            do {
                demoDirectory = try MirrorgateConfiguration.writeDemoFiles()
            } catch {
                throw CommandFailure(
                    description: "cannot write the built-in demo's files to \(NSTemporaryDirectory()): "
                        + "\(error.localizedDescription)")
            }
            config.baseDirectory = demoDirectory ?? "."
        }
        defer { if let demoDirectory { try? FileManager.default.removeItem(atPath: demoDirectory) } }
        LogSetup.bootstrap(config.log)
        let logger = Logger(label: "mirrorgate")
        signal(SIGPIPE, SIG_IGN)
        signal(SIGTERM, SIG_IGN)
        signal(SIGINT, SIG_IGN)
        signal(SIGHUP, SIG_IGN)
        let stop = DispatchSemaphore(value: 0)
        let queue = DispatchQueue(label: "mirrorgate.signals")
        let sources = [SIGTERM, SIGINT].map { sig -> any DispatchSourceSignal in
            let s = DispatchSource.makeSignalSource(signal: sig, queue: queue)
            s.setEventHandler { stop.signal() }
            s.resume()
            return s
        }
        let baseDirectory = config.baseDirectory
        let label = source
        let reread: @Sendable () throws(ConfigError) -> MirrorgateConfiguration = {
            () throws(ConfigError) -> MirrorgateConfiguration in
            var fresh: MirrorgateConfiguration
            do {
                fresh = try options.load(fileChecks: .bootstrapFiles).0
                try overrides(&fresh)
            } catch let error as ConfigError {
                throw error
            } catch {
                throw ConfigError(issues: [
                    ConfigIssue(file: label, line: 0, column: 0, keyPath: "", message: "\(error)")
                ])
            }
            if label == ConfigOptions.builtInDemo { fresh.baseDirectory = baseDirectory }
            return fresh
        }
        let gateway = try Gateway(configuration: config, logger: logger, source: reread)
        // SIGHUP reloads on a queue of its own, so that a slow reload never delays a stop.
        let hangup = DispatchSource.makeSignalSource(
            signal: SIGHUP, queue: DispatchQueue(label: "mirrorgate.reload"))
        hangup.setEventHandler { [weak gateway] in
            logger.notice("SIGHUP: reloading the configuration", metadata: ["config": "\(source)"])
            _ = gateway?.reload()
        }
        hangup.resume()
        gateway.startBackground()
        logger.notice(
            "mirrorgate \(mirrorgateVersion) listening",
            metadata: [
                "address": "\(config.server.listen.host):\(gateway.port)", "config": "\(source)",
                "dataDir": "\(config.dataDir)",
            ])
        stop.wait()
        logger.notice("stopping", metadata: ["grace": "\(config.server.shutdownGrace)"])
        hangup.cancel()
        gateway.shutdown()
        withExtendedLifetime(sources) {}
        logger.notice("stopped")
    }
}

extension Serve {
    /// `--listen` and `--data-dir` applied to a configuration (at start and on every reload), checked.
    func commandLineOverrides() throws -> @Sendable (inout MirrorgateConfiguration) throws -> Void {
        var parsed: ListenAddress?
        if let listen {
            guard let given = ListenAddress(listen) else {
                throw ValidationError("--listen '\(listen)' is not HOST:PORT")
            }
            parsed = given
        }
        let listen = self.listen
        let dataDir = self.dataDir
        let address = parsed
        return { config throws in
            if let address {
                if !address.isLoopback && !(config.server.allowRemote && config.admin.token != nil) {
                    throw ValidationError(
                        "--listen \(listen ?? "") is not a loopback address: set server.allowRemote: true and admin.token"
                    )
                }
                config.server.listen = address
            }
            if let dataDir {
                config.dataDir = dataDir
                let issues = config.dataDirIssues(file: "--data-dir")
                if !issues.isEmpty { throw ConfigError(issues: issues) }
            }
        }
    }
}

struct Check: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Validate the configuration: exit 0, or 2 with every error (file:line: key: message).",
        discussion: """
            Besides keys and values, checks that every bootstrap file exists and is readable and that \
            dataDir is a writable directory (or can be created).
            """)

    @OptionGroup var options: ConfigOptions

    func run() throws {
        let (_, source) = try options.load(fileChecks: .all)
        print("\(source): ok")
    }
}
