import HTTPCore
import JSONCore

/// What a sync brings home besides the records: an index's settings, synonyms and query rules.
public struct IndexMetadata: Sendable {
    /// The settings (`getVersion=1`), as the upstream answered them.
    public var settings: JSON
    /// Every synonym (`POST …/synonyms/search`, all pages).
    public var synonyms: [JSON]
    /// Every query rule (`POST …/rules/search`, all pages).
    public var rules: [JSON]

    /// Creates metadata.
    public init(settings: JSON, synonyms: [JSON] = [], rules: [JSON] = []) {
        self.settings = settings
        self.synonyms = synonyms
        self.rules = rules
    }
}

/// A replica named in a primary index's `replicas` (or legacy `slaves`) setting.
public struct ReplicaName: Sendable, Hashable {
    /// The replica's index name.
    public var name: String
    /// A virtual replica (`virtual(name)`): a view of the primary's records with its own
    /// `customRanking` and `relevancyStrictness` (relevant sort); else a standard replica, an index of
    /// its own whose records the upstream keeps equal to the primary's.
    public var isVirtual: Bool

    /// Creates a name.
    public init(name: String, isVirtual: Bool) {
        self.name = name
        self.isVirtual = isVirtual
    }

    /// The replicas that `settings` names, in order (`replicas`, else `slaves`).
    public static func listed(in settings: JSON) -> [ReplicaName] {
        let list = settings["replicas"]?.arrayValue ?? settings["slaves"]?.arrayValue ?? []
        return list.compactMap { item in
            guard let text = item.stringValue?.trimmingSpaces, !text.isEmpty else { return nil }
            if text.hasPrefix("virtual(") && text.hasSuffix(")") {
                let inner = text.dropFirst("virtual(".count).dropLast().trimmingSpaces
                return inner.isEmpty ? nil : ReplicaName(name: inner, isVirtual: true)
            }
            return ReplicaName(name: text, isVirtual: false)
        }
    }
}

/// A replica's part of a sync: its name and metadata (its records are the primary's).
public struct FetchedReplica: Sendable {
    /// Which replica.
    public var replica: ReplicaName
    /// Its settings (for a virtual replica: the primary's, overlaid with its own), synonyms and rules.
    public var metadata: IndexMetadata

    /// Creates a fetched replica.
    public init(replica: ReplicaName, metadata: IndexMetadata) {
        self.replica = replica
        self.metadata = metadata
    }
}

extension StringProtocol {
    fileprivate var trimmingSpaces: String {
        String(drop(while: { $0 == " " }).reversed().drop(while: { $0 == " " }).reversed())
    }
}

extension MirrorFetcher {
    /// Pages of 1000 at most, and at most this many pages (10 million objects: far beyond Algolia's
    /// limits of 10,000 synonyms per index), so that an upstream that keeps answering cannot loop a sync.
    static let maxMetadataPages = 10_000

    /// Settings, synonyms and rules of the index `name`. A failure of any of the three fails the sync
    /// (a mirror without its synonyms or rules would answer differently, silently).
    func metadata(_ name: String) throws(SyncError) -> IndexMetadata {
        let path = "/1/indexes/\(FormCodec.percentEncode(name))"
        let settings = try call("GET", "\(path)/settings?getVersion=1", body: nil)
        guard settings.objectValue != nil else {
            throw SyncError(description: "GET \(path)/settings: the answer is not a JSON object")
        }
        let synonyms = try allPages("\(path)/synonyms/search")
        let rules = try allPages("\(path)/rules/search")
        return IndexMetadata(settings: settings, synonyms: synonyms, rules: rules)
    }

    /// Every hit of a synonyms or rules search, page after page (`hitsPerPage` 1000), without the
    /// highlighting the search adds.
    func allPages(_ path: String) throws(SyncError) -> [JSON] {
        var hits: [JSON] = []
        for page in 0..<Self.maxMetadataPages {
            let answer = try call(
                "POST", path, body: ["query": "", "page": .int(Int64(page)), "hitsPerPage": 1000])
            guard let pageHits = answer["hits"]?.arrayValue else {
                throw SyncError(description: "POST \(path): the answer has no `hits`")
            }
            for hit in pageHits {
                guard case .object(var o) = hit else { continue }
                o["_highlightResult"] = nil
                hits.append(.object(o))
            }
            let total = answer["nbHits"]?.intValue ?? hits.count
            let pages = answer["nbPages"]?.intValue
            if pageHits.isEmpty || hits.count >= total || pages.map({ page + 1 >= $0 }) == true { break }
        }
        return hits
    }

    /// The replicas of a primary whose settings are `primary`: each one's metadata. A virtual replica's
    /// settings are the primary's overlaid with what the upstream answers for it (whether it answers
    /// every setting or only those of its own), without `replicas` and with `primary`.
    func replicas(of name: String, primary: JSON) throws(SyncError) -> [FetchedReplica] {
        var out: [FetchedReplica] = []
        for replica in ReplicaName.listed(in: primary) where replica.name != name {
            var metadata = try metadata(replica.name)
            if replica.isVirtual, case .object(var merged) = primary, let own = metadata.settings.objectValue
            {
                for (key, value) in own { merged[key] = value }
                merged["replicas"] = nil
                merged["slaves"] = nil
                merged["primary"] = .string(name)
                metadata.settings = .object(merged)
            }
            out.append(FetchedReplica(replica: replica, metadata: metadata))
        }
        return out
    }
}
