import CCurl
import Foundation
import GatewaySupport
import Synchronization
import SystemCalls

/// Receives one transfer's events on the loop thread. Implementations must never block: every
/// transfer of the process shares that thread.
public protocol TransferSink: AnyObject {
    /// The final status and headers. Return false to cancel.
    func head(status: Int, headers: [(name: String, value: String)]) -> Bool
    /// A piece of the body. Return false to cancel.
    func body(_ bytes: [UInt8]) -> Bool
    /// The transfer ended: nil on success.
    func finished(_ error: UpstreamError?)
    /// Polled about once a second while the transfer runs: true aborts it (`.cancelled`),
    /// for example when the client that wanted the answer went away.
    var isCancelled: Bool { get }
}

extension TransferSink {
    /// By default a transfer is never cancelled from outside.
    public var isCancelled: Bool { false }
}

/// Runs upstream transfers on a few event-loop threads (``CurlLoopThread``), each with its own libcurl
/// multi handle and connection cache; transfers are spread over them in turn, so that relaying is not
/// limited to one core. `submit` is safe from any thread; sinks are called on the thread that runs the
/// transfer.
public final class CurlLoop: Sendable {
    private let threads: [CurlLoopThread]
    private let next = Atomic<Int>(0)

    /// Starts `threads` loop threads (at least one).
    public init(name: String = "mg-curl", threads: Int = 2) throws(SystemCallError) {
        var made: [CurlLoopThread] = []
        for i in 0..<max(1, threads) { made.append(try CurlLoopThread(name: "\(name)-\(i)")) }
        self.threads = made
    }

    /// Starts `request` on the next loop thread; `sink` gets its events on that thread.
    public func submit(_ request: UpstreamRequest, _ sink: any TransferSink) {
        let i = next.add(1, ordering: .relaxed).oldValue
        threads[Int(UInt(bitPattern: i) % UInt(threads.count))].submit(request, sink)
    }

    /// The last failed system call of any loop thread (epoll, eventfd), nil when none failed.
    public var lastSystemError: SystemCallError? {
        threads.lazy.compactMap { $0.lastSystemError.withLock { $0 } }.first
    }

    /// Ends every loop thread: transfers still running finish with `.cancelled`. Waits for the threads.
    public func stop() {
        for t in threads { t.stop() }
    }
}

/// Runs many upstream transfers on one thread with libcurl's multi interface: no thread per request,
/// no thread switch per request under load (events are handled in batches), connections kept alive in
/// the multi handle's pool. The thread waits in its own epoll set, which libcurl keeps up to date through
/// `CURLMOPT_SOCKETFUNCTION`, and drives only the sockets that are ready (`curl_multi_socket_action`), so
/// the cost of a wake-up does not grow with the number of transfers in flight. `submit` is safe from any
/// thread; sinks are called on the loop thread.
final class CurlLoopThread: @unchecked Sendable {
    private struct Job: @unchecked Sendable {
        let request: UpstreamRequest
        let sink: any TransferSink
    }

    private let multi: UnsafeMutableRawPointer
    private let epoll: Epoll
    private let wake: EventFD
    private let pending = Mutex<[Job]>([])
    private let stopped = Atomic<Bool>(false)
    /// True while the loop thread is (about to be) blocked in `epoll_wait`: only then does a submit
    /// need the wake-up syscall.
    private let sleeping = Atomic<Bool>(false)
    private let exited = DispatchSemaphore(value: 0)
    // Loop-thread only:
    private var idleHandles: [UnsafeMutableRawPointer] = []
    private var active: [UnsafeMutableRawPointer] = []
    private var watched = Set<Int32>()
    /// libcurl's timer: when it wants `CURL_SOCKET_TIMEOUT` next (monotonic nanoseconds), or nil.
    private var timerDeadline: UInt64?
    private var nextSweep: UInt64 = 0

