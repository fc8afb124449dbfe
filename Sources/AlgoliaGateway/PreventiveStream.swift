import GatewaySupport
import HTTPCore
import JSONCore
import Synchronization

/// A preventive offline search (SPEC §3): an NDJSON stream whose lines are the remote answer alone when it
/// comes before `delay`; else the local answer at `delay`, then the remote answer or an error line
/// (`{"origin":"remote","status","message"}`: a 4xx relayed, anything else `unavailableStatus`). When the
/// upstream fails before `delay` (no host answers, 5xx, 429, an answer that is not JSON), the local answer
/// is sent at once and the error line after it, as a plain request would have been answered locally; a
/// 4xx before `delay` is the upstream's answer and comes alone. A local answer that fails becomes
/// `{"origin":"local","status","message"}`. A client that disconnects cancels the upstream call.
struct PreventiveStream: Sendable {
    let paths: AnswerPaths
    /// `algolia.timeout`: the stream lives at most this + `delay` + 2 s.
    let readTimeout: Duration

    /// Answers `out` with the stream at once and fills it as the answers come.
    func start(
        _ request: HTTPRequest, _ out: any Responder, route: AlgoliaRoute, mirrored: [String],
        delay: Duration, reachable: Bool
    ) {
        let paths = self.paths
        let timeout = readTimeout + delay + .seconds(2)
        let stream = ResponseStream(timeout: timeout)
        var headers = HTTPHeaders()
        headers.add("Content-Type", "application/x-ndjson")
        headers.add(MirrorgateHeader.origin, reachable ? "remote" : "local")
        headers.add("Cache-Control", "no-store")
        out.respond(HTTPResponse(status: 200, headers: headers, body: .stream(stream)))
        let state = PreventiveState(stream: stream)
        let localLine: @Sendable () -> [UInt8] = {
            let r = paths.local.answer(request, route: route, isAbandoned: { stream.isClosed })
            guard case .bytes(let body) = r.body else { return [] }
            if r.status == 200 { return body + [0x0A] }
            let message = (try? JSON.parse(body))?["message"]?.stringValue ?? "local answer failed"
            let line: JSON = [
                "origin": "local", "status": .int(Int64(r.status)), "message": .string(message),
            ]
            return line.serializedBytes() + [0x0A]
        }
        if !reachable || paths.upstream == nil {
            paths.pool.submit {
                stream.write(localLine())
                stream.finish()
            }
            return
        }
        let failureLine: @Sendable (Int, String) -> [UInt8] = { status, message in
            let j: JSON = ["origin": "remote", "status": .int(Int64(status)), "message": .string(message)]
            return j.serializedBytes() + [0x0A]
        }
        // The local line, computed now unless it is already on its way (a failure before the delay).
        let localNow: @Sendable () -> Void = { paths.pool.submit { state.local(localLine()) } }
        let capture = CaptureResponder(streamRefusal: tooLargeToCapture) { response in
            let body: [UInt8]? = if case .bytes(let b) = response.body { b } else { nil }
            let json = body.flatMap { try? JSON.parse($0) }
            if (200..<300).contains(response.status), let body, json?.objectValue != nil {
                state.remote(body + [0x0A])
            } else if (400..<500).contains(response.status) && !isTooLargeToCapture(response) {
                let message = json?["message"]?.stringValue ?? "upstream answered \(response.status)"
                state.remote(failureLine(response.status, message))
            } else {
                // Not an answer a client can use (not JSON, or too large to hold): a transient failure.
                let message =
                    json?["message"]?.stringValue ?? "upstream unavailable: the answer was not a JSON object"
                if state.remoteFailed(failureLine(paths.unavailableStatus, message)) { localNow() }
            }
        }
        paths.forward(
            request, capture, mirrored: mirrored, tag: true, isCancelled: { stream.isClosed },
            onUnavailable: {
                if state.remoteFailed(failureLine(paths.unavailableStatus, "upstream unavailable")) {
                    localNow()
                }
            })
        Scheduler.shared.schedule(after: delay) {
            guard state.delayExpired() else { return }
            localNow()
        }
    }
}

/// What a capture gets instead of a streamed remote answer (a preventive stream or a split call needs the
/// whole body).
let tooLargeToCapture = HTTPResponse(
    status: 424,
    body: .bytes(Array(#"{"message":"remote answer too large for a preventive stream"}"#.utf8)))

/// Whether `response` is ``tooLargeToCapture`` (the capture's refusal, not the upstream's answer).
func isTooLargeToCapture(_ response: HTTPResponse) -> Bool {
    guard response.status == tooLargeToCapture.status, case .bytes(let a) = response.body,
        case .bytes(let b) = tooLargeToCapture.body
    else { return false }
    return a == b
}

/// The order of a preventive stream: remote alone if it comes before the delay; else the local line
/// at the delay, then the remote line (or its error); then the end.
final class PreventiveState: Sendable {
    private enum Phase { case waiting, localPending, localSent, done }
    private struct S {
        var phase = Phase.waiting
        var heldRemote: [UInt8]?
    }
    private let s = Mutex(S())
    private let stream: ResponseStream
    init(stream: ResponseStream) { self.stream = stream }

    /// The delay expired: true if the local line should be computed now.
    func delayExpired() -> Bool {
        s.withLock { st in
            guard st.phase == .waiting else { return false }
            st.phase = .localPending
            return true
        }
    }

    func local(_ line: [UInt8]) {
        s.withLock { st in
            guard st.phase == .localPending else { return }
            stream.write(line)
            if let held = st.heldRemote {
                stream.write(held)
                stream.finish()
                st.phase = .done
            } else {
                st.phase = .localSent
            }
        }
    }

    /// The upstream failed (transiently) with `line`: before the delay the local line is still due,
    /// so it is asked for now (true: compute it) and `line` follows it; after, as ``remote(_:)``.
    func remoteFailed(_ line: [UInt8]) -> Bool { deliver(line, failed: true) }

    /// The upstream's answer (or its client error) as `line`.
    func remote(_ line: [UInt8]) { _ = deliver(line, failed: false) }

    private func deliver(_ line: [UInt8], failed: Bool) -> Bool {
        s.withLock { st in
            switch st.phase {
            case .waiting where failed:
                st.phase = .localPending
                st.heldRemote = line
                return true
            case .waiting, .localSent:
                st.phase = .done
                stream.write(line)
                stream.finish()
            case .localPending:
                st.heldRemote = line
            case .done:
                break
            }
            return false
        }
    }
}
