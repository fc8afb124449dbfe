import JSONCore

/// Searching: parameters to options, the query and filters to matching records, ranking, the page of
/// hits (retrieved attributes, highlights, snippets, ranking info) and the response envelope.
extension SearchIndex {
    /// Runs one search. `params` is the object form, optionally with a `params` string (merged here).
    /// When the hits would pass about `maxBytes` (their records plus what highlighting adds), the search
    /// stops and throws ``SearchLimits/answerTooLarge(_:)``.
    public func search(_ params: JSON, maxBytes: Int = .max) throws(SearchError) -> JSON {
        let start = ContinuousClock.now
        var outcome = try prepare(params)
        let context = outcome.context
        var hits: [JSON] = []
        hits.reserveCapacity(outcome.pageDocs.count)
        var recordBytes = 0
        for doc in outcome.pageDocs {
            hits.append(try hit(doc.asInt, context))
            recordBytes += data.recordBytes(doc.asInt).count
            if recordBytes + context.highlighter.emitted > maxBytes {
                data.recycle(outcome.match)
                throw SearchLimits.answerTooLarge(maxBytes)
            }
        }
        outcome.response["hits"] = .array(hits)
        data.recycle(outcome.match)
        return .object(finish(outcome, start: start))
    }

    /// The same answer as `search(params).serializedBytes()` (byte for byte, except
    /// `processingTimeMS`), built faster: hits are written straight from the stored record bytes.
    /// This is what an HTTP layer should send. When the hits pass `maxBytes`, the search stops and throws
    /// ``SearchLimits/answerTooLarge(_:)``.
    public func searchSerialized(_ params: JSON, maxBytes: Int = .max) throws(SearchError) -> [UInt8] {
        let start = ContinuousClock.now
        let outcome = try prepare(params)
        var hits: [UInt8] = []
        hits.reserveCapacity(outcome.pageDocs.count * 1024 + 2)
        hits.append(UInt8(ascii: "["))
        for (i, doc) in outcome.pageDocs.enumerated() {
            if i > 0 { hits.append(UInt8(ascii: ",")) }
            try writeHit(doc.asInt, outcome.context, to: &hits)
            if hits.count > maxBytes {
                data.recycle(outcome.match)
                throw SearchLimits.answerTooLarge(maxBytes)
            }
        }
        hits.append(UInt8(ascii: "]"))
        data.recycle(outcome.match)
        let response = finish(outcome, start: start)
        var out: [UInt8] = []
        out.reserveCapacity(hits.count + 1024)
        out.append(UInt8(ascii: "{"))
        for (i, (key, value)) in response.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            JSON.writeString(key, to: &out)
            out.append(UInt8(ascii: ":"))
            if key == "hits" { out.append(contentsOf: hits) } else { value.write(to: &out) }
        }
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// A search up to the page of hits: the response without its hits (a placeholder keeps their
    /// position), the page's documents, and what building hits needs.
    private struct Prepared {
        var response: JSONObject
        var pageDocs: [Int32]
        var context: HitContext
        var match: MatchResult
        var options: SearchOptions
    }

    /// Adds `processingTimeMS` and applies `responseFields`.
    private func finish(_ outcome: Prepared, start: ContinuousClock.Instant) -> JSONObject {
        var response = outcome.response
        let elapsed = ContinuousClock.now - start
        response["processingTimeMS"] = .int(
            max(1, elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000)
        )
        return filterResponseFields(response, outcome.options)
    }

