import JSONCore

/// Indexes records one at a time on top of an existing index's parts (empty for a full build): the
/// records, facets, numbers, geo points, distinct groups and sort keys go to the per-document columns,
/// and the searchable text to a new term segment of its own. ``IndexUpdate/finish(_:)`` turns the
/// result into an index.
struct Builder {
    var parts: IndexParts
    var records: RecordStore.Writer
    let allSearchable: Bool
    /// The first document id of this build.
    let firstDoc: Int
    private(set) var docCount: Int
    var termIDs = ByteKeyTable()
    var termList: [[UInt8]] = []
    var termPostings: [[UInt64]] = []
    /// Numeric values of the documents of this build, by path.
    var numericBuild: [String: (docs: [Int32], values: [Double])] = [:]
    var docEntries: [(term: Int32, occ: UInt32)] = []

    init(continuing parts: IndexParts) {
        self.parts = parts
        records = RecordStore.Writer(continuing: parts.records)
        let settings = parts.settings
        allSearchable = settings.searchable.isEmpty
        firstDoc = parts.docCount
        docCount = parts.docCount
        for attribute in settings.searchable where self.parts.slotByPath[attribute.path] == nil {
            self.parts.slotByPath[attribute.path] = self.parts.slots.count
            self.parts.slots.append(
                Self.makeSlot(
                    attribute.path, rank: attribute.rank, unordered: attribute.unordered, settings: settings))
        }
    }

