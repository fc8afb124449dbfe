import JSONCore
import Synchronization

/// Per-document facet values of one attribute: value ids into `originals`.
struct FacetColumn: Sendable {
    /// Normalized (case-insensitive) key → value id. For `_tags` the key is exact (tags are case-sensitive).
    var ids: [String: Int32] = [:]
    /// Original spelling of each value id (first seen).
    var originals: [String] = []
    /// Number of live documents per value over the whole index.
    var totals: [Int32] = []
    /// `offsets[doc]..<offsets[doc+1]` into `values`.
    var offsets: [Int32] = [0]
    var values: [Int32] = []

    @inline(__always) func contains(doc: Int, id: Int32) -> Bool {
        var i = Int(offsets[doc])
        let end = Int(offsets[doc + 1])
        while i < end {
            if values[i] == id { return true }
            i += 1
        }
        return false
    }

    /// While building: adds `text` (found under `key`: normalized for facets, exact for `_tags`) to the
    /// values of the document being built, once per document (`seen` holds the ids it has so far), and
    /// counts it; a value seen for the first time gets the next id and keeps this spelling.
    @inline(__always) mutating func intern(_ text: String, key: String, seen: inout [Int32]) {
        let id: Int32
        if let existing = ids[key] {
            id = existing
        } else {
            id = Int32(originals.count)
            ids[key] = id
            originals.append(text)
            totals.append(0)
        }
        if !seen.contains(id) {
            seen.append(id)
            values.append(id)
            totals[Int(id)] += 1
        }
    }
}

/// Per-document numeric values of one attribute path.
struct NumericColumn: Sendable {
    /// Single-valued columns: one value per doc, NaN when missing.
    var dense: [Double]?
    /// Multi-valued: `offsets[doc]..<offsets[doc+1]` into `values`.
    var offsets: [Int32] = []
    var values: [Double] = []

    @inline(__always) func forEach(doc: Int, _ body: (Double) -> Bool) -> Bool {
        if let dense {
            let value = dense[doc]
            return value.isNaN ? false : body(value)
        }
        var i = Int(offsets[doc])
        let end = Int(offsets[doc + 1])
        while i < end {
            if body(values[i]) { return true }
            i += 1
        }
        return false
    }
}

/// A searchable attribute slot (one per distinct path, in searchable order).
struct AttributeSlot: Sendable {
    var path: String
    var rank: Int
    var unordered: Bool
    var typoDisabled: Bool
    var prefixDisabled: Bool
    var exactDisabled: Bool
}

/// A fixed-size array of packed per-document word matches (``Packed``), all ``Packed/absent`` when
/// fresh or recycled. Shared by reference so that reading it never copies; only one search uses a
/// buffer at a time (taken from and returned to ``IndexData``'s pool).
final class MatchBuffer: @unchecked Sendable {
    let values: UnsafeMutablePointer<UInt64>
    let count: Int

    init(count: Int) {
        self.count = count
        values = .allocate(capacity: Swift.max(1, count))
        values.initialize(repeating: UInt64.max, count: Swift.max(1, count))
    }

    deinit { values.deallocate() }

    @inline(__always) subscript(doc: Int) -> UInt64 { values[doc] }
}

/// The documents of an index version that were deleted or replaced since its last full build: their
/// ids stay allocated (every per-document array keeps its entry) but no search returns them.
struct DeadSet: Sendable {
    private(set) var words: [UInt64] = []
    private(set) var count = 0

    @inline(__always) func contains(_ doc: Int) -> Bool {
        let w = doc >> 6
        return w < words.count && words[w] >> UInt64(doc & 63) & 1 == 1
    }

    /// Marks `doc` dead; false when it already was.
    @discardableResult
    mutating func insert(_ doc: Int) -> Bool {
        let w = doc >> 6
        if w >= words.count { words += [UInt64](repeating: 0, count: w - words.count + 1) }
        let bit = UInt64(1) << UInt64(doc & 63)
        if words[w] & bit != 0 { return false }
        words[w] |= bit
        count += 1
        return true
    }
}

