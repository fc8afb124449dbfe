import Foundation
import GatewayConfig
import JSONCore
import Logging
import SearchEngine
import Synchronization
import Upstream

/// The purely local Algolia indices of `algolia.offlineIndices`. At start each is loaded from its stored
/// version in `dataDir/search.sqlite`; an index with no stored version is built from its bootstrap files
/// and stored, so later starts answer without reading the files again (unless it was deleted through the
/// API: it stays deleted). Indices created by writes under a pattern (`catalog_tmp_*`) are loaded too.
///
/// Promises: `lookup` sees an index installed by the writer (``install(_:)``) at once, and never half of
/// one; the writer is the only caller of `install` and `remove`.
public final class OfflineIndexRegistry: Sendable {
    private let indices: Mutex<[String: LocalIndex]>
    private let algolia: AlgoliaConfig

    /// A registry of the given indices, configured by `algolia` (its `offlineIndices`).
    public init(_ indices: [String: LocalIndex] = [:], algolia: AlgoliaConfig = AlgoliaConfig()) {
        self.indices = Mutex(indices)
        self.algolia = algolia
    }

    /// The offline index named `name`, when it exists.
    public func lookup(_ name: String) -> LocalIndex? { indices.withLock { $0[name] } }

    /// The names of the existing indices, sorted.
    public var names: [String] { indices.withLock { $0.keys.sorted() } }

    /// The configuration `name` falls under (its own, or a pattern's), nil when it is not an offline
    /// index name.
    public func configuration(for name: String) -> OfflineIndexConfig? { algolia.offlineIndex(for: name) }

    /// Whether `name` is (or would be, on its first write) an offline index.
    public func isOffline(_ name: String) -> Bool { lookup(name) != nil || configuration(for: name) != nil }

    /// Makes `index` the version of its name that answers.
    public func install(_ index: SearchIndex) {
        let access = LocalIndex.Access.keys(configuration(for: index.name)?.apiKeys)
        indices.withLock { $0[index.name] = LocalIndex(index: index, access: access) }
    }

    /// Removes the index `name` (deleted, or moved away).
    public func remove(_ name: String) { _ = indices.withLock { $0.removeValue(forKey: name) } }

    /// Builds every configured offline index that has a bootstrap. A missing or malformed file is a
    /// start error naming the file. An index of `previous` (a configuration reload) keeps its data, with
    /// the keys of the new configuration.
    public static func load(
        _ configuration: MirrorgateConfiguration, store: IndexStore?, logger: Logger,
        previous: OfflineIndexRegistry? = nil
    ) throws(AlgoliaSetupError) -> OfflineIndexRegistry {
        var built: [String: LocalIndex] = [:]
        let algolia = configuration.algolia
        for (name, config) in algolia.offlineIndices.sorted(by: { $0.key < $1.key }) where !config.isPattern {
            let start = ContinuousClock.now
            let access = LocalIndex.Access.keys(config.apiKeys)
            if let kept = previous?.lookup(name) {
                built[name] = kept.access == access ? kept : LocalIndex(index: kept.index, access: access)
                continue
            }
            var index: SearchIndex
            let how: String
            if let stored = try? store?.load(name: name) {
                (index, how) = (stored, "offline index loaded")
            } else if (try? store?.isDeleted(name: name)) == true {
                logger.info(
                    "offline index deleted through the API: created again by its next write",
                    metadata: ["index": "\(name)"])
                continue
            } else {
                let files = try BootstrapFiles.read(config.bootstrap, configuration)
                index = SearchIndex(
                    name: name, settings: files.settings, synonyms: files.synonyms, rules: files.rules,
                    records: files.records)
                if let store {
                    do {
                        index = try store.save(index)
                    } catch {
                        throw AlgoliaSetupError(description: "cannot store offline index \(name): \(error)")
                    }
                }
                how = "offline index built from bootstrap"
            }
            built[name] = LocalIndex(index: index, access: access)
            logger.info(
                "\(how)",
                metadata: [
                    "index": "\(name)", "objects": "\(index.objectCount)",
                    "ms": "\((ContinuousClock.now - start).milliseconds)",
                ])
        }
        // Indices created by writes under a pattern.
        for name in (try? store?.indexNames()) ?? [] where built[name] == nil && algolia.indices[name] == nil
        {
            guard let config = algolia.offlineIndex(for: name), config.isPattern,
                let index = try? store?.load(name: name)
            else { continue }
            built[name] = LocalIndex(index: index, access: .keys(config.apiKeys))
            logger.info(
                "offline index loaded", metadata: ["index": "\(name)", "objects": "\(index.objectCount)"])
        }
        return OfflineIndexRegistry(built, algolia: algolia)
    }
}