    static func makeSlot(_ path: String, rank: Int, unordered: Bool, settings: EngineSettings)
        -> AttributeSlot
    {
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

    /// Indexes `record` as the next document, stored under `key` (nil: the next free key). A live
    /// document with the same objectID dies (objectIDs are unique).
    mutating func add(_ record: JSON, key: Int64? = nil) {
        let doc = Int32(docCount)
        docCount += 1
        let objectID: String
        switch record["objectID"] {
        case .string(let s)?: objectID = s
        case let other?: objectID = other.serialized()
        case nil: objectID = String(doc)
        }
        // Always the canonical serialization (even when the caller has bytes), so that hits can be
        // written from these bytes as ``JSON/write(to:)`` would write the record.
        records.append(record)
        let storageKey = key ?? parts.nextStorageKey
        parts.storageKeys.append(storageKey)
        parts.nextStorageKey = max(parts.nextStorageKey, storageKey + 1)
        for c in parts.custom.criteria.indices {
            parts.custom.keys[c].append(IndexData.sortValue(record, parts.custom.criteria[c].0))
        }
        for name in parts.sorts.keys {
            let attr = parts.sorts[name]!.criteria[0].0
            parts.sorts[name]!.keys[0].append(IndexData.sortValue(record, attr))
        }
        parts.custom.ranks.append(0)
        for name in parts.sorts.keys { parts.sorts[name]!.ranks.append(0) }
        parts.liveCount += 1

        // Searchable text.
        docEntries.removeAll(keepingCapacity: true)
        if allSearchable {
            if case .object(let object) = record {
                for (key, value) in object where key != "objectID" && key != "_geoloc" {
                    if parts.slotByPath[key] == nil {
                        parts.slotByPath[key] = parts.slots.count
                        // Algolia's default: every attribute at one priority, word position ranked.
                        parts.slots.append(
                            Self.makeSlot(key, rank: 0, unordered: false, settings: parts.settings))
                    }
                    indexValue(value, slot: parts.slotByPath[key]!)
                }
            }
        } else {
            for slot in parts.slots.indices {
                if let value = value(at: parts.slots[slot].path, in: record) { indexValue(value, slot: slot) }
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
        for index in parts.facetPaths.indices {
            let key = parts.facetPaths[index]
            var column = parts.facetList[index]
            parts.facetList[index] = FacetColumn()
            var seen: [Int32] = []
            forEachLeaf(record, path: key) { leaf in
                let text = leaf.stringValue ?? leaf.serialized()
                column.intern(text, key: Normalizer.facetKey(text), seen: &seen)
            }
            column.offsets.append(Int32(column.values.count))
            parts.facetList[index] = column
        }
        var tags = parts.tagColumn
        parts.tagColumn = FacetColumn()
        if let value = record["_tags"] {
            var seen: [Int32] = []
            for leaf in value.arrayValue ?? [value] where !leaf.isNull {
                let text = leaf.stringValue ?? leaf.serialized()
                tags.intern(text, key: text, seen: &seen)
            }
        }
        tags.offsets.append(Int32(tags.values.count))
        parts.tagColumn = tags

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
        if parts.geo != nil {
            parts.geo!.append(points)
        } else if !points.isEmpty {
            parts.geo = [[(lat: Double, lng: Double)]](repeating: [], count: Int(doc)) + [points]
        }

        // Distinct.
        if let attr = parts.settings.attributeForDistinct {
            var key: String?
            forEachLeaf(record, path: attr) { leaf in
                if key == nil { key = leaf.stringValue ?? leaf.serialized() }
            }
            if let key {
                if let id = parts.distinctIDs[key] {
                    parts.distinctGroup?.append(id)
                } else {
                    let id = Int32(parts.distinctIDs.count)
                    parts.distinctIDs[key] = id
                    parts.distinctGroup?.append(id)
                }
            } else {
                parts.distinctGroup?.append(-1)
            }
        }

        if let previous = parts.docByID[objectID] { parts.kill(Int(previous)) }
        parts.docByID[objectID] = doc
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

    mutating func indexText(_ text: String, slot: Int, position: inout Int, placeholders: Bool = true) {
        if placeholders, !parts.placeholders.isEmpty, text.utf8.contains(UInt8(ascii: "<")) {
            indexWithPlaceholders(text, slot: slot, position: &position)
            return
        }
        let first = docEntries.count
        var count = 0
        parts.normalizer.scan(text, firstPosition: position) { bytes, _, _, tokenPosition in
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
        let keys = parts.placeholders
        while let open = rest.firstIndex(of: "<") {
            guard let close = rest[open...].firstIndex(of: ">") else { break }
            let key = "<" + Normalizer.facetKey(String(rest[rest.index(after: open)..<close])) + ">"
            guard keys.contains(key) else {
                plain += rest[...open]
                rest = rest[rest.index(after: open)...]
                continue
            }
            plain += rest[..<open]
            indexText(plain, slot: slot, position: &position, placeholders: false)
            plain = ""
            let bytes = Array(key.utf8)
            let id = bytes.withUnsafeBufferPointer { intern($0) }
            docEntries.append((id, UInt32(slot) << 16 | UInt32(Swift.min(position, 0x7FFF))))
            position += 1
            rest = rest[rest.index(after: close)...]
        }
        plain += rest
        indexText(plain, slot: slot, position: &position, placeholders: false)
        // The single-token mark is per text: recompute it for the whole of it.
        for i in first..<docEntries.count { docEntries[i].occ &= ~UInt32(0x8000) }
        if docEntries.count - first == 1 { docEntries[first].occ |= 0x8000 }
    }

    mutating func collectNumbers(_ value: JSON, path: String, doc: Int32) {
        switch value {
        case .int, .double:
            guard !path.isEmpty else { return }
            if let allowed = parts.settings.numericAttributesForFiltering, !allowed.contains(path) { return }
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

    /// Freezes the dictionary and postings of this build's documents, releasing the per-term build
    /// arrays as it goes.
    mutating func freezeTerms() -> TermSegment {
        let order = termList.indices.sorted { termList[$0].lexicographicallyPrecedes(termList[$1]) }
        var segment = TermSegment()
        var total = 0
        for postings in termPostings { total += postings.count }
        segment.postDocs.reserveCapacity(total)
        segment.postOccs.reserveCapacity(total)
        segment.termOffsets.reserveCapacity(order.count + 1)
        segment.postStart.reserveCapacity(order.count + 1)
        for old in order {
            segment.termBytes.append(contentsOf: termList[old])
            segment.termOffsets.append(Int32(segment.termBytes.count))
            for entry in termPostings[old] {
                segment.postDocs.append(UInt32(entry >> 32))
                segment.postOccs.append(UInt32(truncatingIfNeeded: entry))
            }
            segment.postStart.append(Int32(segment.postDocs.count))
            termPostings[old] = []
            termList[old] = []
        }
        termPostings = []
        termList = []
        termIDs = ByteKeyTable()
        return segment
    }
}
