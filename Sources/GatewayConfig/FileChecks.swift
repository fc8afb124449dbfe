import Foundation

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
