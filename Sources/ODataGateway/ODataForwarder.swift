import GatewaySupport
import HTTPCore
import JSONCore
import Logging
import ODataCore
import Proxying
import Synchronization
import Upstream

/// OData version of a service (ODataCore's), re-exported for the assembly.
public typealias ODataVersion = ODataCore.ODataVersion

/// An error of an OData service in its version's JSON format (and version header).
public struct ODataError: GatewayError, Sendable {
    /// The HTTP status.
    public var status: Int
    /// The OData error code.
    public var code: String
    /// The message for the client.
    public var message: String
    /// The version whose format the body takes.
    public var version: ODataVersion

    /// An error with its status, code, message and version.
    public init(_ status: Int, code: String, _ message: String, version: ODataVersion) {
        self.status = status
        self.code = code
        self.message = message
        self.version = version
    }

    /// The error as a response.
    public func response() -> HTTPResponse { Self.response(status, code: code, message, version: version) }

    /// V4 `{"error":{"code","message"}}` or V2 `{"error":{"code","message":{"lang","value"}}}`.
    public static func response(_ status: Int, code: String, _ message: String, version: ODataVersion)
        -> HTTPResponse
    {
        let body: String
        switch version {
        case .v4:
            body =
                #"{"error":{"code":\#(JSON.string(code).serialized()),"message":\#(JSON.string(message).serialized())}}"#
        case .v2:
            body =
                #"{"error":{"code":\#(JSON.string(code).serialized()),"message":{"lang":"en","value":\#(JSON.string(message).serialized())}}}"#
        }
        var r = HTTPResponse.json(status, body)
        if version == .v4 {
            r.headers.set("OData-Version", "4.0")
        } else {
            r.headers.set("DataServiceVersion", "1.0")
        }
        return r
    }
}

/// Settings of one OData service's forwarding (mapped from `odata.services.NAME`).
public struct ODataServiceSettings: Sendable {
    /// Service name.
    public var name: String
    /// Local service root, starting and ending with `/`.
    public var mount: String
    /// Upstream service root URL (ending with `/`).
    public var upstream: String
    /// Version when known (auto-detection happens later); errors use V4 format when nil.
    public var version: ODataVersion?
    /// Sent with every upstream request.
    public var customHeaders: [(String, String)]
    /// Sent as a `Cookie` header with every upstream request.
    public var customCookies: [(String, String)]
    /// Appended to every upstream URL's query (e.g. `sap-client=100`).
    public var urlSuffix: String?
    /// Budget of one upstream call.
    public var timeout: Duration
    /// Connect budget.
    public var connectTimeout: Duration

    /// Creates settings; `mount` and `upstream` are normalised to end with `/`.
    public init(
        name: String, mount: String, upstream: String, version: ODataVersion? = nil,
        customHeaders: [(String, String)] = [], customCookies: [(String, String)] = [],
        urlSuffix: String? = nil,
        timeout: Duration = .seconds(30), connectTimeout: Duration = .seconds(2)
    ) {
        self.name = name
        self.mount = mount.hasSuffix("/") ? mount : mount + "/"
        self.upstream = upstream.hasSuffix("/") ? upstream : upstream + "/"
        self.version = version
        self.customHeaders = customHeaders
        self.customCookies = customCookies
        self.urlSuffix = urlSuffix
        self.timeout = timeout
        self.connectTimeout = connectTimeout
    }
}

/// The two-way URL map between a gateway mount and an upstream service root.
public struct ODataURLMap: Sendable {
    /// Local service root as clients see it, e.g. `http://127.0.0.1:8080/odata/demo/`.
    public let gatewayRoot: String
    /// Upstream service root, e.g. `http://127.0.0.1:9000/svc/`.
    public let upstreamRoot: String

    /// Creates the map for one request (the gateway's origin comes from the request's `Host`).
    public init(gatewayRoot: String, upstreamRoot: String) {
        self.gatewayRoot = gatewayRoot
        self.upstreamRoot = upstreamRoot
    }

    private static func pairs(_ from: String, _ to: String) -> [(String, String)] {
        var result = [(from, to)]
        let escapedFrom = from.replacingOccurrences(of: "/", with: "\\/")
        if escapedFrom != from { result.append((escapedFrom, to.replacingOccurrences(of: "/", with: "\\/"))) }
        // The root without its trailing slash (e.g. `…/svc/$metadata` is covered; `…/svc"` is not).
        if from.hasSuffix("/") {
            result.append((String(from.dropLast()) + "\"", String(to.dropLast()) + "\""))
        }
        return result
    }

