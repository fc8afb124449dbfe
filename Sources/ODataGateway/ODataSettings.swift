import GatewayConfig
import HTTPCore
import Proxying
import Storage

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

extension ODataServiceSettings {
    /// The mount as a value that splits requests.
    public var mountPoint: ODataMount { ODataMount(mount) }

    /// The upstream URL for a request target under the mount (with `urlSuffix`). A parameter the
    /// client's own query already names (say `sap-client=200`) is not appended again from the suffix:
    /// the upstream answers the client what it asked for, never the suffix's client's data instead.
    public func upstreamURL(for target: String) -> String {
        var rest = Substring(target)
        if rest.hasPrefix(mount) {
            rest = rest.dropFirst(mount.count)
        } else if rest == mount.dropLast() || rest.hasPrefix(mount.dropLast() + "?") {
            rest = rest.dropFirst(mount.count - 1)
        }
        let url = upstream + rest
        guard let suffix = urlSuffix, let q = url.firstIndex(of: "?") else { return withSuffix(url) }
        let named = Set(url[url.index(after: q)...].split(separator: "&").map { name(of: $0) })
        let kept = suffix.split(separator: "&").filter { !named.contains(name(of: $0)) }
        return kept.isEmpty ? url : url + "&" + kept.joined(separator: "&")
    }

    /// The lowercased name of one `name=value` query parameter.
    private func name(of parameter: Substring) -> String {
        String(parameter.prefix { $0 != "=" }).lowercased()
    }

    /// `url` with `urlSuffix` appended to its query.
    func withSuffix(_ url: String) -> String {
        guard let suffix = urlSuffix, !suffix.isEmpty else { return url }
        return url + (url.contains("?") ? "&" : "?") + suffix
    }

    /// The URL map for a request (gateway origin from its `Host`).
    public func urlMap(for request: HTTPRequest) -> ODataURLMap {
        ODataURLMap(gatewayRoot: mountPoint.gatewayRoot(for: request), upstreamRoot: upstream)
    }

    /// `customHeaders`, then `customCookies` as one `Cookie` header.
    var customFields: [(name: String, value: String)] {
        customHeaders.map { (name: $0.0, value: $0.1) }
            + (customCookie.map { [(name: "Cookie", value: $0)] } ?? [])
    }

    /// `customCookies` as the value of one `Cookie` header; nil when there are none.
    var customCookie: String? {
        customCookies.isEmpty ? nil : customCookies.map { "\($0.0)=\($0.1)" }.joined(separator: "; ")
    }
}

/// Where a service is mounted (its local service root path, starting and ending with `/`) and how a
/// request's target splits under it.
public struct ODataMount: Sendable, Hashable {
    /// `/odata/demo/`.
    public let path: String

    /// A mount at `path` (a missing trailing `/` is added).
    public init(_ path: String) { self.path = path.hasSuffix("/") ? path : path + "/" }

    /// The path under the mount (percent-encoded, no leading `/`) and the raw query of `request`.
    public func relative(_ request: HTTPRequest) -> (path: String, query: String) {
        var rest = Substring(request.path)
        if rest.hasPrefix(path) { rest = rest.dropFirst(path.count) } else { rest = "" }
        return (String(rest), request.query.map(String.init) ?? "")
    }

    /// The service root as the client addressed it, e.g. `http://127.0.0.1:8080/odata/demo/` (the origin
    /// from the request's `Host`).
    ///
    /// The `Host` is used only when it is strictly a host name (letters, digits, `-`, dots), an IPv4
    /// address or a bracketed IPv6 address, with an optional port; anything else (the HTTP server lets
    /// every RFC 3986 `reg-name` through, such as `a'b` or `x%22`) gives `127.0.0.1`, so that no client
    /// text reaches `@odata.context`, `__metadata` URIs or `Location` beyond a plain authority.
    public func gatewayRoot(for request: HTTPRequest) -> String {
        let host = request.headers["Host"].flatMap { Self.isPlainAuthority($0) ? $0 : nil } ?? "127.0.0.1"
        return "http://\(host)\(path)"
    }