/// Serialized records (canonical JSON) in chunks of 1,024 documents, so that appending records to a new
/// version copies only the last, partial chunk; versions share the others.
struct RecordStore: Sendable {
    static let shift = 10
    static let chunkSize = 1 << shift

    final class Chunk: Sendable {
        let blob: [UInt8]
        /// `offsets[i]..<offsets[i+1]` is the i-th record of the chunk.
        let offsets: [Int]
        init(blob: [UInt8], offsets: [Int]) {
            self.blob = blob
            self.offsets = offsets
        }
        var count: Int { offsets.count - 1 }
    }

    private(set) var chunks: [Chunk] = []
    private(set) var count = 0

    /// The stored bytes of `doc` (a slice sharing the chunk's storage).
    @inline(__always) func bytes(_ doc: Int) -> ArraySlice<UInt8> {
        let chunk = chunks[doc >> Self.shift]
        let i = doc & (Self.chunkSize - 1)
        return chunk.blob[chunk.offsets[i]..<chunk.offsets[i + 1]]
    }

    /// Appends records through `writer`, starting from the last partial chunk.
    struct Writer {
        private var chunks: [Chunk]
        private var blob: [UInt8] = []
        private var offsets: [Int] = [0]
        private var count: Int

        init(continuing store: RecordStore) {
            chunks = store.chunks
            count = store.count
            if let last = chunks.last, last.count < RecordStore.chunkSize {
                chunks.removeLast()
                blob = last.blob
                offsets = last.offsets
            }
        }

        /// Appends the canonical serialization of `record`.
        mutating func append(_ record: JSON) {
            record.write(to: &blob)
            offsets.append(blob.count)
            count += 1
            if offsets.count > RecordStore.chunkSize { seal() }
        }

        private mutating func seal() {
            // Exact-size copies: a chunk keeps no spare capacity.
            let exact = blob.withUnsafeBufferPointer { Array($0) }
            chunks.append(Chunk(blob: exact, offsets: offsets))
            blob.removeAll(keepingCapacity: true)
            offsets = [0]
        }

        /// The store with every appended record.
        mutating func finish() -> RecordStore {
            if offsets.count > 1 { seal() }
            var store = RecordStore()
            store.chunks = chunks
            store.count = count
            return store
        }
    }
}

/// The term dictionary and postings of some documents (a whole build, or the records added by later
/// writes until segments are merged). Postings hold global document ids.
struct TermSegment: Sendable {
    /// Sorted term dictionary: `termBytes[termOffsets[t]..<termOffsets[t+1]]`.
    var termBytes: [UInt8] = []
    var termOffsets: [Int32] = [0]
    /// Postings of term t: `postStart[t]..<postStart[t+1]` into `postDocs` / `postOccs`.
    /// Each entry is one (doc, slot) pair with the first position: occ = slot<<16 | single<<15 | pos.
    var postStart: [Int32] = [0]
    var postDocs: [UInt32] = []
    var postOccs: [UInt32] = []

    var termCount: Int { termOffsets.count - 1 }
    /// What merging costs: postings plus terms.
    var size: Int { postDocs.count + termOffsets.count }

    @inline(__always) func termLength(_ t: Int) -> Int { Int(termOffsets[t + 1] - termOffsets[t]) }

    func term(_ t: Int) -> [UInt8] { Array(termBytes[Int(termOffsets[t])..<Int(termOffsets[t + 1])]) }

    /// Compares term t with `key` lexicographically (bytes).
    @inline(__always) func compare(term t: Int, _ key: UnsafeBufferPointer<UInt8>, prefixOnly: Bool) -> Int {
        let start = Int(termOffsets[t])
        let length = Int(termOffsets[t + 1]) - start
        let n = Swift.min(length, key.count)
        var i = 0
        while i < n {
            let a = termBytes[start + i]
            let b = key[i]
            if a != b { return a < b ? -1 : 1 }
            i += 1
        }
        if prefixOnly && length >= key.count { return 0 }
        if length == key.count { return 0 }
        return length < key.count ? -1 : 1
    }

