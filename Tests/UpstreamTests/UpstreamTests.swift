import CCurl
import Foundation
import Synchronization
import Testing

@testable import Upstream

@Suite struct UpstreamErrorTests {
    @Test func curlCodesMapToKinds() {
        #expect(
            UpstreamClient.mapError(CURLE_COULDNT_CONNECT, cancelled: false, connected: false).kind
                == .refused)
        #expect(
            UpstreamClient.mapError(CURLE_OPERATION_TIMEDOUT, cancelled: false, connected: true).kind
                == .timeout)
        #expect(
            UpstreamClient.mapError(CURLE_COULDNT_RESOLVE_HOST, cancelled: false, connected: false).kind
                == .dns)
        #expect(
            UpstreamClient.mapError(CURLE_GOT_NOTHING, cancelled: false, connected: true).kind
                == .connectionLost)
        #expect(
            UpstreamClient.mapError(CURLE_WRITE_ERROR, cancelled: true, connected: true).kind == .cancelled)
    }

    @Test func anOutcomeIsUnknownOnceRequestBytesWereWritten() {
        let garbled = UpstreamClient.mapError(
            CURLE_WEIRD_SERVER_REPLY, cancelled: false, connected: true, requestWritten: true)
        #expect(garbled.kind == .malformed && garbled.outcomeUnknown)
        let refused = UpstreamClient.mapError(CURLE_COULDNT_CONNECT, cancelled: false, connected: false)
        #expect(!refused.outcomeUnknown)
        let headerCheck = UpstreamClient.mapError(
            CURLE_WRITE_ERROR, cancelled: false, malformed: true, connected: true, requestWritten: true)
        #expect(headerCheck.kind == .malformed && headerCheck.outcomeUnknown)
    }

    @Test func onlyFailuresBeforeAnyRequestByteAreNotSent() {
        func delivery(_ code: CURLcode, connected: Bool, written: Bool = false) -> UpstreamError.Delivery {
            UpstreamClient.mapError(code, cancelled: false, connected: connected, requestWritten: written)
                .delivery
        }
        #expect(delivery(CURLE_COULDNT_CONNECT, connected: false) == .notSent)
        #expect(delivery(CURLE_COULDNT_RESOLVE_HOST, connected: false) == .notSent)
        #expect(delivery(CURLE_OPERATION_TIMEDOUT, connected: false) == .notSent)
        #expect(delivery(CURLE_SSL_CONNECT_ERROR, connected: true) == .notSent)
        // Connected and then no answer, or bytes written: the upstream may have the request.
        #expect(delivery(CURLE_OPERATION_TIMEDOUT, connected: true) == .inDoubt)
        #expect(delivery(CURLE_OPERATION_TIMEDOUT, connected: true, written: true) == .inDoubt)
        #expect(delivery(CURLE_GOT_NOTHING, connected: true, written: true) == .inDoubt)
        #expect(delivery(CURLE_SEND_ERROR, connected: true) == .inDoubt)
        #expect(delivery(CURLE_RECV_ERROR, connected: false) == .inDoubt)
        #expect(delivery(CURLE_COULDNT_CONNECT, connected: false, written: true) == .inDoubt)
    }

    @Test func aRefusedConnectIsNotSentAndASilentUpstreamIsInDoubt() throws {
        let loop = try CurlLoop(name: "test-delivery")
        defer { loop.stop() }
        let refused = Collect()
        loop.submit(
            UpstreamRequest(method: "POST", url: "http://127.0.0.1:9/", body: [1], timeout: .seconds(2)),
            refused)
        #expect(refused.done.wait(timeout: .now() + 5) == .success)
        #expect(refused.error?.kind == .refused && refused.error?.delivery == .notSent)
        // The kernel completes the handshake and takes the request; no answer comes.
        let silent = SilentListener()
        let unanswered = Collect()
        loop.submit(
            UpstreamRequest(
                method: "POST", url: "http://127.0.0.1:\(silent.port)/", body: Array("{}".utf8),
                timeout: .milliseconds(300)), unanswered)
        #expect(unanswered.done.wait(timeout: .now() + 5) == .success)
        #expect(unanswered.error?.kind == .timeout && unanswered.error?.delivery == .inDoubt)
    }

    @Test func responseHeadsThatAreNotWellFormedAreRefused() {
        let t = Transfer(onHead: { _, _ in true }, onData: { _ in true })
        func line(_ text: String) -> Bool {
            Array((text + "\r\n").utf8).withUnsafeBytes { t.headerLine($0) }
        }
        #expect(line("HTTP/1.1 201 Created") && t.status == 201)
        #expect(line("Content-Type: application/json"))
        #expect(line("\tcontinued"))
        #expect(t.headers.last?.value == "application/json continued")
        #expect(line("Content-Length: 2") && line("Content-Length: 2"))
        #expect(!line("Content-Length: 3"))
        #expect(!line("Content-Type application/json"))
        #expect(!line("Bad Name: x"))
        #expect(!line(": empty name"))
        #expect(!line("X-Nul: a\u{0}b"))
        #expect(!line("HTTP/1.1 2x1 Created"))
        #expect(!line("HTTP/1.1 20 Created"))
        #expect(line(""))
    }

    @Test func refusedConnectionIsTypedAndFast() {
        let client = UpstreamClient()
        let start = ContinuousClock.now
        do {
            _ = try client.perform(
                UpstreamRequest(method: "GET", url: "http://127.0.0.1:9/", timeout: .seconds(2)))
            Issue.record("port 9 answered")
        } catch {
            #expect(error.kind == .refused)
            #expect(error.isTransient)
        }
        #expect(ContinuousClock.now - start < .seconds(2))
    }

    @Test func durationsInMilliseconds() {
        #expect(Duration.milliseconds(2500).milliseconds == 2500)
        #expect(Duration.seconds(3).milliseconds == 3000)
        #expect(Duration.seconds(-1).milliseconds == 0)
    }
}

