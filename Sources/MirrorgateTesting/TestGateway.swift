import Foundation
import GatewayConfig
import HTTPCore
import JSONCore
import Logging
import Mirrorgate
import Upstream

/// The whole gateway in the test's process, on an ephemeral loopback port, with its data directory in a
/// ``TemporaryDirectory``: the same assembly `mirrorgate serve` runs (server, router, services), driven
/// with ``send(_:)`` over real loopback HTTP. Upstreams are in-process fakes (``FakeAlgoliaServer``) or
/// unreachable ones. Stop it with ``stop()``.
public final class TestGateway: Sendable {
    /// The running gateway.
    public let gateway: Gateway
    private let client: UpstreamClient

    /// Starts a gateway for `configuration` (its listen port is replaced by 0).
    public init(configuration: MirrorgateConfiguration, logger: Logger = Logger(label: "test-gateway")) throws
    {
        var configuration = configuration
        configuration.server.listen = ListenAddress(host: "127.0.0.1", port: 0)
        UpstreamClient.globalInit()
        gateway = try Gateway(configuration: configuration, logger: logger)
        client = UpstreamClient()
    }

    /// `http://127.0.0.1:PORT`.
    public var url: String { "http://127.0.0.1:\(gateway.port)" }

    /// Sends `request` to the gateway and returns its answer (a streamed answer is read whole).
    public func send(_ request: HTTPRequest, timeout: Duration = .seconds(10)) throws -> UpstreamResponse {
        var upstream = UpstreamRequest(
            method: request.method, url: url + request.target,
            headers: request.headers.map { (name: $0.name, value: $0.value) }, body: request.body,
            timeout: timeout)
        upstream.idempotent = true
        return try client.perform(upstream)
    }

    /// Stops the gateway (a short grace).
    public func stop() { gateway.shutdown() }
}

extension UpstreamResponse {
    /// The body parsed as JSON (nil when it is not JSON).
    public var json: JSON? { try? JSON.parse(body) }
}
