import ArgumentParser
import Dispatch
import Foundation
import GatewayConfig
import Logging
import Mirrorgate

/// `mirrorgate` — a local gateway that keeps Algolia search and OData services working offline.
struct MirrorgateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mirrorgate",
        abstract:
            "A local gateway that keeps Algolia search and OData services working when the network does not.",
        version: mirrorgateVersion,
        subcommands: [Serve.self, Status.self, Sync.self, Upload.self, Build.self, Check.self, Rekey.self],
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
        help: "Configuration file (YAML). Default: config/mirrorgate.yaml, else the built-in demo.")
    var config: String?

    func load() throws -> (MirrorgateConfiguration, String) {
        let env = ProcessInfo.processInfo.environment
        if let config {
            return (try MirrorgateConfiguration.load(path: config, environment: env), config)
        }
        let fallback = "config/mirrorgate.yaml"
        if FileManager.default.fileExists(atPath: fallback) {
            return (try MirrorgateConfiguration.load(path: fallback, environment: env), fallback)
        }
        var demo = try MirrorgateConfiguration.parse(
            yaml: MirrorgateConfiguration.demoYAML, fileName: "<built-in demo>", environment: env)
        demo.baseDirectory = Self.demoDataDirectory()
        return (demo, "<built-in demo>")
    }

    /// Where the demo's bundled data is: `./config`, else the `config` folder of the checkout the binary
    /// was built in (`<repo>/.build/<mode>/mirrorgate`), so the demo also runs from another directory.
    static func demoDataDirectory() -> String {
        if FileManager.default.fileExists(atPath: "config/demo.yaml") { return "config" }
        let exe = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        var dir = exe.deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = dir.appendingPathComponent("config")
            if FileManager.default.fileExists(atPath: candidate.appendingPathComponent("demo.yaml").path) {
                return candidate.path
            }
            dir = dir.deletingLastPathComponent()
        }
        return "."
    }
}

struct Serve: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run the gateway.")

    @OptionGroup var options: ConfigOptions

    @Option(name: .long, help: "Listen address HOST:PORT (overrides server.listen).")
    var listen: String?

    @Option(name: .customLong("data-dir"), help: "Data directory (overrides dataDir).")
    var dataDir: String?

    func run() throws {
        var (config, source) = try options.load()
        if let listen {
            guard let address = ListenAddress(listen) else {
                throw ValidationError("--listen '\(listen)' is not HOST:PORT")
            }
            if !address.isLoopback && !(config.server.allowRemote && config.admin.token != nil) {
                throw ValidationError(
                    "--listen \(listen) is not a loopback address: set server.allowRemote: true and admin.token"
                )
            }
            config.server.listen = address
        }
        if let dataDir { config.dataDir = dataDir }
        LogSetup.bootstrap(config.log)
        let logger = Logger(label: "mirrorgate")
        signal(SIGPIPE, SIG_IGN)
        signal(SIGTERM, SIG_IGN)
        signal(SIGINT, SIG_IGN)
        let stop = DispatchSemaphore(value: 0)
        let queue = DispatchQueue(label: "mirrorgate.signals")
        let sources = [SIGTERM, SIGINT].map { sig -> any DispatchSourceSignal in
            let s = DispatchSource.makeSignalSource(signal: sig, queue: queue)
            s.setEventHandler { stop.signal() }
            s.resume()
            return s
        }
        let gateway = try Gateway(configuration: config, logger: logger)
        gateway.startBackground()
        logger.notice(
            "mirrorgate \(mirrorgateVersion) listening",
            metadata: [
                "address": "\(config.server.listen.host):\(gateway.port)", "config": "\(source)",
                "dataDir": "\(config.dataDir)",
            ])
        stop.wait()
        logger.notice("stopping", metadata: ["grace": "\(config.server.shutdownGrace)"])
        gateway.shutdown()
        withExtendedLifetime(sources) {}
        logger.notice("stopped")
    }
}

struct Check: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Validate the configuration: exit 0, or 2 with every error (file:line: key: message).")

    @OptionGroup var options: ConfigOptions

    func run() throws {
        let (_, source) = try options.load()
        print("\(source): ok")
    }
}
