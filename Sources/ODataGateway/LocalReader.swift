import HTTPCore
import JSONCore
import ODataCore
import Storage

/// How a local response is written: version, V4 metadata level, `IEEE754Compatible`.
public struct ODataFormat: Sendable {
    /// V4 `odata.metadata` levels.
    public enum Metadata: String, Sendable {
        case minimal, full, none
    }
    /// The service version.
    public var version: ODataVersion
    /// V4 metadata level.
    public var metadata: Metadata = .minimal
    /// V4: Int64 and Decimal as strings.
    public var ieee754Compatible = false

    /// A format for `version`.
    public init(version: ODataVersion, metadata: Metadata = .minimal, ieee754Compatible: Bool = false) {
        self.version = version
        self.metadata = metadata
        self.ieee754Compatible = ieee754Compatible
    }
}

/// A read request answered from the mirror.
public struct LocalReadRequest: Sendable {
    /// Path relative to the service root, still percent-encoded (no leading `/`).
    public var path: String
    /// Raw query string (without `?`).
    public var query: String
    /// The gateway's service root URL as the client sees it (ends with `/`).
    public var serviceRoot: String
    /// Output format.
    public var format: ODataFormat
    /// Server-driven page size (config `pageSize` or `Prefer: odata.maxpagesize`, the smaller).
    public var pageSize: Int?
    /// The client asked for Atom/XML (`Accept` without JSON naming Atom or XML, or `$format=atom|xml`).
    public var atom = false

    /// Creates a request.
    public init(path: String, query: String, serviceRoot: String, format: ODataFormat, pageSize: Int?) {
        self.path = path
        self.query = query
        self.serviceRoot = serviceRoot
        self.format = format
        self.pageSize = pageSize
    }
}

/// A local answer: status, content type and body (headers such as `OData-Version` are added by the caller).
public struct LocalReadResponse: Sendable {
    /// HTTP status.
    public var status: Int
    /// Content type.
    public var contentType: String
    /// Body.
    public var body: [UInt8]
    /// The entity's ETag (single-entity answers).
    public var etag: String?

    init(status: Int, contentType: String, body: [UInt8], etag: String? = nil) {
        self.status = status
        self.contentType = contentType
        self.body = body
        self.etag = etag
    }
}

/// Skip tokens the gateway issues: `mg1.<offset>`; any other token is the upstream's.
public enum LocalSkipToken {
    /// Prefix of the gateway's own tokens.
    public static let prefix = "mg1."
    /// Whether `token` was issued by the gateway.
    public static func isLocal(_ token: String) -> Bool { token.hasPrefix(prefix) }
}

/// The local read path: answers OData reads from an ``ODataMirror`` — resource paths (entity sets, keys
/// incl. composite, navigation, `/$count`, properties and `$value`), `$filter`, `$orderby`, `$select`,
/// `$expand` (nested options), `$top`, `$skip`, `$count`/`$inlinecount`, server-driven paging with the
/// gateway's own `$skiptoken`, `$ref` (V4) and `$links` (V2) — in V4 JSON or V2 verbose JSON. A read is
/// planned by ``LocalQueryPlanner`` and written by ``ODataJSONSerializer``.
///
/// Navigation uses referential constraints when the model has them, otherwise the links `$expand` showed
/// in defining requests (``MirrorLinkNavigation``): a source entity whose links were downloaded answers
/// (empty when there were none); one whose links were never downloaded gives 501, as does a filter or
/// order through such a navigation while any row of the source set lacks its links.
///
/// Promises: it needs nothing but the mirror (no upstream, no thread of its own: it blocks its caller);
/// every value from the request reaches SQL as a bound parameter; results are ordered by the requested
/// `$orderby` then by key, so pages are stable; an upstream `$skiptoken` gives a 400 telling the client to
/// restart; unsupported constructs give 501, never a wrong answer.
public struct ODataLocalReader: Sendable {
    /// The mirror read.
    public let mirror: ODataMirror
    /// Where the service is mounted.
    public let mount: ODataMount
    /// The configured version (nil: the mirrored `$metadata`'s).
    public let configuredVersion: ODataVersion?
    /// Server-driven page size (`pageSize`), if any.
    public let pageSize: Int?

