import AlgoliaGateway
import Foundation
import GatewayConfig
import JSONCore
import Logging
import SearchEngine
import Synchronization
import Upstream

/// The purely local Algolia indices of `algolia.offlineIndices`. At start each is loaded from its stored
/// version in `dataDir/search.sqlite`; an index with no stored version is built from its bootstrap files
/// and stored, so later starts answer without reading the files again.
final class OfflineIndexRegistry: Sendable {
    private let indices: Mutex<[String: OfflineIndex]>

    init(_ indices: [String: OfflineIndex] = [:]) { self.indices = Mutex(indices) }

    func lookup(_ name: String) -> OfflineIndex? { indices.withLock { $0[name] } }

    var names: [String] { indices.withLock { $0.keys.sorted() } }

    /// Builds every configured offline index that has a bootstrap. A missing or malformed file is a
    /// start error naming the file.
    static func load(_ configuration: MirrorgateConfiguration, store: IndexStore?, logger: Logger) throws
        -> OfflineIndexRegistry
    {
        var built: [String: OfflineIndex] = [:]
        for (name, config) in configuration.algolia.offlineIndices.sorted(by: { $0.key < $1.key }) {
            let start = ContinuousClock.now
            if let stored = try? store?.load(name: name) {
                built[name] = OfflineIndex(index: stored, apiKeys: config.apiKeys.map(Set.init))
                logger.info(
                    "offline index loaded",
                    metadata: [
                        "index": "\(name)", "objects": "\(stored.objectCount)",
                        "ms": "\((ContinuousClock.now - start).milliseconds)",
                    ])
                continue
            }
            let (settings, records) = try BootstrapFiles.read(config.bootstrap, configuration)
            var index = SearchIndex(name: name, settings: settings, records: records)
            if let store, config.bootstrap != nil {
                do {
                    index = try store.save(index)
                } catch {
                    throw GatewayStartError(description: "cannot store offline index \(name): \(error)")
                }
            }
            built[name] = OfflineIndex(index: index, apiKeys: config.apiKeys.map(Set.init))
            logger.info(
                "offline index built from bootstrap",
                metadata: [
                    "index": "\(name)", "objects": "\(index.objectCount)",
                    "ms": "\((ContinuousClock.now - start).milliseconds)",
                ])
        }
        return OfflineIndexRegistry(built)
    }

}

/// Reads the files of a `bootstrap:` (a settings object, object files that are arrays or browse answers).
enum BootstrapFiles {
    static func read(_ bootstrap: AlgoliaBootstrap?, _ configuration: MirrorgateConfiguration) throws -> (
        JSON, [JSON]
    ) {
        var settings: JSON = .object(JSONObject())
        var records: [JSON] = []
        guard let bootstrap else { return (settings, records) }
        if let file = bootstrap.settings {
            settings = try readJSON(configuration.resolve(path: file))
            if settings.objectValue == nil {
                throw GatewayStartError(description: "\(file): settings must be a JSON object")
            }
        }
        for file in bootstrap.objects {
            let json = try readJSON(configuration.resolve(path: file))
            if let array = json.arrayValue {
                records += array
            } else if let hits = json["hits"]?.arrayValue {
                records += hits
            } else {
                throw GatewayStartError(
                    description: "\(file): objects must be a JSON array or a browse response with `hits`")
            }
        }
        return (settings, records)
    }

    static func readJSON(_ path: String) throws -> JSON {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw GatewayStartError(description: "cannot read bootstrap file \(path)")
        }
        do {
            return try JSON.parse([UInt8](data))
        } catch {
            throw GatewayStartError(description: "bootstrap file \(path) is not valid JSON: \(error)")
        }
    }
}
