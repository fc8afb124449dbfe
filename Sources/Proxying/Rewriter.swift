/// Replaces every occurrence of some byte patterns with their replacements: the two-way URL map's
/// tool for bodies (upstream service root ↔ gateway service root). Works on whole bodies and on bodies
/// that arrive in pieces: it holds back at most the longest pattern's length minus one byte.
public struct Rewriter: StreamTransform, Sendable {
    /// Pairs of (pattern, replacement); earlier pairs win where patterns overlap.
    public let rules: [(pattern: [UInt8], replacement: [UInt8])]
    private let holdBack: Int
    private var pending: [UInt8] = []

    /// Creates a rewriter from string pairs; empty patterns are ignored.
    public init(_ pairs: [(String, String)]) {
        rules = pairs.filter { !$0.0.isEmpty }.map { (Array($0.0.utf8), Array($0.1.utf8)) }
        holdBack = max(0, (rules.map(\.pattern.count).max() ?? 1) - 1)
    }

    /// Whole-body replacement.
    public func apply(_ input: [UInt8]) -> [UInt8] {
        guard !rules.isEmpty, !input.isEmpty else { return input }
        var out: [UInt8] = []
        out.reserveCapacity(input.count)
        _ = scan(input, upTo: input.count, into: &out)
        return out
    }

    /// Scans `input[0..<limit]` starting matches only below `limit` (matches may extend past it);
    /// returns the index where scanning stopped.
    private func scan(_ input: [UInt8], upTo limit: Int, into out: inout [UInt8]) -> Int {
        var i = 0
        let n = input.count
        outer: while i < limit {
            let b = input[i]
            for rule in rules where rule.pattern[0] == b {
                let p = rule.pattern
                if i + p.count <= n {
                    var j = 1
                    while j < p.count && input[i + j] == p[j] { j += 1 }
                    if j == p.count {
                        out.append(contentsOf: rule.replacement)
                        i += p.count
                        continue outer
                    }
                }
            }
            out.append(b)
            i += 1
        }
        return i
    }

    public mutating func feed(_ bytes: [UInt8]) -> [UInt8] {
        guard !rules.isEmpty else { return bytes }
        let input = pending + bytes
        let limit = input.count - holdBack
        guard limit > 0 else {
            pending = input
            return []
        }
        var out: [UInt8] = []
        out.reserveCapacity(input.count)
        let stopped = scan(input, upTo: limit, into: &out)
        pending = Array(input[stopped...])
        return out
    }

    public mutating func flush() -> [UInt8] {
        let rest = apply(pending)
        pending = []
        return rest
    }
}
