import Foundation
import Yams

extension MirrorgateConfiguration {
    /// Keys that parse but belong to features this version does not implement: dotted key pattern
    /// (`*` matches one name) → reason. Present with a non-default value, they are rejected with
    /// `<key>: not supported in this version (<reason>)`. Lift a feature by deleting its line.
    /// The shortest `storeEncryptionKey` accepted.
    public static let minimumSecretLength = 8

    public static let unsupportedKeys: [String: String] = [:]

    /// Reads and validates the YAML file at `path`; relative files inside resolve against its directory.
    /// `fileChecks` look at the files the configuration names (see `FileChecks`).
    public static func load(
        path: String, environment: [String: String],
        unsupportedKeys: [String: String] = MirrorgateConfiguration.unsupportedKeys,
        fileChecks: FileChecks = []
    ) throws(ConfigError) -> MirrorgateConfiguration {
        let text: String
        do {
            let data = try Data(contentsOf: URL(fileURLWithPath: path))
            guard let s = String(data: data, encoding: .utf8) else {
                throw ConfigError(issues: [
                    ConfigIssue(
                        file: path, line: 0, column: 0, keyPath: "", message: "file is not valid UTF-8")
                ])
            }
            text = s
        } catch let error as ConfigError {
            throw error
        } catch {
            throw ConfigError(issues: [
                ConfigIssue(
                    file: path, line: 0, column: 0, keyPath: "",
                    message: "cannot read configuration: \(error.localizedDescription)")
            ])
        }
        let base = URL(fileURLWithPath: path).deletingLastPathComponent().standardizedFileURL.path
        return try parse(
            yaml: text, fileName: path, environment: environment, baseDirectory: base,
            unsupportedKeys: unsupportedKeys, fileChecks: fileChecks)
    }

    /// Parses and validates YAML text. `fileName` only labels errors; relative files inside resolve
    /// against `baseDirectory`. Throws every problem found at once, including those of `fileChecks`.
    public static func parse(
        yaml: String, fileName: String, environment: [String: String], baseDirectory: String = ".",
        unsupportedKeys: [String: String] = MirrorgateConfiguration.unsupportedKeys,
        fileChecks: FileChecks = []
    ) throws(ConfigError) -> MirrorgateConfiguration {
        let reader = ConfigReader(file: fileName, unsupportedKeys: unsupportedKeys)
        let root: Node?
        do {
            root = try Yams.compose(yaml: yaml)
        } catch {
            throw ConfigError(issues: [yamlIssue(error, file: fileName)])
        }
        var builder = TreeBuilder(environment: environment)
        let tree = root.map { builder.build($0, path: ConfPath()) }
        for (path, line, column, message) in builder.issues {
            reader.issues.append(
                ConfigIssue(
                    file: fileName, line: line, column: column, keyPath: path.dotted, message: message))
        }
        if let tree, !tree.isNull, case .scalar = tree.kind {
            reader.fail(ConfPath(), tree, "expected a mapping of configuration keys at the top level")
        }
        let config = reader.readRoot(tree, baseDirectory: baseDirectory)
        var issues = reader.issues
        issues += config.crossCheckIssues(file: fileName) { reader.locations[$0] }
        if !fileChecks.isEmpty {
            issues += config.fileIssues(file: fileName, checks: fileChecks) { reader.locations[$0] }
        }
        guard issues.isEmpty else {
            throw ConfigError(issues: sortedUnique(issues))
        }
        return config
    }

    /// Re-checks rules that span several keys (e.g. after a `--listen` override). Throws every problem.
    public func validate(file: String = "<configuration>") throws(ConfigError) {
        let issues = crossCheckIssues(file: file) { _ in nil }
        if !issues.isEmpty { throw ConfigError(issues: issues) }
    }

