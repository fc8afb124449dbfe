/// Ranking criteria values of one hit (also reported as `_rankingInfo`).
struct RankingValues {
    var typos = 0
    var geoDistance = 0
    var words = 0
    var filters = 0
    var proximity = 0
    var attributeKey: UInt64 = 0
    var firstMatchedWord = 0
    var exactWords = 0
}

struct Ranker {
    let data: IndexData
    let match: MatchResult
    let criteria: [RankingCriterion]
    let exactSingle: ExactSingleWord
    let minProximity: Int
    let geo: GeoQuery?
    let geoPrecision: Double
    /// The filter score of a document (`filters` criterion), when filters carry scores.
    let filterScore: ((Int) -> Int)?
    /// The word match buffers' storage (kept alive by `match`).
    private let buffers: [UnsafeMutablePointer<UInt64>]
    /// The key layout: (step, bits) per criterion that contributes, in order (see `key`).
    private let steps: [(step: KeyStep, bits: Int)]
    /// Rank columns of the `.sort` steps, in step order.
    private let sortColumns: [[UInt32]]

    private enum KeyStep { case typo, geo, words, filters, proximity, attribute, exact, custom, sort }

    /// `customFirst`: the custom ranking before every other criterion (a virtual replica's relevant
    /// sort orders the relevant matches by it).
    init(
        data: IndexData, match: MatchResult, options: SearchOptions, geo: GeoQuery?,
        filterScore: ((Int) -> Int)? = nil, customFirst: Bool = false
    ) throws(SearchError) {
        self.data = data
        self.filterScore = filterScore
        self.match = match
        var criteria = data.settings.ranking
        if customFirst { criteria = [.custom] + criteria.filter { $0 != .custom } }
        if options.typoMode == .strict, let i = criteria.firstIndex(of: .typo) {
            criteria.remove(at: i)
            criteria.insert(.typo, at: 0)
        }
        self.criteria = criteria
        exactSingle = options.exactOnSingleWordQuery
        minProximity = max(1, min(7, try options.int("minProximity", default: 1)))
        self.geo = geo
        geoPrecision = max(1, geo?.precision ?? 10)
        buffers = match.wordMatches.map(\.values)
        var steps: [(step: KeyStep, bits: Int)] = []
        var sortColumns: [[UInt32]] = []
        var used = 0
        let wordCount = match.words.count
        func add(_ step: KeyStep, _ bits: Int) {
            // Criteria that would overflow the 104 bits are skipped (a later, smaller one may still fit).
            guard used + bits <= 104 else { return }
            steps.append((step, bits))
            used += bits
        }
        for criterion in criteria {
            switch criterion {
            case .typo: add(.typo, 6)
            case .geo: if geo?.center != nil { add(.geo, 25) }
            case .words: add(.words, 6)
            case .filters: if filterScore != nil { add(.filters, 16) }
            case .proximity: if wordCount > 1 { add(.proximity, 8) }
            case .attribute: if wordCount > 0 { add(.attribute, 23) }
            case .exact: add(.exact, 6)
            case .custom: if !data.settings.customRanking.isEmpty { add(.custom, 24) }
            case .sort(let attr, let direction):
                let name = (direction == .ascending ? "asc(" : "desc(") + attr + ")"
                if let ranks = data.sortRanks[name], used + 24 <= 104 {
                    add(.sort, 24)
                    sortColumns.append(ranks)
                }
            }
        }
        self.steps = steps
        self.sortColumns = sortColumns
    }

