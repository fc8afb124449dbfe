import Foundation
import Replication
import SystemCalls

/// A policy's condition command run by the `SystemCalls` adapter: its own process group, the gateway's
/// environment, standard input from `/dev/null`, the first 4 KiB of its output kept for the log.
struct CommandCondition: ConditionRunner {
    func run(_ argv: [String], timeout: Duration) -> ConditionResult {
        let environment = ProcessInfo.processInfo.environment.map { "\($0.key)=\($0.value)" }
        do {
            let r = try Subprocess.run(
                argv, environment: environment, timeoutMs: Int(max(1, timeout.milliseconds)))
            return ConditionResult(
                exitStatus: r.status, timedOut: r.timedOut, output: String(decoding: r.output, as: UTF8.self))
        } catch {
            return ConditionResult(exitStatus: nil, startError: error.description)
        }
    }
}
