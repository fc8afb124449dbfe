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
    /// Each term appears once, with its smallest typo count (order unspecified).
    func matchTerms(_ word: [UInt8], prefix: Bool, maxTypos: Int) -> [TermMatch] {
        var result: [TermMatch] = []
        let exact: Range<Int>
        if prefix {
            exact = prefixRange(word)
            result.reserveCapacity(exact.count)
            for t in exact {
                result.append(TermMatch(term: t, typos: 0, nonExact: termLength(t) != word.count))
            }
        } else if let t = lookup(word) {
            exact = t..<(t + 1)
            result.append(TermMatch(term: t, typos: 0, nonExact: false))
        } else {
            exact = 0..<0
        }
        guard maxTypos > 0, !word.isEmpty else { return result }
        // (term << 4 | typos), sorted then deduplicated keeping the fewest typos per term.
        var found: [UInt64] = []
        var ranges: [(Range<Int>, Int)] = []
        termBytes.withUnsafeBufferPointer { bytes in
            termOffsets.withUnsafeBufferPointer { offsets in
                word.withUnsafeBufferPointer { wordBuffer in
                    let search = TypoSearch(
                        termBytes: bytes, termOffsets: offsets, word: wordBuffer, maxTypos: maxTypos,
                        prefix: prefix)
                    defer { search.deallocate() }
                    search.run { term, typos in
                        if !exact.contains(term) { found.append(UInt64(term) << 4 | UInt64(typos)) }
                    } range: { range, typos in
                        ranges.append((range, typos))
                    }
                }
            }
        }
        for (range, typos) in ranges {
            found.reserveCapacity(found.count + range.count)
            for t in range where !exact.contains(t) { found.append(UInt64(t) << 4 | UInt64(typos)) }
        }
        guard !found.isEmpty else { return result }
        found.sort()
        var last = UInt64.max
        for entry in found {
            let term = entry >> 4
            if term == last { continue }
            last = term
            result.append(TermMatch(term: Int(term), typos: Int(entry & 15), nonExact: true))
        }
        return result
    }
}

/// Depth-first walk of the sorted term dictionary as an implicit trie, carrying Damerau-Levenshtein
/// rows and pruning subtrees whose row minimum exceeds the budget. Works on raw buffers (no
/// allocation or reference counting in the walk); `deallocate()` frees the row storage.
private struct TypoSearch {
    let termBytes: UnsafeBufferPointer<UInt8>
    let termOffsets: UnsafeBufferPointer<Int32>
    let word: UnsafeBufferPointer<UInt8>
    let maxTypos: Int
    let prefix: Bool
    let m: Int
    /// Rows of the DP table, `rowCount` rows of `m + 1` entries each.
    let rows: UnsafeMutablePointer<Int32>
    let rowCount: Int
    let path: UnsafeMutablePointer<UInt8>
    let termCount: Int

    init(
        termBytes: UnsafeBufferPointer<UInt8>, termOffsets: UnsafeBufferPointer<Int32>,
        word: UnsafeBufferPointer<UInt8>, maxTypos: Int, prefix: Bool
    ) {
        self.termBytes = termBytes
        self.termOffsets = termOffsets
        self.word = word
        self.maxTypos = maxTypos
        self.prefix = prefix
        m = word.count
        rowCount = m + maxTypos + 3
        rows = .allocate(capacity: rowCount * (m + 1))
        // Cells outside the diagonal band |i - j| <= maxTypos are never computed: their true distance
        // exceeds the budget, and "budget + 1" stands for it (Ukkonen's cut-off).
        rows.initialize(repeating: Int32(maxTypos + 1), count: rowCount * (m + 1))
        for j in 0...m { rows[j] = Int32(j) }
        path = .allocate(capacity: rowCount)
        path.initialize(repeating: 0, count: rowCount)
        termCount = termOffsets.count - 1
    }

    func deallocate() {
        rows.deallocate()
        path.deallocate()
    }

    @inline(__always) func byte(_ t: Int, _ i: Int) -> UInt8 { termBytes[Int(termOffsets[t]) + i] }
    @inline(__always) func termLength(_ t: Int) -> Int { Int(termOffsets[t + 1] - termOffsets[t]) }

    func run(term: (Int, Int) -> Void, range: (Range<Int>, Int) -> Void) {
        visit(lo: 0, hi: termCount, depth: 0, penalty: 0, prefixCost: Int.max, term: term, range: range)
    }

    private func visit(
        lo: Int, hi: Int, depth: Int, penalty: Int, prefixCost: Int,
        term: (Int, Int) -> Void, range: (Range<Int>, Int) -> Void
    ) {
        var lo = lo
        var prefixCost = prefixCost
        let width = m + 1
        if depth > 0 {
            let cost = Int(rows[depth * width + m]) + penalty
            // A term that ends here matches as a whole word.
            if termLength(lo) == depth && cost <= maxTypos { term(lo, cost) }
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
        if termLength(lo) == depth { lo += 1 }
        guard depth + 1 < rowCount else { return }
        let i = depth + 1
        let previous = rows + (i - 1) * width
        let row = rows + i * width
        let beforePrevious = i > 1 ? rows + (i - 2) * width : rows
        let previousByte: UInt8 = i > 1 ? path[i - 2] : 0
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
                row[0] = Int32(i)
                var rowMin = Int32(i)
                var j = Swift.max(1, i - maxTypos)
                let last = Swift.min(m, i + maxTypos)
                while j <= last {
                    var cost = Swift.min(
                        previous[j] + 1, row[j - 1] + 1, previous[j - 1] + (b == word[j - 1] ? 0 : 1))
                    if i > 1 && j > 1 && b == word[j - 2] && previousByte == word[j - 1] {
                        cost = Swift.min(cost, beforePrevious[j - 2] + 1)
                    }
                    row[j] = cost
                    if cost < rowMin { rowMin = cost }
                    j += 1
                }
                if Int(rowMin) + childPenalty <= maxTypos {
                    path[depth] = b
                    visit(
                        lo: lo, hi: end, depth: i, penalty: childPenalty, prefixCost: prefixCost, term: term,
                        range: range)
                }
            }
            lo = end
        }
    }
}
