import GatewaySupport
import HTTPCore
import JSONCore
import Logging
import Proxying
import Upstream

/// Forwards requests under an OData service's mount to its upstream through the two-way URL map:
/// paths and gateway URLs in request bodies go to the upstream; absolute upstream URLs in response
/// headers and bodies come back as gateway URLs. An unreachable upstream gets 502 (refused) or 504
/// (timeout) with an OData error body. The offline store's request options (`OfflineOData.*` headers,
/// also inside a `$batch`) are never forwarded. Owned by the service's ``ODataRouter``; knows nothing of
/// the mirror.
public final class ODataForwarder: Sendable {
    /// The service's settings.
    public let settings: ODataServiceSettings
    /// Tracks whether the upstream answers.
    public let reachability: ReachabilityTracker
    private let loop: CurlLoop
    private let logger: Logger

    /// Creates a forwarder with its own reachability tracker (probing the service root with the blocking
    /// `client`); transfers run on `loop`.
    public init(settings: ODataServiceSettings, loop: CurlLoop, client: UpstreamClient, logger: Logger) {
        self.settings = settings
        self.loop = loop
        self.logger = logger
        let root = settings.upstream
        let connectTimeout = settings.connectTimeout
        reachability = ReachabilityTracker(name: "odata:\(settings.name)", logger: logger) {
            let request = UpstreamRequest(
                method: "GET", url: root, connectTimeout: connectTimeout,
                timeout: connectTimeout + .seconds(2))
            return (try? client.perform(request)) != nil
        }
    }

    /// The largest remote answer held until it is whole for a read the mirror can answer instead (a
    /// larger one is streamed as it comes): 32 MiB, as for Algolia's mirrored indices.
    static let wholeAnswerLimit = 32 << 20

    /// Forwards `request` without blocking; answers through `responder` in every case, except that when
    /// the upstream cannot be reached at all and `fallback` returns true, `fallback` has taken over the
    /// answer. `timeout` (the service's `timeout` when nil) bounds the whole transfer: a caller that spent
    /// part of its budget already (a forwarded write's CSRF fetch) passes what remains.
    ///
    /// With `onUpstreamFailure` (a read the mirror can answer instead), the upstream's answer reaches the
    /// client only whole: it is held until complete (up to ``wholeAnswerLimit``), so that a body still
    /// arriving when `timeout` ends is a failure that `fallback` answers, never a truncated answer; and
    /// an answer that is a failure of the upstream rather than its final answer (``isUpstreamFailure(status:
    /// headers:body:)``) is held from the client and offered to `onUpstreamFailure`; when it returns false,
    /// the held answer is relayed. Every other answer (2xx, 3xx, 4xx, 501, a 500 carrying the service's
    /// OData error) is the upstream's final answer and is relayed.
    public func forward(
        _ request: HTTPRequest, _ responder: any Responder,
        fallback: (@Sendable (UpstreamError) -> Bool)? = nil, timeout: Duration? = nil,
        onUpstreamFailure: (@Sendable (Int) -> Bool)? = nil
    ) {
        let timeout = timeout ?? settings.timeout
        let map = settings.urlMap(for: request)
        var headers = HopByHop.requestHeaders(request.headers, dropping: ["accept-encoding"])
        // The offline store's per-request options (`OfflineOData.*`) are the gateway's, never the upstream's.
        headers.removeAll { ODataRequestOptions.isOptionHeader($0.name) }
        headers.append((name: "Accept-Encoding", value: "identity"))
        headers += settings.customFields
        var body = request.body
        if !body.isEmpty, ODataRouter.isBatch(request) {
            body = ODataRequestOptions.strippingOptionHeaders(
                body, contentType: request.headers["Content-Type"] ?? "")
        }
        if !body.isEmpty { body = map.toUpstream.apply(body) }
        let upstream = UpstreamRequest(
            method: request.method, url: settings.upstreamURL(for: request.target), headers: headers,
            body: body, connectTimeout: min(settings.connectTimeout, timeout), timeout: timeout)
        var options = RelayTransfer.Options()
        options.streamTimeout = timeout + .seconds(1)
        let adjust: @Sendable (inout HTTPHeaders) -> Void = { h in
            for name in ["Location", "Content-Location", "OData-EntityId"] {
                if let v = h[name] { h.set(name, map.headerToGateway(v)) }
            }
        }
        options.adjustHeaders = adjust
        options.holdServerErrors = onUpstreamFailure != nil
        options.holdRateLimited = onUpstreamFailure != nil
        if onUpstreamFailure != nil {
            options.bufferLimit = Self.wholeAnswerLimit
            options.streamAfter = .seconds(86400)
        }
        options.transform = { map.toGateway.apply($0) }
        options.makeStreamTransform = { map.toGateway }
        let sink = RelayTransfer(responder: responder, options: options) { [self] outcome in
            switch outcome {
            case .relayed:
                reachability.reportSuccess()
            case .serverError(let status, let headers, let body):
                reachability.reportSuccess()
                if let onUpstreamFailure,
                    Self.isUpstreamFailure(status: status, headers: headers, body: body),
                    onUpstreamFailure(status)
                {
                    return
                }
                var h = HopByHop.responseHeaders(headers)
                adjust(&h)
                responder.respond(
                    HTTPResponse(status: status, headers: h, body: .bytes(map.toGateway.apply(body))))
            case .brokenAfterStart(let error):
                logger.warning(
                    "odata upstream broke mid-response",
                    metadata: ["service": "\(settings.name)", "error": "\(error)"])
            case .failed(let error):
                if error.kind == .cancelled { return }
                reachability.reportFailure(error.description)
                if let fallback, fallback(error) { return }
                let status = error.kind == .timeout ? 504 : 502
                responder.respond(
                    ODataServiceError.response(
                        status, code: status == 504 ? "UpstreamTimeout" : "UpstreamUnavailable",
                        "upstream unavailable: \(error)", version: settings.version ?? .v4))
            }
        }
        loop.submit(upstream, sink)
    }
}

