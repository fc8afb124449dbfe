import GatewayConfig
import SearchEngine

/// One index answered locally and who may read it.
public struct LocalIndex: Sendable {
    /// Who may read an index answered locally.
    public enum Access: Sendable, Equatable {
        /// An offline index: the listed keys with their ACLs (`algolia.offlineIndices.NAME.apiKeys`), any
        /// key with every ACL when nil.
        case keys([String: Set<AlgoliaACL>]?)
        /// A mirrored index: the gateway's own sync key (`algolia.apiKey`) and the keys the upstream has
        /// accepted for this index before (``KeyMemory``), with the configured application ID.
        case upstreamAccepted
        /// A replica of the mirrored index named here: the same rules as its primary, with the keys the
        /// upstream accepted for the replica or for the primary (the replica holds the primary's records).
        case replicaOf(String)
    }

    /// The engine's index; nil when a mirrored index has no offline data yet.
    public let index: SearchIndex?
    /// Who may read it.
    public let access: Access

    /// Creates an entry.
    public init(index: SearchIndex?, access: Access) {
        self.index = index
        self.access = access
    }
}

/// Every index the gateway can answer locally, by name: the offline indices, then the mirrored ones (an
/// offline index shadows a mirrored index of the same name).
public struct LocalCatalog: Sendable {
    /// The purely local indices.
    public let offline: OfflineIndexRegistry
    /// The mirrored indices, whose current version answers.
    public let mirrors: [String: MirroredIndex]

    /// Creates a catalog.
    public init(offline: OfflineIndexRegistry, mirrors: [String: MirroredIndex]) {
        self.offline = offline
        self.mirrors = mirrors
    }

    /// The index named `name`, if it is answered locally (an offline index, a mirrored index, or a replica
    /// of one).
    public func lookup(_ name: String) -> LocalIndex? {
        if let o = offline.lookup(name) { return o }
        if let m = mirrors[name] { return LocalIndex(index: m.current, access: .upstreamAccepted) }
        for (primary, m) in mirrors {
            if let replica = m.replica(name) {
                return LocalIndex(index: replica, access: .replicaOf(primary))
            }
        }
        return nil
    }

    /// The mirrored index `name` is, or is a replica of (nil for offline and unknown indices).
    public func mirror(for name: String) -> MirroredIndex? {
        if offline.lookup(name) != nil { return nil }
        if let m = mirrors[name] { return m }
        return mirrors.values.first { $0.replica(name) != nil }
    }

    /// Whether `name` is an offline (existing or configured) or a mirrored index, or a replica of one.
    public func contains(_ name: String) -> Bool { offline.isOffline(name) || mirror(for: name) != nil }
}

/// Decides who may read an index answered locally: only callers the real service would have answered.
public struct ReadAccess: Sendable {
    /// `algolia.appId`: mirrored indices are read only with this application ID.
    public let appId: String?
    /// `algolia.apiKey`: the operator's own sync key, trusted for every mirrored index.
    public let syncKey: String?
    /// The keys the upstream accepted before.
    public let keys: KeyMemory

    /// Creates the policy.
    public init(appId: String?, syncKey: String?, keys: KeyMemory) {
        self.appId = appId
        self.syncKey = syncKey
        self.keys = keys
    }

    /// Whether the key of `credentials` has `acl` on an index whose access is `access` (mirrored
    /// indices: the upstream decides; a key it accepted reads).
    public func allows(_ credentials: AlgoliaCredentials, _ acl: AlgoliaACL, _ access: LocalIndex.Access)
        -> Bool
    {
        guard case .keys(let allowed?) = access, let key = credentials.apiKey else { return true }
        return allowed[key]?.contains(acl) ?? false
    }

    /// Whether `credentials` (with a non-empty key) may read `index`, whose access is `access`.
    public func admits(_ credentials: AlgoliaCredentials, to index: String, _ access: LocalIndex.Access)
        -> Bool
    {
        guard let key = credentials.apiKey else { return false }
        switch access {
        case .keys(let allowed):
            return allowed.map { $0[key] != nil } ?? true
        case .upstreamAccepted:
            guard let appId, credentials.appId == appId else { return false }
            return key == syncKey || keys.isAccepted(appId: appId, index: index, key: key)
        case .replicaOf(let primary):
            guard let appId, credentials.appId == appId else { return false }
            return key == syncKey || keys.isAccepted(appId: appId, index: index, key: key)
                || keys.isAccepted(appId: appId, index: primary, key: key)
        }
    }
}