    /// The filter score function (`filters` criterion and `_rankingInfo.filters`) when scores matter:
    /// `optionalFilters`, explicit `<score=N>`, or `sumOrFiltersScores` over OR groups.
    private func filterScoring(_ options: SearchOptions, _ filter: CompiledFilter) throws(SearchError)
        -> ((Int) -> Int)?
    {
        var optional = CompiledFilter([], data: data)
        if let value = options.value("optionalFilters"), !value.isNull {
            let cnf = try parseArrayFilters(value, kind: .facet, name: "optionalFilters")
            try SearchLimits.checkFilterCount(cnf.reduce(0) { $0 + $1.count })
            optional = CompiledFilter(cnf, data: data)
        }
        let sumOr = options.bool("sumOrFiltersScores", default: false)
        let scored = filter.groups.contains { group in group.contains { $0.score != 1 } }
        let orGroups = filter.groups.contains { $0.count > 1 }
        guard !optional.isEmpty || scored || (sumOr && orGroups) else { return nil }
        return { doc in filter.score(doc, sumOr: sumOr) + optional.score(doc, sumOr: sumOr) }
    }

    /// `removeWordsIfNoResults`: the optional flags to try in turn when the query matched nothing.
    private static func removalAttempts(_ mode: String, words: [QueryWord]) -> [[Bool]] {
        let n = words.count
        guard n > 1 else { return [] }
        switch mode {
        case "lastWords":
            return (1...min(5, n - 1)).map { k in (0..<n).map { $0 >= n - k } }
        case "firstWords":
            return (1...min(5, n - 1)).map { k in (0..<n).map { $0 < k } }
        case "allOptional":
            return [[Bool](repeating: true, count: n)]
        default:
            return []
        }
    }

    /// The original query with the words made optional wrapped in `<em>` (Algolia's
    /// `queryAfterRemoval`).
    private func queryAfterRemoval(_ query: String, words: [QueryWord], removed: [Bool]) -> String {
        var out = ""
        var utf8 = Array(query.utf8)
        var cursor = 0
        var w = 0
        for token in data.normalizer.tokens(query) {
            guard w < words.count else { break }
            guard token.normalized == words[w].bytes else { continue }
            out += String(decoding: utf8[cursor..<token.start], as: UTF8.self)
            let text = String(decoding: utf8[token.start..<token.end], as: UTF8.self)
            out += removed[w] ? "<em>" + text + "</em>" : text
            cursor = token.end
            w += 1
        }
        out += String(decoding: utf8[cursor...], as: UTF8.self)
        utf8 = []
        return out
    }

    /// Query rules: the parameters to search with and the rest of the rules' outcome.
    private func applyRules(_ merged: JSONObject) -> RuleOutcome {
        guard !ruleSet.isEmpty else { return RuleOutcome(params: merged) }
        let options = SearchOptions(params: merged, settings: data.settings.raw)
        // Invalid filters or parameters are reported by the search itself, after the rules.
        let queryFilters = { () -> FilterCNF in
            var cnf: FilterCNF = []
            if let filters = merged["filters"], !filters.isNull {
                cnf += (try? FilterParser.parse(filters.stringValue ?? filters.serialized())) ?? []
            }
            if let value = merged["facetFilters"] {
                cnf += (try? parseArrayFilters(value, kind: .facet, name: "facetFilters")) ?? []
            }
            return cnf
        }
        let words = { () -> [QueryWord] in
            self.alternatives.apply((try? self.data.parseQuery(options).words) ?? [], options)
        }
        return ruleSet.apply(
            merged, settings: data.settings.raw, data: data, words: words, now: RuleSet.now,
            queryFilters: queryFilters)
    }

    /// One rule by objectID (`GET …/rules/{objectID}`), nil when there is none.
    public func getRule(_ objectID: String) -> JSON? { ruleSet.rule(objectID) }

    /// `POST …/rules/search`: rules whose objectID, description, pattern or consequence contain `query`,
    /// restricted by `anchoring`, `context` and `enabled`, paged by `page` and `hitsPerPage` (20);
    /// answers `{"hits", "nbHits", "page", "nbPages"}`.
    public func searchRules(params: JSON) -> JSON { ruleSet.search(Self.mergedParameters(params)) }

