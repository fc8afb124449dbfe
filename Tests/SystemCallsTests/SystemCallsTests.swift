import Foundation
import Testing

@testable import SystemCalls

#if canImport(Glibc)
    import Glibc
#endif

@Suite struct SystemCallsTests {
    @Test func aFailedCallBecomesATypedErrorNamingTheCall() {
        #expect(throws: SystemCallError(call: "close", code: EBADF)) { try Socket.close(-1) }
        let error = SystemCallError(call: "epoll_ctl(ADD)", code: EBADF)
        #expect(error.description.hasPrefix("epoll_ctl(ADD) failed: "))
        #expect(error.description.hasSuffix("(errno \(EBADF))"))
    }

    @Test func wouldBlockIsNotAnErrorOnANonBlockingDescriptor() throws {
        let wake = try EventFD()
        defer { try? wake.close() }
        try wake.drain()  // nothing to read: EAGAIN, reported as would-block and accepted
        let result = try syscall("read(eventfd)", blocking: false) { readCounter(wake.fd) }
        guard case .wouldBlock = result else {
            Issue.record("expected would-block, got \(result)")
            return
        }
    }

    @Test func anEventFDWakesAnEpollWait() throws {
        let epoll = try Epoll()
        defer { try? epoll.close() }
        let wake = try EventFD()
        defer { try? wake.close() }
        try epoll.add(wake.fd, .input)
        var fds = [Int32](repeating: -1, count: 4)
        var events = [UInt32](repeating: 0, count: 4)
        #expect(try epoll.wait(fds: &fds, events: &events, timeoutMs: 0) == 0)
        try wake.signal()
        #expect(try epoll.wait(fds: &fds, events: &events, timeoutMs: 5000) == 1)
        #expect(fds[0] == wake.fd)
        #expect(Epoll.Events(rawValue: events[0]).contains(.input))
        try wake.drain()
        #expect(try epoll.wait(fds: &fds, events: &events, timeoutMs: 0) == 0)
        #expect(throws: SystemCallError.self) { try epoll.add(-1, .input) }
    }

    /// Issue 23: a client that half-closes after its request still reads the answer, so end-of-file is
    /// not "gone"; a reset is.
    @Test func aHalfCloseIsNotGoneButAResetIs() throws {
        var fds: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        defer { _ = Glibc.close(fds[0]) }
        #expect(!Socket.peerGone(fds[0]))
        _ = Glibc.shutdown(fds[1], Int32(SHUT_WR))
        #expect(!Socket.peerGone(fds[0]), "a half-closed peer still reads")
        _ = Glibc.close(fds[1])
        #expect(Socket.peerGone(fds[0]), "a closed peer (no one can read) is gone")
    }

    @Test func numericAddressesOnly() {
        #expect(Socket.address(host: "127.0.0.1", port: 80)?.ss_family == sa_family_t(AF_INET))
        #expect(Socket.address(host: "::1", port: 80)?.ss_family == sa_family_t(AF_INET6))
        #expect(Socket.address(host: "localhost", port: 80) == nil)
        #expect(Socket.address(host: "300.1.1.1", port: 80) == nil)
    }
}

/// Whether `pid` exists and is not a zombie (its state in `/proc/PID/stat`).
private func isRunning(_ pid: Int32) -> Bool {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
        let close = stat.lastIndex(of: ")")
    else { return false }
    let state = stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces).prefix(1)
    return state != "Z" && state != "X"
}

/// A raw read of 8 bytes (an eventfd's counter).
private func readCounter(_ fd: Int32) -> Int {
    var v: UInt64 = 0
    return read(fd, &v, 8)
}

@Suite struct SubprocessTests {
    @Test func exitStatusAndOutputAreReported() throws {
        let r = try Subprocess.run(
            ["/bin/sh", "-c", "echo out; echo err >&2; exit 3"], environment: ["PATH=/usr/bin:/bin"],
            timeoutMs: 5000)
        #expect(r.status == 3)
        #expect(r.timedOut == false)
        #expect(String(decoding: r.output, as: UTF8.self) == "out\nerr\n")
    }

    @Test func argv0IsLookedUpInPathAndOutputIsCapped() throws {
        let r = try Subprocess.run(
            ["sh", "-c", "head -c 10000 /dev/zero"], environment: ["PATH=/usr/bin:/bin"], timeoutMs: 5000,
            outputLimit: 100)
        #expect(r.status == 0)
        #expect(r.output.count == 100)
    }

    @Test func aCommandPastItsTimeoutIsKilledWithItsGroup() throws {
        // The shell's child (sleep) keeps the pipe open: the whole group must go. The shell prints the
        // child's pid; after the run the child is gone (or a zombie), not sleeping on.
        let r = try Subprocess.run(
            ["/bin/sh", "-c", "sleep 20 & echo $!; sleep 20"], environment: ["PATH=/usr/bin:/bin"],
            timeoutMs: 300)
        #expect(r.timedOut)
        #expect(r.status == nil)
        let child = try #require(
            Int32(String(decoding: r.output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)))
        var alive = true
        for _ in 0..<100 where alive {  // at most about 5 s for the kernel to end it
            alive = isRunning(child)
            if alive { usleep(50_000) }
        }
        #expect(!alive, "the shell's child \(child) outlived the timeout")
    }

    @Test func anUnknownCommandThrows() {
        #expect(throws: SystemCallError.self) {
            try Subprocess.run(
                ["no-such-command-mirrorgate"], environment: ["PATH=/usr/bin:/bin"], timeoutMs: 1000)
        }
    }
}