    /// Starts the loop thread.
    init(name: String) throws(SystemCallError) {
        UpstreamClient.globalInit()
        epoll = try Epoll()
        wake = try EventFD()
        try epoll.add(wake.fd, .input)
        multi = curl_multi_init()
        // Keep enough idle connections for every concurrent transfer (the default cache is sized by the
        // number of easy handles attached, which is small between transfers, so connections were closed
        // and reopened under load).
        mg_curl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, 512)
        let me = Unmanaged.passUnretained(self).toOpaque()
        mg_curl_multi_setopt_socket_callback(multi, CurlLoopThread.socketCallback)
        mg_curl_multi_setopt_pointer(multi, CURLMOPT_SOCKETDATA, me)
        mg_curl_multi_setopt_timer_callback(multi, CurlLoopThread.timerCallback)
        mg_curl_multi_setopt_pointer(multi, CURLMOPT_TIMERDATA, me)
        let thread = Thread { [self] in self.run() }
        thread.name = name
        thread.start()
    }

    /// Starts `request`; `sink` gets its events on the loop thread.
    func submit(_ request: UpstreamRequest, _ sink: any TransferSink) {
        if stopped.load(ordering: .relaxed) {
            sink.finished(
                UpstreamError(kind: .cancelled, curlCode: 0, message: "gateway is stopping", connected: false)
            )
            return
        }
        pending.withLock { $0.append(Job(request: request, sink: sink)) }
        if sleeping.load(ordering: .acquiring) { wakeUp() }
    }

    /// Ends the loop: transfers still running finish with `.cancelled`. Waits for the thread.
    func stop() {
        guard !stopped.exchange(true, ordering: .relaxed) else { return }
        wakeUp()
        _ = exited.wait(timeout: .now() + 5)
    }

    /// Wakes the loop thread out of `epoll_wait`. The eventfd cannot fail but for a broken descriptor,
    /// in which case the loop still wakes within its one-second sweep.
    private func wakeUp() {
        do { try wake.signal() } catch { lastSystemError.withLock { $0 = error } }
    }

    /// The last system call failure of this loop, kept for diagnosis (see ``CurlLoop/lastSystemError``).
    let lastSystemError = Mutex<SystemCallError?>(nil)

    /// libcurl says which events it wants on a socket: mirror that in the epoll set. A failure is
    /// returned to libcurl (-1), which fails the transfers on that socket.
    private static let socketCallback: mg_curl_socket_callback = { _, fd, what, userp, _ in
        let loop = Unmanaged<CurlLoopThread>.fromOpaque(userp!).takeUnretainedValue()
        var events: Epoll.Events = []
        if what == CURL_POLL_IN || what == CURL_POLL_INOUT { events.insert(.input) }
        if what == CURL_POLL_OUT || what == CURL_POLL_INOUT { events.insert(.output) }
        do throws(SystemCallError) {
            if what == CURL_POLL_REMOVE {
                // libcurl may have closed the socket already, which removed it from the set: not an error.
                if loop.watched.remove(fd) != nil { try? loop.epoll.remove(fd) }
            } else if loop.watched.contains(fd) {
                try loop.epoll.modify(fd, events)
            } else {
                try loop.epoll.add(fd, events)
                loop.watched.insert(fd)
            }
        } catch {
            loop.lastSystemError.withLock { $0 = error }
            return -1
        }
        return 0
    }

    /// libcurl's single timer: -1 removes it, otherwise it fires after `ms`.
    private static let timerCallback: mg_curl_timer_callback = { _, ms, userp in
        let loop = Unmanaged<CurlLoopThread>.fromOpaque(userp!).takeUnretainedValue()
        loop.timerDeadline = ms < 0 ? nil : monotonicNanos() + UInt64(ms) * 1_000_000
        return 0
    }

    private func run() {
        var running: Int32 = 0
        let capacity = 128
        var fds = [Int32](repeating: 0, count: capacity)
        var events = [UInt32](repeating: 0, count: capacity)
        while !stopped.load(ordering: .relaxed) {
            let jobs = pending.withLock { list -> [Job] in
                let taken = list
                list.removeAll(keepingCapacity: true)
                return taken
            }
            for job in jobs { start(job) }
            let now = monotonicNanos()
            if let deadline = timerDeadline, deadline <= now {
                timerDeadline = nil
                curl_multi_socket_action(multi, CURL_SOCKET_TIMEOUT, 0, &running)
                drainMessages()
            }
            if now >= nextSweep {
                sweepCancelled()
                nextSweep = now + 1_000_000_000
            }
            var waitMs = Int((nextSweep - now) / 1_000_000) + 1
            if let deadline = timerDeadline {
                waitMs = min(waitMs, deadline > now ? Int((deadline - now + 999_999) / 1_000_000) : 0)
            }
            sleeping.store(true, ordering: .sequentiallyConsistent)
            if !pending.withLock({ $0.isEmpty }) { waitMs = 0 }
            let n: Int
            do {
                n = try epoll.wait(fds: &fds, events: &events, timeoutMs: Int32(waitMs))
            } catch {
                // Only a broken epoll descriptor gets here (EINTR is retried): keep the error for the
                // transfers and do not spin.
                lastSystemError.withLock { $0 = error }
                n = 0
            }
            sleeping.store(false, ordering: .sequentiallyConsistent)
            guard n > 0 else { continue }
            for i in 0..<n {
                if fds[i] == wake.fd {
                    do { try wake.drain() } catch { lastSystemError.withLock { $0 = error } }
                } else {
                    let e = Epoll.Events(rawValue: events[i])
                    var flags: Int32 = 0
                    if !e.isDisjoint(with: [.input, .hangup]) { flags |= CURL_CSELECT_IN }
                    if e.contains(.output) { flags |= CURL_CSELECT_OUT }
                    if e.contains(.error) { flags |= CURL_CSELECT_ERR }
                    curl_multi_socket_action(multi, fds[i], flags, &running)
                }
            }
            drainMessages()
        }
        for job in pending.withLock({ $0 }) {
            job.sink.finished(
                UpstreamError(kind: .cancelled, curlCode: 0, message: "gateway is stopping", connected: false)
            )
        }
        for easy in active {
            var raw: UnsafeMutableRawPointer?
            mg_curl_getinfo_pointer(easy, CURLINFO_PRIVATE, &raw)
            curl_multi_remove_handle(multi, easy)
            if let raw {
                let t = Unmanaged<LoopTransfer>.fromOpaque(raw).takeRetainedValue()
                t.sink.finished(
                    UpstreamError(
                        kind: .cancelled, curlCode: 0, message: "gateway is stopping", connected: false))
            }
            curl_easy_cleanup(easy)
        }
        for easy in idleHandles { curl_easy_cleanup(easy) }
        curl_multi_cleanup(multi)
        try? epoll.close()  // at exit: nothing is left to tell
        try? wake.close()
        exited.signal()
    }

    private func start(_ job: Job) {
        let easy = idleHandles.popLast() ?? curl_easy_init()!
        let sink = job.sink
        let transfer = LoopTransfer(sink: sink)
        let list = UpstreamClient.configure(easy, job.request, transfer: transfer.transfer)
        transfer.headerList = list
        if !job.request.body.isEmpty {
            mg_curl_setopt_off_t(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(job.request.body.count))
            _ = job.request.body.withUnsafeBytes { bytes in
                mg_curl_setopt_pointer(
                    easy, CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(mutating: bytes.baseAddress))
            }
        }
        let opaque = Unmanaged.passRetained(transfer).toOpaque()
        mg_curl_setopt_pointer(easy, CURLOPT_PRIVATE, opaque)
        curl_multi_add_handle(multi, easy)
        active.append(easy)
    }

    /// About once a second: transfers whose sink reports `isCancelled` (say, the client went away while
    /// the upstream is slow and sends nothing) are ended with `.cancelled`.
    private func sweepCancelled() {
        var cancelled: [UnsafeMutableRawPointer] = []
        for easy in active {
            var raw: UnsafeMutableRawPointer?
            mg_curl_getinfo_pointer(easy, CURLINFO_PRIVATE, &raw)
            guard let raw else { continue }
            let t = Unmanaged<LoopTransfer>.fromOpaque(raw).takeUnretainedValue()
            if t.sink.isCancelled { cancelled.append(easy) }
        }
        for easy in cancelled {
            guard let t = retire(easy) else { continue }
            t.transfer.cancelled = true
            t.sink.finished(
                UpstreamError(kind: .cancelled, curlCode: 0, message: "cancelled", connected: true))
        }
    }

    /// Detaches a transfer's handle from the multi handle and keeps it for reuse; returns its state.
    private func retire(_ easy: UnsafeMutableRawPointer) -> LoopTransfer? {
        var raw: UnsafeMutableRawPointer?
        mg_curl_getinfo_pointer(easy, CURLINFO_PRIVATE, &raw)
        curl_multi_remove_handle(multi, easy)
        if let i = active.lastIndex(of: easy) {
            active.swapAt(i, active.count - 1)
            active.removeLast()
        }
        curl_easy_reset(easy)
        if idleHandles.count < 256 { idleHandles.append(easy) } else { curl_easy_cleanup(easy) }
        guard let raw else { return nil }
        let t = Unmanaged<LoopTransfer>.fromOpaque(raw).takeRetainedValue()
        curl_slist_free_all(t.headerList)
        t.headerList = nil
        return t
    }

    private func drainMessages() {
        var left: Int32 = 0
        while let msg = curl_multi_info_read(multi, &left) {
            var easy: UnsafeMutableRawPointer?
            var result = CURLE_OK
            guard mg_curl_msg_done(msg, &easy, &result) == 1, let easy else { continue }
            let sent = UpstreamClient.progress(easy)
            var code = 0
            mg_curl_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &code)
            guard let t = retire(easy) else { continue }
            if result == CURLE_OK {
                if !t.transfer.headDelivered {
                    t.transfer.status = code
                    if !t.transfer.deliverHead() {
                        t.sink.finished(
                            UpstreamError(
                                kind: .cancelled, curlCode: 0, message: "cancelled", connected: true))
                        continue
                    }
                }
                t.sink.finished(nil)
            } else {
                t.sink.finished(
                    UpstreamClient.mapError(
                        result, cancelled: t.transfer.cancelled, malformed: t.transfer.malformed,
                        connected: sent.connected,
                        requestWritten: sent.requestWritten))
            }
        }
    }
}

/// A transfer on the loop: the callbacks' state plus what must live until it ends.
final class LoopTransfer {
    let sink: any TransferSink
    let transfer: Transfer
    var headerList: UnsafeMutablePointer<curl_slist>?

    init(sink: any TransferSink) {
        self.sink = sink
        transfer = Transfer(
            onHead: { [unowned sink] status, headers in sink.head(status: status, headers: headers) },
            onData: { [unowned sink] bytes in sink.body(bytes) })
    }
}
