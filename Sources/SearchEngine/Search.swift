import JSONCore

/// One processed query word.
struct QueryWord {
    var text: String
    var bytes: [UInt8]
    var prefix: Bool
    var maxTypos: Int
    /// Words or phrases that also match this one (plurals, synonyms), with the typo count a match on
    /// them counts. A multi-word alternative matches a document holding all its words.
    var alternatives: [Alternative] = []
    /// A record need not match an optional word (`optionalWords`, `removeWordsIfNoResults`).
    var optional = false
    /// The exact phrase (`"…"` with `advancedSyntax`) this word belongs to, or -1.
    var phrase = -1
}

/// Another spelling that matches a query word, and how a match on it counts.
struct Alternative: Sendable {
    enum Kind: Sendable { case plural, synonym }
    var tokens: [[UInt8]]
    var typos: Int
    /// A match on it is not an exact match (`alternativesAsExact` does not list its kind).
    var nonExact: Bool
    var kind: Kind
}

/// Per-word best match in a document, packed so that `min` picks the best:
/// typos(4) | nonExact(1) | rank(8) | orderedPos(15) | notSingle(1) | pos(15) | slot(16).
enum Packed {
    static let absent = UInt64.max
    @inline(__always) static func make(
        typos: Int, nonExact: Bool, rank: Int, orderedPos: Int, single: Bool, pos: Int, slot: Int
    ) -> UInt64 {
        UInt64(typos) << 60 | (nonExact ? 1 << 59 : 0) | UInt64(rank & 0xFF) << 51 | UInt64(
            orderedPos & 0x7FFF) << 36
            | (single ? 0 : 1 << 35) | UInt64(pos & 0x7FFF) << 20 | UInt64(slot & 0xFFFF)
    }
    @inline(__always) static func typos(_ v: UInt64) -> Int { Int(v >> 60) }
    @inline(__always) static func nonExact(_ v: UInt64) -> Bool { v >> 59 & 1 == 1 }
    @inline(__always) static func attributeKey(_ v: UInt64) -> UInt64 { v >> 36 & 0x7FFFFF }
    @inline(__always) static func single(_ v: UInt64) -> Bool { v >> 35 & 1 == 0 }
    @inline(__always) static func pos(_ v: UInt64) -> Int { Int(v >> 20 & 0x7FFF) }
    @inline(__always) static func slot(_ v: UInt64) -> Int { Int(v & 0xFFFF) }
    @inline(__always) static func rank(_ v: UInt64) -> Int { Int(v >> 51 & 0xFF) }
    @inline(__always) static func orderedPos(_ v: UInt64) -> Int { Int(v >> 36 & 0x7FFF) }
}

/// The outcome of matching and filtering, before pagination.
struct MatchResult {
    var words: [QueryWord]
    var candidates: [Int32]
    /// `wordMatches[w][doc]` packed best match (only meaningful for candidates).
    var wordMatches: [MatchBuffer]
    /// Docs whose entry was set in each `wordMatches` array (to reset them for reuse).
    var wordDocs: [[Int32]] = []
}

/// A geo constraint resolved from the parameters.
struct GeoQuery {
    var center: (lat: Double, lng: Double)?
    var radius: Double?
    var boxes: [(Double, Double, Double, Double)]
    var precision: Double
    /// `aroundPrecision` as ranges: from that distance (meters) on, buckets of `value` meters.
    var precisionRanges: [(from: Double, value: Double)] = []
    /// `insidePolygon`: each polygon's (lat, lng) vertices.
    var polygons: [[(lat: Double, lng: Double)]] = []
}

extension IndexData {
    /// Restricts searchable slots (`restrictSearchableAttributes`).
    func allowedSlots(_ options: SearchOptions) -> [Bool] {
        guard let restrict = options.params["restrictSearchableAttributes"].map(stringList), !restrict.isEmpty
        else {
            return [Bool](repeating: true, count: slots.count)
        }
        let set = Set(restrict)
        return slots.map { slot in
            set.contains(slot.path) || set.contains(String(slot.path.split(separator: ".").first ?? ""))
        }
    }

