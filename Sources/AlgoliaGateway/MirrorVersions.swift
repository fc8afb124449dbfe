import JSONCore
import SearchEngine

extension MirrorCoordinator {
    /// Builds a new version of the mirrored index `name` and of its replicas from the same records, stores
    /// it (each replica as an index of its own, then the primary, so that the primary's settings never
    /// name replicas missing from the store), and removes the stored replicas in `replacing` that the new
    /// version no longer has. Replicas whose names are configured indices of their own are skipped.
    /// Without a store the version is only built.
    func storeVersion(
        _ name: String, metadata: IndexMetadata, records: [JSON], replicas: [FetchedReplica],
        replacing previous: [String]
    ) throws -> MirrorVersion {
        var built: [String: SearchIndex] = [:]
        for fetched in replicas where !reservedNames.contains(fetched.replica.name) {
            let m = fetched.metadata
            var replica = SearchIndex(
                name: fetched.replica.name, settings: m.settings, synonyms: m.synonyms, rules: m.rules,
                records: records)
            if let store { replica = try store.save(replica) }
            built[fetched.replica.name] = fetched.replica.isVirtual ? replica.asVirtualReplica() : replica
        }
        var primary = SearchIndex(
            name: name, settings: metadata.settings, synonyms: metadata.synonyms, rules: metadata.rules,
            records: records)
        if let store {
            primary = try store.save(primary)
            for gone in previous where built[gone] == nil && !reservedNames.contains(gone) {
                try? store.delete(name: gone)
            }
        }
        return MirrorVersion(primary: primary, replicas: built)
    }

    /// The stored version of `name` and of the replicas its settings name (those stored; virtual ones as
    /// virtual replicas), or nil when `name` has none.
    static func loadVersion(_ name: String, store: IndexStore, reserved: Set<String>) -> MirrorVersion? {
        guard let primary = try? store.load(name: name) else { return nil }
        var replicas: [String: SearchIndex] = [:]
        for replica in ReplicaName.listed(in: primary.settingsJSON) where !reserved.contains(replica.name) {
            guard let index = try? store.load(name: replica.name) else { continue }
            replicas[replica.name] = replica.isVirtual ? index.asVirtualReplica() : index
        }
        return MirrorVersion(primary: primary, replicas: replicas)
    }

    /// The replicas of the current version of `mirror`, with their metadata, that `settings` (a new
    /// version's) still names: what a manual build rebuilds from its new records.
    func currentReplicas(of mirror: MirroredIndex, namedIn settings: JSON) -> [FetchedReplica] {
        ReplicaName.listed(in: settings).compactMap { replica in
            guard let index = mirror.replica(replica.name) else { return nil }
            return FetchedReplica(
                replica: replica,
                metadata: IndexMetadata(
                    settings: index.settingsJSON, synonyms: index.synonyms, rules: index.rules))
        }
    }
}