    /// A reader of `mirror` for a service mounted at `mount`.
    public init(mirror: ODataMirror, mount: ODataMount, version: ODataVersion? = nil, pageSize: Int? = nil) {
        self.mirror = mirror
        self.mount = mount
        self.configuredVersion = version
        self.pageSize = pageSize
    }

    /// The service's version (configured, else from the mirrored `$metadata`, else V4).
    public var version: ODataVersion { mirror.version(configured: configuredVersion) }

    /// The local answer to one read under the mount (an OData error response when it cannot be
    /// answered): format from `Accept`/`$format`, page size from `Prefer: odata.maxpagesize`.
    public func response(to request: HTTPRequest) -> HTTPResponse {
        let version = self.version
        let (path, query) = mount.relative(request)
        if let m = mirror.model, let parsed = try? ODataResourcePath.parse(path, model: m.model) {
            switch parsed.target {
            case .operationImport, .batch:
                return ODataServiceError.response(
                    503, code: "UpstreamUnavailable",
                    "the upstream is unreachable; function imports and actions are not answered offline",
                    version: version)
            default: break
            }
        }
        var format = ODataFormat(version: version)
        let accept = (request.headers["Accept"] ?? "") + ";" + (request.queryValue("$format") ?? "")
        let lower = accept.lowercased()
        if lower.contains("odata.metadata=full") {
            format.metadata = .full
        } else if lower.contains("odata.metadata=none") {
            format.metadata = .none
        }
        if lower.contains("ieee754compatible=true") { format.ieee754Compatible = true }
        var pageSize = self.pageSize
        var preferApplied: String?
        if let prefer = request.headers["Prefer"], let range = prefer.range(of: "odata.maxpagesize=") {
            let digits = prefer[range.upperBound...].prefix { $0.isNumber }
            if let n = Int(digits), n > 0 {
                pageSize = min(pageSize ?? n, n)
                preferApplied = "odata.maxpagesize=\(n)"
            }
        }
        var local = LocalReadRequest(
            path: path, query: query, serviceRoot: mount.gatewayRoot(for: request), format: format,
            pageSize: pageSize)
        local.atom = Self.wantsAtom(accept: request.headers["Accept"], format: request.queryValue("$format"))
        // A V4 client that also takes anything (`*/*`) gets JSON, as V4 services answer.
        if version == .v4, request.queryValue("$format") == nil,
            (request.headers["Accept"] ?? "").contains("*/*")
        {
            local.atom = false
        }
        do {
            let answer = try read(local)
            var headers = ODataVersionHeaders.response(version, for: .data)
            headers.set(
                "Content-Type",
                local.atom && request.queryValue("$format") == nil
                    ? Self.acceptedXMLType(answer.contentType, accept: request.headers["Accept"])
                    : answer.contentType)
            if let preferApplied { headers.set("Preference-Applied", preferApplied) }
            if let etag = answer.etag { headers.set("ETag", etag) }
            return HTTPResponse(
                status: answer.status, headers: headers,
                body: .bytes(request.method == "HEAD" ? [] : answer.body))
        } catch {
            return error.response(version: version)
        }
    }