    /// The compiled-in demo configuration; its bootstrap files resolve against `<currentDirectory>/config`
    /// when that directory exists, else against `currentDirectory`.
    public static func demo(
        environment: [String: String] = [:],
        currentDirectory: String = FileManager.default.currentDirectoryPath
    ) throws(ConfigError) -> MirrorgateConfiguration {
        var isDirectory: ObjCBool = false
        let configDir =
            currentDirectory.hasSuffix("/") ? currentDirectory + "config" : currentDirectory + "/config"
        let base =
            FileManager.default.fileExists(atPath: configDir, isDirectory: &isDirectory)
                && isDirectory.boolValue
            ? configDir : currentDirectory
        return try parse(
            yaml: demoYAML, fileName: "<built-in demo>", environment: environment, baseDirectory: base)
    }

    private static func yamlIssue(_ error: any Error, file: String) -> ConfigIssue {
        func issue(_ mark: Mark?, _ message: String) -> ConfigIssue {
            ConfigIssue(
                file: file, line: mark?.line ?? 0, column: mark?.column ?? 0, keyPath: "", message: message)
        }
        guard let y = error as? YamlError else { return issue(nil, "invalid YAML: \(error)") }
        switch y {
        case .scanner(_, let problem, let mark, _), .parser(_, let problem, let mark, _),
            .composer(_, let problem, let mark, _):
            return issue(mark, "invalid YAML: \(problem)")
        case .duplicatedKeysInMapping(let duplicates, let context):
            let keys = duplicates.map { "'\($0)'" }.joined(separator: ", ")
            return issue(context.mark, "duplicate key \(keys) in one mapping")
        case .reader(let problem, _, _, _):
            return issue(nil, "invalid YAML: \(problem)")
        default:
            return issue(nil, "invalid YAML: \(y)")
        }
    }

    private static func sortedUnique(_ issues: [ConfigIssue]) -> [ConfigIssue] {
        var seen = Set<ConfigIssue>()
        let unique = issues.filter { seen.insert($0).inserted }
        return unique.enumerated().sorted {
            ($0.element.line, $0.element.column, $0.offset) < ($1.element.line, $1.element.column, $1.offset)
        }.map(\.element)
    }

