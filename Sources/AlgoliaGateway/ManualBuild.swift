import Foundation
import GatewayConfig
import GatewaySupport
import HTTPCore
import JSONCore
import Logging
import SearchEngine
import Synchronization

/// `POST /_mirrorgate/algolia/indices/{i}/build` (SPEC §5): a manual build of a mirrored index, from
/// `{"settings": {…}, "objects": […], "synonyms": […], "rules": […]}` in the body or from
/// `{"settingsFile": PATH, "objectFiles": [PATH, …], "synonymsFile": PATH, "rulesFile": PATH}` naming
/// files the gateway can read (object files are JSON arrays or browse answers with `hits`; synonym and
/// rule files JSON arrays or search answers with `hits`, each entry an object with an `objectID`). The
/// replicas of the current version that the new settings still name are rebuilt from the new records
/// with their own settings, synonyms and rules.
///
/// Promises: the request is parsed on the polling thread only as far as the route; reading files,
/// parsing, indexing and storing run on a background thread, and the answer (`200`
/// `{"index","objects","buildMs","durationMs"}`, `400`/`404`/`409` with `{"message","status"}`) is sent
/// when the new version is stored (as a new version of the index store, swapped in atomically) and
/// installed. `buildDidStart` and `buildDidFinish` (with `objects`, or `error`) are published on the event
/// bus. At most one manual build per index runs at a time, and none while the index syncs (`409`).
struct ManualBuilds: Sendable {
    let coordinator: MirrorCoordinator
    let offline: OfflineIndexRegistry
    let configuration: MirrorgateConfiguration
    let events: @Sendable (String, JSON) -> Void
    let logger: Logger

    /// Starts a build of `name` from `body` (on the calling thread only the checks; returns at once).
    func start(_ name: String, body: [UInt8], _ out: any Responder) {
        func fail(_ status: Int, _ message: String) { out.respond(AlgoliaError.response(status, message)) }
        guard let mirror = coordinator.mirrors[name] else {
            if offline.lookup(name) != nil {
                fail(
                    400,
                    "\(name) is an offline index: manual builds of offline indices are not supported in this "
                        + "version (configure algolia.offlineIndices.\(name).bootstrap)")
            } else {
                fail(404, "no mirrored index named \(name)")
            }
            return
        }
        if body.count > configuration.admin.maxBodySize {
            fail(413, "request body is larger than admin.maxBodySize")
            return
        }
        // A build takes the same claim as a sync: never a sync and a build (or two of either) at once.
        guard mirror.beginSync() else {
            fail(409, "a sync or build of \(name) is running; build after it finishes")
            return
        }
        guard coordinator.store != nil else {
            mirror.endBuild(nil)
            fail(500, "no index store: the build could not be persisted")
            return
        }
        let thread = Thread { [self] in
            // Installed (or the claim released) before the answer: a client that searches or builds
            // again right after it sees the new version, never a 409 of its own build.
            let (response, built) = run(mirror, body: body)
            mirror.endBuild(built)
            out.respond(response)
        }
        thread.name = "mg-build-\(name)"
        thread.start()
    }