extension ODataForwarder {
    /// Whether an upstream answer is a failure of the upstream (the mirror may answer instead) rather than
    /// the service's final answer (relayed): `429`, `502`, `503` and `504` are failures, and a `500` whose
    /// body is not an OData error (a proxy's or a crashed server's page, an empty body). Every other status —
    /// 2xx, 3xx, 4xx, `501`, `505`… — and a `500` carrying the service's OData error is the service's answer.
    static func isUpstreamFailure(status: Int, headers: [(name: String, value: String)], body: [UInt8])
        -> Bool
    {
        switch status {
        case 429, 502, 503, 504: return true
        case 500: return !isODataError(body)
        default: return false
        }
    }

    /// Whether `body` is an OData error: JSON `{"error":{"code":…,"message":…}}` (V4's message a string,
    /// V2's `{"lang","value"}`), or XML whose root is `error` in the OData metadata namespace of V4 or V2.
    static func isODataError(_ body: [UInt8]) -> Bool {
        let start =
            body.firstIndex { !($0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D) } ?? body.endIndex
        guard start < body.endIndex else { return false }
        if body[start] == UInt8(ascii: "{") {
            guard let error = try? RawJSON.parse(Array(body[start...]))["error"], error.members != nil,
                error["code"] != nil, let message = error["message"]
            else { return false }
            return message.string != nil || message["value"]?.string != nil
        }
        guard body[start] == UInt8(ascii: "<") else { return false }
        let text = String(decoding: body[start...].prefix(4096), as: UTF8.self)
        var rest = Substring(text)
        // The root element: after an XML declaration, comments and whitespace.
        while let open = rest.firstIndex(of: "<") {
            let after = rest[rest.index(after: open)...]
            if after.hasPrefix("?") || after.hasPrefix("!") {
                guard let close = after.firstIndex(of: ">") else { return false }
                rest = after[after.index(after: close)...]
                continue
            }
            let name = after.prefix { !($0 == " " || $0 == ">" || $0 == "/" || $0 == "\n" || $0 == "\t") }
            let local = name.split(separator: ":").last.map(String.init) ?? ""
            return local == "error"
                && (text.contains("http://docs.oasis-open.org/odata/ns/metadata")
                    || text.contains("http://schemas.microsoft.com/ado/2007/08/dataservices/metadata"))
        }
        return false
    }
}
