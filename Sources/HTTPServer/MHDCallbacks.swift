// libmicrohttpd's C entry points and the stream transport over a suspended connection (the server and
// its request contexts are in Server.swift).

import CMHDOwnErrors
import CMicroHTTPD
import GatewaySupport
import Glibc
import HTTPCore
import Logging
import Synchronization
import SystemCalls

/// C entry points for libmicrohttpd. They live in a nonisolated type: closures written at the top level
/// of `main.swift` would be main-actor isolated and crash when called from MHD's thread.
enum MHDCallbacks {
    static let acceptPolicy: MHD_AcceptPolicyCallback = { cls, addr, _ in
        let core = Unmanaged<ServerCore>.fromOpaque(cls!).takeUnretainedValue()
        let peer = addr.flatMap(PeerAddress.init) ?? .unknown
        return core.admit(peer) ? .YES : .NO
    }

    static let uriLog: mg_mhd_uri_log_callback = { cls, uri, connection in
        let core = Unmanaged<ServerCore>.fromOpaque(cls!).takeUnretainedValue()
        core.active.add(1, ordering: .relaxed)
        let raw = uri.map { String(cString: $0) } ?? "/"
        let slot = connection.flatMap(mg_mhd_socket_context).map {
            Unmanaged<ConnectionSlot>.fromOpaque($0).takeUnretainedValue()
        }
        // An absolute-form target (RFC 9112 §3.2.2) is routed by its path; its authority is the Host.
        let form = RequestFraming.originForm(raw)
        slot?.target = form.target
        let ctx = RequestContext(core: core, target: form.target, slot: slot)
        ctx.authority = form.authority
        return Unmanaged.passRetained(ctx).toOpaque()
    }

    static let connectionNotify: MHD_NotifyConnectionCallback = { cls, connection, socketContext, code in
        let core = Unmanaged<ServerCore>.fromOpaque(cls!).takeUnretainedValue()
        if code == .CONNECTION_NOTIFY_STARTED {
            core.connections.add(1, ordering: .relaxed)
            guard let connection, let socketContext else { return }
            let peer = mg_mhd_client_address(connection).flatMap(PeerAddress.init) ?? .unknown
            let slot = ConnectionSlot(fd: mg_mhd_connection_fd(connection), peer: peer, core: core)
            socketContext.pointee = Unmanaged.passRetained(slot).toOpaque()
            core.opened(slot)
        } else {
            core.connections.subtract(1, ordering: .relaxed)
            guard let socketContext, let raw = socketContext.pointee else { return }
            socketContext.pointee = nil
            core.closed(Unmanaged<ConnectionSlot>.fromOpaque(raw).takeRetainedValue())
        }
    }

    /// libmicrohttpd is about to send an error answer of its own (see CMHDOwnErrors): the server answers
    /// in the API's format first and shuts the socket down, so libmicrohttpd's page is never sent.
    static let ownError: mg_mhd_own_error_hook = { connection, status in
        guard let connection, let raw = mg_mhd_socket_context(connection) else { return }
        let slot = Unmanaged<ConnectionSlot>.fromOpaque(raw).takeUnretainedValue()
        slot.core?.answerOwnError(slot, status: Int(status))
    }

    static let completed: MHD_RequestCompletedCallback = { cls, _, reqCls, _ in
        guard let reqCls, let raw = reqCls.pointee else { return }
        reqCls.pointee = nil
        let ctx = Unmanaged<RequestContext>.fromOpaque(raw).takeRetainedValue()
        ctx.core.unregister(ctx)
        if let slot = ctx.slot { ctx.core.requestEnded(slot) }
        ctx.core.requestCompleted()
    }

    /// Collects the header fields in order, and where each lies in libmicrohttpd's read buffer (for
    /// ``HeadLayout``).
    static let headerIterator: MHD_KeyValueIteratorN = { cls, _, key, keySize, value, valueSize in
        let ctx = Unmanaged<RequestContext>.fromOpaque(cls!).takeUnretainedValue()
        guard let key else { return .YES }
        let name = String(decoding: UnsafeRawBufferPointer(start: key, count: keySize), as: UTF8.self)
        let text = value.map {
            String(decoding: UnsafeRawBufferPointer(start: $0, count: valueSize), as: UTF8.self)
        }
        ctx.headers.add(name, text ?? "")
        if let base = ctx.layoutBase {
            if let value {
                ctx.fields.append(
                    HeadLayout.Field(
                        name: UnsafeRawPointer(key) - base, nameCount: keySize,
                        value: UnsafeRawPointer(value) - base,
                        valueCount: valueSize))
            } else {
                ctx.layoutBase = nil  // no value pointer: nothing to check against
            }
        }
        return .YES
    }

