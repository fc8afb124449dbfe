import AlgoliaGateway
import Foundation
import GatewaySupport
import HTTPCore
import JSONCore
import SearchEngine
import Synchronization

/// `POST /_mirrorgate/algolia/indices/{i}/build` (SPEC §5): a manual build of a mirrored index, from
/// `{"settings": {…}, "objects": […], "synonyms": […]}` in the body or from
/// `{"settingsFile": PATH, "objectFiles": [PATH, …], "synonymsFile": PATH}` naming files the gateway can
/// read (object files are JSON arrays or browse answers with `hits`).
///
/// Promises: the request is parsed on the polling thread only as far as the route; reading files,
/// parsing, indexing and storing run on a background thread, and the answer (`200`
/// `{"index","objects","buildMs","durationMs"}`, `400`/`404`/`409` with `{"message","status"}`) is sent
/// when the new version is stored (as a new version of the index store, swapped in atomically) and
/// installed. `buildDidStart` and `buildDidFinish` (with `objects`, or `error`) are published on the event
/// bus. At most one manual build per index runs at a time, and none while the index syncs (`409`).
enum AdminBuild {
    static let prefix = "/_mirrorgate/algolia/indices/"

    /// Whether `path` addresses the build route.
    static func matches(_ method: String, _ path: Substring) -> Bool {
        method == "POST" && path.hasPrefix(prefix) && path.hasSuffix("/build")
            && path.count > prefix.count + "/build".count
    }

    /// Handles the route (called inline on the polling thread; returns at once).
    static func handle(router: Router, request: HTTPRequest, out: any Responder) {
        let path = request.path
        let name = FormCodec.percentDecode(path.dropFirst(prefix.count).dropLast("/build".count))
        let target = request.target
        func fail(_ status: Int, _ message: String) {
            out.respond(router.errorResponse(status, message, target: target))
        }
        let coordinator = router.frontend.mirrors
        guard let mirror = coordinator.mirrors[name] else {
            if router.frontend.offline.lookup(name) != nil {
                fail(
                    400,
                    "\(name) is an offline index: manual builds of offline indices are not supported in this "
                        + "version (configure algolia.offlineIndices.\(name).bootstrap)")
            } else {
                fail(404, "no mirrored index named \(name)")
            }
            return
        }
        if request.body.count > router.configuration.admin.maxBodySize {
            fail(413, "request body is larger than admin.maxBodySize")
            return
        }
        // A build takes the same claim as a sync: never a sync and a build (or two of either) at once.
        guard mirror.beginSync() else {
            fail(409, "a sync or build of \(name) is running; build after it finishes")
            return
        }
        guard let store = coordinator.store else {
            mirror.endBuild(nil)
            fail(500, "no index store: the build could not be persisted")
            return
        }
        let body = request.body
        let events = router.events
        let logger = router.logger
        let configuration = router.configuration
        let thread = Thread {
            var built: SearchIndex?
            defer { mirror.endBuild(built) }
            let start = ContinuousClock.now
            let source: Source
            do throws(BuildError) {
                source = try parse(body, resolve: { configuration.resolve(path: $0) })
            } catch {
                out.respond(router.errorResponse(400, error.description, target: target))
                return
            }
            events.publish("buildDidStart", ["index": .string(name), "source": .string(source.kind)])
            do {
                let (settings, synonyms, records) = try source.load()
                let parsed = ContinuousClock.now
                var index = SearchIndex(name: name, settings: settings, synonyms: synonyms, records: records)
                do {
                    index = try store.save(index)
                } catch {
                    throw BuildError(description: "storing the new version failed: \(error)", status: 500)
                }
                built = index
                let end = ContinuousClock.now
                let buildMs = Int((end - parsed).seconds * 1000)
                let durationMs = Int((end - start).seconds * 1000)
                events.publish(
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
                out.respond(.json(200, answer.serialized()))
            } catch let error as BuildError {
                events.publish(
                    "buildDidFinish", ["index": .string(name), "error": .string(error.description)])
                logger.warning("manual build failed", metadata: ["index": "\(name)", "error": "\(error)"])
                out.respond(router.errorResponse(error.status, error.description, target: target))
            } catch {
                let message = "\(error)"
                events.publish("buildDidFinish", ["index": .string(name), "error": .string(message)])
                out.respond(router.errorResponse(400, message, target: target))
            }
        }
        thread.name = "mg-build-\(name)"
        thread.start()
    }

    struct BuildError: Error, CustomStringConvertible {
        let description: String
        var status = 400
    }

    /// What to build from.
    enum Source {
        case inline(settings: JSON, synonyms: [JSON], objects: [JSON])
        case files(settings: String?, synonyms: String?, objects: [String])

        var kind: String {
            switch self {
            case .inline: "body"
            case .files: "files"
            }
        }

        func load() throws(BuildError) -> (JSON, [JSON], [JSON]) {
            switch self {
            case .inline(let settings, let synonyms, let objects):
                try AdminBuild.check(objects, what: "objects")
                return (settings, synonyms, objects)
            case .files(let settingsFile, let synonymsFile, let objectFiles):
                var settings: JSON = .object(JSONObject())
                if let settingsFile {
                    settings = try readJSON(settingsFile)
                    guard settings.objectValue != nil else {
                        throw BuildError(description: "\(settingsFile): settings must be a JSON object")
                    }
                }
                var synonyms: [JSON] = []
                if let synonymsFile {
                    let json = try readJSON(synonymsFile)
                    guard let array = json.arrayValue ?? json["hits"]?.arrayValue else {
                        throw BuildError(description: "\(synonymsFile): synonyms must be a JSON array")
                    }
                    synonyms = array
                }
                var records: [JSON] = []
                for file in objectFiles {
                    let json = try readJSON(file)
                    guard let array = json.arrayValue ?? json["hits"]?.arrayValue else {
                        throw BuildError(
                            description:
                                "\(file): objects must be a JSON array or a browse answer with `hits`")
                    }
                    try AdminBuild.check(array, what: file)
                    records += array
                }
                return (settings, synonyms, records)
            }
        }
    }

    static func check(_ objects: [JSON], what: String) throws(BuildError) {
        for (i, o) in objects.enumerated() where o.objectValue == nil {
            throw BuildError(description: "\(what)[\(i)] is not a JSON object")
        }
    }

    static func readJSON(_ path: String) throws(BuildError) -> JSON {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw BuildError(description: "cannot read \(path)")
        }
        do {
            return try JSON.parse([UInt8](data))
        } catch {
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
            "settings", "objects", "synonyms", "settingsFile", "objectFiles", "synonymsFile",
        ]
        if let unknown = o.keys.first(where: { !known.contains($0) }) {
            throw BuildError(description: "unknown field \(unknown) in the build request")
        }
        let inline = o["objects"] != nil || o["settings"] != nil || o["synonyms"] != nil
        let files = o["objectFiles"] != nil || o["settingsFile"] != nil || o["synonymsFile"] != nil
        if inline && files {
            throw BuildError(
                description: "give either settings/objects or settingsFile/objectFiles, not both")
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
                settings: try path("settingsFile"), synonyms: try path("synonymsFile"), objects: objectFiles)
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
        var synonyms: [JSON] = []
        switch o["synonyms"] {
        case nil, .null?: break
        case .array(let a)?: synonyms = a
        default: throw BuildError(description: "synonyms must be an array")
        }
        return .inline(settings: settings, synonyms: synonyms, objects: objects)
    }
}