/// A configured Algolia index that cannot be prepared (a missing or malformed bootstrap file, a store that
/// cannot be opened): the gateway does not start.
public struct AlgoliaSetupError: Error, CustomStringConvertible, Sendable {
    /// What went wrong, naming the file or index.
    public let description: String
}

/// What the files of a `bootstrap:` (or of a manual build) hold.
struct IndexFiles {
    var settings: JSON = .object(JSONObject())
    var synonyms: [JSON] = []
    var rules: [JSON] = []
    var records: [JSON] = []

    /// Why a synonyms or rules file cannot be used.
    struct Problem: Error {
        let message: String
    }

    /// The synonym or rule objects of a file's JSON (an array, or a search answer with `hits`), each
    /// checked to be an object with a string `objectID` (and, for synonyms, a `type`).
    static func entries(_ json: JSON, kind: String) throws(Problem) -> [JSON] {
        guard let items = json.arrayValue ?? json["hits"]?.arrayValue else {
            throw Problem(message: "\(kind) must be a JSON array (or a search answer with `hits`)")
        }
        for (i, item) in items.enumerated() {
            guard item.objectValue != nil, let id = item["objectID"]?.stringValue, !id.isEmpty else {
                throw Problem(message: "\(kind)[\(i)] must be an object with a string objectID")
            }
            if kind == "synonyms" && item["type"]?.stringValue == nil {
                throw Problem(message: "synonyms[\(i)] (\(id)) has no type")
            }
        }
        return items.map { item in
            guard case .object(var o) = item else { return item }
            o["_highlightResult"] = nil
            return .object(o)
        }
    }
}

/// Reads the files of a `bootstrap:` (a settings object, object files that are arrays or browse answers,
/// a synonyms file, a rules file).
enum BootstrapFiles {
    static func read(_ bootstrap: AlgoliaBootstrap?, _ configuration: MirrorgateConfiguration)
        throws(AlgoliaSetupError) -> IndexFiles
    {
        var files = IndexFiles()
        guard let bootstrap else { return files }
        if let file = bootstrap.settings {
            files.settings = try readJSON(configuration.resolve(path: file))
            if files.settings.objectValue == nil {
                throw AlgoliaSetupError(description: "\(file): settings must be a JSON object")
            }
        }
        for file in bootstrap.objects {
            let json = try readJSON(configuration.resolve(path: file))
            if let array = json.arrayValue {
                files.records += array
            } else if let hits = json["hits"]?.arrayValue {
                files.records += hits
            } else {
                throw AlgoliaSetupError(
                    description: "\(file): objects must be a JSON array or a browse response with `hits`")
            }
        }
        for (kind, file) in [("synonyms", bootstrap.synonyms), ("rules", bootstrap.rules)] {
            guard let file else { continue }
            let json = try readJSON(configuration.resolve(path: file))
            do {
                let entries = try IndexFiles.entries(json, kind: kind)
                if kind == "synonyms" { files.synonyms = entries } else { files.rules = entries }
            } catch {
                throw AlgoliaSetupError(description: "\(file): \(error.message)")
            }
        }
        return files
    }

    static func readJSON(_ path: String) throws(AlgoliaSetupError) -> JSON {
        switch JSONFile.read(path) {
        case .success(let json): return json
        case .failure(.unreadable): throw AlgoliaSetupError(description: "cannot read bootstrap file \(path)")
        case .failure(.invalid(let error)):
            throw AlgoliaSetupError(description: "bootstrap file \(path) is not valid JSON: \(error)")
        }
    }
}

/// A JSON file the gateway reads (bootstrap files, the files of a manual build).
enum JSONFile {
    /// Why a file gave no JSON.
    enum Failure: Error {
        /// It cannot be read (missing, unreadable, a directory).
        case unreadable
        /// It is not valid JSON.
        case invalid(any Error)
    }

    /// The file's JSON.
    static func read(_ path: String) -> Result<JSON, Failure> {
        guard let data = FileManager.default.contents(atPath: path) else { return .failure(.unreadable) }
        do {
            return .success(try JSON.parse([UInt8](data)))
        } catch {
            return .failure(.invalid(error))
        }
    }
}