    /// The id of an exact term.
    func lookup(_ key: [UInt8]) -> Int? {
        key.withUnsafeBufferPointer { buffer in
            var lo = 0
            var hi = termCount
            while lo < hi {
                let mid = (lo + hi) >> 1
                let c = compare(term: mid, buffer, prefixOnly: false)
                if c == 0 { return mid }
                if c < 0 { lo = mid + 1 } else { hi = mid }
            }
            return nil
        }
    }

    /// The range of term ids starting with `prefix`.
    func prefixRange(_ prefix: [UInt8]) -> Range<Int> {
        prefix.withUnsafeBufferPointer { buffer in
            var lo = 0
            var hi = termCount
            while lo < hi {
                let mid = (lo + hi) >> 1
                if compare(term: mid, buffer, prefixOnly: true) < 0 { lo = mid + 1 } else { hi = mid }
            }
            let start = lo
            hi = termCount
            while lo < hi {
                let mid = (lo + hi) >> 1
                if compare(term: mid, buffer, prefixOnly: true) <= 0 { lo = mid + 1 } else { hi = mid }
            }
            return start..<lo
        }
    }
}

/// A term of one segment.
struct TermRef: Sendable, Equatable {
    var segment: Int
    var term: Int
}

/// Ranks of the documents by a list of sort criteria (`customRanking`, or one `asc`/`desc` entry of
/// `ranking`): ties share a rank, 0 is best, missing values last.
struct RankColumn: Sendable {
    var criteria: [(String, SortDirection)]
    /// Per criterion, per document: the value sorted on (nil when missing).
    var keys: [[JSON?]]
    /// Live documents, best first.
    var order: [Int32] = []
    /// Per document.
    var ranks: [UInt32] = []

    init(criteria: [(String, SortDirection)]) {
        self.criteria = criteria
        keys = criteria.map { _ in [] }
    }

    /// Compares two documents by the criteria (negative: `a` ranks first).
    func compare(_ a: Int, _ b: Int) -> Int {
        for (c, criterion) in criteria.enumerated() {
            switch (keys[c][a], keys[c][b]) {
            case (nil, nil): continue
            case (nil, _): return 1
            case (_, nil): return -1
            case (let x?, let y?):
                var r = IndexData.compareSortValues(x, y)
                if criterion.1 == .descending { r = -r }
                if r != 0 { return r }
            }
        }
        return 0
    }
}

/// Everything an ``IndexData`` holds, as a value that builds and updates assemble.
struct IndexParts: Sendable {
    var settings: EngineSettings
    var normalizer: Normalizer
    /// The `<name>` keys of placeholder synonyms (indexed as single tokens).
    var placeholders: Set<String>
    var records = RecordStore()
    /// Per document: the key its record is stored under (``IndexStore``'s sequence number).
    var storageKeys: [Int64] = []
    var nextStorageKey: Int64 = 0
    var dead = DeadSet()
    var liveCount = 0
    var docByID: [String: Int32] = [:]
    var slots: [AttributeSlot] = []
    var slotByPath: [String: Int] = [:]
    var segments: [TermSegment] = []
    var facetPaths: [String] = []
    var facetList: [FacetColumn] = []
    var tagColumn = FacetColumn()
    var numericColumns: [String: NumericColumn] = [:]
    var custom: RankColumn
    var sorts: [String: RankColumn] = [:]
    var geo: [[(lat: Double, lng: Double)]]?
    var distinctGroup: [Int32]?
    var distinctIDs: [String: Int32] = [:]