    /// Rules that involve several keys; `locate` gives the position of a dotted key when known.
    func crossCheckIssues(file: String, locate: (String) -> (line: Int, column: Int)?) -> [ConfigIssue] {
        var issues: [ConfigIssue] = []
        func add(_ key: String, near fallbacks: [String] = [], _ message: String) {
            let place = ([key] + fallbacks).lazy.compactMap(locate).first
            issues.append(
                ConfigIssue(
                    file: file, line: place?.line ?? 0, column: place?.column ?? 0, keyPath: key,
                    message: "\(key): \(message)"))
        }

        if !server.listen.isLoopback {
            var missing: [String] = []
            if !server.allowRemote { missing.append("server.allowRemote: true") }
            if admin.token == nil { missing.append("admin.token") }
            if !missing.isEmpty {
                add(
                    "server.listen",
                    "'\(server.listen)' is not a loopback address; listening on it needs "
                        + missing.joined(separator: " and "))
            }
        }

        let policyNames = policies.keys.sorted().joined(separator: ", ")
        for (name, index) in algolia.indices.sorted(by: { $0.key < $1.key }) {
            let p = "algolia.indices.\(name)"
            if policies[index.policy] == nil {
                add("\(p).policy", near: [p], "unknown policy '\(index.policy)' (defined: \(policyNames))")
            }
            if index.mirrored && index.dataSelectionQueries.isEmpty {
                add(
                    "\(p).dataSelectionQueries", near: [p],
                    "required for a mirrored index (e.g. - {query: {filters: \"\"}, maxObjects: 1000}), or set mirrored: false"
                )
            }
            if index.requestStrategy == .offlineOnly && !index.mirrored && index.bootstrap == nil {
                add(
                    "\(p).requestStrategy", near: [p],
                    "offlineOnly needs local data: set mirrored: true or a bootstrap")
            }
            if index.offlineWrites == .queue && !index.mirrored {
                add(
                    "\(p).offlineWrites", near: [p],
                    "queue applies writes to the local mirror: it needs mirrored: true")
            }
        }
        if !algolia.indices.isEmpty {
            if algolia.appId == nil {
                add("algolia.appId", near: ["algolia.indices"], "required when algolia.indices is not empty")
            }
            if algolia.apiKey == nil && algolia.indices.values.contains(where: \.mirrored) {
                add(
                    "algolia.apiKey", near: ["algolia.appId", "algolia.indices"],
                    "required for mirrored indices (the gateway's own key for syncs)")
            }
        }
        for name in algolia.offlineIndices.keys.sorted() where algolia.indices[name] != nil {
            add(
                "algolia.offlineIndices.\(name)",
                "an index named '\(name)' is already defined in algolia.indices")
        }
        for (name, index) in algolia.offlineIndices.sorted(by: { $0.key < $1.key }) {
            let p = "algolia.offlineIndices.\(name)"
            if let star = name.firstIndex(of: "*"), star != name.index(before: name.endIndex) {
                add(p, "'*' may only end a name (a pattern: every index whose name starts with the rest)")
            } else if name == "*" {
                add(p, "a pattern needs a prefix before '*' (e.g. catalog_tmp_*)")
            } else if index.isPattern {
                if index.bootstrap != nil {
                    add(
                        "\(p).bootstrap", near: [p], "a pattern names indices created by writes: no bootstrap"
                    )
                }
                for other in algolia.indices.keys.sorted() where index.matches(other) {
                    add(p, "the pattern matches '\(other)' of algolia.indices")
                }
            }
        }

        var mounts: [String: String] = [:]
        for (name, service) in odata.services.sorted(by: { $0.key < $1.key }) {
            let p = "odata.services.\(name)"
            if policies[service.policy] == nil {
                add("\(p).policy", near: [p], "unknown policy '\(service.policy)' (defined: \(policyNames))")
            }
            let mount = service.mount
            if !(mount.hasPrefix("/") && mount.hasSuffix("/")) {
                add("\(p).mount", near: [p], "must start and end with '/', got '\(mount)'")
            }
            for reserved in ["/1/", "/_mirrorgate/", "/metrics/"]
            where mount.hasPrefix(reserved) || reserved.hasPrefix(mount) {
                add("\(p).mount", near: [p], "'\(mount)' collides with the gateway's own \(reserved) routes")
            }
            for (other, otherMount) in mounts where mount.hasPrefix(otherMount) || otherMount.hasPrefix(mount)
            {
                add(
                    "\(p).mount", near: [p],
                    "'\(mount)' overlaps the mount '\(otherMount)' of service '\(other)'")
            }
            mounts[name] = mount
        }
        return issues
    }
}

/// Checks of the files a configuration names, beyond its syntax and keys (`load(path:…:fileChecks:)`).
public struct FileChecks: OptionSet, Sendable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    /// Every bootstrap file exists and is a readable regular file.
    public static let bootstrapFiles = FileChecks(rawValue: 1)
    /// `dataDir` is a writable directory, or can be created (its nearest existing parent is writable).
    public static let dataDir = FileChecks(rawValue: 2)
    /// What `mirrorgate check` verifies.
    public static let all: FileChecks = [.bootstrapFiles, .dataDir]
}

extension MirrorgateConfiguration {
    /// The problems `checks` find, each at the line of its key when `locate` knows it (else of the nearest
    /// parent key written in the file).
    func fileIssues(
        file: String, checks: FileChecks = .all, locate: (String) -> (line: Int, column: Int)?
    ) -> [ConfigIssue] {
        var issues: [ConfigIssue] = []
        func add(_ key: String, _ message: String) {
            // a key the file leaves at its default has no line; the nearest written parent gives one
            var place = locate(key)
            var parent = key
            while place == nil, let dot = parent.lastIndex(of: ".") {
                parent = String(parent[..<dot])
                place = locate(parent)
            }
            issues.append(
                ConfigIssue(
                    file: file, line: place?.line ?? 0, column: place?.column ?? 0, keyPath: key,
                    message: "\(key): \(message)"))
        }
        if checks.contains(.bootstrapFiles) {
            for (key, path) in bootstrapFileKeys() {
                if let problem = Self.readableFileProblem(resolve(path: path)) {
                    add(key, "bootstrap file '\(path)' \(problem)")
                }
            }
        }
        if checks.contains(.dataDir), let problem = Self.writableDirectoryProblem(dataDir) {
            add("dataDir", "'\(dataDir)' \(problem)")
        }
        return issues
    }