    /// Parses, reads, builds and stores; the answer and the stored version (nil when the build failed).
    private func run(_ mirror: MirroredIndex, body: [UInt8]) -> (HTTPResponse, MirrorVersion?) {
        let name = mirror.settings.name
        let start = ContinuousClock.now
        let source: Source
        do throws(BuildError) {
            source = try ManualBuilds.parse(body, resolve: { configuration.resolve(path: $0) })
        } catch {
            return (AlgoliaError.response(400, error.description), nil)
        }
        events("buildDidStart", ["index": .string(name), "source": .string(source.kind)])
        do {
            let files = try source.load()
            let parsed = ContinuousClock.now
            let version: MirrorVersion
            do {
                version = try coordinator.storeVersion(
                    name,
                    metadata: IndexMetadata(
                        settings: files.settings, synonyms: files.synonyms, rules: files.rules),
                    records: files.records,
                    replicas: coordinator.currentReplicas(of: mirror, namedIn: files.settings),
                    replacing: mirror.replicaNames)
            } catch {
                throw BuildError(description: "storing the new version failed: \(error)", status: 500)
            }
            let index = version.primary
            let end = ContinuousClock.now
            let buildMs = Int((end - parsed).seconds * 1000)
            let durationMs = Int((end - start).seconds * 1000)
            events(
                "buildDidFinish",
                [
                    "index": .string(name), "objects": .int(Int64(index.objectCount)),
                    "buildMs": .int(Int64(buildMs)), "source": .string(source.kind),
                ])
            logger.info(
                "manual build finished",
                metadata: ["index": "\(name)", "objects": "\(index.objectCount)", "ms": "\(durationMs)"])
            let answer: JSON = [
                "index": .string(name), "objects": .int(Int64(index.objectCount)),
                "buildMs": .int(Int64(buildMs)), "durationMs": .int(Int64(durationMs)),
            ]
            return (.json(200, answer.serialized()), version)
        } catch let error as BuildError {
            events("buildDidFinish", ["index": .string(name), "error": .string(error.description)])
            logger.warning("manual build failed", metadata: ["index": "\(name)", "error": "\(error)"])
            return (AlgoliaError.response(error.status, error.description), nil)
        } catch {
            let message = "\(error)"
            events("buildDidFinish", ["index": .string(name), "error": .string(message)])
            return (AlgoliaError.response(400, message), nil)
        }
    }

    struct BuildError: Error, CustomStringConvertible {
        let description: String
        var status = 400
    }

    /// What to build from.
    enum Source {
        case inline(settings: JSON, synonyms: JSON?, rules: JSON?, objects: [JSON])
        case files(settings: String?, synonyms: String?, rules: String?, objects: [String])

        var kind: String {
            switch self {
            case .inline: "body"
            case .files: "files"
            }
        }

        /// The synonyms or rules of `json` (nil: none), checked; `what` names them in an error.
        static func entries(_ json: JSON?, kind: String, what: String) throws(BuildError) -> [JSON] {
            guard let json else { return [] }
            do {
                return try IndexFiles.entries(json, kind: kind)
            } catch {
                throw BuildError(description: what == kind ? error.message : "\(what): \(error.message)")
            }
        }

        func load() throws(BuildError) -> IndexFiles {
            switch self {
            case .inline(let settings, let synonyms, let rules, let objects):
                try ManualBuilds.check(objects, what: "objects")
                return IndexFiles(
                    settings: settings,
                    synonyms: try Self.entries(synonyms, kind: "synonyms", what: "synonyms"),
                    rules: try Self.entries(rules, kind: "rules", what: "rules"), records: objects)
            case .files(let settingsFile, let synonymsFile, let rulesFile, let objectFiles):
                var settings: JSON = .object(JSONObject())
                if let settingsFile {
                    settings = try readJSON(settingsFile)
                    guard settings.objectValue != nil else {
                        throw BuildError(description: "\(settingsFile): settings must be a JSON object")
                    }
                }
                let synonyms = try Self.entries(
                    try synonymsFile.map(readJSON), kind: "synonyms", what: synonymsFile ?? "")
                let rules = try Self.entries(
                    try rulesFile.map(readJSON), kind: "rules", what: rulesFile ?? "")
                var records: [JSON] = []
                for file in objectFiles {
                    let json = try readJSON(file)
                    guard let array = json.arrayValue ?? json["hits"]?.arrayValue else {
                        throw BuildError(
                            description:
                                "\(file): objects must be a JSON array or a browse answer with `hits`")
                    }
                    try ManualBuilds.check(array, what: file)
                    records += array
                }
                return IndexFiles(settings: settings, synonyms: synonyms, rules: rules, records: records)
            }
        }
    }

