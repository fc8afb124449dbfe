import GatewayConfig
import JSONCore

/// What a reload did (`SIGHUP`, `POST /_mirrorgate/reload`).
public enum ReloadOutcome: Sendable {
    /// The new configuration runs (restart-only keys excepted, see ``ConfigurationReload``).
    case applied(ConfigurationReload)
    /// The file is invalid; the running configuration is kept.
    case invalid([String])
    /// Another reload is running.
    case busy
    /// A service could not be rebuilt (a store that does not open, a bootstrap file that does not read);
    /// the running configuration is kept.
    case failed(String)

    /// The admin API's status for it.
    public var status: Int {
        switch self {
        case .applied: 200
        case .invalid: 400
        case .busy: 409
        case .failed: 500
        }
    }

    /// The admin API's body: `{status, changes, restartRequired}`, or `{message, status, errors}`.
    public var json: JSON {
        switch self {
        case .applied(let plan):
            return [
                "status": "reloaded",
                "changes": .array(plan.applied.map { ["key": .string($0.key), "change": .string($0.kind)] }),
                "restartRequired": .array(plan.restartRequired.map { .string($0) }),
            ]
        case .invalid(let errors):
            return [
                "message": "invalid configuration; the running configuration is kept", "status": 400,
                "errors": .array(errors.map { .string($0) }),
            ]
        case .busy:
            return ["message": "a reload is already running", "status": 409]
        case .failed(let message):
            return [
                "message": .string("reload failed; the running configuration is kept: \(message)"),
                "status": 500,
            ]
        }
    }
}
