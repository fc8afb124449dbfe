/// Reads a `YNode` tree into `MirrorgateConfiguration`, collecting every issue instead of stopping.
final class ConfigReader {
    let file: String
    let unsupported: [(pattern: [String], key: String, reason: String)]
    var issues: [ConfigIssue] = []
    /// Position of every value read, by dotted key path (for checks made on the finished struct).
    var locations: [String: (line: Int, column: Int)] = [:]

    init(file: String, unsupportedKeys: [String: String]) {
        self.file = file
        self.unsupported = unsupportedKeys.sorted { $0.key < $1.key }.map {
            (pattern: $0.key.split(separator: ".").map(String.init), key: $0.key, reason: $0.value)
        }
    }

    // MARK: Issues

    func fail(_ path: ConfPath, _ node: YNode?, _ message: String) {
        fail(path, line: node?.line ?? 0, column: node?.column ?? 0, message)
    }

    func fail(_ path: ConfPath, line: Int, column: Int, _ message: String) {
        let key = path.dotted
        issues.append(
            ConfigIssue(
                file: file, line: line, column: column, keyPath: key,
                message: key.isEmpty ? message : "\(key): \(message)"))
    }

    /// Rejects a key of a feature this version does not implement, when set to a non-default value.
    func gate(_ path: ConfPath, _ node: YNode, changed: Bool) {
        guard changed else { return }
        for entry in unsupported where ConfigReader.matches(entry.pattern, path.segments) {
            fail(path, node, "not supported in this version (\(entry.reason))")
            return
        }
    }

    static func matches(_ pattern: [String], _ segments: [String]) -> Bool {
        guard pattern.count == segments.count else { return false }
        for (p, s) in zip(pattern, segments) where p != "*" && p != s { return false }
        return true
    }

    // MARK: Mappings

    /// The keys of one mapping; `finish()` reports those never taken as unknown.
    final class Fields {
        let reader: ConfigReader
        let path: ConfPath
        let entries: [YEntry]
        private var taken = Set<String>()

        init(_ reader: ConfigReader, _ path: ConfPath, _ node: YNode?) {
            self.reader = reader
            self.path = path
            guard let node, !node.isNull else {
                entries = []
                return
            }
            guard case .mapping(let e) = node.kind else {
                reader.fail(path, node, "expected a mapping, got \(node.typeName)")
                entries = []
                return
            }
            entries = e
        }

        /// The value node of `key` (nil when absent); records its location.
        func take(_ key: String) -> YNode? {
            taken.insert(key)
            guard let e = entries.first(where: { $0.key == key }) else { return nil }
            reader.locations[path.child(key).dotted] = (e.value.line, e.value.column)
            return e.value
        }

        /// Every entry, all marked as taken (for maps of names).
        func all() -> [YEntry] {
            for e in entries {
                taken.insert(e.key)
                reader.locations[path.child(e.key).dotted] = (e.line, e.column)
            }
            return entries
        }

        func finish() {
            for e in entries where !taken.contains(e.key) {
                let key = path.child(e.key).dotted
                reader.issues.append(
                    ConfigIssue(
                        file: reader.file, line: e.line, column: e.column, keyPath: key,
                        message: "unknown key '\(key)'"))
            }
        }
    }

    // MARK: Typed values

    private func scalarText(_ path: ConfPath, _ node: YNode, expected: String) -> String? {
        guard case .scalar(let s, _) = node.kind else {
            fail(path, node, "expected \(expected), got \(node.typeName)")
            return nil
        }
        return s
    }

    /// Reads `key` with `parse`; absent or null gives `def`; a bad value is reported and gives `def`.
    func value<T: Equatable>(
        _ m: Fields, _ key: String, _ def: T, expected: String, _ parse: (String) throws(ValueError) -> T
    ) -> T {
        let path = m.path.child(key)
        guard let node = m.take(key), !node.isNull else { return def }
        guard let text = scalarText(path, node, expected: expected) else { return def }
        do throws(ValueError) {
            let v = try parse(text)
            gate(path, node, changed: v != def)
            return v
        } catch {
            fail(path, node, error.message)
            return def
        }
    }

    func bool(_ m: Fields, _ key: String, _ def: Bool) -> Bool {
        value(m, key, def, expected: "true or false") { (s: String) throws(ValueError) -> Bool in
            switch s {
            case "true", "True", "TRUE": return true
            case "false", "False", "FALSE": return false
            default: throw ValueError("expected true or false, got '\(s)'")
            }
        }
    }

    func int(_ m: Fields, _ key: String, _ def: Int, range: ClosedRange<Int>? = nil) -> Int {
        value(m, key, def, expected: "an integer") { (s: String) throws(ValueError) -> Int in
            guard let i = Int(s.trimmingSpaces()) else { throw ValueError("expected an integer, got '\(s)'") }
            if let range, !range.contains(i) {
                throw ValueError("must be between \(range.lowerBound) and \(range.upperBound), got \(i)")
            }
            return i
        }
    }