    static func check(_ objects: [JSON], what: String) throws(BuildError) {
        for (i, o) in objects.enumerated() {
            guard let record = o.objectValue else {
                throw BuildError(description: "\(what)[\(i)] is not a JSON object")
            }
            guard let id = record["objectID"]?.stringValue, !id.isEmpty else {
                throw BuildError(description: "\(what)[\(i)] has no objectID (a non-empty string)")
            }
        }
    }

    static func readJSON(_ path: String) throws(BuildError) -> JSON {
        switch JSONFile.read(path) {
        case .success(let json): return json
        case .failure(.unreadable): throw BuildError(description: "cannot read \(path)")
        case .failure(.invalid(let error)):
            throw BuildError(description: "\(path) is not valid JSON: \(error)")
        }
    }

    /// Parses the request body into a source; relative file paths are resolved like config paths.
    static func parse(_ body: [UInt8], resolve: (String) -> String) throws(BuildError) -> Source {
        let json: JSON
        do {
            json = try JSON.parse(body)
        } catch {
            throw BuildError(description: "the body is not valid JSON: \(error)")
        }
        guard let o = json.objectValue else {
            throw BuildError(
                description:
                    "the body must be {\"settings\", \"objects\"} or {\"settingsFile\", \"objectFiles\"}")
        }
        let known: Set<String> = [
            "settings", "objects", "synonyms", "rules", "settingsFile", "objectFiles", "synonymsFile",
            "rulesFile",
        ]
        if let unknown = o.keys.first(where: { !known.contains($0) }) {
            throw BuildError(description: "unknown field \(unknown) in the build request")
        }
        let inline = o["objects"] != nil || o["settings"] != nil || o["synonyms"] != nil || o["rules"] != nil
        let files =
            o["objectFiles"] != nil || o["settingsFile"] != nil || o["synonymsFile"] != nil
            || o["rulesFile"] != nil
        if inline && files {
            throw BuildError(
                description: "give either settings/objects or settingsFile/objectFiles, not both")
        }
        // A build replaces the whole index: an empty one only when asked for in so many words.
        if o["objects"] == nil && o["objectFiles"] == nil {
            throw BuildError(
                description: "objects (a list; [] for an empty index) or objectFiles is required")
        }
        if files {
            func path(_ key: String) throws(BuildError) -> String? {
                switch o[key] {
                case nil, .null?: return nil
                case .string(let s)? where !s.isEmpty: return resolve(s)
                default: throw BuildError(description: "\(key) must be a file path")
                }
            }
            guard let list = o["objectFiles"]?.arrayValue, !list.isEmpty else {
                throw BuildError(description: "objectFiles must be a non-empty array of file paths")
            }
            var objectFiles: [String] = []
            for item in list {
                guard let s = item.stringValue, !s.isEmpty else {
                    throw BuildError(description: "objectFiles must be a non-empty array of file paths")
                }
                objectFiles.append(resolve(s))
            }
            return .files(
                settings: try path("settingsFile"), synonyms: try path("synonymsFile"),
                rules: try path("rulesFile"),
                objects: objectFiles)
        }
        guard let objects = o["objects"]?.arrayValue else {
            throw BuildError(description: "objects must be an array of records")
        }
        var settings: JSON = .object(JSONObject())
        switch o["settings"] {
        case nil, .null?: break
        case .object?: settings = o["settings"]!
        default: throw BuildError(description: "settings must be a JSON object")
        }
        // Synonyms and rules: arrays of JSON objects (each one is stored as given).
        func list(_ key: String) throws(BuildError) -> JSON? {
            switch o[key] {
            case nil, .null?: return nil
            case .array(let items)?:
                for (i, item) in items.enumerated() where item.objectValue == nil {
                    throw BuildError(description: "\(key)[\(i)] is not a JSON object")
                }
                return o[key]
            default: throw BuildError(description: "\(key) must be an array")
            }
        }
        return .inline(
            settings: settings, synonyms: try list("synonyms"), rules: try list("rules"), objects: objects)
    }
}