    /// Hidden records removed and promoted ones pinned at their positions in a ranked list.
    private static func pin(_ ranked: [Int32], promoted: [(Int32, Int)], hidden: Set<Int32>) -> [Int32] {
        let promotedSet = Set(promoted.map(\.0))
        var out = ranked.filter { !hidden.contains($0) && !promotedSet.contains($0) }
        var placed = Set<Int32>()
        for (doc, position) in promoted.sorted(by: { $0.1 < $1.1 }) where placed.insert(doc).inserted {
            out.insert(doc, at: min(max(0, position), out.count))
        }
        return out
    }

    private func prepare(_ params: JSON) throws(SearchError) -> Prepared {
        let rules = applyRules(Self.mergedParameters(params))
        let merged = rules.params
        let options = SearchOptions(params: merged, settings: data.settings.raw)
        try SearchLimits.check(options)
        let filter = try compileFilters(options)
        let scoring = try filterScoring(options, filter)
        let geo = try geoQuery(options)
        var parsed = try data.parseQuery(options)
        parsed.words = alternatives.apply(parsed.words, options)
        let removalMode = options.string("removeWordsIfNoResults") ?? "none"
        guard ["none", "lastWords", "firstWords", "allOptional"].contains(removalMode) else {
            throw SearchError(
                status: 400,
                message:
                    "Invalid value for removeWordsIfNoResults: \(removalMode) (expected none, lastWords, firstWords or allOptional)"
            )
        }
        var words = parsed.words
        var result = data.match(
            options, words: words, filter: filter, geo: geo, exclusions: parsed.exclusions,
            phrases: parsed.phrases)
        var afterRemoval: String?
        if result.candidates.isEmpty {
            for flags in Self.removalAttempts(removalMode, words: parsed.words) {
                data.recycle(result)
                words = parsed.words
                for i in words.indices where flags[i] { words[i].optional = true }
                result = data.match(
                    options, words: words, filter: filter, geo: geo, exclusions: parsed.exclusions,
                    phrases: parsed.phrases)
                if !result.candidates.isEmpty {
                    afterRemoval = queryAfterRemoval(options.query, words: parsed.words, removed: flags)
                    break
                }
            }
        }
        var relevantSortNote: String?
        if relevantSort {
            let textual = try Ranker(
                data: data, match: result, options: options, geo: geo, filterScore: scoring)
            (result.candidates, relevantSortNote) = try relevantCandidates(
                result, textual, options, approximate: geo?.center != nil || scoring != nil)
        }
        let ranker = try Ranker(
            data: data, match: result, options: options, geo: geo, filterScore: scoring,
            customFirst: relevantSort)

        let hitsPerPage = max(0, min(1000, try options.int("hitsPerPage", default: 20)))
        let limit = max(0, min(20_000, try options.int("paginationLimitedTo", default: 1000)))
        let page = max(0, try options.int("page", default: 0))
        // A page far past the end saturates instead of overflowing (it is simply empty).
        let (product, overflow) = page.multipliedReportingOverflow(by: hitsPerPage)
        var offset = overflow ? Int.max : product
        var length = hitsPerPage
        let usesOffset = merged["offset"] != nil
        if usesOffset {
            offset = max(0, try options.int("offset", default: 0))
            length = max(0, min(1000, try options.int("length", default: hitsPerPage)))
        }
        let distinct = data.distinctGroup != nil ? options.distinct : 0

        var nbHits = result.candidates.count
        var pageDocs: [Int32] = []
        let end = offset >= limit ? limit : min(offset + length, limit)
        // Rules: promoted records (also when the query does not match them, unless `filterPromotes`
        // and the filters exclude them) and hidden ones.
        let hidden = Set(rules.hide.compactMap { data.docByID[$0] })
        var promoted: [(Int32, Int)] = []
        for (id, position) in rules.promote {
            guard let doc = data.docByID[id], !hidden.contains(doc) else { continue }
            if rules.filterPromotes && !(filter.isEmpty || filter.matches(Int(doc))) { continue }
            promoted.append((doc, position))
        }
        if !hidden.isEmpty || !promoted.isEmpty {
            // Candidates are in ascending document order: membership by binary search.
            func isCandidate(_ doc: Int32) -> Bool {
                var lo = 0
                var hi = result.candidates.count
                while lo < hi {
                    let mid = (lo + hi) >> 1
                    if result.candidates[mid] < doc { lo = mid + 1 } else { hi = mid }
                }
                return lo < result.candidates.count && result.candidates[lo] == doc
            }
            var ranked: [Int32]
            if distinct > 0, let groups = data.distinctGroup {
                var seen: [Int32: Int] = [:]
                ranked = ranker.sorted(result.candidates).filter { doc in
                    let group = groups[Int(doc)]
                    guard group >= 0 else { return true }
                    let count = seen[group, default: 0]
                    seen[group] = count + 1
                    return count < distinct
                }
            } else {
                ranked = ranker.top(end + hidden.count + promoted.count, of: result.candidates)
            }
            let pinned = Self.pin(ranked, promoted: promoted, hidden: hidden)
            nbHits =
                result.candidates.count - hidden.filter(isCandidate).count
                + Set(promoted.map(\.0)).filter { !isCandidate($0) }.count
            if offset < end && offset < pinned.count {
                pageDocs = Array(pinned[offset..<min(end, pinned.count)])
            }
        } else if distinct > 0, let groups = data.distinctGroup {
            var seen: [Int32: Int] = [:]
            var kept: [Int32] = []
            for doc in ranker.sorted(result.candidates) {
                let group = groups[Int(doc)]
                if group >= 0 {
                    let count = seen[group, default: 0]
                    if count >= distinct { continue }
                    seen[group] = count + 1
                }
                kept.append(doc)
            }
            nbHits = kept.count
            if offset < end { pageDocs = Array(kept[min(offset, kept.count)..<min(end, kept.count)]) }
        } else if offset < end {
            let top = ranker.top(end, of: result.candidates)
            if offset < top.count { pageDocs = Array(top[offset...]) }
        }

        var response = JSONObject()
        var context = HitContext(self, options, ranker)
        context.promoted = Set(promoted.map(\.0))
        response["hits"] = .array([])
        response["nbHits"] = .int(Int64(nbHits))
        response["page"] = .int(Int64(usesOffset ? (hitsPerPage > 0 ? offset / hitsPerPage : 0) : page))
        let reachable = min(nbHits, limit)
        response["nbPages"] = .int(Int64(hitsPerPage > 0 ? (reachable + hitsPerPage - 1) / hitsPerPage : 0))
        response["hitsPerPage"] = .int(Int64(hitsPerPage))
        if usesOffset {
            response["offset"] = .int(Int64(offset))
            response["length"] = .int(Int64(length))
        }
        response["exhaustiveNbHits"] = true
        response["exhaustiveTypo"] = true
        let facetNames = requestedFacets(options)
        if !facetNames.isEmpty {
            response["exhaustiveFacetsCount"] = true
        }
        response["exhaustive"] =
            facetNames.isEmpty
            ? ["nbHits": true, "typo": true] : ["nbHits": true, "typo": true, "facetsCount": true]
        if !facetNames.isEmpty {
            let (facets, stats) = try facetCounts(facetNames, result.candidates, options)
            response["facets"] = .object(facets)
            if !stats.isEmpty { response["facets_stats"] = .object(stats) }
        }
        if let geo, let center = geo.center {
            response["aroundLatLng"] = .string("\(center.lat),\(center.lng)")
        }
        response["query"] = .string(options.query)
        if let afterRemoval { response["queryAfterRemoval"] = .string(afterRemoval) }
        // Algolia answers `{}` when there is nothing to render.
        let rendering = rules.renderingContent ?? options.value("renderingContent")
        response["renderingContent"] = rendering.flatMap { $0.isNull ? nil : $0 } ?? .object(JSONObject())
        if !rules.userData.isEmpty { response["userData"] = .array(rules.userData) }
        if !rules.applied.isEmpty {
            response["appliedRules"] = .array(rules.applied.map { ["objectID": .string($0)] })
        }
        var ignored = ignoredSettings + ignoredParameters(.object(merged))
        if let relevantSortNote { ignored.append(relevantSortNote) }
        for (feature, languages) in parsed.unsupportedLanguages.sorted(by: { $0.key < $1.key }) {
            ignored.append("\(feature) for \(languages.joined(separator: ", "))")
        }
        if !ignored.isEmpty {
            response["message"] = .string(
                "Answered locally by Mirrorgate; not applied: " + ignored.joined(separator: "; "))
        }
        response["params"] = .string(JSON.echoedParameters(params))
        response["index"] = .string(name)
        return Prepared(
            response: response, pageDocs: pageDocs, context: context, match: result, options: options)
    }

