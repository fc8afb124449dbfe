import Yams

/// A dotted key path as segments; sequence items are `[i]` segments.
struct ConfPath: Hashable {
    var segments: [String] = []

    func child(_ key: String) -> ConfPath { ConfPath(segments: segments + [key]) }
    func item(_ i: Int) -> ConfPath { ConfPath(segments: segments + ["[\(i)]"]) }

    var dotted: String {
        var out = ""
        for s in segments {
            if !out.isEmpty && !s.hasPrefix("[") { out += "." }
            out += s
        }
        return out
    }
}

/// A YAML node after environment interpolation, with its position (1-based; 0 = unknown).
struct YNode {
    enum Kind {
        case scalar(String, plain: Bool)
        case mapping([YEntry])
        case sequence([YNode])
    }
    var kind: Kind
    var line: Int
    var column: Int
    /// `true` when `${…}` interpolation changed the scalar's text (an empty result is then not a YAML null
    /// to keys that must tell the two apart, such as secrets).
    var interpolated = false

    /// A plain `null`, `~`, `Null`, `NULL` or empty scalar.
    var isNull: Bool {
        if case .scalar(let s, let plain) = kind, plain {
            return s.isEmpty || s == "~" || s == "null" || s == "Null" || s == "NULL"
        }
        return false
    }

    var typeName: String {
        switch kind {
        case .scalar(let s, let plain):
            if isNull { return "null" }
            guard plain else { return "a string" }
            switch YNode.resolvePlain(s) {
            case .bool: return "a boolean"
            case .int, .double: return "a number"
            default: return "a string"
            }
        case .mapping: return "a mapping"
        case .sequence: return "a list"
        }
    }

    /// YAML 1.2 core-schema typing of a plain scalar.
    static func resolvePlain(_ s: String) -> ConfigValue {
        switch s {
        case "", "~", "null", "Null", "NULL": return .null
        case "true", "True", "TRUE": return .bool(true)
        case "false", "False", "FALSE": return .bool(false)
        default: break
        }
        let body = s.hasPrefix("-") || s.hasPrefix("+") ? s.dropFirst() : Substring(s)
        guard let first = body.first, first.isASCIIDigit || first == "." else { return .string(s) }
        if body.allSatisfy(\.isASCIIDigit) {
            if let i = Int64(s.hasPrefix("+") ? String(s.dropFirst()) : s) { return .int(i) }
        }
        if body.allSatisfy({
            $0.isASCIIDigit || $0 == "." || $0 == "e" || $0 == "E" || $0 == "-" || $0 == "+"
        }),
            body.contains(where: \.isASCIIDigit), let d = Double(s)
        {
            return .double(d)
        }
        return .string(s)
    }

    /// The node as an arbitrary value (quoted scalars stay strings).
    var configValue: ConfigValue {
        switch kind {
        case .scalar(let s, let plain): return plain ? YNode.resolvePlain(s) : .string(s)
        case .sequence(let items): return .array(items.map(\.configValue))
        case .mapping(let entries):
            var object: [String: ConfigValue] = [:]
            for e in entries { object[e.key] = e.value.configValue }
            return .object(object)
        }
    }
}

/// One key of a mapping, with the key's position.
struct YEntry {
    var key: String
    var line: Int
    var column: Int
    var value: YNode
}

/// Turns Yams nodes into `YNode`s, interpolating `${NAME}` / `${NAME:-default}` in scalar values.
struct TreeBuilder {
    let environment: [String: String]
    var issues: [(ConfPath, Int, Int, String)] = []

    mutating func build(_ node: Node, path: ConfPath) -> YNode {
        let line = node.mark?.line ?? 0
        let column = node.mark?.column ?? 0
        switch node {
        case .scalar(let scalar):
            let raw = scalar.string
            let text = interpolate(raw, path: path, line: line, column: column)
            var plain = scalar.style == .plain || scalar.style == .any
            // An explicit `!!str` tag on something that would otherwise be typed keeps it a string.
            if plain, node.tag.description == Tag.Name.str.rawValue {
                if case .string = YNode.resolvePlain(raw) {} else { plain = false }
            }
            var built = YNode(kind: .scalar(text, plain: plain), line: line, column: column)
            built.interpolated = text != raw
            return built
        case .sequence(let seq):
            var items: [YNode] = []
            for (i, child) in seq.enumerated() { items.append(build(child, path: path.item(i))) }
            return YNode(kind: .sequence(items), line: line, column: column)
        case .mapping(let map):
            var entries: [YEntry] = []
            for (k, v) in map {
                let kLine = k.mark?.line ?? line
                let kColumn = k.mark?.column ?? column
                guard case .scalar(let ks) = k else {
                    issues.append((path, kLine, kColumn, "\(label(path))keys must be plain strings"))
                    continue
                }
                if ks.string == "<<" {
                    issues.append((path, kLine, kColumn, "\(label(path))merge keys (<<) are not supported"))
                    continue
                }
                let value = build(v, path: path.child(ks.string))
                entries.append(YEntry(key: ks.string, line: kLine, column: kColumn, value: value))
            }
            return YNode(kind: .mapping(entries), line: line, column: column)
        case .alias:
            issues.append((path, line, column, "\(label(path))unresolved YAML alias"))
            return YNode(kind: .scalar("", plain: true), line: line, column: column)
        }
    }

    private func label(_ path: ConfPath) -> String { path.segments.isEmpty ? "" : "\(path.dotted): " }

    /// Replaces `${NAME}` and `${NAME:-default}`; `$${` stands for a literal `${`.
    mutating func interpolate(_ text: String, path: ConfPath, line: Int, column: Int) -> String {
        guard text.contains("${") else { return text }
        var out = ""
        var rest = Substring(text)
        while let dollar = rest.firstIndex(of: "$") {
            out += rest[..<dollar]
            let after = rest[dollar...]
            if after.hasPrefix("$${") {
                out += "${"
                rest = after.dropFirst(3)
                continue
            }
            guard after.hasPrefix("${") else {
                out += "$"
                rest = after.dropFirst()
                continue
            }
            let inner = after.dropFirst(2)
            guard let close = inner.firstIndex(of: "}") else {
                issues.append((path, line, column, "\(label(path))unterminated '${' in value"))
                return out + after
            }
            let expr = inner[..<close]
            rest = inner[inner.index(after: close)...]
            let name: Substring
            let fallback: Substring?
            if let sep = expr.range(of: ":-") {
                name = expr[..<sep.lowerBound]
                fallback = expr[sep.upperBound...]
            } else {
                name = expr
                fallback = nil
            }
            guard let first = name.first, first == "_" || first.isASCIILetter,
                name.allSatisfy({ $0 == "_" || $0.isASCIILetter || $0.isASCIIDigit })
            else {
                issues.append((path, line, column, "\(label(path))invalid variable reference '${\(expr)}'"))
                continue
            }
            if let value = environment[String(name)] {
                out += value
            } else if let fallback {
                out += fallback
            } else {
                issues.append(
                    (
                        path, line, column,
                        "\(label(path))environment variable '\(name)' is not set (write ${\(name):-default} to give a default)"
                    ))
            }
        }
        out += rest
        return out
    }
}
