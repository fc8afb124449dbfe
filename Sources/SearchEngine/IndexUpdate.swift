import JSONCore

extension IndexParts {
    /// Marks `doc` dead (deleted or replaced): it keeps its id and its entries in every per-document
    /// array, leaves the facet totals and the ranking orders, and no search returns it again.
    mutating func kill(_ doc: Int) {
        guard dead.insert(doc) else { return }
        liveCount -= 1
        for index in facetList.indices {
            var column = facetList[index]
            facetList[index] = FacetColumn()
            for i in Int(column.offsets[doc])..<Int(column.offsets[doc + 1]) {
                column.totals[Int(column.values[i])] -= 1
            }
            facetList[index] = column
        }
        var tags = tagColumn
        tagColumn = FacetColumn()
        for i in Int(tags.offsets[doc])..<Int(tags.offsets[doc + 1]) { tags.totals[Int(tags.values[i])] -= 1 }
        tagColumn = tags
    }
}

/// Incremental updates of an in-memory index: a write makes a new ``IndexData`` from the previous one
/// without re-indexing the records it keeps.
///
/// Promises: the new index answers every search exactly as a full build of its live records (in the
/// same order) would, except that dead documents keep their ids until the next compaction; the cost of
/// a write is the indexing of the records it adds, plus copies of the per-document columns (linear in
/// the index size, no parsing), plus an occasional merge of term segments (tiered: a segment is merged
/// into the one before it once it reaches a third of its size, so each posting is copied O(log n)
/// times); once dead documents outnumber live ones the index is rebuilt from its live records.
/// The previous index is never modified: readers holding it keep a consistent view.
enum IndexUpdate {
    /// `data` with the records of `deleting` removed and `adding` appended in order (each replacing a
    /// live record with the same objectID). `keys` are the storage keys of the added records (nil:
    /// the next free keys, in order).
    static func apply(
        to data: IndexData, deleting: [String], adding: [JSON], keys: [Int64]? = nil
    ) -> IndexData {
        var parts = data.parts
        for id in deleting {
            if let doc = parts.docByID.removeValue(forKey: id) { parts.kill(Int(doc)) }
        }
        for record in adding {
            if let id = objectID(record), let doc = parts.docByID.removeValue(forKey: id) {
                parts.kill(Int(doc))
            }
        }
        if parts.dead.count > 1024 && parts.dead.count > parts.liveCount + adding.count {
            // Compaction: a full build of the live records (their keys kept) and the new ones.
            return rebuild(from: parts, settings: parts.settings, placeholders: parts.placeholders) {
                add in
                for (i, record) in adding.enumerated() { add(record, keys?[i]) }
            }
        }
        var builder = Builder(continuing: parts)
        for (i, record) in adding.enumerated() { builder.add(record, key: keys?[i]) }
        return IndexData(finish(builder, removing: []))
    }

    /// A full build of the live records of `parts` (in order, keys kept) with other settings or
    /// placeholders, then of the records `more` adds.
    static func rebuild(
        from parts: IndexParts, settings: EngineSettings, placeholders: Set<String>,
        more: ((JSON, Int64?) -> Void) -> Void = { _ in }
    ) -> IndexData {
        var builder = Builder(continuing: IndexParts(settings: settings, placeholders: placeholders))
        builder.parts.nextStorageKey = parts.nextStorageKey
        for doc in 0..<parts.docCount where !parts.dead.contains(doc) {
            let record = parts.records.bytes(doc).withUnsafeBufferPointer {
                (try? JSON.parse(buffer: $0)) ?? .null
            }
            builder.add(record, key: parts.storageKeys[doc])
        }
        more { record, key in builder.add(record, key: key) }
        return IndexData(finish(builder, removing: []))
    }

    /// The objectID of a record as the index keys it.
    static func objectID(_ record: JSON) -> String? {
        switch record["objectID"] {
        case .string(let s)?: return s
        case let other?: return other.serialized()
        case nil: return nil
        }
    }