    static let streamReader: MHD_ContentReaderCallback = { cls, _, buf, max in
        let stream = Unmanaged<ResponseStream>.fromOpaque(cls!).takeUnretainedValue()
        switch stream.read(into: UnsafeMutableRawBufferPointer(start: buf, count: max)) {
        case .bytes(let n): return n
        case .suspended: return 0
        case .end: return Int(mg_mhd_end_of_stream())
        case .failed: return Int(mg_mhd_end_with_error())
        }
    }

    static let streamFree: MHD_ContentReaderFreeCallback = { cls in
        let stream = Unmanaged<ResponseStream>.fromOpaque(cls!).takeRetainedValue()
        stream.detach()
    }

    static let access: MHD_AccessHandlerCallback = {
        cls, connection, _, method, version, uploadData, uploadSize, reqCls in
        guard let connection, let reqCls, let raw = reqCls.pointee else { return .NO }
        let ctx = Unmanaged<RequestContext>.fromOpaque(raw).takeUnretainedValue()
        if !ctx.started { return head(ctx, connection, method, version) }
        if ctx.answered {
            // Answered in the first call: libmicrohttpd reads no body after an early answer.
            uploadSize?.pointee = 0
            return .YES
        }
        if ctx.isCut { return .NO }
        let core = ctx.core
        if let uploadSize, uploadSize.pointee > 0 {
            let n = uploadSize.pointee
            uploadSize.pointee = 0
            if !ctx.sawBody { ctx.noteBody() }
            if ctx.body.count + n > core.configuration.maxBodySize {
                // Only a chunked body gets here (a Content-Length over the limit was refused with the
                // head): answered at once, not after its last chunk.
                ctx.body = []
                ctx.cutWhileReceiving(
                    413, "request body is larger than \(core.configuration.maxBodySize) bytes")
                return .NO
            }
            if let uploadData {
                uploadData.withMemoryRebound(to: UInt8.self, capacity: n) { p in
                    ctx.body.append(contentsOf: UnsafeBufferPointer(start: p, count: n))
                }
            }
            return .YES
        }
        if let response = ctx.takeResponse() {
            core.unregister(ctx)
            return queue(response, ctx, connection)
        }
        if ctx.isDispatched { return .YES }
        // Body complete: hand the request to the handler, suspended until it answers.
        let request = HTTPRequest(
            method: ctx.method, target: ctx.target, version: ctx.version, headers: ctx.headers,
            body: ctx.body,
            receivedAt: ctx.receivedAt)
        ctx.body = []
        guard ctx.dispatch() else { return .NO }
        MHD_suspend_connection(connection)
        core.handler.handle(request, ctx)
        return .YES
    }

    /// The first call, with the complete head: the checks that come before any body byte is read. An
    /// answer queued here makes libmicrohttpd close the connection after sending it, without reading
    /// what follows (a body, or a pipelined request).
    static func head(
        _ ctx: RequestContext, _ connection: OpaquePointer, _ method: UnsafePointer<CChar>?,
        _ version: UnsafePointer<CChar>?
    ) -> MHD_Result {
        let core = ctx.core
        ctx.started = true
        ctx.connection = connection
        ctx.method = method.map { String(cString: $0) } ?? "GET"
        ctx.version = version.map { String(cString: $0) } ?? "HTTP/1.1"
        let shutOpen = ctx.slot.map { core.requestStarted($0) } ?? 0
        if let oversized = oversizedHead(ctx, connection) {
            // Answered on the socket, not through libmicrohttpd: its pool may have no room left for an
            // answer's head.
            ctx.answered = true
            if let slot = ctx.slot {
                core.answerOwnError(slot, status: oversized.status, message: oversized.message)
                return .YES
            }
            return queue(core.errors(oversized.status, oversized.message, ctx.target), ctx, connection)
        }
        // The head lies in libmicrohttpd's read buffer, from the method on (see HeadLayout).
        let headSize = core.checksHeadLayout ? Int(mg_mhd_header_size(connection)) : 0
        if headSize > 0, let method, version != nil, ctx.version.hasPrefix("HTTP/1.") {
            ctx.layoutBase = UnsafeRawPointer(method)
            ctx.fields.reserveCapacity(16)
        }
        MHD_get_connection_values_n(
            connection, .HEADER_KIND, headerIterator, Unmanaged.passUnretained(ctx).toOpaque())
        if let authority = ctx.authority {
            // RFC 9112 §3.2.2: the target's authority replaces any Host field.
            ctx.headers.set("Host", authority)
        }
        if let name = core.configuration.requestIDHeader { ctx.assignRequestID(field: name) }
        let layoutRefusal = ctx.layoutBase.flatMap { base in
            HeadLayout.check(
                versionEnd: UnsafeRawPointer(version!) - base + ctx.version.utf8.count, headEnd: headSize,
                fields: ctx.fields
            ) { base.load(fromByteOffset: $0, as: UInt8.self) }
        }
        ctx.fields = []
        ctx.layoutBase = nil
        let framing = RequestFraming.check(version: ctx.version, headers: ctx.headers)
        var refusal: RequestFraming.Refusal?
        if let message = layoutRefusal ?? RequestFraming.targetRefusal(ctx.target) {
            refusal = RequestFraming.Refusal(status: 400, message: message)
        } else if case .failure(let r) = framing {
            refusal = r
        }
        if let refusal {
            ctx.answered = true
            return queue(core.errors(refusal.status, refusal.message, ctx.target), ctx, connection)
        }
        if core.connections.load(ordering: .relaxed) - shutOpen > core.configuration.maxConnections {
            ctx.answered = true
            var response = core.errors(
                503, "too many connections (server.maxConnections = \(core.configuration.maxConnections))",
                ctx.target)
            response.headers.set("Retry-After", "1")
            return queue(response, ctx, connection)
        }
        switch framing {
        case .success(.length(let n)) where n > core.configuration.maxBodySize:
            ctx.answered = true
            return queue(
                core.errors(
                    413, "request body is larger than \(core.configuration.maxBodySize) bytes", ctx.target),
                ctx, connection)
        case .success(.length(let n)):
            ctx.body.reserveCapacity(n)
            ctx.awaitBody(expectsContinue: expectsContinue(ctx))
        case .success(.chunked):
            ctx.awaitBody(expectsContinue: expectsContinue(ctx))
        default:
            break
        }
        return .YES
    }