    private func filterResponseFields(_ response: JSONObject, _ options: SearchOptions) -> JSONObject {
        guard let fields = options.params["responseFields"].map(stringList), !fields.contains("*") else {
            return response
        }
        let keep = Set(fields).union(["message", "warning", "cursor", "abTestVariantID"])
        var out = JSONObject()
        for (key, value) in response where keep.contains(key) { out[key] = value }
        return out
    }

    // MARK: - Hits

    func retrieved(_ record: JSON, attributes: [String]?) -> JSON {
        guard case .object(let object) = record else { return record }
        let unretrievable = data.settings.unretrievable
        let list = attributes ?? ["*"]
        var out = JSONObject()
        if list.contains("*") {
            let excluded = Set(list.filter { $0.hasPrefix("-") }.map { String($0.dropFirst()) })
            for (key, value) in object where !unretrievable.contains(key) && !excluded.contains(key) {
                out[key] = value
            }
        } else {
            for attribute in list where !unretrievable.contains(attribute) {
                if let direct = object[attribute] {
                    out[attribute] = direct
                } else if attribute.contains("."), let nested = value(at: attribute, in: record) {
                    let parts = attribute.split(separator: ".").map(String.init)
                    out[parts[0]] = setNested(out[parts[0]], parts.dropFirst(), nested)
                }
            }
        }
        if let objectID = object["objectID"] {
            if out["objectID"] == nil { out["objectID"] = objectID }
        }
        return .object(out)
    }