    /// `dataDir` is a writable directory, or can be created: empty, else one clean line saying why not
    /// (for a `dataDir` set outside a file, e.g. by `--data-dir`). `serve` checks before opening anything,
    /// so that it never fails later with a raw error dump.
    public func dataDirIssues(file: String) -> [ConfigIssue] {
        fileIssues(file: file, checks: .dataDir) { _ in nil }
    }

    /// Every bootstrap file of the configuration: the dotted key that names it, and the path as written.
    func bootstrapFileKeys() -> [(key: String, path: String)] {
        var out: [(key: String, path: String)] = []
        func algolia(_ prefix: String, _ b: AlgoliaBootstrap?) {
            guard let b else { return }
            if let s = b.settings { out.append(("\(prefix).bootstrap.settings", s)) }
            for o in b.objects { out.append(("\(prefix).bootstrap.objects", o)) }
            if let s = b.synonyms { out.append(("\(prefix).bootstrap.synonyms", s)) }
            if let r = b.rules { out.append(("\(prefix).bootstrap.rules", r)) }
        }
        for (name, index) in self.algolia.indices.sorted(by: { $0.key < $1.key }) {
            algolia("algolia.indices.\(name)", index.bootstrap)
        }
        for (name, index) in self.algolia.offlineIndices.sorted(by: { $0.key < $1.key }) {
            algolia("algolia.offlineIndices.\(name)", index.bootstrap)
        }
        for (name, service) in odata.services.sorted(by: { $0.key < $1.key }) {
            guard let b = service.bootstrap else { continue }
            let p = "odata.services.\(name).bootstrap"
            out.append(("\(p).metadata", b.metadata))
            for (set, path) in b.data.sorted(by: { $0.key < $1.key }) {
                out.append(("\(p).data.\(set)", path))
            }
        }
        return out
    }

    /// nil when `path` is a regular file this process can read, else why not ("does not exist", …).
    static func readableFileProblem(_ path: String) -> String? {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            return "does not exist (looked for \(path))"
        }
        if isDirectory.boolValue { return "is a directory (\(path))" }
        if access(path, R_OK) != 0 { return "is not readable: \(errnoText()) (\(path))" }
        return nil
    }

    /// nil when `path` is a directory this process can create files in, or does not exist yet and its
    /// nearest existing ancestor is such a directory (serve creates it); else why not.
    static func writableDirectoryProblem(_ path: String) -> String? {
        let absolute = URL(fileURLWithPath: path).standardizedFileURL.path
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: absolute, isDirectory: &isDirectory) {
            if !isDirectory.boolValue { return "is not a directory (\(absolute))" }
            if access(absolute, W_OK | X_OK) != 0 {
                return "is not writable: \(errnoText()) (\(absolute))"
            }
            return nil
        }
        var ancestor = URL(fileURLWithPath: absolute).deletingLastPathComponent()
        for _ in 0..<256 {
            if FileManager.default.fileExists(atPath: ancestor.path, isDirectory: &isDirectory) {
                if !isDirectory.boolValue {
                    return "cannot be created: \(ancestor.path) is not a directory"
                }
                if access(ancestor.path, W_OK | X_OK) != 0 {
                    return "cannot be created in \(ancestor.path): \(errnoText())"
                }
                return nil
            }
            if ancestor.path == "/" { break }
            ancestor = ancestor.deletingLastPathComponent()
        }
        return "cannot be created (no existing parent directory)"
    }

    private static func errnoText() -> String { String(cString: strerror(errno)) }
}