    /// Turns a builder's output into the parts of an index: the new term segment joins (and may be
    /// merged with) the previous ones, numbers and ranking orders take the new documents in.
    static func finish(_ builder: Builder, removing: [Int]) -> IndexParts {
        var builder = builder
        var parts = builder.parts
        builder.parts = IndexParts(settings: parts.settings, placeholders: [])
        for doc in removing { parts.kill(doc) }
        parts.records = builder.records.finish()
        let first = builder.firstDoc
        let count = parts.docCount
        if count > first {
            parts.segments.append(builder.freezeTerms())
            mergeSegments(&parts.segments, dead: parts.dead)
        }
        parts.numericColumns = mergeNumbers(
            parts.numericColumns, builder.numericBuild, oldCount: first, newCount: count)
        if let geo = parts.geo, geo.count < count {
            parts.geo = geo + [[(lat: Double, lng: Double)]](repeating: [], count: count - geo.count)
        }
        let added = (first..<count).filter { !parts.dead.contains($0) }
        updateRanks(&parts.custom, added: added, dead: parts.dead)
        for name in parts.sorts.keys { updateRanks(&parts.sorts[name]!, added: added, dead: parts.dead) }
        return parts
    }

    // MARK: - Term segments

    /// Tiered merging: while the newest segment holds at least a third of the one before it (or there
    /// are more than 12), the two are merged; dead documents' postings are dropped on the way.
    static func mergeSegments(_ segments: inout [TermSegment], dead: DeadSet) {
        while segments.count >= 2 {
            let n = segments.count
            guard segments[n - 1].size * 3 >= segments[n - 2].size || n > 12 else { break }
            let newer = segments.removeLast()
            let older = segments.removeLast()
            segments.append(merge(older, newer, dead: dead))
        }
    }

    /// One segment holding the terms and postings of both (`older`'s postings first for a shared term).
    static func merge(_ older: TermSegment, _ newer: TermSegment, dead: DeadSet) -> TermSegment {
        var out = TermSegment()
        out.termBytes.reserveCapacity(older.termBytes.count + newer.termBytes.count)
        out.postDocs.reserveCapacity(older.postDocs.count + newer.postDocs.count)
        out.postOccs.reserveCapacity(older.postDocs.count + newer.postDocs.count)
        func copyPostings(_ s: TermSegment, _ t: Int) {
            for i in Int(s.postStart[t])..<Int(s.postStart[t + 1]) {
                let doc = s.postDocs[i]
                if dead.count > 0 && dead.contains(Int(doc)) { continue }
                out.postDocs.append(doc)
                out.postOccs.append(s.postOccs[i])
            }
        }
        func close(_ s: TermSegment, _ t: Int, _ mark: Int) {
            // A term whose postings all died is dropped.
            guard out.postDocs.count > mark else { return }
            out.termBytes.append(
                contentsOf: s.termBytes[Int(s.termOffsets[t])..<Int(s.termOffsets[t + 1])])
            out.termOffsets.append(Int32(out.termBytes.count))
            out.postStart.append(Int32(out.postDocs.count))
        }
        var a = 0
        var b = 0
        while a < older.termCount || b < newer.termCount {
            let mark = out.postDocs.count
            let order: Int
            if a == older.termCount {
                order = 1
            } else if b == newer.termCount {
                order = -1
            } else {
                let key = newer.term(b)
                order = key.withUnsafeBufferPointer { older.compare(term: a, $0, prefixOnly: false) }
            }
            if order <= 0 {
                copyPostings(older, a)
                if order == 0 {
                    copyPostings(newer, b)
                    b += 1
                }
                close(older, a, mark)
                a += 1
            } else {
                copyPostings(newer, b)
                close(newer, b, mark)
                b += 1
            }
        }
        return out
    }

    // MARK: - Numbers

