import CLinux

#if canImport(Glibc)
    import Glibc
#endif

/// What a command run with ``Subprocess/run(_:environment:timeoutMs:outputLimit:)`` did.
public struct SubprocessResult: Sendable, Equatable {
    /// The exit code (128 + N when signal N ended it); nil when it was killed at its timeout.
    public var status: Int32?
    /// Whether the timeout passed and the process group was killed.
    public var timedOut: Bool
    /// The first `outputLimit` bytes of its standard output and error, merged.
    public var output: [UInt8]
}

/// Short-lived commands (a replication policy's condition): spawned without a shell, bounded in time and
/// in the output kept.
public enum Subprocess {
    /// Runs `argv` (`argv[0]` looked up in `PATH`) in a process group of its own with `environment`
    /// (`NAME=value` strings), standard input from `/dev/null`. Reads its output (keeping the first
    /// `outputLimit` bytes) until it exits; when `timeoutMs` passes first (or it writes without end), the
    /// whole group is killed (SIGKILL) and reaped. Throws when the pipe or the process cannot be created (an unknown command
    /// is `posix_spawnp` with ENOENT).
    public static func run(
        _ argv: [String], environment: [String], timeoutMs: Int, outputLimit: Int = 4096
    ) throws(SystemCallError) -> SubprocessResult {
        precondition(!argv.isEmpty, "a command needs argv[0]")
        var fds: [Int32] = [-1, -1]
        try syscall("pipe") { fds.withUnsafeMutableBufferPointer { mg_pipe_cloexec($0.baseAddress) } }
        let readEnd = fds[0]
        let writeEnd = fds[1]
        defer { _ = try? syscall("close(pipe)") { close(readEnd) } }
        var pid: pid_t = 0
        let rc = withCStrings(argv) { args in
            withCStrings(environment) { env in mg_spawn(args, env, writeEnd, &pid) }
        }
        _ = try? syscall("close(pipe)") { close(writeEnd) }
        if rc != 0 { throw SystemCallError(call: "posix_spawnp(\(argv[0]))", code: rc) }
        let deadline = monotonicMs() + timeoutMs
        var output: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        var exited: Int32?
        var open = true
        // Each pass waits at most 50 ms, or reads up to 4 KiB: bounded by the deadline, and by the passes
        // (a command that writes without end is killed after about 400 MiB).
        for _ in 0..<(timeoutMs / 50 + 100_000) {
            if !open {
                _ = try? syscall("poll") { mg_pause_ms(50) }
            } else if (try? syscall("poll") { mg_poll_in(readEnd, 50) }) ?? 0 > 0 {
                let n = buffer.withUnsafeMutableBytes { read(readEnd, $0.baseAddress, $0.count) }
                if n > 0 {
                    output += buffer.prefix(min(n, max(0, outputLimit - output.count)))
                } else if n == 0 || errno != EINTR {
                    open = false
                }
            }
            var status: Int32 = 0
            if exited == nil, mg_reap(pid, &status) == pid { exited = status }
            if let exited, !open || (try? syscall("poll") { mg_poll_in(readEnd, 0) }) ?? 0 == 0 {
                return SubprocessResult(status: exited, timedOut: false, output: output)
            }
            if monotonicMs() >= deadline { break }
        }
        if let exited { return SubprocessResult(status: exited, timedOut: false, output: output) }
        _ = kill(-pid, SIGKILL)
        _ = kill(pid, SIGKILL)
        var status: Int32 = 0
        _ = try? syscall("waitpid") { mg_reap_blocking(pid, &status) }
        return SubprocessResult(status: nil, timedOut: true, output: output)
    }

    private static func monotonicMs() -> Int {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return ts.tv_sec * 1000 + ts.tv_nsec / 1_000_000
    }

    /// Calls `body` with a NULL-terminated array of C strings for `strings`.
    private static func withCStrings<R>(
        _ strings: [String], _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>) -> R
    ) -> R {
        let copies: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) } + [nil]
        defer { for c in copies { free(c) } }
        return copies.withUnsafeBufferPointer { body($0.baseAddress!) }
    }
}