    func optionalInt(_ m: Fields, _ key: String, _ def: Int?, minimum: Int) -> Int? {
        value(m, key, def, expected: "an integer") { (s: String) throws(ValueError) -> Int? in
            guard let i = Int(s.trimmingSpaces()) else { throw ValueError("expected an integer, got '\(s)'") }
            guard i >= minimum else { throw ValueError("must be at least \(minimum), got \(i)") }
            return i
        }
    }

    func duration(_ m: Fields, _ key: String, _ def: Duration, positive: Bool = true) -> Duration {
        value(m, key, def, expected: "a duration such as 5s") { (s: String) throws(ValueError) -> Duration in
            let d = try ConfigSyntax.parseDuration(s)
            if positive && d <= .zero { throw ValueError("must be greater than 0s") }
            return d
        }
    }

    func size(_ m: Fields, _ key: String, _ def: Int) -> Int {
        value(m, key, def, expected: "a size such as 10MiB") { (s: String) throws(ValueError) -> Int in
            let n = try ConfigSyntax.parseSize(s)
            guard n > 0 else { throw ValueError("must be greater than 0") }
            return n
        }
    }

    func string(_ m: Fields, _ key: String, _ def: String) -> String {
        value(m, key, def, expected: "a string") { (s: String) throws(ValueError) -> String in
            guard !s.isEmpty else { throw ValueError("must not be empty") }
            return s
        }
    }

    /// Empty text counts as null (so `${VAR:-}` can leave a key unset).
    func optionalString(_ m: Fields, _ key: String, _ def: String?) -> String? {
        value(m, key, def, expected: "a string") { (s: String) throws(ValueError) -> String? in
            s.isEmpty ? nil : s
        }
    }

    /// A secret (`storeEncryptionKey`): absent or null for none; an empty or short value is an error, never
    /// silently "no encryption" (an unset `${VAR:-}` must not turn encryption off).
    func secret(_ m: Fields, _ key: String) -> String? {
        let path = m.path.child(key)
        guard let node = m.take(key), !(node.isNull && !node.interpolated) else { return nil }
        guard let s = scalarText(path, node, expected: "a string") else { return nil }
        guard !s.isEmpty else {
            fail(path, node, "is empty: give a secret, or write null to store data unencrypted")
            return nil
        }
        guard s.count >= MirrorgateConfiguration.minimumSecretLength else {
            fail(
                path, node,
                "must be at least \(MirrorgateConfiguration.minimumSecretLength) characters (a long random "
                    + "secret: it alone stands between a copied data directory and its data)")
            return nil
        }
        gate(path, node, changed: true)
        return s
    }

    func enumeration<E: RawRepresentable & CaseIterable & Equatable>(_ m: Fields, _ key: String, _ def: E)
        -> E
    where E.RawValue == String {
        let names = E.allCases.map(\.rawValue)
        return value(m, key, def, expected: names.joined(separator: " | ")) {
            (s: String) throws(ValueError) -> E in
            guard let v = E(rawValue: s) else {
                throw ValueError("expected one of \(names.joined(separator: ", ")), got '\(s)'")
            }
            return v
        }
    }

    /// A list of non-empty strings (a single string is not accepted as a list).
    func stringList(_ path: ConfPath, _ node: YNode) -> [String]? {
        guard case .sequence(let items) = node.kind else {
            fail(path, node, "expected a list of strings, got \(node.typeName)")
            return nil
        }
        var out: [String] = []
        for (i, item) in items.enumerated() {
            guard case .scalar(let s, _) = item.kind, !item.isNull, !s.isEmpty else {
                fail(path.item(i), item, "expected a non-empty string, got \(item.typeName)")
                continue
            }
            out.append(s)
        }
        return out
    }

    /// A mapping of string to string (scalar values taken as written).
    func stringMap(_ m: Fields, _ key: String) -> [String: String] {
        let path = m.path.child(key)
        guard let node = m.take(key), !node.isNull else { return [:] }
        guard case .mapping(let entries) = node.kind else {
            fail(path, node, "expected a mapping of names to strings, got \(node.typeName)")
            return [:]
        }
        var out: [String: String] = [:]
        for e in entries {
            guard case .scalar(let s, _) = e.value.kind, !e.value.isNull else {
                fail(path.child(e.key), e.value, "expected a string, got \(e.value.typeName)")
                continue
            }
            out[e.key] = s
        }
        gate(path, node, changed: !out.isEmpty)
        return out
    }

    /// `true` when `url` is an absolute http(s) URL with a host.
    static func isHTTPURL(_ url: String) -> Bool {
        for scheme in ["http://", "https://"] where url.lowercased().hasPrefix(scheme) {
            let rest = url.dropFirst(scheme.count)
            let host = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
            return !host.isEmpty && !url.contains(" ")
        }
        return false
    }
}
