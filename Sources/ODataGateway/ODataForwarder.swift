import GatewaySupport
import HTTPCore
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

    /// Forwards `request` without blocking; answers through `responder` in every case, except that when
    /// the upstream cannot be reached at all and `fallback` returns true, `fallback` has taken over the
    /// answer. `timeout` (the service's `timeout` when nil) bounds the whole transfer: a caller that spent
    /// part of its budget already (a forwarded write's CSRF fetch) passes what remains. With
    /// `onServerError`, an upstream answer of 5xx or `429` is held from the client and offered to it (a
    /// read that the mirror can answer instead); when it returns false the held answer is relayed.
    public func forward(
        _ request: HTTPRequest, _ responder: any Responder,
        fallback: (@Sendable (UpstreamError) -> Bool)? = nil, timeout: Duration? = nil,
        onServerError: (@Sendable (Int) -> Bool)? = nil
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
        options.holdServerErrors = onServerError != nil
        options.holdRateLimited = onServerError != nil
        options.transform = { map.toGateway.apply($0) }
        options.makeStreamTransform = { map.toGateway }
        let sink = RelayTransfer(responder: responder, options: options) { [self] outcome in
            switch outcome {
            case .relayed:
                reachability.reportSuccess()
            case .serverError(let status, let headers, let body):
                reachability.reportSuccess()
                if let onServerError, onServerError(status) { return }
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