    /// Whether `text` is `name[:port]` with a DNS-style name or IPv4 address, or `[v6][:port]`.
    static func isPlainAuthority(_ text: String) -> Bool {
        var host = Substring(text)
        var port: Substring?
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { return false }
            let literal = host[host.index(after: host.startIndex)..<close]
            guard !literal.isEmpty, literal.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }) else {
                return false
            }
            let rest = host[host.index(after: close)...]
            if !rest.isEmpty {
                guard rest.hasPrefix(":") else { return false }
                port = rest.dropFirst()
            }
            host = ""
        } else if let colon = host.firstIndex(of: ":") {
            port = host[host.index(after: colon)...]
            host = host[..<colon]
        }
        if let port {
            guard !port.isEmpty, port.count <= 5, port.allSatisfy(\.isASCII), port.allSatisfy(\.isNumber),
                let n = Int(port), n > 0, n < 65536
            else { return false }
        }
        if host.isEmpty { return text.hasPrefix("[") }
        guard host.count <= 253 else { return false }
        return host.split(separator: ".", omittingEmptySubsequences: false).allSatisfy { label in
            !label.isEmpty && label.count <= 63 && !label.hasPrefix("-") && !label.hasSuffix("-")
                && label.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }
        }
    }
}

/// What an ``ODataService`` mirrors and how it routes reads (mapped from `odata.services.NAME`).
public struct ODataMirrorSettings: Sendable {
    /// One defining request: a name and a query relative to the service root.
    public struct DefiningRequest: Sendable {
        /// Unique name.
        public var name: String
        /// Relative read URL, e.g. `Customers?$filter=Country eq 'Germany'`.
        public var query: String
        /// Creates one.
        public init(name: String, query: String) {
            self.name = name
            self.query = query
        }
    }
    /// `routing: localFirst`: reads are always answered from the mirror.
    public var localFirst: Bool
    /// The defining requests.
    public var definingRequests: [DefiningRequest]
    /// Server-driven page size of local responses.
    public var pageSize: Int?
    /// `bootstrap.metadata` file.
    public var bootstrapMetadata: String?
    /// `bootstrap.data`: entity set → JSON file.
    public var bootstrapData: [String: String]
    /// Path of the mirror file.
    public var databasePath: String
    /// `storeEncryptionKey`: encrypts the mirror file (mirror, queue, archive, queued credentials).
    public var storeEncryption: StoreEncryption?
    /// `enableRepeatableRequests`: uploaded modifications carry repeatability headers.
    public var enableRepeatableRequests = true
    /// `repeatabilityHeaders`: OASIS, SAP or both header names.
    public var repeatabilityHeaders: RepeatabilityHeaders = .both
    /// `upstreamSupportsRepeatability`: whether a request in doubt may be re-sent with the same
    /// repeatability headers (`auto`: once a `Repeatability-Result` header was seen).
    public var upstreamSupportsRepeatability: RepeatabilitySupport = .auto
    /// `uploadIfMatch`: the If-Match an uploaded write gets when its client sent none.
    public var uploadIfMatch: UploadIfMatch = .mirror
    /// `uploadCredentials`: `client` replays the writer's Authorization, `service` sends only the
    /// service's custom headers and cookies.
    public var uploadCredentials: UploadCredentials = .client
    /// `enableIndividualErrorArchiveDeletion`: deleting an ErrorArchive entry reverts only it and the
    /// requests depending on it (else every entry and every held request).
    public var enableIndividualErrorArchiveDeletion = false
    /// `enableRequestQueueOptimization`: before an upload, requests of one entity are combined (SAP's
    /// request-queue optimisation; see ``ODataQueuePlanner``).
    public var enableRequestQueueOptimization = false
    /// `enableUndoLocalCreation`: before an upload, the delete of an entity created locally and not yet
    /// uploaded removes its requests (unless an entity of the upstream would change).
    public var enableUndoLocalCreation = false
    /// `enableTransactionBuilder`: before an upload, requests with the same `OfflineOData.TransactionID`
    /// are grouped into changesets.
    public var enableTransactionBuilder = false

    /// Creates settings.
    public init(
        localFirst: Bool, definingRequests: [DefiningRequest], pageSize: Int?, bootstrapMetadata: String?,
        bootstrapData: [String: String], databasePath: String
    ) {
        self.localFirst = localFirst
        self.definingRequests = definingRequests
        self.pageSize = pageSize
        self.bootstrapMetadata = bootstrapMetadata
        self.bootstrapData = bootstrapData
        self.databasePath = databasePath
    }
}
