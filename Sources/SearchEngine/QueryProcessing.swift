import JSONCore

// From the query text to the index terms it matches: the parsed query (words, alternatives, exclusions,
// phrases, stop words) and each word's dictionary terms within its typo budget.

/// What the query text asks for once parsed: the words to match (with their prefix, typo budget,
/// optional flag and alternatives), the words to exclude (`-word` with `advancedSyntax`), the exact
/// phrases (`"…"`), and what was dropped (stop words).
struct ParsedQuery {
    var words: [QueryWord]
    /// Normalized words whose records are excluded.
    var exclusions: [[UInt8]] = []
    /// Word indices of each exact phrase, in order.
    var phrases: [[Int]] = []
    /// Languages requested for `ignorePlurals` / `removeStopWords` that have no local dictionary.
    var unsupportedLanguages: [String: [String]] = [:]
}

/// One token of the query text and the role advanced syntax gives it.
private struct QueryToken {
    var bytes: [UInt8]
    var phrase: Int
    var excluded: Bool
}

extension IndexData {
    /// The languages a language feature (`ignorePlurals`, `removeStopWords`) applies to: nil when off.
    /// `true` means `queryLanguages` when set, else every language Algolia supports (here: the local
    /// dictionaries, the others are reported as unsupported); a list overrides `queryLanguages`.
    static func featureLanguages(_ name: String, _ options: SearchOptions) -> (
        use: [String], missing: [String]
    )? {
        guard let value = options.value(name) else { return nil }
        var requested: [String]
        switch value {
        case .bool(false): return nil
        case .bool(true):
            requested = options.list("queryLanguages") ?? []
        case .string(let s) where s.lowercased() == "false" || s.isEmpty: return nil
        case .string(let s) where s.lowercased() == "true":
            requested = options.list("queryLanguages") ?? []
        default:
            requested = stringList(value)
            if requested.isEmpty { return nil }
        }
        if requested.isEmpty {
            return (LanguageTables.supported, ["all other languages"])
        }
        let codes = requested.map { $0.trimmingSpaces.lowercased() }
        return (
            codes.filter { LanguageTables.supported.contains($0) },
            codes.filter { !LanguageTables.supported.contains($0) }
        )
    }

    /// Splits the query into words and decides, per word: prefix, typo budget, optional, phrase,
    /// exclusion, plural alternatives; removes stop words.
    func parseQuery(_ options: SearchOptions) throws(SearchError) -> ParsedQuery {
        // Bounded before any work: the typo search allocates in the square of a word's length.
        try SearchLimits.checkLength("query", options.params["query"], limit: SearchLimits.queryBytes)
        let text = options.query
        let advanced = options.bool("advancedSyntax", default: false)
        let features = Set(options.list("advancedSyntaxFeatures") ?? ["exactPhrase", "excludeWords"])
        let phrasesOn = advanced && features.contains("exactPhrase")
        let exclusionOn = advanced && features.contains("excludeWords")
        var tokens: [QueryToken] = []
        var phraseCount = 0
        if phrasesOn || exclusionOn {
            // Quoted segments are phrases; outside quotes, a chunk starting with '-' is excluded.
            var segments: [(String, Bool)] = []
            var current = ""
            var inQuote = false
            for char in text {
                if char == "\"" && phrasesOn {
                    segments.append((current, inQuote))
                    current = ""
                    inQuote.toggle()
                } else {
                    current.append(char)
                }
            }
            segments.append((current, inQuote))
            for (segment, quoted) in segments {
                if quoted {
                    let words = normalizer.tokens(segment).map(\.normalized)
                    guard !words.isEmpty else { continue }
                    for word in words {
                        tokens.append(QueryToken(bytes: word, phrase: phraseCount, excluded: false))
                    }
                    phraseCount += 1
                    continue
                }
                for chunk in segment.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" }) {
                    let excluded = exclusionOn && chunk.hasPrefix("-") && chunk.count > 1
                    for token in normalizer.tokens(String(excluded ? chunk.dropFirst() : chunk)) {
                        tokens.append(QueryToken(bytes: token.normalized, phrase: -1, excluded: excluded))
                    }
                }
            }
        } else {
            tokens = normalizer.tokens(text).map {
                QueryToken(bytes: $0.normalized, phrase: -1, excluded: false)
            }
        }
        var parsed = ParsedQuery(words: [])
        parsed.exclusions = tokens.filter(\.excluded).map(\.bytes)
        var positive = Array(tokens.filter { !$0.excluded }.prefix(32))

        let queryType = options.queryType
        let typoMode = options.typoMode
        let min1 = try options.int("minWordSizefor1Typo", default: 4)
        let min2 = try options.int("minWordSizefor2Typos", default: 8)
        let typosOnNumbers = options.bool("allowTyposOnNumericTokens", default: true)
        func isPrefix(_ i: Int, of count: Int) -> Bool {
            guard positive[i].phrase < 0 else { return false }
            switch queryType {
            case .prefixAll: return true
            case .prefixNone: return false
            case .prefixLast: return i == count - 1
            }
        }

        // Stop words: never removed from words read as prefixes, nor from phrases.
        if let stop = Self.featureLanguages("removeStopWords", options) {
            if !stop.missing.isEmpty { parsed.unsupportedLanguages["removeStopWords"] = stop.missing }
            let sets = stop.use.compactMap(LanguageTables.stopWords)
            if !sets.isEmpty {
                let count = positive.count
                positive = positive.enumerated().filter { i, token in
                    isPrefix(i, of: count) || token.phrase >= 0 || !sets.contains { $0.contains(token.bytes) }
                }.map(\.element)
            }
        }