    /// Answers one parsed read.
    public func read(_ request: LocalReadRequest) throws(ODataServiceError) -> LocalReadResponse {
        guard let m = mirror.model else {
            throw ODataServiceError(503, "NoMirror", "no $metadata mirrored yet")
        }
        let path: ODataResourcePath
        let options: ODataQueryOptions
        do {
            path = try ODataResourcePath.parse(request.path, model: m.model)
            options = try ODataQueryOptions.parse(rawQuery: request.query, version: m.version)
        } catch { throw ODataServiceError(error) }
        switch path.target {
        case .metadata, .count, .rawValue: break
        default:
            if request.atom {
                // V4 has no Atom format the gateway writes; V2 Atom is SAP Gateway's default format.
                if m.version == .v4 {
                    throw ODataServiceError(
                        406, "NotAcceptable", "only JSON is served for this OData V4 service")
                }
            }
            if !request.atom, let f = options.format?.lowercased(), !f.hasPrefix("json"),
                !f.hasPrefix("application/json")
            {
                throw ODataServiceError(501, "NotImplemented", "only $format=json is answered locally")
            }
        }
        try Self.refuseUnanswered(options)
        let serializer = ODataJSONSerializer(model: m, format: request.format, root: request.serviceRoot)
        do {
            return try mirror.pool.read { db throws(ODataServiceError) in
                var planner = LocalQueryPlanner(db: db, model: m, request: request)
                let result = try planner.plan(path: path, options: options)
                if request.atom,
                    let atom = ODataAtomSerializer(model: m, root: request.serviceRoot, path: request.path)
                        .render(result)
                {
                    return atom
                }
                return serializer.render(result)
            }
        } catch let e as ODataServiceError {
            throw e
        } catch {
            throw ODataServiceError(sqlFailure: error)
        }
    }

    /// Whether a client asks for Atom/XML: `$format=atom|xml`, or an `Accept` that names Atom or XML and
    /// not JSON (as SAP Gateway decides).
    static func wantsAtom(accept: String?, format: String?) -> Bool {
        if let f = format?.lowercased() {
            return f == "atom" || f == "xml" || f.hasPrefix("application/atom")
                || f.hasPrefix("application/xml")
        }
        let a = (accept ?? "").lowercased()
        return !a.contains("json") && (a.contains("atom") || a.contains("xml"))
    }

    /// An Atom answer's media type as the client accepts it: `application/atom+xml` or
    /// `application/atomsvc+xml` when `Accept` admits it (named, `application/*` or `*/*`), else
    /// `application/xml` (the same document), as V2 servers answer `Accept: application/xml`.
    static func acceptedXMLType(_ type: String, accept: String?) -> String {
        let base = type.split(separator: ";").first.map { String($0) } ?? type
        guard base == "application/atom+xml" || base == "application/atomsvc+xml" else { return type }
        let accepted = (accept ?? "").lowercased().split(separator: ",").map {
            String(($0.split(separator: ";").first ?? "").filter { $0 != " " && $0 != "\t" })
        }
        if accepted.contains(where: { $0 == base || $0 == "application/*" || $0 == "*/*" }) { return type }
        return accepted.contains("application/xml") ? "application/xml;charset=utf-8" : type
    }

    /// Query options the local read path does not evaluate: answered 501, never a 200 that silently
    /// ignores them (`$index`, a top-level `$levels`, `$apply` with `$expand`/`$select` or inside
    /// `$expand`, `$levels=max`, `Nav/$ref` and `Nav/$count` expansions).
    static func refuseUnanswered(_ options: ODataQueryOptions) throws(ODataServiceError) {
        func refuse(_ name: String) -> ODataServiceError {
            ODataServiceError(501, "NotImplemented", "\(name) is not answered locally")
        }
        if options.index != nil { throw refuse("$index") }
        if options.levels != nil { throw refuse("$levels outside $expand") }
        if options.apply != nil, options.expand != nil || options.select != nil {
            throw refuse("$expand or $select with $apply")
        }
        func check(_ items: [ODataExpandItem]) throws(ODataServiceError) {
            for item in items {
                if item.apply != nil { throw refuse("$apply in $expand") }
                if item.levels == Int.max { throw refuse("$levels=max") }
                if item.isRef { throw refuse("$expand=\(item.path.joined(separator: "/"))/$ref") }
                if item.isCount { throw refuse("$expand=\(item.path.joined(separator: "/"))/$count") }
                try check(item.expand ?? [])
            }
        }
        try check(options.expand ?? [])
    }
}