    /// The refusal of a head beyond `maxHeadSize` (431, or 414 when the request line alone is) or with
    /// more than `maxHeaderFields` fields (431), or of a target with more than `maxQueryArguments`
    /// arguments (414), or nil.
    private static func oversizedHead(_ ctx: RequestContext, _ connection: OpaquePointer) -> (
        status: Int, message: String
    )? {
        let configuration = ctx.core.configuration
        let limit = configuration.maxHeadSize
        let lineSize = ctx.method.utf8.count + ctx.target.utf8.count + ctx.version.utf8.count + 4
        if lineSize > limit {
            return (414, "the request line is longer than the limit of \(limit) bytes")
        }
        if Int(mg_mhd_header_size(connection)) > limit {
            return (431, "the request head is larger than the limit of \(limit) bytes")
        }
        let fields = Int(MHD_get_connection_values_n(connection, .HEADER_KIND, nil, nil))
        if fields > configuration.maxHeaderFields {
            return (
                431,
                "the request head has \(fields) header fields, more than the limit of \(configuration.maxHeaderFields)"
            )
        }
        let arguments = Int(MHD_get_connection_values_n(connection, .GET_ARGUMENT_KIND, nil, nil))
        if arguments > configuration.maxQueryArguments {
            return (
                414,
                "the request target has \(arguments) query arguments, more than the limit of \(configuration.maxQueryArguments)"
            )
        }
        return nil
    }

    private static func expectsContinue(_ ctx: RequestContext) -> Bool {
        ctx.headers.contains {
            $0.name.equalsIgnoringASCIICase("Expect") && $0.value.lowercased().contains("100-continue")
        }
    }
    static func queue(_ response: HTTPResponse, _ ctx: RequestContext, _ connection: OpaquePointer)
        -> MHD_Result
    {
        var response = response
        ctx.stamp(&response)
        let mhdResponse: OpaquePointer?
        switch response.body {
        case .bytes(let bytes):
            mhdResponse = bytes.withUnsafeBytes { raw in
                MHD_create_response_from_buffer(
                    raw.count, UnsafeMutableRawPointer(mutating: raw.baseAddress), .RESPMEM_MUST_COPY)
            }
        case .stream(let stream):
            stream.attach(MHDStreamTransport(connection))
            ctx.stream = stream
            ctx.core.register(ctx)
            mhdResponse = MHD_create_response_from_callback(
                mg_mhd_size_unknown(), 16 * 1024, streamReader, Unmanaged.passRetained(stream).toOpaque(),
                streamFree)
        }
        guard let mhdResponse else { return .NO }
        for (name, value) in response.headers {
            if name.equalsIgnoringASCIICase("Content-Length")
                || name.equalsIgnoringASCIICase("Transfer-Encoding")
                || name.equalsIgnoringASCIICase("Connection")
            {
                continue
            }
            MHD_add_response_header(mhdResponse, name, value)
        }
        let result = MHD_queue_response(connection, UInt32(response.status), mhdResponse)
        MHD_destroy_response(mhdResponse)
        ctx.core.observe(ctx, response)
        return result
    }
}

/// Parks and wakes a libmicrohttpd connection for a ``ResponseStream`` (always called with the stream's
/// lock held, see ``StreamTransport``).
final class MHDStreamTransport: StreamTransport, @unchecked Sendable {
    private let connection: OpaquePointer
    private let socket: Int32

    init(_ connection: OpaquePointer) {
        self.connection = connection
        self.socket = mg_mhd_connection_fd(connection)
    }

    func suspend() { MHD_suspend_connection(connection) }
    func resume() { MHD_resume_connection(connection) }
    func peerClosed() -> Bool { socket >= 0 && Socket.peerGone(socket) }
}