    /// Rewrites gateway URLs to upstream URLs (request bodies).
    public var toUpstream: Rewriter { Rewriter(Self.pairs(gatewayRoot, upstreamRoot)) }
    /// Rewrites upstream URLs to gateway URLs (response bodies and headers).
    public var toGateway: Rewriter { Rewriter(Self.pairs(upstreamRoot, gatewayRoot)) }

    /// Maps one header value (Location, OData-EntityId, Content-Location) to the gateway.
    public func headerToGateway(_ value: String) -> String {
        value.hasPrefix(upstreamRoot) ? gatewayRoot + value.dropFirst(upstreamRoot.count) : value
    }
}

/// Forwards requests under an OData service's mount to its upstream through the two-way URL map:
/// paths and gateway URLs in request bodies go to the upstream; absolute upstream URLs in response
/// headers and bodies come back as gateway URLs. An unreachable upstream gets 502 (refused) or 504
/// (timeout) with an OData error body.
public final class ODataForwarder: Sendable {
    /// The service's settings.
    public let settings: ODataServiceSettings
    /// Tracks whether the upstream answers.
    public let reachability: ReachabilityTracker
    private let loop: CurlLoop
    private let logger: Logger
    private let local = Mutex<ODataService?>(nil)

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

    /// The upstream URL for a request target under the mount.
    public func upstreamURL(for target: String) -> String {
        var rest = Substring(target)
        if rest.hasPrefix(settings.mount) {
            rest = rest.dropFirst(settings.mount.count)
        } else if rest == settings.mount.dropLast() || rest.hasPrefix(settings.mount.dropLast() + "?") {
            rest = rest.dropFirst(settings.mount.count - 1)
        }
        var url = settings.upstream + rest
        if let suffix = settings.urlSuffix, !suffix.isEmpty {
            url += (url.contains("?") ? "&" : "?") + suffix
        }
        return url
    }

    /// The URL map for a request (gateway origin from its `Host`).
    public func urlMap(for request: HTTPRequest) -> ODataURLMap {
        let host = request.headers["Host"] ?? "127.0.0.1"
        return ODataURLMap(gatewayRoot: "http://\(host)\(settings.mount)", upstreamRoot: settings.upstream)
    }

    /// Attaches the service that answers reads locally (mirror, routing); without one, everything is
    /// forwarded.
    public func attach(_ service: ODataService) { local.withLock { $0 = service } }

    /// The attached service, if any.
    public var service: ODataService? { local.withLock { $0 } }

    /// Routes one request under the mount without blocking: through the attached ``ODataService`` when
    /// there is one, else forwarded.
    public func handle(_ request: HTTPRequest, _ responder: any Responder) {
        if let service { service.handle(request, responder) } else { forward(request, responder) }
    }

    /// Forwards `request` without blocking; answers through `responder` in every case, except that when
    /// the upstream cannot be reached at all and `fallback` returns true, `fallback` has taken over the
    /// answer.
    public func forward(
        _ request: HTTPRequest, _ responder: any Responder,
        fallback: (@Sendable (UpstreamError) -> Bool)? = nil
    ) {
        let map = urlMap(for: request)
        var headers = HopByHop.requestHeaders(request.headers, dropping: ["accept-encoding"])
        headers.append((name: "Accept-Encoding", value: "identity"))
        for (name, value) in settings.customHeaders { headers.append((name: name, value: value)) }
        if !settings.customCookies.isEmpty {
            let cookie = settings.customCookies.map { "\($0.0)=\($0.1)" }.joined(separator: "; ")
            headers.append((name: "Cookie", value: cookie))
        }
        var body = request.body
        if !body.isEmpty { body = map.toUpstream.apply(body) }
        let upstream = UpstreamRequest(
            method: request.method, url: upstreamURL(for: request.target), headers: headers, body: body,
            connectTimeout: settings.connectTimeout, timeout: settings.timeout)
        var options = RelayTransfer.Options()
        options.streamTimeout = settings.timeout + .seconds(1)
        options.adjustHeaders = { h in
            for name in ["Location", "Content-Location", "OData-EntityId"] {
                if let v = h[name] { h.set(name, map.headerToGateway(v)) }
            }
        }
        options.transform = { map.toGateway.apply($0) }
        options.makeStreamTransform = { map.toGateway }
        let sink = RelayTransfer(responder: responder, options: options) { [self] outcome in
            switch outcome {
            case .relayed, .serverError:
                reachability.reportSuccess()
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
                    ODataError.response(
                        status, code: status == 504 ? "UpstreamTimeout" : "UpstreamUnavailable",
                        "upstream unavailable: \(error)", version: settings.version ?? .v4))
            }
        }
        loop.submit(upstream, sink)
    }
}
