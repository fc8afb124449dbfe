import HTTPServer
import JSONCore
import Logging
import Proxying
import Upstream

/// One Algolia host and the calls it accepts.
public struct AlgoliaHost: Sendable, Hashable {
    /// What a host accepts.
    public enum Accept: String, Sendable { case read, write, readWrite }
    /// Base URL, e.g. `https://APPID-dsn.algolia.net` or `http://127.0.0.1:8081`.
    public var url: String
    /// Which calls go to it.
    public var accept: Accept

    /// Creates a host.
    public init(url: String, accept: Accept = .readWrite) {
        var u = url
        while u.hasSuffix("/") { u.removeLast() }
        self.url = u
        self.accept = accept
    }
}

/// Settings of the forwarder (mapped from `algolia.*` in the configuration).
public struct AlgoliaForwardingSettings: Sendable {
    /// Hosts in the order they are tried.
    public var hosts: [AlgoliaHost]
    /// Connect budget per host attempt.
    public var connectTimeout: Duration
    /// Whole budget of one read across all hosts.
    public var readTimeout: Duration
    /// Whole budget of one write across all hosts.
    public var writeTimeout: Duration
    /// Status answered when no host answers (a 4xx: official clients shun a host after any 5xx).
    public var unavailableStatus: Int

    /// Creates settings.
    public init(
        hosts: [AlgoliaHost], connectTimeout: Duration = .seconds(1),
        readTimeout: Duration = .milliseconds(2500),
        writeTimeout: Duration = .seconds(25), unavailableStatus: Int = 424
    ) {
        self.hosts = hosts
        self.connectTimeout = connectTimeout
        self.readTimeout = readTimeout
        self.writeTimeout = writeTimeout
        self.unavailableStatus = unavailableStatus
    }
}

/// Algolia's error body, `{"message": …, "status": N}`.
public enum AlgoliaError {
    /// An error response in Algolia's format.
    public static func response(_ status: Int, _ message: String) -> HTTPResponse {
        .json(status, #"{"message":\#(JSON.string(message).serialized()),"status":\#(status)}"#)
    }
}

/// Forwards requests under `/1/` to the Algolia hosts unchanged: reads to read hosts, writes to write
/// hosts, tried in order on transient failures within one whole budget per request. Never answers a
/// 5xx: when no host answers, or every host answered 5xx, the answer is `unavailableStatus` with
/// Algolia's error body.
public final class AlgoliaForwarder: Sendable {
    /// The settings in force.
    public let settings: AlgoliaForwardingSettings
    /// Tracks whether any host answers.
    public let reachability: ReachabilityTracker
    private let client: UpstreamClient
    private let logger: Logger
    private let relay = Relay()

    /// Creates a forwarder with its own reachability tracker (probing `GET /1/isalive` on the first host).
    public init(settings: AlgoliaForwardingSettings, client: UpstreamClient, logger: Logger) {
        self.settings = settings
        self.client = client
        self.logger = logger
        let probeHosts = settings.hosts
        let connectTimeout = settings.connectTimeout
        self.reachability = ReachabilityTracker(name: "algolia", logger: logger) {
            for host in probeHosts {
                let request = UpstreamRequest(
                    method: "GET", url: host.url + "/1/isalive", connectTimeout: connectTimeout,
                    timeout: connectTimeout + .seconds(1))
                if (try? client.perform(request)) != nil { return true }
            }
            return false
        }
    }

    /// Whether Algolia's clients treat this call as a read (read hosts, read timeout).
    public static func isRead(method: String, path: Substring) -> Bool {
        if method == "GET" { return true }
        guard method == "POST" else { return false }
        return path.hasSuffix("/query") || path.hasSuffix("/queries") || path.hasSuffix("/browse")
            || path == "/1/indexes/*/objects" || path.hasSuffix("/synonyms/search")
            || path.hasSuffix("/rules/search")
    }

    /// Forwards `request`; answers through `responder` in every case.
    public func forward(
        _ request: HTTPRequest, _ responder: any Responder, extraHeaders: [(String, String)] = []
    ) {
        let read = Self.isRead(method: request.method, path: request.path)
        let hosts = settings.hosts.filter { read ? $0.accept != .write : $0.accept != .read }
        let budget = read ? settings.readTimeout : settings.writeTimeout
        let deadline = ContinuousClock.now + budget
        var headers = HopByHop.requestHeaders(request.headers, dropping: ["x-mirrorgate-strategy"])
        headers.append(contentsOf: extraHeaders.map { (name: $0.0, value: $0.1) })
        var lastProblem = "no Algolia host configured"
        var sawAnswer = false
        for host in hosts {
            let remaining = deadline - ContinuousClock.now
            if remaining <= .milliseconds(1) {
                lastProblem = "budget of \(budget) exhausted"
                break
            }
            let upstream = UpstreamRequest(
                method: request.method, url: host.url + request.target, headers: headers, body: request.body,
                connectTimeout: min(settings.connectTimeout, remaining), timeout: remaining)
            switch relay.run(upstream, client: client, responder: responder, holdServerErrors: true) {
            case .relayed:
                reachability.reportSuccess()
                return
            case .brokenAfterStart(let error):
                logger.warning(
                    "algolia host broke mid-response", metadata: ["host": "\(host.url)", "error": "\(error)"])
                return
            case .serverError(let status, _, _):
                sawAnswer = true
                lastProblem = "host \(host.url) answered \(status)"
            case .failed(let error):
                if error.kind == .cancelled { return }
                lastProblem = "host \(host.url): \(error)"
            }
        }
        if !sawAnswer && !hosts.isEmpty {
            reachability.reportFailure(lastProblem)
        }
        responder.respond(
            AlgoliaError.response(settings.unavailableStatus, "upstream unavailable: \(lastProblem)"))
    }
}
