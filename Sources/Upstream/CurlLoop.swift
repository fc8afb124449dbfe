import CCurl
import Foundation
import Synchronization

/// Receives one transfer's events on the loop thread. Implementations must never block: every
/// transfer of the process shares that thread.
public protocol TransferSink: AnyObject {
    /// The final status and headers. Return false to cancel.
    func head(status: Int, headers: [(name: String, value: String)]) -> Bool
    /// A piece of the body. Return false to cancel.
    func body(_ bytes: [UInt8]) -> Bool
    /// The transfer ended: nil on success.
    func finished(_ error: UpstreamError?)
    /// Polled about once a second (and on activity) while the transfer runs: true aborts it (`.cancelled`),
    /// for example when the client that wanted the answer went away.
    var isCancelled: Bool { get }
}

extension TransferSink {
    /// By default a transfer is never cancelled from outside.
    public var isCancelled: Bool { false }
}

/// Runs many upstream transfers on one thread with libcurl's multi interface: no thread per request,
/// no thread switch per request under load (events are handled in batches), connections kept alive in
/// the multi handle's pool. `submit` is safe from any thread; sinks are called on the loop thread.
public final class CurlLoop: @unchecked Sendable {
    private struct Job: @unchecked Sendable {
        let request: UpstreamRequest
        let sink: any TransferSink
    }

    private let multi: UnsafeMutableRawPointer
    private let pending = Mutex<[Job]>([])
    private let stopped = Atomic<Bool>(false)
    /// True while the loop thread is (about to be) blocked in `curl_multi_poll`: only then does a submit
    /// need the wake-up syscall.
    private let sleeping = Atomic<Bool>(false)
    private let exited = DispatchSemaphore(value: 0)
    // Loop-thread only:
    private var idleHandles: [UnsafeMutableRawPointer] = []
    private var active: [UnsafeMutableRawPointer] = []

    /// Starts the loop thread.
    public init(name: String = "mg-curl") {
        UpstreamClient.globalInit()
        multi = curl_multi_init()
        // Keep enough idle connections for every concurrent transfer (the default cache is sized by the
        // number of easy handles attached, which is small between transfers, so connections were closed
        // and reopened under load).
        mg_curl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, 512)
        let thread = Thread { [self] in self.run() }
        thread.name = name
        thread.start()
    }

    /// Starts `request`; `sink` gets its events on the loop thread.
    public func submit(_ request: UpstreamRequest, _ sink: any TransferSink) {
        if stopped.load(ordering: .relaxed) {
            sink.finished(
                UpstreamError(kind: .cancelled, curlCode: 0, message: "gateway is stopping", connected: false)
            )
            return
        }
        pending.withLock { $0.append(Job(request: request, sink: sink)) }
        if sleeping.load(ordering: .acquiring) { curl_multi_wakeup(multi) }
    }

    /// Ends the loop: transfers still running finish with `.cancelled`. Waits for the thread.
    public func stop() {
        guard !stopped.exchange(true, ordering: .relaxed) else { return }
        curl_multi_wakeup(multi)
        _ = exited.wait(timeout: .now() + 5)
    }

    private func run() {
        var numfds: Int32 = 0
        var running: Int32 = 0
        while !stopped.load(ordering: .relaxed) {
            let jobs = pending.withLock { list -> [Job] in
                let taken = list
                list.removeAll(keepingCapacity: true)
                return taken
            }
            for job in jobs { start(job) }
            curl_multi_perform(multi, &running)
            drainMessages()
            sleeping.store(true, ordering: .sequentiallyConsistent)
            if pending.withLock({ $0.isEmpty }) {
                curl_multi_poll(multi, nil, 0, 1000, &numfds)
            }
            sleeping.store(false, ordering: .sequentiallyConsistent)
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
        mg_curl_setopt_long(easy, CURLOPT_NOPROGRESS, 0)
        mg_curl_setopt_xferinfo_callback(easy, LoopTransfer.progress)
        mg_curl_setopt_pointer(easy, CURLOPT_XFERINFODATA, opaque)
        curl_multi_add_handle(multi, easy)
        active.append(easy)
    }

    private func drainMessages() {
        var left: Int32 = 0
        while let msg = curl_multi_info_read(multi, &left) {
            var easy: UnsafeMutableRawPointer?
            var result = CURLE_OK
            guard mg_curl_msg_done(msg, &easy, &result) == 1, let easy else { continue }
            var raw: UnsafeMutableRawPointer?
            mg_curl_getinfo_pointer(easy, CURLINFO_PRIVATE, &raw)
            var connectTime = 0.0
            mg_curl_getinfo_double(easy, CURLINFO_CONNECT_TIME, &connectTime)
            var code = 0
            mg_curl_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &code)
            curl_multi_remove_handle(multi, easy)
            if let i = active.lastIndex(of: easy) {
                active.swapAt(i, active.count - 1)
                active.removeLast()
            }
            guard let raw else { continue }
            let t = Unmanaged<LoopTransfer>.fromOpaque(raw).takeRetainedValue()
            curl_slist_free_all(t.headerList)
            t.headerList = nil
            curl_easy_reset(easy)
            if idleHandles.count < 256 { idleHandles.append(easy) } else { curl_easy_cleanup(easy) }
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
                        result, cancelled: t.transfer.cancelled, connected: connectTime > 0))
            }
        }
    }
}

/// A transfer on the loop: the callbacks' state plus what must live until it ends.
final class LoopTransfer {
    let sink: any TransferSink
    let transfer: Transfer
    var headerList: UnsafeMutablePointer<curl_slist>?

    /// libcurl's progress callback: a non-zero return aborts the transfer.
    static let progress: mg_curl_xferinfo_callback = { clientp, _, _, _, _ in
        let t = Unmanaged<LoopTransfer>.fromOpaque(clientp!).takeUnretainedValue()
        if t.sink.isCancelled {
            t.transfer.cancelled = true
            return 1
        }
        return 0
    }

    init(sink: any TransferSink) {
        self.sink = sink
        transfer = Transfer(
            onHead: { [unowned sink] status, headers in sink.head(status: status, headers: headers) },
            onData: { [unowned sink] bytes in sink.body(bytes) })
    }
}
