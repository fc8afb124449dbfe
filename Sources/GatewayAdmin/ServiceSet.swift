import AlgoliaGateway
import GatewayConfig
import ODataGateway

/// What a reload replaces at once: the configuration in force and the services built from it. A request
/// reads one snapshot when it arrives and keeps it to the end, so a reload never changes the rules under
/// a request already routed.
public struct ServiceSet: Sendable {
    /// The configuration in force (restart-only keys keep the values the gateway started with).
    public let configuration: MirrorgateConfiguration
    /// The Algolia service.
    public let algolia: AlgoliaService
    /// OData services, longest mount first (so that nested mounts route to the most specific one).
    public let odata: [ODataService]
    /// `server.cors.allowOrigins` as a set.
    public let allowedOrigins: Set<String>

    /// The set of `configuration`'s services.
    public init(configuration: MirrorgateConfiguration, algolia: AlgoliaService, odata: [ODataService]) {
        self.configuration = configuration
        self.algolia = algolia
        self.odata = odata.sorted { $0.settings.mount.count > $1.settings.mount.count }
        self.allowedOrigins = Set(configuration.server.cors.allowOrigins)
    }
}
