import GatewaySupport
import HTTPCore
import JSONCore
import Synchronization

/// A preventive offline search (SPEC §3): an NDJSON stream whose lines are the remote answer alone when it
/// comes before `delay`; else the local answer at `delay`, then the remote answer or an error line
/// (`{"origin":"remote","status","message"}`: a 4xx relayed, anything else `unavailableStatus`). A local
/// answer that fails becomes `{"origin":"local","status","message"}`. A client that disconnects cancels
/// the upstream call.
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
            let r = paths.local.answer(request, route: route)
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
        let capture = CaptureResponder(streamRefusal: tooLargeToCapture) { response in
            var line: [UInt8]
            if case .bytes(let body) = response.body, (200..<300).contains(response.status) {
                line = body
            } else {
                var message = "upstream answered \(response.status)"
                if case .bytes(let body) = response.body,
                    let m = (try? JSON.parse(body))?["message"]?.stringValue
                {
                    message = m
                }
                let status =
                    (400..<500).contains(response.status)
                    ? response.status : paths.unavailableStatus
                let j: JSON = [
                    "origin": "remote", "status": .int(Int64(status)), "message": .string(message),
                ]
                line = j.serializedBytes()
            }
            state.remote(line + [0x0A])
        }
        let unavailable: JSON = [
            "origin": "remote", "status": .int(Int64(paths.unavailableStatus)),
            "message": "upstream unavailable",
        ]
        paths.forward(
            request, capture, mirrored: mirrored, tag: true, isCancelled: { stream.isClosed },
            onUnavailable: { state.remote(unavailable.serializedBytes() + [0x0A]) })
        Scheduler.shared.schedule(after: delay) {
            guard state.delayExpired() else { return }
            paths.pool.submit { state.local(localLine()) }
        }
    }
}

/// What a capture gets instead of a streamed remote answer (a preventive stream or a split call needs the
/// whole body).
let tooLargeToCapture = HTTPResponse(
    status: 424,
    body: .bytes(Array(#"{"message":"remote answer too large for a preventive stream"}"#.utf8)))

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

    func remote(_ line: [UInt8]) {
        s.withLock { st in
            switch st.phase {
            case .waiting, .localSent:
                st.phase = .done
                stream.write(line)
                stream.finish()
            case .localPending:
                st.heldRemote = line
            case .done:
                break
            }
        }
    }
}