    /// Fills the best-match array of one word from its matching terms.
    private func fill(
        _ buffer: MatchBuffer, matches: [TermMatch], allowed: [Bool], onNew: (Int32) -> Void
    ) {
        // Per slot: the packed bits that don't depend on the posting, and the slot's flags.
        let slotInfo = slots.enumerated().map { index, slot in
            (
                allowed: allowed[index], typoDisabled: slot.typoDisabled, prefixDisabled: slot.prefixDisabled,
                exactDisabled: slot.exactDisabled, rank: slot.rank, unordered: slot.unordered
            )
        }
        let dense = buffer.values
        slotInfo.withUnsafeBufferPointer { slotInfo in
            for (s, segment) in segments.enumerated() {
                segment.postStart.withUnsafeBufferPointer { postStart in
                    segment.postOccs.withUnsafeBufferPointer { postOccs in
                        segment.postDocs.withUnsafeBufferPointer { postDocs in
                            for match in matches where match.segment == s {
                                var i = Int(postStart[match.term])
                                let end = Int(postStart[match.term + 1])
                                while i < end {
                                    let occ = postOccs[i]
                                    let slotIndex = Int(occ >> 16)
                                    let slot = slotInfo[slotIndex]
                                    if slot.allowed && !(match.typos > 0 && slot.typoDisabled)
                                        && !(match.nonExact && match.typos == 0 && slot.prefixDisabled)
                                    {
                                        let pos = Int(occ & 0x7FFF)
                                        let value = Packed.make(
                                            typos: match.typos,
                                            nonExact: match.nonExact || slot.exactDisabled,
                                            rank: slot.rank, orderedPos: slot.unordered ? 0 : pos,
                                            single: occ & 0x8000 != 0, pos: pos, slot: slotIndex)
                                        let doc = Int(postDocs[i])
                                        let current = dense[doc]
                                        if value < current {
                                            if current == Packed.absent { onNew(Int32(doc)) }
                                            dense[doc] = value
                                        }
                                    }
                                    i += 1
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// Matches of the terms `refs` counted as one typo (splits and concatenations of query words).
    static func oneTypo(_ refs: [TermRef]) -> [TermMatch] {
        refs.map { TermMatch(segment: $0.segment, term: $0.term, typos: 1, nonExact: true) }
    }

    /// Matches every query word (all required), applies filters, geo and typo-tolerance modes.
    func match(
        _ options: SearchOptions, words: [QueryWord], filter: CompiledFilter, geo: GeoQuery?,
        exclusions: [[UInt8]] = [], phrases: [[Int]] = []
    ) -> MatchResult {
        let n = count
        var candidates: [Int32] = []
        var wordMatches: [MatchBuffer] = []
        var wordDocsOut: [[Int32]] = []
        if words.isEmpty {
            candidates.reserveCapacity(n)
            let excluded = excludedDocs(exclusions)
            for doc in 0..<n
            where isLive(doc) && (filter.isEmpty || filter.matches(doc)) && !excluded.contains(Int32(doc)) {
                candidates.append(Int32(doc))
            }
        } else {
            let allowed = allowedSlots(options)
            let typoMode = options.typoMode
            var termMatches = words.map { word in
                var matches = matchTerms(word.bytes, prefix: word.prefix, maxTypos: word.maxTypos)
                for alternative in word.alternatives where alternative.tokens.count == 1 {
                    for ref in lookup(alternative.tokens[0]) {
                        matches.append(
                            TermMatch(
                                segment: ref.segment, term: ref.term, typos: alternative.typos,
                                nonExact: alternative.nonExact || alternative.typos > 0))
                    }
                }
                return matches
            }
            // Split: a word made of two dictionary terms ("helloworld" → "hello world") counts one typo.
            var splits: [[([TermRef], [TermRef])]] = Array(repeating: [], count: words.count)
            if typoMode != .off {
                for (w, word) in words.enumerated() where word.maxTypos > 0 && word.bytes.count >= 4 {
                    for cut in 1..<word.bytes.count {
                        let a = lookup(Array(word.bytes[..<cut]))
                        guard !a.isEmpty else { continue }
                        let b = lookup(Array(word.bytes[cut...]))
                        if !b.isEmpty { splits[w].append((a, b)) }
                    }
                }
            }
            // Concatenation: two adjacent words found as one term ("hello world" → "helloworld").
            var concats: [(Int, [TermRef])] = []
            if typoMode != .off && words.count > 1 {
                for w in 0..<(words.count - 1) {
                    let refs = lookup(words[w].bytes + words[w + 1].bytes)
                    if !refs.isEmpty { concats.append((w, refs)) }
                }
            }
            var wordDocs = [[Int32]](repeating: [], count: words.count)
            wordMatches.reserveCapacity(words.count)
            for w in words.indices {
                let dense = takeScratch()
                var docs: [Int32] = []
                fill(dense, matches: termMatches[w], allowed: allowed) { docs.append($0) }
                if !splits[w].isEmpty {
                    let left = takeScratch()
                    let right = takeScratch()
                    for (a, b) in splits[w] {
                        var leftDocs: [Int32] = []
                        fill(left, matches: Self.oneTypo(a), allowed: allowed) {
                            leftDocs.append($0)
                        }
                        var rightDocs: [Int32] = []
                        fill(right, matches: Self.oneTypo(b), allowed: allowed) {
                            rightDocs.append($0)
                        }
                        for doc in rightDocs where left[Int(doc)] != Packed.absent {
                            let value = min(left[Int(doc)], right[Int(doc)])
                            if value < dense[Int(doc)] {
                                if dense[Int(doc)] == Packed.absent { docs.append(doc) }
                                dense.values[Int(doc)] = value
                            }
                        }
                        for doc in leftDocs { left.values[Int(doc)] = Packed.absent }
                        for doc in rightDocs { right.values[Int(doc)] = Packed.absent }
                    }
                    recycle(left, docs: [])
                    recycle(right, docs: [])
                }
                // Phrase alternatives: documents holding every word of the phrase.
                for alternative in words[w].alternatives where alternative.tokens.count > 1 {
                    let terms = alternative.tokens.map(lookup)
                    guard !terms.contains(where: \.isEmpty) else { continue }
                    let match = { (refs: [TermRef]) in
                        refs.map {
                            TermMatch(
                                segment: $0.segment, term: $0.term, typos: alternative.typos,
                                nonExact: alternative.nonExact || alternative.typos > 0)
                        }
                    }
                    let buffers = terms.map { _ in takeScratch() }
                    var docLists: [[Int32]] = []
                    for (i, t) in terms.enumerated() {
                        var list: [Int32] = []
                        fill(buffers[i], matches: match(t), allowed: allowed) { list.append($0) }
                        docLists.append(list)
                    }
                    for doc in docLists[0] {
                        var value = Packed.absent
                        for buffer in buffers {
                            let v = buffer[Int(doc)]
                            if v == Packed.absent {
                                value = Packed.absent
                                break
                            }
                            value = min(value, v)
                        }
                        if value < dense[Int(doc)] {
                            if dense[Int(doc)] == Packed.absent { docs.append(doc) }
                            dense.values[Int(doc)] = value
                        }
                    }
                    for (i, buffer) in buffers.enumerated() { recycle(buffer, docs: docLists[i]) }
                }
                for (first, t) in concats where first == w || first + 1 == w {
                    fill(dense, matches: Self.oneTypo(t), allowed: allowed) {
                        docs.append($0)
                    }
                }
                wordMatches.append(dense)
                wordDocs[w] = docs
            }
            termMatches.removeAll()
            wordDocsOut = wordDocs
            // Intersect the required words starting from the rarest; with no required word, any word.
            let required = words.indices.filter { !words[$0].optional }
            var base: [Int32]
            var order: [Int]
            if required.isEmpty {
                var seen = Set<Int32>()
                base = []
                for docs in wordDocs { for doc in docs where seen.insert(doc).inserted { base.append(doc) } }
                order = []
            } else {
                order = required.sorted { wordDocs[$0].count < wordDocs[$1].count }
                base = wordDocs[order[0]]
                order.removeFirst()
            }
            base.sort()
            let excluded = excludedDocs(exclusions)
            let allowedForPhrases = phrases.isEmpty ? [] : allowed
            for doc in base where isLive(Int(doc)) {
                var ok = true
                for w in order where wordMatches[w][Int(doc)] == Packed.absent {
                    ok = false
                    break
                }
                if ok && (filter.isEmpty || filter.matches(Int(doc))) && !excluded.contains(doc)
                    && (phrases.isEmpty
                        || holdsPhrases(Int(doc), phrases, words: words, allowed: allowedForPhrases))
                {
                    candidates.append(doc)
                }
            }
            if required.isEmpty, words.count >= 4, candidates.count > 1000 {
                candidates = longOptionalQueryCut(candidates, words: words, matches: wordMatches)
            }
            if typoMode == .min || typoMode == .strict, !candidates.isEmpty {
                var minTypos = Int.max
                var typoCounts = [Int](repeating: 0, count: candidates.count)
                for (i, doc) in candidates.enumerated() {
                    var total = 0
                    for w in words.indices where wordMatches[w][Int(doc)] != Packed.absent {
                        total += Packed.typos(wordMatches[w][Int(doc)])
                    }
                    typoCounts[i] = total
                    minTypos = min(minTypos, total)
                }
                let limit = typoMode == .min ? minTypos : minTypos + 1
                candidates = candidates.indices.filter { typoCounts[$0] <= limit }.map { candidates[$0] }
            }
        }
        if let geo, geo.radius != nil || !geo.boxes.isEmpty || !geo.polygons.isEmpty {
            candidates = candidates.filter { geoMatch(Int($0), geo) != nil }
        }
        return MatchResult(
            words: words, candidates: candidates, wordMatches: wordMatches, wordDocs: wordDocsOut)
    }

    /// Documents holding one of `words` (exactly) in a searchable attribute.
    func excludedDocs(_ words: [[UInt8]]) -> Set<Int32> {
        var docs = Set<Int32>()
        for word in words {
            for ref in lookup(word) {
                let segment = segments[ref.segment]
                for i in Int(segment.postStart[ref.term])..<Int(segment.postStart[ref.term + 1]) {
                    docs.insert(Int32(bitPattern: segment.postDocs[i]))
                }
            }
        }
        return docs
    }

    /// Algolia's rule for long queries whose words are all optional: records are taken best-matching
    /// first, and the number of matched words required grows by one (by a fifth of the word count from
    /// 10 words on) for every 1,000 records.
    func longOptionalQueryCut(_ candidates: [Int32], words: [QueryWord], matches: [MatchBuffer]) -> [Int32] {
        let step = words.count >= 10 ? words.count / 5 : 1
        var byCount: [(Int, Int32)] = candidates.map { doc in
            var matched = 0
            for w in words.indices where matches[w][Int(doc)] != Packed.absent { matched += 1 }
            return (matched, doc)
        }
        byCount.sort { $0.0 > $1.0 }
        var kept: [Int32] = []
        for (position, (matched, doc)) in byCount.enumerated() {
            let needed = 1 + (position / 1000) * step
            if matched < needed { break }
            kept.append(doc)
        }
        return kept.sorted()
    }

    /// Distance (meters) of the best point of `doc` inside the geo constraint; nil if outside.
    func geoMatch(_ doc: Int, _ geo: GeoQuery) -> Double? {
        guard let points = self.geo?[doc], !points.isEmpty else { return nil }
        var best: Double?
        for point in points {
            if !geo.boxes.isEmpty {
                var inside = false
                for (lat1, lng1, lat2, lng2) in geo.boxes {
                    let (minLat, maxLat) = (min(lat1, lat2), max(lat1, lat2))
                    let (minLng, maxLng) = (min(lng1, lng2), max(lng1, lng2))
                    if point.lat >= minLat && point.lat <= maxLat && point.lng >= minLng
                        && point.lng <= maxLng
                    {
                        inside = true
                    }
                }
                if !inside { continue }
            } else if !geo.polygons.isEmpty {
                if !geo.polygons.contains(where: { pointInPolygon(point, $0) }) { continue }
            }
            let distance = geo.center.map { haversine($0, point) } ?? 0
            if let radius = geo.radius, distance > radius { continue }
            if best == nil || distance < best! { best = distance }
        }
        return best
    }
}

/// Even-odd ray casting on (lat, lng) as plane coordinates; points on an edge count as inside.
func pointInPolygon(_ p: (lat: Double, lng: Double), _ polygon: [(lat: Double, lng: Double)]) -> Bool {
    var inside = false
    var j = polygon.count - 1
    for i in polygon.indices {
        let a = polygon[i]
        let b = polygon[j]
        if (a.lng > p.lng) != (b.lng > p.lng) {
            let lat = a.lat + (p.lng - a.lng) / (b.lng - a.lng) * (b.lat - a.lat)
            if p.lat == lat { return true }
            if p.lat < lat { inside.toggle() }
        }
        j = i
    }
    return inside
}

func haversine(_ a: (lat: Double, lng: Double), _ b: (lat: Double, lng: Double)) -> Double {
    let r = 6_371_000.0
    let dLat = (b.lat - a.lat) * .pi / 180
    let dLng = (b.lng - a.lng) * .pi / 180
    let s1 = sinApprox(dLat / 2)
    let s2 = sinApprox(dLng / 2)
    let h = s1 * s1 + cosApprox(a.lat * .pi / 180) * cosApprox(b.lat * .pi / 180) * s2 * s2
    return 2 * r * asinApprox(min(1, h.squareRoot()))
}

// Small-footprint trigonometry (Taylor/rational approximations, adequate for ranking distances).
func sinApprox(_ x: Double) -> Double {
    var x = x.truncatingRemainder(dividingBy: 2 * .pi)
    if x > .pi { x -= 2 * .pi } else if x < -.pi { x += 2 * .pi }
    var term = x
    var sum = x
    let x2 = x * x
    for k in 1...10 {
        term *= -x2 / Double((2 * k) * (2 * k + 1))
        sum += term
    }
    return sum
}

func cosApprox(_ x: Double) -> Double { sinApprox(x + .pi / 2) }

func asinApprox(_ x: Double) -> Double {
    // Newton iterations on sin(y) = x.
    var y = x
    for _ in 0..<30 {
        let c = cosApprox(y)
        if abs(c) < 1e-12 { break }
        y -= (sinApprox(y) - x) / c
    }
    return y
}

/// Query-time synonyms (reference §2.6): `synonym` (every listed word matches the others),
/// `onewaysynonym` (`input` also matches the listed words), `altcorrection1`/`altcorrection2`
/// (`word` also matches the corrections, counted as 1 or 2 typos), `placeholder` (a `<name>` in a
/// record is matched by each of the `replacements`, and only by them). Applied to whole query words when
/// the `synonyms` parameter is not false; a synonym match is an exact, typo-free match (Algolia's
/// default `alternativesAsExact`). A single query word triggers them; an alternative of several words
/// matches documents holding all of them (in any order); several query words never trigger one.
struct SynonymTable: Sendable {
    private var table: [[UInt8]: [(tokens: [[UInt8]], typos: Int)]] = [:]

    var isEmpty: Bool { table.isEmpty }

    init(_ synonyms: [JSON], normalizer: Normalizer) {
        func tokens(_ text: String) -> [[UInt8]] { normalizer.tokens(text).map(\.normalized) }
        func add(_ from: [[UInt8]], _ to: [[UInt8]], typos: Int) {
            // Only single query words trigger alternatives.
            guard from.count == 1, !to.isEmpty, from != to else { return }
            var list = table[from[0], default: []]
            if let i = list.firstIndex(where: { $0.tokens == to }) {
                list[i].typos = Swift.min(list[i].typos, typos)
            } else {
                list.append((to, typos))
            }
            table[from[0]] = list
        }
        for synonym in synonyms {
            let words = ((synonym["synonyms"] ?? synonym["corrections"]).map(stringList) ?? []).map(tokens)
            switch (synonym["type"]?.stringValue ?? "").lowercased() {
            case "synonym":
                for a in words { for b in words { add(a, b, typos: 0) } }
            case "onewaysynonym":
                guard let input = synonym["input"]?.stringValue.map(tokens) else { continue }
                for b in words { add(input, b, typos: 0) }
            case "placeholder":
                // The record's `<name>` token is matched by each one-word replacement.
                guard let placeholder = synonym["placeholder"]?.stringValue else { continue }
                let key = Array(Self.placeholderKey(placeholder).utf8)
                for replacement in (synonym["replacements"].map(stringList) ?? []).map(tokens) {
                    add(replacement, [key], typos: 0)
                }
            case "altcorrection1", "altcorrection2":
                let typos = synonym["type"]?.stringValue?.hasSuffix("2") == true ? 2 : 1
                guard let word = synonym["word"]?.stringValue.map(tokens) else { continue }
                for b in words { add(word, b, typos: typos) }
            default: continue
            }
        }
    }

    /// `<Street>` → `<street>`: how a placeholder is indexed.
    static func placeholderKey(_ placeholder: String) -> String {
        var inner = placeholder.trimmingSpaces
        if inner.hasPrefix("<") { inner.removeFirst() }
        if inner.hasSuffix(">") { inner.removeLast() }
        return "<" + Normalizer.facetKey(inner) + ">"
    }

    /// The placeholder keys of `synonyms` (what the index builder must keep as single tokens).
    static func placeholderKeys(_ synonyms: [JSON]) -> Set<String> {
        Set(
            synonyms.compactMap { synonym in
                guard synonym["type"]?.stringValue?.lowercased() == "placeholder",
                    let placeholder = synonym["placeholder"]?.stringValue
                else { return nil }
                return placeholderKey(placeholder)
            })
    }

    /// `words` with their synonym alternatives added (none when the `synonyms` parameter is false).
    /// A one-word synonym counts as exact when `alternativesAsExact` lists `singleWordSynonym`, a
    /// several-word one when it lists `multiWordsSynonym`. Phrase words take no synonyms.
    func apply(_ words: [QueryWord], _ options: SearchOptions) -> [QueryWord] {
        guard !table.isEmpty, options.bool("synonyms", default: true) else { return words }
        let exact = Set(options.list("alternativesAsExact") ?? ["ignorePlurals", "singleWordSynonym"])
        return words.map { word in
            var word = word
            guard word.phrase < 0 else { return word }
            for entry in table[word.bytes] ?? [] {
                let kindExact =
                    entry.tokens.count == 1
                    ? exact.contains("singleWordSynonym") : exact.contains("multiWordsSynonym")
                word.alternatives.append(
                    Alternative(
                        tokens: entry.tokens, typos: entry.typos, nonExact: !kindExact, kind: .synonym))
            }
            return word
        }
    }
}
