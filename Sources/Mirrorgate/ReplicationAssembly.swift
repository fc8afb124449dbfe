import CoreMetrics
import Foundation
import HTTPCore
import JSONCore
import Metrics
import Replication
import Synchronization
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

/// The replication metrics: `mirrorgate_replication_runs_total{mirror,outcome}` (outcome `completed`,
/// `budgetReached`, `stopped`, `failed`) and `mirrorgate_replication_run_duration_seconds{mirror}` from
/// the run events; `mirrorgate_replication_paused{policy}` set whenever `/metrics` is rendered (the data
/// age of each mirror is a scrape family of its own, see `Router.dataAges`).
final class ReplicationMetrics: Sendable {
    private let counters = Mutex<[String: CoreMetrics.Counter]>([:])
    private let timers = Mutex<[String: Metrics.Timer]>([:])

    /// Counts a run's end from its event.
    func observe(_ event: String, _ data: JSON) {
        guard let mirror = data["mirror"]?.stringValue else { return }
        let outcome: String
        switch event {
        case "runDidFinish": outcome = data["completed"]?.boolValue == false ? "stopped" : "completed"
        case "runBudgetReached": outcome = "budgetReached"
        case "runDidFail": outcome = "failed"
        default: return
        }
        let key = mirror + "\n" + outcome
        let counter = counters.withLock { c in
            if let existing = c[key] { return existing }
            let made = CoreMetrics.Counter(
                label: "mirrorgate_replication_runs_total",
                dimensions: [("mirror", mirror), ("outcome", outcome)])
            c[key] = made
            return made
        }
        counter.increment()
        if let ms = data["durationMs"]?.intValue {
            let timer = timers.withLock { t in
                if let existing = t[mirror] { return existing }
                let made = Metrics.Timer(
                    label: "mirrorgate_replication_run_duration_seconds", dimensions: [("mirror", mirror)])
                t[mirror] = made
                return made
            }
            timer.recordMilliseconds(ms)
        }
    }

    /// Sets the gauges from the scheduler (before `/metrics` is rendered).
    func update(_ replication: ReplicationScheduler) {
        for name in replication.policies.keys {
            Gauge(label: "mirrorgate_replication_paused", dimensions: [("policy", name)])
                .record(replication.isPaused(name) ? 1 : 0)
        }
    }
}

extension Router {
    /// `POST /_mirrorgate/policies/{p}/pause` and `…/resume`: `200 {"policy","paused"}`, 404 for an
    /// unknown policy, 405 for another method.
    func policyAdmin(_ request: HTTPRequest, _ out: any Responder) {
        let prefix = "/_mirrorgate/policies/"
        let path = request.path
        let action = path.hasSuffix("/pause") ? "pause" : path.hasSuffix("/resume") ? "resume" : nil
        guard let action, path.count > prefix.count + action.count + 1 else {
            out.respond(Self.adminError(404, "no admin route \(request.method) \(path)"))
            return
        }
        guard request.method == "POST" else {
            out.respond(Self.methodNotAllowed(request, allow: "POST"))
            return
        }
        let name = FormCodec.percentDecode(path.dropFirst(prefix.count).dropLast(action.count + 1))
        let known = action == "pause" ? replication.pause(name) : replication.resume(name)
        guard known else {
            out.respond(Self.adminError(404, "no policy named \(name)"))
            return
        }
        let body: JSON = ["policy": .string(name), "paused": .bool(replication.isPaused(name))]
        out.respond(.json(200, body.serialized()))
    }
}
