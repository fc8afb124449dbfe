import Foundation

/// What a policy's condition command did.
public struct ConditionResult: Sendable, Equatable {
    /// The exit status (nil when it did not exit by itself: killed at its timeout, or not started).
    public var exitStatus: Int32?
    /// Whether it was killed at its timeout.
    public var timedOut: Bool
    /// The start of its standard output and error, merged (for the log).
    public var output: String
    /// Why it could not start (nil when it started).
    public var startError: String?

    /// Creates a result.
    public init(exitStatus: Int32?, timedOut: Bool = false, output: String = "", startError: String? = nil) {
        self.exitStatus = exitStatus
        self.timedOut = timedOut
        self.output = output
        self.startError = startError
    }

    /// A run is allowed only when the command exited 0 by itself.
    public var allows: Bool { exitStatus == 0 && !timedOut && startError == nil }

    /// One phrase for the log and the status: `exit 0`, `exit 3`, `timed out after 5s`, `cannot start: …`.
    public var summary: String {
        if let startError { return "cannot start: \(startError)" }
        if timedOut { return "timed out" }
        return exitStatus.map { "exit \($0)" } ?? "killed"
    }
}

/// Runs a policy's condition command: `argv` (no shell; `argv[0]` looked up in `PATH`), killed (with its
/// process group) when it has not exited after `timeout`. Blocking; called on a run's own thread. The
/// gateway's runner is built on the `SystemCalls` adapter by the assembly; tests script their own.
public protocol ConditionRunner: Sendable {
    /// Runs the command and reports what it did.
    func run(_ argv: [String], timeout: Duration) -> ConditionResult
}

/// A runner for configurations without conditions (and tests): every command is allowed, none runs.
public struct NoConditionRunner: ConditionRunner {
    /// Creates the runner.
    public init() {}
    /// Allows without running anything.
    public func run(_ argv: [String], timeout: Duration) -> ConditionResult { ConditionResult(exitStatus: 0) }
}