    private func setNested(_ existing: JSON?, _ path: ArraySlice<String>, _ leaf: JSON) -> JSON {
        guard let first = path.first else { return leaf }
        var object = existing?.objectValue ?? JSONObject()
        object[first] = setNested(object[first], path.dropFirst(), leaf)
        return .object(object)
    }

    private func highlightAttributes(_ options: SearchOptions, record: JSONObject) -> [String] {
        highlightAttributes(options, keys: record.keys)
    }

    private func highlightAttributes(_ options: SearchOptions, keys: [String]) -> [String] {
        if let list = options.list("attributesToHighlight") {
            if list.contains("*") { return keys.filter { $0 != "objectID" } }
            return list
        }
        if data.settings.searchable.isEmpty { return keys.filter { $0 != "objectID" } }
        var seen = Set<String>()
        return data.settings.searchable.map(\.path).filter { seen.insert($0).inserted }
    }

    /// What every hit of one search shares: the parameters read once, and one highlighter.
    struct HitContext {
        let options: SearchOptions
        let ranker: Ranker
        let highlighter: Highlighter
        let attributesToRetrieve: [String]?
        /// Highlighted attributes when they don't depend on the record (nil: computed per record).
        let highlightAttributes: [String]?
        /// (attribute or "*", size) per `attributesToSnippet` entry.
        let snippets: [(String, Int)]
        let rankingInfo: Bool
        /// Records pinned by a rule's `promote` (`_rankingInfo.promoted`).
        var promoted: Set<Int32> = []
        /// The hit is the stored record (all attributes, in order) plus the computed keys, so it can be
        /// written from the record's stored bytes.
        let rawRecord: Bool

