import JSONCore
import Synchronization

/// Per-document facet values of one attribute: value ids into `originals`.
struct FacetColumn: Sendable {
    /// Normalized (case-insensitive) key → value id. For `_tags` the key is exact (tags are case-sensitive).
    var ids: [String: Int32] = [:]
    /// Original spelling of each value id (first seen).
    var originals: [String] = []
    /// Number of documents per value over the whole index.
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

/// The frozen, immutable in-memory index of one index version. All arrays are built once and only read.
final class IndexData: Sendable {
    let settings: EngineSettings
    let normalizer: Normalizer
    /// Records kept compact: serialized JSON, parsed on demand for the returned hits.
    let recordBlob: [UInt8]
    let recordOffsets: [Int]
    let objectIDs: [String]
    let docByID: [String: Int32]
    let slots: [AttributeSlot]
    /// Sorted term dictionary: `termBytes[termOffsets[t]..<termOffsets[t+1]]`.
    let termBytes: [UInt8]
    let termOffsets: [Int32]
    /// Postings of term t: `postStart[t]..<postStart[t+1]` into `postDocs` / `postOccs`.
    /// Each entry is one (doc, slot) pair with the first position: occ = slot<<16 | single<<15 | pos.
    let postStart: [Int32]
    let postDocs: [UInt32]
    let postOccs: [UInt32]
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

    var count: Int { objectIDs.count }

    /// Reusable all-absent per-word match buffers (avoids a large allocation per query word).
    private let scratch = Mutex<[MatchBuffer]>([])

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

    /// The record of `doc`, parsed from its stored bytes.
    func record(_ doc: Int) -> JSON {
        recordBlob.withUnsafeBufferPointer { buffer in
            let slice = UnsafeBufferPointer(rebasing: buffer[recordOffsets[doc]..<recordOffsets[doc + 1]])
            return (try? JSON.parse(buffer: slice)) ?? .null
        }
    }
    var termCount: Int { termOffsets.count - 1 }

    /// Builds from records given one at a time by `feed`, each with its serialized bytes when the caller
    /// has them (nil: serialized here).
    /// `expectedBytes` (when known) sizes the record storage once instead of growing it by doubling.
    /// `placeholders`: the `<name>` keys of placeholder synonyms (lowercase, brackets kept); such a
    /// text in a record is indexed as one token of that key, which only the placeholder's replacements
    /// match.
    init(
        settings: EngineSettings, placeholders: Set<String> = [], expectedBytes: Int = 0,
        feed: (_ add: (JSON, UnsafeBufferPointer<UInt8>?) -> Void) throws -> Void
    ) rethrows {
        self.settings = settings
        let normalizer = Normalizer(separatorsToIndex: settings.separatorsToIndex)
        self.normalizer = normalizer
        var builder = Builder(settings: settings, normalizer: normalizer)
        builder.placeholders = placeholders
        builder.blob.reserveCapacity(expectedBytes)
        try feed { record, bytes in builder.add(record, bytes: bytes) }
        builder.termIDs = ByteKeyTable()
        recordBlob = builder.blob
        recordOffsets = builder.blobOffsets
        objectIDs = builder.objectIDs
        docByID = builder.docByID
        slots = builder.slots
        let frozen = builder.freezeTerms()
        termBytes = frozen.bytes
        termOffsets = frozen.offsets
        postStart = frozen.postStart
        postDocs = frozen.postDocs
        postOccs = frozen.postOccs
        facetColumns = Dictionary(uniqueKeysWithValues: zip(builder.facetPaths, builder.facetList))
        tagColumn = builder.tagColumn
        numericColumns = builder.freezeNumeric()
        customRank = Self.rank(keys: builder.customKeys, by: settings.customRanking)
        var sortRanks: [String: [UInt32]] = [:]
        for criterion in settings.ranking {
            if case .sort(let attr, let direction) = criterion {
                let key = (direction == .ascending ? "asc(" : "desc(") + attr + ")"
                sortRanks[key] = Self.rank(
                    keys: builder.sortKeys[attr]!.map { [$0] }, by: [(attr, direction)])
            }
        }
        self.sortRanks = sortRanks
        geo = builder.hasGeo ? builder.geo : nil
        if settings.attributeForDistinct != nil {
            distinctGroup = builder.distinct
        } else {
            distinctGroup = nil
        }
    }

    // MARK: - Term dictionary

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