        let plural = Self.featureLanguages("ignorePlurals", options)
        if let plural, !plural.missing.isEmpty {
            parsed.unsupportedLanguages["ignorePlurals"] = plural.missing
        }
        let pluralTables = (plural?.use ?? []).compactMap(LanguageTables.plurals)
        let exactKinds = Set(options.list("alternativesAsExact") ?? ["ignorePlurals", "singleWordSynonym"])
        var optionalSet = Set<[UInt8]>()
        for entry in options.list("optionalWords") ?? [] {
            for token in normalizer.tokens(entry) { optionalSet.insert(token.normalized) }
        }

        var phraseWords: [Int: [Int]] = [:]
        for (i, token) in positive.enumerated() {
            let prefix = isPrefix(i, of: positive.count)
            var maxTypos = 0
            let length = String(decoding: token.bytes, as: UTF8.self).count
            if typoMode != .off && token.phrase < 0 {
                if length >= min2 { maxTypos = 2 } else if length >= min1 { maxTypos = 1 }
                if !typosOnNumbers && token.bytes.isNumericToken { maxTypos = 0 }
                if settings.disableTypoOnWords.contains(String(decoding: token.bytes, as: UTF8.self)) {
                    maxTypos = 0
                }
            }
            var word = QueryWord(
                text: String(decoding: token.bytes, as: UTF8.self), bytes: token.bytes, prefix: prefix,
                maxTypos: maxTypos)
            word.optional = optionalSet.contains(token.bytes)
            word.phrase = token.phrase
            if token.phrase < 0 {
                var seen = Set<[UInt8]>([token.bytes])
                for table in pluralTables {
                    for form in table.forms(of: token.bytes) where seen.insert(form).inserted {
                        word.alternatives.append(
                            Alternative(
                                tokens: [form], typos: 0, nonExact: !exactKinds.contains("ignorePlurals"),
                                kind: .plural))
                    }
                }
            } else {
                phraseWords[token.phrase, default: []].append(i)
            }
            parsed.words.append(word)
        }
        parsed.phrases = phraseWords.keys.sorted().compactMap { phraseWords[$0] }.filter { $0.count > 1 }
        return parsed
    }

    /// Whether `doc` holds each phrase's words consecutively in one allowed searchable attribute.
    func holdsPhrases(_ doc: Int, _ phrases: [[Int]], words: [QueryWord], allowed: [Bool]) -> Bool {
        let record = record(doc)
        for phrase in phrases {
            let wanted = phrase.map { words[$0].bytes }
            var found = false
            for (index, slot) in slots.enumerated() where allowed[index] && !found {
                guard let value = value(at: slot.path, in: record) else { continue }
                forEachString(value) { text in
                    guard !found else { return }
                    let tokens = normalizer.tokens(text).map(\.normalized)
                    guard tokens.count >= wanted.count else { return }
                    for start in 0...(tokens.count - wanted.count)
                    where tokens[start..<(start + wanted.count)].elementsEqual(wanted) {
                        found = true
                        return
                    }
                }
            }
            if !found { return false }
        }
        return true
    }
}

/// Calls `body` with every string (and number, as text) inside `value`, arrays and objects walked.
func forEachString(_ value: JSON, _ body: (String) -> Void) {
    switch value {
    case .string(let s): body(s)
    case .int, .double: body(value.serialized())
    case .array(let items): for item in items { forEachString(item, body) }
    case .object(let object): for (_, child) in object { forEachString(child, body) }
    default: break
    }
}

/// A dictionary term matched by a query word.
struct TermMatch {
    /// The term segment and the term's id in it.
    var segment: Int
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
    /// Terms matching `word` in every segment: see ``TermSegment/matchTerms(_:prefix:maxTypos:segment:)``.
    func matchTerms(_ word: [UInt8], prefix: Bool, maxTypos: Int) -> [TermMatch] {
        if segments.count == 1 {
            return segments[0].matchTerms(word, prefix: prefix, maxTypos: maxTypos, segment: 0)
        }
        var result: [TermMatch] = []
        for (s, segment) in segments.enumerated() {
            result += segment.matchTerms(word, prefix: prefix, maxTypos: maxTypos, segment: s)
        }
        return result
    }
}

extension TermSegment {
    /// Terms matching `word`: the exact term, terms it prefixes (when `prefix`), and terms within
    /// `maxTypos` Damerau-Levenshtein edits (first-letter edits count twice); with `prefix`, a typo
    /// match may also be on the term's first `word.count` or `word.count + 1` letters.
    /// Each term appears once, with its smallest typo count (order unspecified), tagged `segment`.
    func matchTerms(_ word: [UInt8], prefix: Bool, maxTypos: Int, segment: Int) -> [TermMatch] {
        var result: [TermMatch] = []
        let exact: Range<Int>
        if prefix {
            exact = prefixRange(word)
            result.reserveCapacity(exact.count)
            for t in exact {
                result.append(
                    TermMatch(segment: segment, term: t, typos: 0, nonExact: termLength(t) != word.count))
            }
        } else if let t = lookup(word) {
            exact = t..<(t + 1)
            result.append(TermMatch(segment: segment, term: t, typos: 0, nonExact: false))
        } else {
            exact = 0..<0
        }
        guard maxTypos > 0, !word.isEmpty, termCount > 0 else { return result }
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
            result.append(
                TermMatch(segment: segment, term: Int(term), typos: Int(entry & 15), nonExact: true))
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
