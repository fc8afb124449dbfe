import ArgumentParser
import Foundation
import GatewayConfig
import HTTPCore
import JSONCore

/// `mirrorgate pause [--config FILE] POLICY` and `mirrorgate resume [--config FILE] POLICY`: asks the
/// running gateway to pause or resume every run of a replication policy
/// (`POST /_mirrorgate/policies/{p}/pause|resume`). Exits 2 for a policy the configuration does not
/// define, 1 when the gateway cannot be reached or refuses.
struct PolicyAction {
    let action: String

    func run(_ options: ConfigOptions, policy: String) throws {
        let (config, source) = try options.load()
        guard config.policies[policy] != nil else {
            throw ValidationError(
                "\(policy) is not a policy in \(source) (defined: \(config.policies.keys.sorted().joined(separator: ", ")))"
            )
        }
        let client = AdminClient(configuration: config)
        try runtime {
            let path = "/_mirrorgate/policies/\(FormCodec.percentEncode(policy))/\(action)"
            let (status, body) = try client.call("POST", path, timeout: .seconds(10))
            guard status == 200, let doc = try? JSON.parse(body) else {
                throw CommandFailure(
                    description: "\(action) \(policy): \(status) \(AdminClient.message(body))")
            }
            let paused = doc["paused"]?.boolValue ?? false
            print("\(policy): \(paused ? "paused" : "running")")
        }
    }
}

struct Pause: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Pause a replication policy: no run of its mirrors starts, and one going on stops at its next "
            + "checkpoint (resumed later from there).")

    @OptionGroup var options: ConfigOptions

    @Argument(help: "The policy (a name under `policies:` in the configuration).")
    var policy: String

    func run() throws { try PolicyAction(action: "pause").run(options, policy: policy) }
}

struct Resume: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Resume a paused replication policy: what is due runs now.")

    @OptionGroup var options: ConfigOptions

    @Argument(help: "The policy (a name under `policies:` in the configuration).")
    var policy: String

    func run() throws { try PolicyAction(action: "resume").run(options, policy: policy) }
}