    static func rank(keys: [[JSON?]], by criteria: [(String, SortDirection)]) -> [UInt32] {
        let n = keys.count
        guard !criteria.isEmpty else { return [UInt32](repeating: 0, count: n) }
        func compare(_ a: Int, _ b: Int) -> Int {
            for (c, criterion) in criteria.enumerated() {
                switch (keys[a][c], keys[b][c]) {
                case (nil, nil): continue
                case (nil, _): return 1
                case (_, nil): return -1
                case (let x?, let y?):
                    var r = compareSortValues(x, y)
                    if criterion.1 == .descending { r = -r }
                    if r != 0 { return r }
                }
            }
            return 0
        }
        let order = (0..<n).sorted { compare($0, $1) < 0 }
        var ranks = [UInt32](repeating: 0, count: n)
        var current: UInt32 = 0
        for (i, doc) in order.enumerated() {
            if i > 0 && compare(order[i - 1], doc) != 0 { current = UInt32(i) }
            ranks[doc] = current
        }
        return ranks
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

/// Accumulates records and builds the index arrays.
private struct Builder {
    let settings: EngineSettings
    let normalizer: Normalizer
    var blob: [UInt8] = []
    var blobOffsets: [Int] = [0]
    var customKeys: [[JSON?]] = []
    var sortKeys: [String: [JSON?]] = [:]
    var objectIDs: [String] = []
    var docByID: [String: Int32] = [:]
    var slots: [AttributeSlot] = []
    var slotByPath: [String: Int] = [:]
    let allSearchable: Bool
    var termIDs = ByteKeyTable()
    var termList: [[UInt8]] = []
    var termPostings: [[UInt64]] = []
    var facetPaths: [String] = []
    var facetList: [FacetColumn] = []
    var tagColumn = FacetColumn()
    var numericBuild: [String: (docs: [Int32], values: [Double])] = [:]
    var geo: [[(lat: Double, lng: Double)]] = []
    var hasGeo = false
    var distinct: [Int32] = []
    var distinctIDs: [String: Int32] = [:]
    var docEntries: [(term: Int32, occ: UInt32)] = []
    var placeholders: Set<String> = []

    init(settings: EngineSettings, normalizer: Normalizer) {
        self.settings = settings
        self.normalizer = normalizer
        allSearchable = settings.searchable.isEmpty
        for attribute in settings.searchable where slotByPath[attribute.path] == nil {
            slotByPath[attribute.path] = slots.count
            slots.append(makeSlot(attribute.path, rank: attribute.rank, unordered: attribute.unordered))
        }
        for facet in settings.facets where !facetPaths.contains(facet.path) {
            facetPaths.append(facet.path)
            facetList.append(FacetColumn())
        }
    }

    func makeSlot(_ path: String, rank: Int, unordered: Bool) -> AttributeSlot {
        let top = String(path.split(separator: ".").first ?? Substring(path))
        return AttributeSlot(
            path: path, rank: rank, unordered: unordered,
            typoDisabled: settings.disableTypoOnAttributes.contains(path)
                || settings.disableTypoOnAttributes.contains(top),
            prefixDisabled: settings.disablePrefixOnAttributes.contains(path)
                || settings.disablePrefixOnAttributes.contains(top),
            exactDisabled: settings.disableExactOnAttributes.contains(path)
                || settings.disableExactOnAttributes.contains(top))
    }

    mutating func intern(_ token: UnsafeBufferPointer<UInt8>) -> Int32 {
        if let id = termIDs.value(for: token) { return Int32(id) }
        let id = Int32(termList.count)
        termIDs.insert(token, UInt64(id))
        termList.append(Array(token))
        termPostings.append([])
        return id
    }

    mutating func add(_ record: JSON, bytes: UnsafeBufferPointer<UInt8>?) {
        let doc = Int32(objectIDs.count)
        let objectID: String
        switch record["objectID"] {
        case .string(let s)?: objectID = s
        case let other?: objectID = other.serialized()
        case nil: objectID = String(doc)
        }
        // Always the canonical serialization (even when the caller has bytes), so that hits can be
        // written from these bytes as ``JSON/write(to:)`` would write the record.
        record.write(to: &blob)
        blobOffsets.append(blob.count)
        customKeys.append(settings.customRanking.map { IndexData.sortValue(record, $0.0) })
        for criterion in settings.ranking {
            if case .sort(let attr, _) = criterion {
                sortKeys[attr, default: []].append(IndexData.sortValue(record, attr))
            }
        }
        objectIDs.append(objectID)
        docByID[objectID] = doc

        // Searchable text.
        docEntries.removeAll(keepingCapacity: true)
        if allSearchable {
            if case .object(let object) = record {
                for (key, value) in object where key != "objectID" && key != "_geoloc" {
                    if slotByPath[key] == nil {
                        slotByPath[key] = slots.count
                        // Algolia's default: every attribute at one priority, word position ranked.
                        slots.append(makeSlot(key, rank: 0, unordered: false))
                    }
                    indexValue(value, slot: slotByPath[key]!)
                }
            }
        } else {
            for slot in slots.indices {
                if let value = value(at: slots[slot].path, in: record) { indexValue(value, slot: slot) }
            }
        }
        if !docEntries.isEmpty {
            docEntries.sort { ($0.term, $0.occ) < ($1.term, $1.occ) }
            var last: (Int32, UInt32) = (-1, 0)
            for entry in docEntries {
                let slot = entry.occ >> 16
                if entry.term == last.0 && slot == last.1 { continue }
                last = (entry.term, slot)
                termPostings[Int(entry.term)].append(UInt64(UInt32(doc)) << 32 | UInt64(entry.occ))
            }
        }

        // Facets.
        for index in facetPaths.indices {
            let key = facetPaths[index]
            var column = facetList[index]
            facetList[index] = FacetColumn()
            var seen: [Int32] = []
            forEachLeaf(record, path: key) { leaf in
                let text = leaf.stringValue ?? leaf.serialized()
                let normalized = Normalizer.facetKey(text)
                let id: Int32
                if let existing = column.ids[normalized] {
                    id = existing
                } else {
                    id = Int32(column.originals.count)
                    column.ids[normalized] = id
                    column.originals.append(text)
                    column.totals.append(0)
                }
                if !seen.contains(id) {
                    seen.append(id)
                    column.values.append(id)
                    column.totals[Int(id)] += 1
                }
            }
            column.offsets.append(Int32(column.values.count))
            facetList[index] = column
        }
        if let tags = record["_tags"] {
            var seen: [Int32] = []
            for leaf in tags.arrayValue ?? [tags] where !leaf.isNull {
                let text = leaf.stringValue ?? leaf.serialized()
                let id: Int32
                if let existing = tagColumn.ids[text] {
                    id = existing
                } else {
                    id = Int32(tagColumn.originals.count)
                    tagColumn.ids[text] = id
                    tagColumn.originals.append(text)
                    tagColumn.totals.append(0)
                }
                if !seen.contains(id) {
                    seen.append(id)
                    tagColumn.values.append(id)
                    tagColumn.totals[Int(id)] += 1
                }
            }
        }
        tagColumn.offsets.append(Int32(tagColumn.values.count))

        // Numbers (every numeric leaf, nested paths dotted).
        collectNumbers(record, path: "", doc: doc)

        // Geo.
        var points: [(lat: Double, lng: Double)] = []
        if let geoloc = record["_geoloc"] {
            let items = geoloc.arrayValue ?? [geoloc]
            for item in items {
                if let lat = item["lat"].flatMap(numberOrString),
                    let lng = item["lng"].flatMap(numberOrString)
                {
                    points.append((lat, lng))
                }
            }
        }
        if !points.isEmpty { hasGeo = true }
        geo.append(points)

        // Distinct.
        if let attr = settings.attributeForDistinct {
            var key: String?
            forEachLeaf(record, path: attr) { leaf in
                if key == nil { key = leaf.stringValue ?? leaf.serialized() }
            }
            if let key {
                if let id = distinctIDs[key] {
                    distinct.append(id)
                } else {
                    let id = Int32(distinctIDs.count)
                    distinctIDs[key] = id
                    distinct.append(id)
                }
            } else {
                distinct.append(-1)
            }
        }
    }

    mutating func indexValue(_ value: JSON, slot: Int) {
        var position = 0
        indexValue(value, slot: slot, position: &position)
    }

    mutating func indexValue(_ value: JSON, slot: Int, position: inout Int) {
        switch value {
        case .string(let text):
            indexText(text, slot: slot, position: &position)
        case .int, .double:
            indexText(value.serialized(), slot: slot, position: &position)
        case .array(let items):
            for item in items {
                indexValue(item, slot: slot, position: &position)
                position += 8
            }
        case .object(let object):
            for (_, child) in object {
                indexValue(child, slot: slot, position: &position)
                position += 8
            }
        default: break
        }
    }

    mutating func indexText(_ text: String, slot: Int, position: inout Int) {
        if !placeholders.isEmpty, text.utf8.contains(UInt8(ascii: "<")) {
            indexWithPlaceholders(text, slot: slot, position: &position)
            return
        }
        let first = docEntries.count
        var count = 0
        normalizer.scan(text, firstPosition: position) { bytes, _, _, tokenPosition in
            let id = intern(bytes)
            let pos = UInt32(Swift.min(tokenPosition, 0x7FFF))
            docEntries.append((id, UInt32(slot) << 16 | pos))
            count += 1
        }
        if count == 1 { docEntries[first].occ |= 0x8000 }
        position += count
    }

    /// Text holding `<name>` placeholders: each one is a single token `<name>`; the rest as usual.
    mutating func indexWithPlaceholders(_ text: String, slot: Int, position: inout Int) {
        let first = docEntries.count
        var rest = Substring(text)
        var plain = ""
        let saved = placeholders
        placeholders = []
        defer { placeholders = saved }
        while let open = rest.firstIndex(of: "<") {
            guard let close = rest[open...].firstIndex(of: ">") else { break }
            let key = "<" + Normalizer.facetKey(String(rest[rest.index(after: open)..<close])) + ">"
            guard saved.contains(key) else {
                plain += rest[...open]
                rest = rest[rest.index(after: open)...]
                continue
            }
            plain += rest[..<open]
            indexText(plain, slot: slot, position: &position)
            plain = ""
            let bytes = Array(key.utf8)
            let id = bytes.withUnsafeBufferPointer { intern($0) }
            docEntries.append((id, UInt32(slot) << 16 | UInt32(Swift.min(position, 0x7FFF))))
            position += 1
            rest = rest[rest.index(after: close)...]
        }
        plain += rest
        indexText(plain, slot: slot, position: &position)
        // The single-token mark is per text: recompute it for the whole of it.
        for i in first..<docEntries.count { docEntries[i].occ &= ~UInt32(0x8000) }
        if docEntries.count - first == 1 { docEntries[first].occ |= 0x8000 }
    }

    mutating func collectNumbers(_ value: JSON, path: String, doc: Int32) {
        switch value {
        case .int, .double:
            guard !path.isEmpty else { return }
            if let allowed = settings.numericAttributesForFiltering, !allowed.contains(path) { return }
            numericBuild[path, default: ([], [])].docs.append(doc)
            numericBuild[path, default: ([], [])].values.append(value.doubleValue!)
        case .array(let items):
            for item in items { collectNumbers(item, path: path, doc: doc) }
        case .object(let object):
            if path == "_geoloc" { return }
            for (key, child) in object {
                collectNumbers(child, path: path.isEmpty ? key : path + "." + key, doc: doc)
            }
        default: break
        }
    }

    func freezeNumeric() -> [String: NumericColumn] {
        let n = objectIDs.count
        var columns: [String: NumericColumn] = [:]
        for (path, built) in numericBuild {
            var single = true
            for i in built.docs.indices.dropFirst() where built.docs[i] == built.docs[i - 1] {
                single = false
                break
            }
            var column = NumericColumn()
            if single {
                var dense = [Double](repeating: .nan, count: n)
                for (i, doc) in built.docs.enumerated() { dense[Int(doc)] = built.values[i] }
                column.dense = dense
            } else {
                var offsets = [Int32](repeating: 0, count: n + 1)
                for doc in built.docs { offsets[Int(doc) + 1] += 1 }
                for i in 0..<n { offsets[i + 1] += offsets[i] }
                column.offsets = offsets
                column.values = built.values
            }
            columns[path] = column
        }
        return columns
    }

    /// Freezes the dictionary and postings, releasing the per-term build arrays as it goes.
    mutating func freezeTerms() -> (
        bytes: [UInt8], offsets: [Int32], postStart: [Int32], postDocs: [UInt32], postOccs: [UInt32]
    ) {
        let order = termList.indices.sorted { termList[$0].lexicographicallyPrecedes(termList[$1]) }
        var bytes: [UInt8] = []
        var offsets: [Int32] = [0]
        var postStart: [Int32] = [0]
        var total = 0
        for postings in termPostings { total += postings.count }
        var postDocs: [UInt32] = []
        var postOccs: [UInt32] = []
        postDocs.reserveCapacity(total)
        postOccs.reserveCapacity(total)
        offsets.reserveCapacity(order.count + 1)
        postStart.reserveCapacity(order.count + 1)
        for old in order {
            bytes.append(contentsOf: termList[old])
            offsets.append(Int32(bytes.count))
            for entry in termPostings[old] {
                postDocs.append(UInt32(entry >> 32))
                postOccs.append(UInt32(truncatingIfNeeded: entry))
            }
            postStart.append(Int32(postDocs.count))
            termPostings[old] = []
            termList[old] = []
        }
        termPostings = []
        termList = []
        return (bytes, offsets, postStart, postDocs, postOccs)
    }
}

func numberOrString(_ value: JSON) -> Double? {
    if let number = value.doubleValue { return number }
    if let text = value.stringValue { return Double(text.trimmingSpaces) }
    return nil
}