        init(_ index: SearchIndex, _ options: SearchOptions, _ ranker: Ranker) {
            self.options = options
            self.ranker = ranker
            highlighter = Highlighter(
                normalizer: index.data.normalizer, words: ranker.match.words,
                preTag: options.string("highlightPreTag") ?? "<em>",
                postTag: options.string("highlightPostTag") ?? "</em>",
                ellipsis: options.string("snippetEllipsisText") ?? "…")
            attributesToRetrieve = options.list("attributesToRetrieve")
            let list = options.list("attributesToHighlight")
            if let list, !list.contains("*") {
                highlightAttributes = list
            } else if list == nil && !index.data.settings.searchable.isEmpty {
                var seen = Set<String>()
                highlightAttributes = index.data.settings.searchable.map(\.path).filter {
                    seen.insert($0).inserted
                }
            } else {
                highlightAttributes = nil
            }
            snippets = (options.list("attributesToSnippet") ?? []).map { entry in
                if let colon = entry.lastIndex(of: ":"), let n = Int(entry[entry.index(after: colon)...]) {
                    return (String(entry[..<colon]), n)
                }
                return (entry, 10)
            }
            rankingInfo = options.bool("getRankingInfo", default: false)
            let retrieve = attributesToRetrieve
            rawRecord =
                !rankingInfo && index.data.settings.unretrievable.isEmpty
                && (retrieve == nil || (retrieve!.contains("*") && !retrieve!.contains { $0.hasPrefix("-") }))
        }
    }

    private static let computedKeys: Set<String> = ["_highlightResult", "_snippetResult", "_rankingInfo"]