final class Collect: TransferSink, @unchecked Sendable {
    let done = DispatchSemaphore(value: 0)
    var error: UpstreamError?
    var finished = false
    func head(status: Int, headers: [(name: String, value: String)]) -> Bool { true }
    func body(_ bytes: [UInt8]) -> Bool { true }
    func finished(_ error: UpstreamError?) {
        self.error = error
        finished = true
        done.signal()
    }
}

@Suite struct CurlLoopTests {
    @Test func loopReportsEveryTransferOnce() throws {
        let loop = try CurlLoop(name: "test-curl")
        defer { loop.stop() }
        let sinks = (0..<8).map { _ in Collect() }
        for sink in sinks {
            loop.submit(
                UpstreamRequest(method: "GET", url: "http://127.0.0.1:9/", timeout: .seconds(2)), sink)
        }
        for sink in sinks {
            #expect(sink.done.wait(timeout: .now() + 5) == .success)
            #expect(sink.error?.kind == .refused)
        }
    }
}

@Suite struct ReachabilityTests {
    @Test func failureMarksDownAndProbeBringsItBack() {
        let probeOK = Atomic<Bool>(false)
        let changes = Mutex<[Bool]>([])
        let tracker = ReachabilityTracker(
            name: "t", initialBackoff: .milliseconds(20), maxBackoff: .milliseconds(50),
            probe: { probeOK.load(ordering: .relaxed) })
        defer { tracker.stop() }
        tracker.onChange { up in changes.withLock { $0.append(up) } }
        #expect(tracker.isReachable)
        tracker.reportFailure("test")
        #expect(!tracker.isReachable)
        probeOK.store(true, ordering: .relaxed)
        var waited = 0
        while !tracker.isReachable && waited < 200 {
            usleep(10_000)
            waited += 1
        }
        #expect(tracker.isReachable)
        #expect(changes.withLock { $0 } == [false, true])
    }
}

/// A listener that completes TCP handshakes (kernel backlog) and never answers.
final class SilentListener {
    let fd: Int32
    let port: UInt16
    init() {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.fd = fd
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = 0
        _ = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        listen(fd, 16)
        var bound = sockaddr_in()
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &bound) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        self.port = UInt16(bigEndian: bound.sin_port)
    }
    deinit { close(fd) }
}

final class CancellableSink: TransferSink, @unchecked Sendable {
    let done = DispatchSemaphore(value: 0)
    let cancelAt: ContinuousClock.Instant
    var error: UpstreamError?
    init(cancelAfter: Duration) { cancelAt = .now + cancelAfter }
    var isCancelled: Bool { ContinuousClock.now >= cancelAt }
    func head(status: Int, headers: [(name: String, value: String)]) -> Bool { true }
    func body(_ bytes: [UInt8]) -> Bool { true }
    func finished(_ error: UpstreamError?) {
        self.error = error
        done.signal()
    }
}

@Suite struct CancellationTests {
    @Test func aCancelledTransferEndsLongBeforeItsTimeout() throws {
        let silent = SilentListener()
        let loop = try CurlLoop(name: "test-cancel")
        defer { loop.stop() }
        let sink = CancellableSink(cancelAfter: .milliseconds(200))
        let start = ContinuousClock.now
        loop.submit(
            UpstreamRequest(method: "GET", url: "http://127.0.0.1:\(silent.port)/", timeout: .seconds(20)),
            sink)
        #expect(sink.done.wait(timeout: .now() + 5) == .success)
        #expect(sink.error?.kind == .cancelled)
        #expect(ContinuousClock.now - start < .seconds(3))
    }
}
