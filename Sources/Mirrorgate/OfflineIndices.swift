import AlgoliaGateway
import Foundation
import GatewayConfig
import JSONCore
import Logging
import SearchEngine
import Synchronization

/// The purely local Algolia indices of `algolia.offlineIndices`, built from their bootstrap files at start.
final class OfflineIndexRegistry: Sendable {
    private let indices: Mutex<[String: OfflineIndex]>

    init(_ indices: [String: OfflineIndex] = [:]) { self.indices = Mutex(indices) }

    func lookup(_ name: String) -> OfflineIndex? { indices.withLock { $0[name] } }

    var names: [String] { indices.withLock { $0.keys.sorted() } }

    /// Builds every configured offline index that has a bootstrap. A missing or malformed file is a
    /// start error naming the file.
    static func load(_ configuration: MirrorgateConfiguration, logger: Logger) throws -> OfflineIndexRegistry
    {
        var built: [String: OfflineIndex] = [:]
        for (name, config) in configuration.algolia.offlineIndices.sorted(by: { $0.key < $1.key }) {
            let start = ContinuousClock.now
            var settings: JSON = .object(JSONObject())
            var records: [JSON] = []
            if let bootstrap = config.bootstrap {
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
                            description:
                                "\(file): objects must be a JSON array or a browse response with `hits`")
                    }
                }
            }
            let index = SearchIndex(name: name, settings: settings, records: records)
            built[name] = OfflineIndex(index: index, apiKeys: config.apiKeys.map(Set.init))
            logger.info(
                "offline index ready",
                metadata: [
                    "index": "\(name)", "objects": "\(index.objectCount)",
                    "ms": "\((ContinuousClock.now - start).milliseconds)",
                ])
        }
        return OfflineIndexRegistry(built)
    }

    private static func readJSON(_ path: String) throws -> JSON {
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

extension Duration {
    var milliseconds: Int64 {
        let (s, a) = components
        return s * 1000 + a / 1_000_000_000_000_000
    }
}