    /// An index with no document.
    init(settings: EngineSettings, placeholders: Set<String>) {
        self.settings = settings
        normalizer = Normalizer(separatorsToIndex: settings.separatorsToIndex)
        self.placeholders = placeholders
        custom = RankColumn(criteria: settings.customRanking)
        for criterion in settings.ranking {
            if case .sort(let attr, let direction) = criterion {
                sorts[IndexParts.sortName(attr, direction)] = RankColumn(criteria: [(attr, direction)])
            }
        }
        for facet in settings.facets where !facetPaths.contains(facet.path) {
            facetPaths.append(facet.path)
            facetList.append(FacetColumn())
        }
        if settings.attributeForDistinct != nil { distinctGroup = [] }
    }

    var docCount: Int { records.count }

    static func sortName(_ attr: String, _ direction: SortDirection) -> String {
        (direction == .ascending ? "asc(" : "desc(") + attr + ")"
    }
}

/// The frozen, immutable in-memory index of one index version. All arrays are built once and only read;
/// a write makes a new value that shares most storage with this one (``IndexUpdate``).
final class IndexData: Sendable {
    let settings: EngineSettings
    let normalizer: Normalizer
    /// Records kept compact: serialized JSON, parsed on demand for the returned hits.
    let records: RecordStore
    let docByID: [String: Int32]
    let slots: [AttributeSlot]
    /// Term dictionaries and postings, oldest documents first.
    let segments: [TermSegment]
    let facetColumns: [String: FacetColumn]
    let tagColumn: FacetColumn
    let numericColumns: [String: NumericColumn]
    /// Rank of each doc in `customRanking` order (ties equal), 0 = best.
    let customRank: [UInt32]
    /// Ranks for `asc(attr)`/`desc(attr)` entries of `ranking`, keyed "asc(attr)".
    let sortRanks: [String: [UInt32]]
    let geo: [[(lat: Double, lng: Double)]]?
    /// Distinct group per doc (-1: none, the doc is its own group).
    let distinctGroup: [Int32]?
    /// Deleted or replaced documents (never returned).
    let dead: DeadSet
    /// Documents that are not dead.
    let liveCount: Int
    /// The size of the document id space (live and dead documents).
    let count: Int
    /// The whole state, for updates.
    let parts: IndexParts

    /// Reusable all-absent per-word match buffers (avoids a large allocation per query word).
    private let scratch = Mutex<[MatchBuffer]>([])

    init(_ parts: IndexParts) {
        self.parts = parts
        settings = parts.settings
        normalizer = parts.normalizer
        records = parts.records
        docByID = parts.docByID
        slots = parts.slots
        segments = parts.segments
        facetColumns = Dictionary(uniqueKeysWithValues: zip(parts.facetPaths, parts.facetList))
        tagColumn = parts.tagColumn
        numericColumns = parts.numericColumns
        customRank = parts.custom.ranks
        sortRanks = parts.sorts.mapValues(\.ranks)
        geo = parts.geo
        distinctGroup = parts.distinctGroup
        dead = parts.dead
        liveCount = parts.liveCount
        count = parts.docCount
    }

    /// Builds from records given one at a time by `feed`, each with its serialized bytes when the caller
    /// has them (nil: serialized here) and the key it is stored under (nil: its position).
    /// `placeholders`: the `<name>` keys of placeholder synonyms (lowercase, brackets kept); such a
    /// text in a record is indexed as one token of that key, which only the placeholder's replacements
    /// match.
    convenience init(
        settings: EngineSettings, placeholders: Set<String> = [], expectedBytes: Int = 0,
        feed: (_ add: (JSON, UnsafeBufferPointer<UInt8>?, Int64?) -> Void) throws -> Void
    ) rethrows {
        var builder = Builder(continuing: IndexParts(settings: settings, placeholders: placeholders))
        try feed { record, _, key in builder.add(record, key: key) }
        self.init(IndexUpdate.finish(builder, removing: []))
    }

    /// Whether `doc` is a live document (not deleted or replaced).
    @inline(__always) func isLive(_ doc: Int) -> Bool { dead.count == 0 || !dead.contains(doc) }

    /// The live documents in index order.
    var liveDocs: [Int] { (0..<count).filter(isLive) }

