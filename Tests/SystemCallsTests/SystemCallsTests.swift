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

    @Test func numericAddressesOnly() {
        #expect(Socket.address(host: "127.0.0.1", port: 80)?.ss_family == sa_family_t(AF_INET))
        #expect(Socket.address(host: "::1", port: 80)?.ss_family == sa_family_t(AF_INET6))
        #expect(Socket.address(host: "localhost", port: 80) == nil)
        #expect(Socket.address(host: "300.1.1.1", port: 80) == nil)
    }
}

/// A raw read of 8 bytes (an eventfd's counter).
private func readCounter(_ fd: Int32) -> Int {
    var v: UInt64 = 0
    return read(fd, &v, 8)
}