    func values(_ doc: Int) -> RankingValues {
        var v = RankingValues()
        let words = match.words
        guard !words.isEmpty else {
            if let geo, geo.center != nil { v.geoDistance = Int(data.geoMatch(doc, geo) ?? 0) }
            v.filters = filterScore?(doc) ?? 0
            return v
        }
        var best = UInt64.max
        var previous: UInt64 = 0
        var matched = 0
        for w in words.indices {
            let m = buffers[w][doc]
            // An optional word the record does not hold counts for nothing.
            if m == Packed.absent { continue }
            v.typos += Packed.typos(m)
            let key = Packed.attributeKey(m)
            if key < best {
                best = key
                v.firstMatchedWord = Packed.pos(m)
            }
            if !Packed.nonExact(m) {
                if words.count == 1 {
                    switch exactSingle {
                    case .attribute: if Packed.single(m) { v.exactWords += 1 }
                    case .word: v.exactWords += 1
                    case .none: break
                    }
                } else {
                    v.exactWords += 1
                }
            }
            if matched > 0 {
                var distance = 8
                if Packed.slot(m) == Packed.slot(previous) {
                    distance = min(8, abs(Packed.pos(m) - Packed.pos(previous)))
                    if distance == 0 { distance = 1 }
                }
                v.proximity += max(distance, minProximity)
            }
            previous = m
            matched += 1
        }
        v.words = matched
        v.filters = filterScore?(doc) ?? 0
        v.attributeKey = best
        if let geo, geo.center != nil { v.geoDistance = Int(data.geoMatch(doc, geo) ?? 0) }
        return v
    }

    /// A sortable key: criteria in `ranking` order, then document order. Smaller is better.
    func key(_ doc: Int) -> UInt128 {
        let v = values(doc)
        var key: UInt128 = 0
        var sortIndex = 0
        for (step, bits) in steps {
            let value: UInt64
            switch step {
            case .typo: value = UInt64(v.typos)
            case .geo: value = UInt64(Double(v.geoDistance) / precision(at: Double(v.geoDistance)))
            case .words: value = UInt64(max(0, 32 - v.words))
            case .filters: value = UInt64(max(0, 0xFFFF - v.filters))
            case .proximity: value = UInt64(v.proximity)
            case .attribute: value = v.attributeKey
            case .exact: value = UInt64(max(0, 32 - v.exactWords))
            case .custom: value = UInt64(data.customRank[doc])
            case .sort:
                value = UInt64(sortColumns[sortIndex][doc])
                sortIndex += 1
            }
            key = key << UInt128(bits) | UInt128(min(value, (1 << UInt64(bits)) - 1))
        }
        // Ties: the record indexed last comes first, as Algolia answers.
        key = key << 24 | UInt128(0xFF_FFFF - (doc & 0xFF_FFFF))
        return key
    }

    /// The `aroundPrecision` bucket size at a distance (a number, or ranges `[{from, value}]`).
    func precision(at distance: Double) -> Double {
        guard let geo else { return geoPrecision }
        var result = geoPrecision
        for range in geo.precisionRanges where distance >= range.from { result = max(1, range.value) }
        return result
    }

    /// The first `k` candidates in ranking order (never fully ranks a large candidate set).
    func top(_ k: Int, of candidates: [Int32]) -> [Int32] {
        guard k > 0, !candidates.isEmpty else { return [] }
        if k * 8 >= candidates.count {
            var keyed = candidates.map { (key($0.asInt), $0) }
            keyed.sort { $0.0 < $1.0 }
            return keyed.prefix(k).map(\.1)
        }
        var heap: [(UInt128, Int32)] = []
        heap.reserveCapacity(k + 1)
        var worst: UInt128 = 0
        for doc in candidates {
            let kv = key(doc.asInt)
            if heap.count < k {
                heap.append((kv, doc))
                if heap.count == k {
                    heap.sort { $0.0 < $1.0 }
                    worst = heap[k - 1].0
                }
                continue
            }
            if kv >= worst { continue }
            var lo = 0
            var hi = k - 1
            while lo < hi {
                let mid = (lo + hi) >> 1
                if heap[mid].0 < kv { lo = mid + 1 } else { hi = mid }
            }
            heap.removeLast()
            heap.insert((kv, doc), at: lo)
            worst = heap[k - 1].0
        }
        if heap.count < k { heap.sort { $0.0 < $1.0 } }
        return heap.map(\.1)
    }

    /// Full ranking (used with `distinct`).
    func sorted(_ candidates: [Int32]) -> [Int32] {
        var keyed = candidates.map { (key($0.asInt), $0) }
        keyed.sort { $0.0 < $1.0 }
        return keyed.map(\.1)
    }
}

extension Int32 {
    @inline(__always) var asInt: Int { Int(self) }
}