    /// An all-absent buffer of `count` entries, from the pool when one is free.
    func takeScratch() -> MatchBuffer {
        if let buffer = scratch.withLock({ $0.popLast() }) { return buffer }
        return MatchBuffer(count: count)
    }

    /// Resets the entries listed in `docs` and returns the buffer to the pool. The caller must not use
    /// the buffer afterwards.
    func recycle(_ buffer: MatchBuffer, docs: [Int32]) {
        for doc in docs { buffer.values[Int(doc)] = UInt64.max }
        scratch.withLock { pool in
            if pool.count < 16 { pool.append(buffer) }
        }
    }

    /// Returns the match buffers of a finished search to the pool.
    func recycle(_ result: MatchResult) {
        for w in result.wordMatches.indices { recycle(result.wordMatches[w], docs: result.wordDocs[w]) }
    }

    /// The stored bytes of `doc`'s record.
    @inline(__always) func recordBytes(_ doc: Int) -> ArraySlice<UInt8> { records.bytes(doc) }

    /// The record of `doc`, parsed from its stored bytes.
    func record(_ doc: Int) -> JSON {
        records.bytes(doc).withUnsafeBufferPointer { (try? JSON.parse(buffer: $0)) ?? .null }
    }

    // MARK: - Term dictionary

    /// The exact term `key` in every segment that has it.
    func lookup(_ key: [UInt8]) -> [TermRef] {
        var refs: [TermRef] = []
        for (s, segment) in segments.enumerated() {
            if let t = segment.lookup(key) { refs.append(TermRef(segment: s, term: t)) }
        }
        return refs
    }

    // MARK: - Ranking helpers

    static func sortValue(_ record: JSON, _ path: String) -> JSON? {
        var found: JSON?
        forEachLeaf(record, path: path) { value in
            if found == nil { found = value }
        }
        return found
    }

    static func compareSortValues(_ a: JSON, _ b: JSON) -> Int {
        switch (a, b) {
        case (.string(let x), .string(let y)): return x == y ? 0 : (x < y ? -1 : 1)
        case (.bool(let x), .bool(let y)): return x == y ? 0 : (!x ? -1 : 1)
        default:
            let x = a.doubleValue ?? (a.boolValue == true ? 1 : 0)
            let y = b.doubleValue ?? (b.boolValue == true ? 1 : 0)
            return x == y ? 0 : (x < y ? -1 : 1)
        }
    }
}

/// Calls `body` for each scalar leaf (string, number, bool) at a dotted path; arrays are flattened.
func forEachLeaf(_ value: JSON, path: String, _ body: (JSON) -> Void) {
    var components = path.split(separator: ".", omittingEmptySubsequences: false)[...]
    func walk(_ value: JSON, _ rest: inout ArraySlice<Substring>) {
        if case .array(let items) = value {
            for item in items { walk(item, &rest) }
            return
        }
        if let first = rest.first {
            guard case .object(let object) = value else { return }
            // Try the longest key first so attributes whose names contain dots still resolve.
            if let direct = object[rest.joined(separator: ".")] {
                var empty = ArraySlice<Substring>()
                walk(direct, &empty)
                return
            }
            guard let child = object[String(first)] else { return }
            var next = rest.dropFirst()
            walk(child, &next)
            return
        }
        switch value {
        case .string, .int, .double, .bool: body(value)
        case .object(let object):
            for (_, child) in object {
                var empty = ArraySlice<Substring>()
                walk(child, &empty)
            }
        default: break
        }
    }
    walk(value, &components)
}

/// The value at a dotted path (no array flattening), or nil.
func value(at path: String, in record: JSON) -> JSON? {
    if let direct = record[path] { return direct }
    var current = record
    for component in path.split(separator: ".") {
        guard let next = current[String(component)] else { return nil }
        current = next
    }
    return current
}

func numberOrString(_ value: JSON) -> Double? {
    if let number = value.doubleValue { return number }
    if let text = value.stringValue { return Double(text.trimmingSpaces) }
    return nil
}
