/// A dictionary term matched by a query word.
struct TermMatch {
    var term: Int
    var typos: Int
    /// Matched as a prefix or with typos (not the whole word exactly).
    var nonExact: Bool
}

/// Damerau-Levenshtein (optimal string alignment) with Algolia's first-letter rule: when the first
/// letters differ the count is one higher. Returns nil when above `maxTypos`.
func typoDistance(_ a: [UInt8], _ b: ArraySlice<UInt8>, maxTypos: Int) -> Int? {
    if abs(a.count - b.count) > maxTypos { return nil }
    if maxTypos < 2, let x = a.first, let y = b.first, x != y { return nil }
    let b = Array(b)
    if a.isEmpty || b.isEmpty {
        return Swift.max(a.count, b.count) <= maxTypos ? Swift.max(a.count, b.count) : nil
    }
    let m = a.count
    let n = b.count
    var prev2 = [Int](repeating: 0, count: m + 1)
    var prev = Array(0...m)
    var row = [Int](repeating: 0, count: m + 1)
    for i in 1...n {
        row[0] = i
        var rowMin = row[0]
        for j in 1...m {
            var cost = Swift.min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (b[i - 1] == a[j - 1] ? 0 : 1))
            if i > 1 && j > 1 && b[i - 1] == a[j - 2] && b[i - 2] == a[j - 1] {
                cost = Swift.min(cost, prev2[j - 2] + 1)
            }
            row[j] = cost
            rowMin = Swift.min(rowMin, cost)
        }
        if rowMin > maxTypos { return nil }
        (prev2, prev, row) = (prev, row, prev2)
    }
    var distance = prev[m]
    if a[0] != b[0] { distance += 1 }
    return distance <= maxTypos ? distance : nil
}

extension IndexData {
    /// Terms matching `word`: the exact term, terms it prefixes (when `prefix`), and terms within
    /// `maxTypos` Damerau-Levenshtein edits (first-letter edits count twice); with `prefix`, a typo
    /// match may also be on the term's first `word.count` or `word.count + 1` letters.
    func matchTerms(_ word: [UInt8], prefix: Bool, maxTypos: Int) -> [TermMatch] {
        var best: [Int: TermMatch] = [:]
        var result: [TermMatch] = []
        if prefix {
            for t in prefixRange(word) {
                result.append(TermMatch(term: t, typos: 0, nonExact: termLength(t) != word.count))
            }
        } else if let t = lookup(word) {
            result.append(TermMatch(term: t, typos: 0, nonExact: false))
        }
        guard maxTypos > 0, !word.isEmpty else { return result }
        let exactSet = Set(result.map(\.term))
        var ranges: [(Range<Int>, Int)] = []
        var search = TypoSearch(data: self, word: word, maxTypos: maxTypos, prefix: prefix)
        search.run { term, typos in
            if exactSet.contains(term) { return }
            if let existing = best[term], existing.typos <= typos { return }
            best[term] = TermMatch(term: term, typos: typos, nonExact: true)
        } range: { range, typos in
            ranges.append((range, typos))
        }
        for (range, typos) in ranges {
            for t in range where !exactSet.contains(t) {
                if let existing = best[t], existing.typos <= typos { continue }
                best[t] = TermMatch(term: t, typos: typos, nonExact: true)
            }
        }
        result.append(contentsOf: best.values)
        return result
    }
}

/// Depth-first walk of the sorted term dictionary as an implicit trie, carrying Damerau-Levenshtein
/// rows and pruning subtrees whose row minimum exceeds the budget.
private struct TypoSearch {
    let data: IndexData
    let word: [UInt8]
    let maxTypos: Int
    let prefix: Bool
    let m: Int
    var rows: [[Int]]
    var path: [UInt8]

    init(data: IndexData, word: [UInt8], maxTypos: Int, prefix: Bool) {
        self.data = data
        self.word = word
        self.maxTypos = maxTypos
        self.prefix = prefix
        m = word.count
        let maxDepth = m + maxTypos + 2
        rows = [[Int]](repeating: [Int](repeating: 0, count: m + 1), count: maxDepth + 1)
        rows[0] = Array(0...m)
        path = []
    }

    @inline(__always) func byte(_ t: Int, _ i: Int) -> UInt8 { data.termBytes[Int(data.termOffsets[t]) + i] }

    mutating func run(term: (Int, Int) -> Void, range: (Range<Int>, Int) -> Void) {
        visit(lo: 0, hi: data.termCount, depth: 0, penalty: 0, prefixCost: Int.max, term: term, range: range)
    }

    private mutating func visit(
        lo: Int, hi: Int, depth: Int, penalty: Int, prefixCost: Int,
        term: (Int, Int) -> Void, range: (Range<Int>, Int) -> Void
    ) {
        var lo = lo
        var prefixCost = prefixCost
        if depth > 0 {
            let cost = rows[depth][m] + penalty
            // A term that ends here matches as a whole word.
            if data.termLength(lo) == depth && cost <= maxTypos { term(lo, cost) }
            if prefix && (depth == m || depth == m + 1) {
                let subtree = Swift.min(prefixCost, cost)
                if subtree <= maxTypos && subtree > 0 && (depth == m || cost < prefixCost) {
                    range(lo..<hi, subtree)
                }
                prefixCost = subtree
            }
            // Deeper nodes can still match as whole words (e.g. two deletions) up to m + maxTypos.
            if depth >= m + maxTypos { return }
        }
        if data.termLength(lo) == depth { lo += 1 }
        guard depth + 1 < rows.count else { return }
        while lo < hi {
            let b = byte(lo, depth)
            // Find the end of the run of terms with byte b at position depth.
            var a = lo + 1
            var z = hi
            while a < z {
                let mid = (a + z) >> 1
                if byte(mid, depth) == b { a = mid + 1 } else { z = mid }
            }
            let end = a
            var childPenalty = penalty
            if depth == 0 && b != word[0] { childPenalty = 1 }
            if childPenalty <= maxTypos {
                // Compute the row for depth+1.
                let i = depth + 1
                rows[i][0] = i
                var rowMin = i
                for j in 1...Swift.max(m, 1) where j <= m {
                    var cost = Swift.min(
                        rows[i - 1][j] + 1, rows[i][j - 1] + 1,
                        rows[i - 1][j - 1] + (b == word[j - 1] ? 0 : 1))
                    if i > 1 && j > 1 && b == word[j - 2] && path[i - 2] == word[j - 1] {
                        cost = Swift.min(cost, rows[i - 2][j - 2] + 1)
                    }
                    rows[i][j] = cost
                    if cost < rowMin { rowMin = cost }
                }
                if rowMin + childPenalty <= maxTypos {
                    path.append(b)
                    visit(
                        lo: lo, hi: end, depth: i, penalty: childPenalty, prefixCost: prefixCost, term: term,
                        range: range)
                    path.removeLast()
                }
            }
            lo = end
        }
    }
}