    /// Appends the serialization of `hit(doc, context)`: from the stored record bytes when the hit is
    /// the whole record plus highlights and snippets, else by serializing ``hit(_:_:)``.
    private func writeHit(_ doc: Int, _ context: HitContext, to out: inout [UInt8]) throws(SearchError) {
        // The record's bytes (a slice of its chunk; its buffer pointer is indexed from 0).
        let recordBlob = data.recordBytes(doc)
        let start = 0
        let end = recordBlob.count
        let fields =
            context.rawRecord
            ? recordBlob.withUnsafeBufferPointer {
                topLevelFields(UnsafeBufferPointer(rebasing: $0[start..<end]))
            }
            : nil
        guard let fields else {
            try hit(doc, context).write(to: &out)
            return
        }
        func index(of name: String) -> Int? {
            var name = name
            return name.withUTF8 { name in
                recordBlob.withUnsafeBufferPointer { blob in
                    fields.firstIndex { field in
                        field.key.count == name.count
                            && memcmpEqual(
                                blob.baseAddress! + start + field.key.lowerBound, name.baseAddress, name.count
                            )
                    }
                }
            }
        }
        func keyString(_ f: Int) -> String {
            recordBlob.withUnsafeBufferPointer { blob in
                String(
                    decoding: UnsafeBufferPointer(
                        rebasing: blob[
                            (start + fields[f].key.lowerBound)..<(start + fields[f].key.upperBound)]),
                    as: UTF8.self)
            }
        }
        func value(_ f: Int) -> JSON? {
            recordBlob.withUnsafeBufferPointer { blob in
                try? JSON.parse(
                    buffer: UnsafeBufferPointer(
                        rebasing: blob[
                            (start + fields[f].value.lowerBound)..<(start + fields[f].value.upperBound)]))
            }
        }
        if Self.computedKeys.contains(where: { index(of: $0) != nil }) {
            try hit(doc, context).write(to: &out)
            return
        }
        let attributes =
            context.highlightAttributes
            ?? highlightAttributes(context.options, keys: fields.indices.map(keyString))
        var snippetTargets: [(String, Int)] = []
        for (attribute, size) in context.snippets {
            if attribute == "*" {
                for f in fields.indices {
                    let key = keyString(f)
                    if key != "objectID" { snippetTargets.append((key, size)) }
                }
            } else {
                snippetTargets.append((attribute, size))
            }
        }
        // Nested paths and repeated snippet targets take the general path.
        if attributes.contains(where: { index(of: $0) == nil && $0.split(separator: ".").count > 1 })
            || snippetTargets.contains(where: { index(of: $0.0) == nil && $0.0.contains(".") })
            || Set(snippetTargets.map(\.0)).count != snippetTargets.count
        {
            try hit(doc, context).write(to: &out)
            return
        }
        // Stored records are canonical serializations: copy all but the closing brace.
        recordBlob.withUnsafeBufferPointer { blob in
            out.append(contentsOf: UnsafeBufferPointer(rebasing: blob[start..<(end - 1)]))
        }
        var needsComma = !fields.isEmpty
        let highlighter = context.highlighter
        // Writes `"key":{attr: mirror, …}` for the targets that have a value; nothing when none has.
        func writeSection(_ key: String, _ targets: [(String, Int?)], skipRepeats: Bool) {
            var written: [String] = []
            var section: [UInt8] = []
            for (target, size) in targets where !(skipRepeats && written.contains(target)) {
                guard let f = index(of: target), let value = value(f) else { continue }
                let mark = section.count
                if !written.isEmpty { section.append(UInt8(ascii: ",")) }
                JSON.writeString(target, to: &section)
                section.append(UInt8(ascii: ":"))
                if highlighter.writeMirror(value, snippetWords: size, to: &section) {
                    written.append(target)
                } else {
                    section.removeSubrange(mark...)
                }
            }
            guard !written.isEmpty else { return }
            if needsComma { out.append(UInt8(ascii: ",")) }
            out.append(UInt8(ascii: "\""))
            out.append(contentsOf: key.utf8)
            out.append(contentsOf: #"":{"#.utf8)
            out.append(contentsOf: section)
            out.append(UInt8(ascii: "}"))
            needsComma = true
        }
        writeSection("_highlightResult", attributes.map { ($0, nil) }, skipRepeats: true)
        writeSection("_snippetResult", snippetTargets.map { ($0.0, $0.1) }, skipRepeats: false)
        out.append(UInt8(ascii: "}"))
    }

    func hit(_ doc: Int, _ context: HitContext) throws(SearchError) -> JSON {
        let options = context.options
        let ranker = context.ranker
        let record = data.record(doc)
        guard case .object(var hit) = retrieved(record, attributes: context.attributesToRetrieve),
            case .object(let full) = record
        else { return record }
        let highlighter = context.highlighter
        let unretrievable = data.settings.unretrievable
        var highlights = JSONObject()
        let attributes = context.highlightAttributes ?? highlightAttributes(options, record: full)
        for attribute in attributes where !unretrievable.contains(attribute) {
            guard let value = value(at: attribute, in: record),
                let mirrored = highlighter.mirror(value, snippetWords: nil)
            else { continue }
            let parts =
                full[attribute] != nil || !attribute.contains(".") ? [] : attribute.split(separator: ".")
            if parts.count <= 1 {
                highlights[attribute] = mirrored
            } else {
                let parts = parts.map(String.init)
                highlights[parts[0]] = setNested(highlights[parts[0]], parts.dropFirst(), mirrored)
            }
        }
        if !highlights.isEmpty { hit["_highlightResult"] = .object(highlights) }
        var snippets = JSONObject()
        for (attribute, size) in context.snippets {
            let targets = attribute == "*" ? full.keys.filter { $0 != "objectID" } : [attribute]
            for target in targets where !unretrievable.contains(target) {
                guard let value = value(at: target, in: record),
                    let mirrored = highlighter.mirror(value, snippetWords: size)
                else { continue }
                snippets[target] = mirrored
            }
        }
        if !snippets.isEmpty { hit["_snippetResult"] = .object(snippets) }
        if context.rankingInfo {
            let v = ranker.values(doc)
            var info: JSONObject = [
                "nbTypos": .int(Int64(v.typos)), "firstMatchedWord": .int(Int64(v.firstMatchedWord)),
                "proximityDistance": .int(Int64(v.proximity)),
                "userScore": .int(Int64(data.liveCount - Int(data.customRank[doc]))),
                "geoDistance": .int(Int64(v.geoDistance)),
                "geoPrecision": .int(Int64(ranker.precision(at: Double(v.geoDistance)))),
                "nbExactWords": .int(Int64(v.exactWords)), "words": .int(Int64(v.words)),
                "filters": .int(Int64(v.filters)),
            ]
            if let geo = ranker.geo, let center = geo.center, let points = data.geo?[doc], !points.isEmpty {
                let best = points.min { haversine(center, $0) < haversine(center, $1) }!
                info["matchedGeoLocation"] = [
                    "lat": .double(best.lat), "lng": .double(best.lng),
                    "distance": .int(Int64(v.geoDistance)),
                ]
            }
            info["promoted"] = .bool(context.promoted.contains(Int32(doc)))
            hit["_rankingInfo"] = .object(info)
        }
        return .object(hit)
    }
}

extension SearchIndex {
    /// A virtual replica's relevant sort, step 2 (Algolia: "selects the most relevant results"): the
    /// matches kept before they are ordered by `customRanking`. Every match when `relevancyStrictness` is
    /// 0, or when the query has no words (all matches are then equally relevant); else the matches whose
    /// relevance — matched words and typos, `2 × words − typos` — is at least `relevancyStrictness`
    /// percent of the best match's. Algolia's own threshold is not public: the second value, when not
    /// nil, is the note the answer's `message` carries to say the selection was approximated (also when
    /// geo distance or filter scores, which this selection does not weigh, rank the query: `approximate`).
    func relevantCandidates(
        _ result: MatchResult, _ ranker: Ranker, _ options: SearchOptions, approximate: Bool
    ) throws(SearchError) -> ([Int32], String?) {
        let strictness = max(0, min(100, try options.int("relevancyStrictness", default: 100)))
        let note =
            "relevancyStrictness \(strictness) (relevant sort approximated: the matches kept are those within "
            + "\(strictness)% of the best match by matched words and typos, then sorted by customRanking)"
        guard strictness > 0, !result.candidates.isEmpty else { return (result.candidates, nil) }
        guard !result.words.isEmpty else { return (result.candidates, approximate ? note : nil) }
        let relevance = result.candidates.map { doc -> Int in
            let v = ranker.values(Int(doc))
            return 2 * v.words - v.typos
        }
        let best = relevance.max() ?? 0
        let threshold = best * strictness
        var kept: [Int32] = []
        for (doc, score) in zip(result.candidates, relevance) where score * 100 >= threshold {
            kept.append(doc)
        }
        return (kept, note)
    }
}

extension SearchIndex {
    /// One record by objectID for a caller whose reads are restricted by `restrictions` (the search
    /// parameters a secured API key carries): nil when there is no such record or when it does not pass
    /// the restrictions' `filters`, `facetFilters`, `numericFilters` and `tagFilters`, as Algolia withholds
    /// the records a restricted key cannot retrieve. The restrictions' `attributesToRetrieve`, when they
    /// carry one, wins over `attributesToRetrieve` (a key's parameters cannot be overridden by a request).
    /// Throws ``SearchError`` (400) when the restrictions' filters do not parse.
    public func getObject(
        _ objectID: String, attributesToRetrieve: [String]?, restrictedBy restrictions: JSONObject
    ) throws(SearchError) -> JSON? {
        guard let doc = data.docByID[objectID] else { return nil }
        let options = SearchOptions(params: restrictions, settings: data.settings.raw)
        let filter = try compileFilters(options)
        guard filter.matches(Int(doc)) else { return nil }
        var attributes = attributesToRetrieve
        if let forced = restrictions["attributesToRetrieve"], !forced.isNull {
            attributes = forced.arrayValue?.compactMap(\.stringValue) ?? stringList(forced)
        }
        return retrieved(data.record(Int(doc)), attributes: attributes)
    }
}