    /// The numeric columns of `oldCount` documents extended to `newCount` with the values of the new
    /// documents (`built`, by path); a column becomes multi-valued when a document has several values.
    static func mergeNumbers(
        _ old: [String: NumericColumn], _ built: [String: (docs: [Int32], values: [Double])], oldCount: Int,
        newCount: Int
    ) -> [String: NumericColumn] {
        var columns: [String: NumericColumn] = [:]
        let added = newCount - oldCount
        for path in Set(old.keys).union(built.keys) {
            let previous = old[path]
            let new = built[path] ?? ([], [])
            var single = true
            for i in new.docs.indices.dropFirst() where new.docs[i] == new.docs[i - 1] {
                single = false
                break
            }
            var column = NumericColumn()
            if single && (previous == nil || previous?.dense != nil) {
                var dense = previous?.dense ?? [Double](repeating: .nan, count: oldCount)
                dense.append(contentsOf: repeatElement(.nan, count: added))
                for (i, doc) in new.docs.enumerated() { dense[Int(doc)] = new.values[i] }
                column.dense = dense
            } else {
                var offsets: [Int32]
                var values: [Double]
                if let previous, let dense = previous.dense {
                    offsets = [0]
                    offsets.reserveCapacity(newCount + 1)
                    values = []
                    for value in dense {
                        if !value.isNaN { values.append(value) }
                        offsets.append(Int32(values.count))
                    }
                } else if let previous {
                    offsets = previous.offsets
                    values = previous.values
                } else {
                    offsets = [Int32](repeating: 0, count: oldCount + 1)
                    values = []
                }
                var i = 0
                for doc in oldCount..<newCount {
                    while i < new.docs.count && Int(new.docs[i]) == doc {
                        values.append(new.values[i])
                        i += 1
                    }
                    offsets.append(Int32(values.count))
                }
                column.offsets = offsets
                column.values = values
            }
            columns[path] = column
        }
        return columns
    }

    // MARK: - Ranking orders

    /// Drops dead documents from the order, inserts `added` (sorted by key, each after the live
    /// documents it ties with: the record indexed last is ranked by its id, which is larger), and
    /// renumbers the ranks: ties share the rank of the first of them.
    static func updateRanks(_ column: inout RankColumn, added: [Int], dead: DeadSet) {
        guard !column.criteria.isEmpty else { return }
        let old = dead.count > 0 ? column.order.filter { !dead.contains(Int($0)) } : column.order
        let fresh = added.sorted { column.compare($0, $1) < 0 }.map(Int32.init)
        var merged: [Int32] = []
        merged.reserveCapacity(old.count + fresh.count)
        var isNew: [Bool] = []
        isNew.reserveCapacity(old.count + fresh.count)
        var from = 0
        for doc in fresh {
            // Upper bound: the first old document ranked strictly after `doc`.
            var lo = from
            var hi = old.count
            while lo < hi {
                let mid = (lo + hi) >> 1
                if column.compare(Int(old[mid]), Int(doc)) <= 0 { lo = mid + 1 } else { hi = mid }
            }
            merged.append(contentsOf: old[from..<lo])
            isNew.append(contentsOf: repeatElement(false, count: lo - from))
            merged.append(doc)
            isNew.append(true)
            from = lo
        }
        merged.append(contentsOf: old[from...])
        isNew.append(contentsOf: repeatElement(false, count: old.count - from))
        var ranks = column.ranks
        let previous = column.ranks
        var current: UInt32 = 0
        for (i, doc) in merged.enumerated() {
            if i > 0 {
                let prior = merged[i - 1]
                let tied =
                    !isNew[i] && !isNew[i - 1]
                    ? previous[Int(prior)] == previous[Int(doc)]
                    : column.compare(Int(prior), Int(doc)) == 0
                if !tied { current = UInt32(i) }
            }
            ranks[Int(doc)] = current
        }
        column.order = merged
        column.ranks = ranks
    }
}
