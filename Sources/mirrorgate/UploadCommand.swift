import ArgumentParser
import Foundation
import GatewayConfig
import HTTPCore
import JSONCore

/// `mirrorgate upload [--config FILE] [SERVICE ...]`: asks the running gateway to upload the request queue
/// of each named OData service (all of them by default) and waits for each run
/// (`POST /_mirrorgate/odata/services/{s}/upload?wait=true`); prints one line of statistics per service.
/// Exits 1 when the gateway cannot be reached, a run could not start or reach its upstream, or a request
/// was moved to the ErrorArchive.
struct Upload: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Upload the OData request queues now (all services by default) and print the outcome.")

    @OptionGroup var options: ConfigOptions

    @Argument(help: "OData service names (default: every OData service of the configuration).")
    var services: [String] = []

    func run() throws {
        let (config, source) = try options.load()
        let known = config.odata.services
        let selected = services.isEmpty ? known.keys.sorted() : services
        for name in selected where known[name] == nil {
            throw ValidationError("\(name) is not an OData service in \(source)")
        }
        if selected.isEmpty {
            print("no OData service in \(source)")
            return
        }
        let client = AdminClient(configuration: config)
        try runtime {
            var failures = 0
            for name in selected {
                let path = "/_mirrorgate/odata/services/\(FormCodec.percentEncode(name))/upload?wait=true"
                let (status, body) = try client.call("POST", path, timeout: .seconds(600))
                guard status == 200, let stats = try? JSON.parse(body) else {
                    printError("mirrorgate: upload of \(name) failed: \(status) \(AdminClient.message(body))")
                    failures += 1
                    continue
                }
                print(Self.describe(name, stats))
                if (stats["failed"]?.intValue ?? 0) + (stats["inDoubt"]?.intValue ?? 0) > 0 { failures += 1 }
            }
            if failures > 0 { throw ExitCode(1) }
        }
    }

    /// `nw: 3 uploaded, 0 failed, 0 in doubt, 0 remaining (120 ms)`.
    static func describe(_ name: String, _ stats: JSON) -> String {
        func n(_ key: String) -> Int { stats[key]?.intValue ?? 0 }
        return
            "\(name): \(n("uploaded")) uploaded, \(n("failed")) failed, \(n("inDoubt")) in doubt, \(n("remaining")) remaining (\(n("durationMs")) ms)"
    }
}
