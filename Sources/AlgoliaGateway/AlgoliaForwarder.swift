import GatewayConfig
import GatewaySupport
import HTTPCore
import JSONCore
import Logging
import Proxying
import Upstream

/// Settings of the forwarder (mapped from `algolia.*` in the configuration).
public struct AlgoliaForwardingSettings: Sendable, Equatable {
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

/// Forwards requests under `/1/` to the Algolia hosts unchanged: reads to read hosts, writes to write
/// hosts, tried in order on transient failures within one whole budget per request. Never answers a
/// 5xx: when no host answers, or every host answered 5xx, the answer is `unavailableStatus` with
/// Algolia's error body.
public final class AlgoliaForwarder: AlgoliaUpstream {
    /// The settings in force.
    public let settings: AlgoliaForwardingSettings
    /// Tracks whether any host answers.
    public let reachability: ReachabilityTracker
    private let loop: CurlLoop
    private let logger: Logger

    /// Creates a forwarder with its own reachability tracker (probing `GET /1/isalive` on each host).
    /// Transfers run on `loop`; the blocking `client` serves only the background probe.
    public init(settings: AlgoliaForwardingSettings, loop: CurlLoop, client: UpstreamClient, logger: Logger) {
        self.settings = settings
        self.loop = loop
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

    /// The largest answer held whole with ``ForwardHooks/wholeAnswer`` (a larger one is streamed as it
    /// comes): 32 MiB, far above a search answer's usual size.
    public static let wholeAnswerLimit = 32 << 20

    /// Whether Algolia's clients treat this call as a read (read hosts, read timeout).
    public static func isRead(method: String, path: Substring) -> Bool {
        if method == "GET" { return true }
        guard method == "POST" else { return false }
        return path.hasSuffix("/query") || path.hasSuffix("/queries") || path.hasSuffix("/browse")
            || path == "/1/indexes/*/objects" || path.hasSuffix("/synonyms/search")
            || path.hasSuffix("/rules/search")
    }

    /// Forwards `request` without blocking; answers through `responder` in every case (or calls
    /// `hooks.onUnavailable`).
    public func forward(
        _ request: HTTPRequest, _ responder: any Responder, hooks: ForwardHooks = ForwardHooks()
    ) {
        let read = Self.isRead(method: request.method, path: request.path)
        let hosts = settings.hosts.filter { read ? $0.accept != .write : $0.accept != .read }
        let budget = read ? settings.readTimeout : settings.writeTimeout
        var dropping: Set<String> = ["x-mirrorgate-strategy"]
        if hooks.tagBody { dropping.insert("accept-encoding") }
        var headers = HopByHop.requestHeaders(request.headers, dropping: dropping)
        if hooks.tagBody { headers.append((name: "Accept-Encoding", value: "identity")) }
        let attempt = Attempt(
            forwarder: self, request: request, responder: responder, hosts: hosts, headers: headers,
            budget: budget, deadline: ContinuousClock.now + budget, hooks: hooks)
        attempt.next()
    }

    /// One request's walk over the hosts, advanced from the loop thread as each try ends.
    final class Attempt: @unchecked Sendable {
        let forwarder: AlgoliaForwarder
        let request: HTTPRequest
        let responder: any Responder
        let hosts: [AlgoliaHost]
        let headers: [(name: String, value: String)]
        let budget: Duration
        let deadline: ContinuousClock.Instant
        var index = 0
        var lastProblem = "no Algolia host configured"
        var sawAnswer = false
        /// Some try may have reached a host (bytes written, no complete answer).
        var inDoubt = false
        let hooks: ForwardHooks

        init(
            forwarder: AlgoliaForwarder, request: HTTPRequest, responder: any Responder, hosts: [AlgoliaHost],
            headers: [(name: String, value: String)], budget: Duration, deadline: ContinuousClock.Instant,
            hooks: ForwardHooks
        ) {
            self.hooks = hooks
            self.forwarder = forwarder
            self.request = request
            self.responder = responder
            self.hosts = hosts
            self.headers = headers
            self.budget = budget
            self.deadline = deadline
        }

        func next() {
            let settings = forwarder.settings
            guard index < hosts.count else { return giveUp() }
            let remaining = deadline - ContinuousClock.now
            if remaining <= .milliseconds(1) {
                lastProblem = "budget of \(budget) exhausted"
                return giveUp()
            }
            let host = hosts[index]
            index += 1
            var upstream = UpstreamRequest(
                method: request.method, url: host.url + request.target, headers: headers, body: request.body,
                connectTimeout: min(settings.connectTimeout, remaining), timeout: remaining)
            upstream.idempotent =
                upstream.idempotent || AlgoliaForwarder.isRead(method: request.method, path: request.path)
            var options = RelayTransfer.Options()
            options.holdServerErrors = true
            // With a local fallback, a 429 is a transient failure like a 5xx (SPEC §3); without one it is
            // relayed, and the client's own retries honour its Retry-After.
            options.holdRateLimited = hooks.onUnavailable != nil
            options.streamTimeout = remaining + .seconds(1)
            options.isCancelled = hooks.isCancelled
            if hooks.originHeader {
                options.adjustHeaders = { $0.set(MirrorgateHeader.origin, "remote") }
            }
            if hooks.wholeAnswer {
                options.bufferLimit = AlgoliaForwarder.wholeAnswerLimit
                options.streamAfter = .seconds(86400)
            }
            if hooks.tagBody {
                options.transformIf = { status in (200..<300).contains(status) }
                if hooks.tagResults {
                    // Per-result tags need the whole body (multi-query answers are small).
                    options.bufferLimit = max(options.bufferLimit, 16 << 20)
                    options.streamAfter = .seconds(86400)
                    options.transform = { OriginTag.tagResults($0) }
                } else {
                    options.transform = { OriginTag.tag($0) }
                    options.makeStreamTransform = { OriginTag.Streaming() }
                }
            }
            let sink = RelayTransfer(responder: responder, options: options) { outcome in
                switch outcome {
                case .relayed(let status):
                    self.forwarder.reachability.reportSuccess()
                    self.hooks.onRelayed?(status)
                case .brokenAfterStart(let error):
                    self.inDoubt = true
                    self.forwarder.logger.warning(
                        "algolia host broke mid-response",
                        metadata: ["host": "\(host.url)", "error": "\(error)"])
                case .serverError(let status, _, _):
                    self.sawAnswer = true
                    self.lastProblem = "host \(host.url) answered \(status)"
                    self.next()
                case .failed(let error):
                    if error.kind == .cancelled { return }
                    if error.delivery == .inDoubt { self.inDoubt = true }
                    self.lastProblem = "host \(host.url): \(error)"
                    self.next()
                }
            }
            forwarder.loop.submit(upstream, sink)
        }

        func giveUp() {
            if !sawAnswer && !hosts.isEmpty {
                forwarder.reachability.reportFailure(lastProblem)
            }
            if !sawAnswer && !inDoubt, let notSent = hooks.onNotSent {
                notSent()
                return
            }
            if let fallback = hooks.onUnavailable {
                fallback()
                return
            }
            var message = "upstream unavailable: \(lastProblem)"
            if inDoubt && !AlgoliaForwarder.isRead(method: request.method, path: request.path) {
                message += " (the request may have reached the upstream: its outcome is unknown)"
            }
            responder.respond(AlgoliaError.response(forwarder.settings.unavailableStatus, message))
        }
    }
}
