import JSONCore

/// One searchable index held in memory: its settings (kept exactly as given), synonyms and records,
/// answering Algolia's read API with Algolia's response shapes (reference §2.5).
///
/// Promises: immutable once built, so it is safe to query from any number of threads at once; a search
/// ranks only as many hits as the requested page needs (top-k), computes exact facet counts over all
/// matching records, and builds highlights and snippets only for the returned hits. Errors in
/// parameters or filters throw ``SearchError`` with status 400 and a message saying where.
public final class SearchIndex: Sendable {
    /// The index name.
    public let name: String
    /// The settings object exactly as given (key order kept).
    public let settingsJSON: JSON
    /// Synonym objects as given.
    public let synonyms: [JSON]
    /// A value that changes with every build; browse cursors are tied to it.
    public let generation: String
    let data: IndexData
    /// Query-time alternatives from `synonyms` (see ``SynonymTable``).
    let alternatives: SynonymTable
    /// Query rules as given (Algolia's rule objects); applied by ``search(_:)`` unless `enableRules` is
    /// false, listed by ``searchRules(params:)``.
    public let rules: [JSON]
    let ruleSet: RuleSet

    /// Builds the in-memory index from records (each an object; `objectID` taken as given, else the
    /// record's position).
    public init(
        name: String, settings: JSON, synonyms: [JSON] = [], rules: [JSON] = [], records: [JSON],
        generation: String? = nil
    ) {
        self.name = name
        settingsJSON = settings.objectValue != nil ? settings : .object(JSONObject())
        self.synonyms = synonyms
        self.rules = rules
        ruleSet = RuleSet(rules)
        data = IndexData(
            settings: EngineSettings(settingsJSON), placeholders: SynonymTable.placeholderKeys(synonyms)
        ) { add in
            for record in records { add(record, nil) }
        }
        self.generation = generation ?? String(UInt64.random(in: 0...UInt64.max), radix: 36)
        alternatives = SynonymTable(synonyms, normalizer: data.normalizer)
    }

    /// Builds from serialized records (each one JSON object), keeping their bytes as the stored form;
    /// memory stays near the serialized size plus the index.
    public init(
        name: String, settings: JSON, synonyms: [JSON] = [], rules: [JSON] = [],
        serializedRecords: some Sequence<[UInt8]>,
        generation: String? = nil
    ) throws(JSONParseError) {
        self.name = name
        settingsJSON = settings.objectValue != nil ? settings : .object(JSONObject())
        self.synonyms = synonyms
        self.rules = rules
        ruleSet = RuleSet(rules)
        let engineSettings = EngineSettings(settingsJSON)
        do {
            data = try IndexData(
                settings: engineSettings, placeholders: SynonymTable.placeholderKeys(synonyms)
            ) { add in
                for bytes in serializedRecords {
                    try bytes.withUnsafeBufferPointer { buffer in
                        add(try JSON.parse(buffer: buffer), buffer)
                    }
                }
            }
        } catch let error as JSONParseError {
            throw error
        } catch {
            throw JSONParseError(offset: 0, message: "\(error)")
        }
        self.generation = generation ?? String(UInt64.random(in: 0...UInt64.max), radix: 36)
        alternatives = SynonymTable(synonyms, normalizer: data.normalizer)
    }

    /// Builds from a JSON array text (e.g. a data file) element by element, without materializing all
    /// records at once.
    public init(
        name: String, settings: JSON, synonyms: [JSON] = [], rules: [JSON] = [], jsonArray bytes: [UInt8],
        generation: String? = nil
    ) throws(JSONParseError) {
        self.name = name
        settingsJSON = settings.objectValue != nil ? settings : .object(JSONObject())
        self.synonyms = synonyms
        self.rules = rules
        ruleSet = RuleSet(rules)
        let engineSettings = EngineSettings(settingsJSON)
        do {
            data = try IndexData(
                settings: engineSettings, placeholders: SynonymTable.placeholderKeys(synonyms),
                expectedBytes: bytes.count
            ) { add in
                try JSON.forEachArrayElement(bytes) { value, slice in add(value, slice) }
            }
        } catch let error as JSONParseError {
            throw error
        } catch {
            throw JSONParseError(offset: 0, message: "\(error)")
        }
        self.generation = generation ?? String(UInt64.random(in: 0...UInt64.max), radix: 36)
        alternatives = SynonymTable(synonyms, normalizer: data.normalizer)
    }

    /// Builds from a JSON array text delivered in chunks by `next` (nil at the end), element by
    /// element, so that neither the whole text nor all parsed records are ever in memory at once.
    /// `sizeHint` (the text's total size, when known) sizes the record storage once.
    public convenience init(
        name: String, settings: JSON, synonyms: [JSON] = [], rules: [JSON] = [],
        jsonArrayChunks next: () throws -> [UInt8]?,
        sizeHint: Int = 0, generation: String? = nil
    ) throws {
        let settingsJSON = settings.objectValue != nil ? settings : .object(JSONObject())
        let data = try IndexData(
            settings: EngineSettings(settingsJSON), placeholders: SynonymTable.placeholderKeys(synonyms),
            expectedBytes: sizeHint
        ) { add in
            var stream = JSONArrayStream()
            while let chunk = try next() {
                try stream.feed(chunk) { element in add(try JSON.parse(buffer: element), element) }
            }
            try stream.finish()
        }
        self.init(
            name: name, settings: settingsJSON, synonyms: synonyms, rules: rules, data: data,
            generation: generation ?? String(UInt64.random(in: 0...UInt64.max), radix: 36))
    }

    init(
        name: String, settings: JSON, synonyms: [JSON], rules: [JSON] = [], data: IndexData,
        generation: String
    ) {
        self.name = name
        settingsJSON = settings
        self.synonyms = synonyms
        self.rules = rules
        ruleSet = RuleSet(rules)
        self.data = data
        self.generation = generation
        alternatives = SynonymTable(synonyms, normalizer: data.normalizer)
    }

    /// Number of records.
    public var objectCount: Int { data.count }

    /// The number of word forms in the compiled plural table of a language (en, fr, de, es), 0 for
    /// others (for benchmarks and status).
    public func pluralFormCount(language: String) -> Int { LanguageTables.plurals(language)?.count ?? 0 }

    /// The index settings the local engine does not apply (each local answer names them in its
    /// `message`; `mirrorgate status` can list them).
    public var ignoredSettings: [String] {
        ParameterAudit.ignored(settingsJSON.objectValue ?? JSONObject(), settings: true).map {
            "setting " + $0
        }
    }

    /// All records in index order (parsed from the compact stored form on each call).
    public var records: [JSON] { (0..<data.count).map { data.record($0) } }

    /// The serialized bytes of every record, in index order (what ``IndexStore`` persists).
    public func forEachSerializedRecord(_ body: (UnsafeBufferPointer<UInt8>) throws -> Void) rethrows {
        try data.recordBlob.withUnsafeBufferPointer { buffer in
            for doc in 0..<data.count {
                try body(
                    UnsafeBufferPointer(
                        rebasing: buffer[data.recordOffsets[doc]..<data.recordOffsets[doc + 1]]))
            }
        }
    }

    // MARK: - Parameters

    /// Merges a `params` string (if any) into the object form; explicit keys win over the string.
    public static func mergedParameters(_ params: JSON) -> JSONObject {
        guard case .object(var object) = params else { return JSONObject() }
        if let text = object["params"]?.stringValue {
            object["params"] = nil
            var merged = JSON.parseAlgoliaParams(text)
            for (key, value) in object { merged[key] = value }
            return merged
        }
        return object
    }

    private func compileFilters(_ options: SearchOptions) throws(SearchError) -> CompiledFilter {
        var cnf: FilterCNF = []
        if let filters = options.params["filters"], !filters.isNull {
            let text = filters.stringValue ?? filters.serialized()
            cnf += try FilterParser.parse(text)
        }
        if let value = options.params["facetFilters"] {
            cnf += try parseArrayFilters(value, kind: .facet, name: "facetFilters")
        }
        if let value = options.params["numericFilters"] {
            cnf += try parseArrayFilters(value, kind: .numeric, name: "numericFilters")
        }
        if let value = options.params["tagFilters"] {
            cnf += try parseArrayFilters(value, kind: .tag, name: "tagFilters")
        }
        return CompiledFilter(cnf, data: data)
    }

    private func geoQuery(_ options: SearchOptions) throws(SearchError) -> GeoQuery? {
        var geo = GeoQuery(center: nil, radius: nil, boxes: [], precision: 1)
        var any = false
        if let box = options.params["insideBoundingBox"], !box.isNull {
            let numbers: [Double]
            switch box {
            case .string(let text):
                numbers = text.split(separator: ",").compactMap { Double($0.trimmingSpaces) }
            case .array(let items):
                numbers = items.flatMap { item -> [Double] in
                    if case .array(let inner) = item { return inner.compactMap(numberOrString) }
                    return [numberOrString(item)].compactMap { $0 }
                }
            default: numbers = []
            }
            guard !numbers.isEmpty, numbers.count % 4 == 0 else {
                throw SearchError(status: 400, message: "insideBoundingBox: expected groups of 4 numbers")
            }
            for i in stride(from: 0, to: numbers.count, by: 4) {
                geo.boxes.append((numbers[i], numbers[i + 1], numbers[i + 2], numbers[i + 3]))
            }
            any = true
        } else if let around = options.params["aroundLatLng"]?.stringValue, !around.isEmpty {
            let parts = around.split(separator: ",").compactMap { Double($0.trimmingSpaces) }
            guard parts.count == 2 else {
                throw SearchError(
                    status: 400, message: "aroundLatLng: expected \"lat,lng\", got \"\(around)\"")
            }
            geo.center = (parts[0], parts[1])
            switch options.params["aroundRadius"] {
            case .string("all")?, nil: break
            case let radius?:
                guard let meters = numberOrString(radius), meters >= 1 else {
                    throw SearchError(status: 400, message: "aroundRadius: expected meters >= 1 or \"all\"")
                }
                geo.radius = meters
            }
            any = true
        }
        if geo.boxes.isEmpty, let polygons = options.params["insidePolygon"], !polygons.isNull {
            geo.polygons = try Self.polygons(polygons)
            geo.center = nil
            geo.radius = nil
            any = true
        }
        if geo.center != nil && geo.radius == nil, let minimum = options.params["minimumAroundRadius"],
            !minimum.isNull
        {
            guard let meters = numberOrString(minimum), meters >= 1 else {
                throw SearchError(status: 400, message: "minimumAroundRadius: expected meters >= 1")
            }
            _ = meters
        }
        switch options.value("aroundPrecision") {
        case nil, .null?: break
        case .array(let ranges)?:
            for range in ranges {
                guard let from = range["from"].flatMap(numberOrString),
                    let value = range["value"].flatMap(numberOrString)
                else {
                    throw SearchError(
                        status: 400,
                        message: "aroundPrecision: expected a number or [{\"from\": m, \"value\": m}, …]")
                }
                geo.precisionRanges.append((from, value))
            }
            geo.precisionRanges.sort { $0.from < $1.from }
        case let value?:
            guard let precision = numberOrString(value) else {
                throw SearchError(status: 400, message: "aroundPrecision: expected a number of meters")
            }
            geo.precision = precision
        }
        return any ? geo : nil
    }

    /// `insidePolygon`: one polygon as a flat list (or a string) of lat,lng pairs, or a list of them.
    static func polygons(_ value: JSON) throws(SearchError) -> [[(lat: Double, lng: Double)]] {
        var lists: [[Double]] = []
        switch value {
        case .string(let text):
            let trimmed = text.trimmingSpaces
            if trimmed.hasPrefix("["), let parsed = try? JSON.parse(trimmed) { return try polygons(parsed) }
            lists = [text.split(separator: ",").map { Double($0.trimmingSpaces) ?? .nan }]
        case .array(let items):
            if items.allSatisfy({ $0.arrayValue != nil }) {
                lists = items.map { ($0.arrayValue ?? []).map { numberOrString($0) ?? .nan } }
            } else {
                lists = [items.map { numberOrString($0) ?? .nan }]
            }
        default: break
        }
        guard !lists.isEmpty else {
            throw SearchError(
                status: 400, message: "insidePolygon: expected lists of at least 3 lat,lng points")
        }
        return try lists.map { numbers throws(SearchError) in
            guard numbers.count >= 6, numbers.count % 2 == 0, numbers.allSatisfy(\.isFinite) else {
                throw SearchError(
                    status: 400,
                    message: "insidePolygon: a polygon needs at least 3 points (6 numbers: lat,lng,…)")
            }
            return stride(from: 0, to: numbers.count, by: 2).map { (numbers[$0], numbers[$0 + 1]) }
        }
    }

    // MARK: - Search

    /// Runs one search. `params` is the object form, optionally with a `params` string (merged here).
    public func search(_ params: JSON) throws(SearchError) -> JSON {
        let start = ContinuousClock.now
        var outcome = try prepare(params)
        let context = outcome.context
        outcome.response["hits"] = .array(
            try outcome.pageDocs.map { doc throws(SearchError) in try hit(doc.asInt, context) })
        data.recycle(outcome.match)
        return .object(finish(outcome, start: start))
    }

    /// The same answer as `search(params).serializedBytes()` (byte for byte, except
    /// `processingTimeMS`), built faster: hits are written straight from the stored record bytes.
    /// This is what an HTTP layer should send.
    public func searchSerialized(_ params: JSON) throws(SearchError) -> [UInt8] {
        let start = ContinuousClock.now
        let outcome = try prepare(params)
        var hits: [UInt8] = []
        hits.reserveCapacity(outcome.pageDocs.count * 1024 + 2)
        hits.append(UInt8(ascii: "["))
        for (i, doc) in outcome.pageDocs.enumerated() {
            if i > 0 { hits.append(UInt8(ascii: ",")) }
            try writeHit(doc.asInt, outcome.context, to: &hits)
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
            optional = CompiledFilter(
                try parseArrayFilters(value, kind: .facet, name: "optionalFilters"), data: data)
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
        let ranker = try Ranker(data: data, match: result, options: options, geo: geo, filterScore: scoring)

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
        response["exhaustive"] = ["nbHits": true, "typo": true, "facetsCount": true]
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
        if let rendering = rules.renderingContent ?? options.value("renderingContent"), !rendering.isNull {
            response["renderingContent"] = rendering
        }
        if !rules.userData.isEmpty { response["userData"] = .array(rules.userData) }
        if !rules.applied.isEmpty {
            response["appliedRules"] = .array(rules.applied.map { ["objectID": .string($0)] })
        }
        var ignored = ignoredSettings + ignoredParameters(.object(merged))
        for (feature, languages) in parsed.unsupportedLanguages.sorted(by: { $0.key < $1.key }) {
            ignored.append("\(feature) for \(languages.joined(separator: ", "))")
        }
        if !ignored.isEmpty {
            response["message"] = .string(
                "Answered locally by Mirrorgate; not applied: " + ignored.joined(separator: "; "))
        }
        var echo = merged
        echo["cursor"] = nil
        response["params"] = .string(JSON.formEncode(echo))
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

    private func retrieved(_ record: JSON, attributes: [String]?) -> JSON {
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
    private struct HitContext {
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
        let start = data.recordOffsets[doc]
        let end = data.recordOffsets[doc + 1]
        let fields =
            context.rawRecord
            ? data.recordBlob.withUnsafeBufferPointer {
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
                data.recordBlob.withUnsafeBufferPointer { blob in
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
            data.recordBlob.withUnsafeBufferPointer { blob in
                String(
                    decoding: UnsafeBufferPointer(
                        rebasing: blob[
                            (start + fields[f].key.lowerBound)..<(start + fields[f].key.upperBound)]),
                    as: UTF8.self)
            }
        }
        func value(_ f: Int) -> JSON? {
            data.recordBlob.withUnsafeBufferPointer { blob in
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
        data.recordBlob.withUnsafeBufferPointer { blob in
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

    private func hit(_ doc: Int, _ context: HitContext) throws(SearchError) -> JSON {
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
                "userScore": .int(Int64(data.count - Int(data.customRank[doc]))),
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

    // MARK: - Facets

    private func requestedFacets(_ options: SearchOptions) -> [String] {
        guard let list = options.params["facets"].map(stringList) ?? options.list("facets"), !list.isEmpty
        else {
            return []
        }
        let declared = data.settings.facets.filter { !$0.filterOnly }.map(\.path)
        if list.contains("*") { return declared }
        return list.filter { declared.contains($0) }
    }

    private func facetCounts(
        _ names: [String], _ candidates: [Int32], _ options: SearchOptions
    ) throws(SearchError) -> (JSONObject, JSONObject) {
        let maxValues = max(1, min(1000, try options.int("maxValuesPerFacet", default: 100)))
        let alpha = options.string("sortFacetValuesBy") == "alpha"
        var facets = JSONObject()
        var stats = JSONObject()
        let all = candidates.count == data.count
        for name in names {
            guard let column = data.facetColumns[name] else { continue }
            var counts: [Int32]
            if all {
                counts = column.totals
            } else {
                counts = [Int32](repeating: 0, count: column.originals.count)
                counts.withUnsafeMutableBufferPointer { out in
                    column.offsets.withUnsafeBufferPointer { offsets in
                        column.values.withUnsafeBufferPointer { values in
                            for doc in candidates {
                                var i = Int(offsets[Int(doc)])
                                let e = Int(offsets[Int(doc) + 1])
                                while i < e {
                                    out[Int(values[i])] += 1
                                    i += 1
                                }
                            }
                        }
                    }
                }
            }
            var present: [Int] = []
            for (id, count) in counts.enumerated() where count > 0 { present.append(id) }
            if alpha {
                present.sort { column.originals[$0] < column.originals[$1] }
            } else {
                present.sort {
                    counts[$0] != counts[$1]
                        ? counts[$0] > counts[$1] : column.originals[$0] < column.originals[$1]
                }
            }
            var object = JSONObject()
            for id in present.prefix(maxValues) { object[column.originals[id]] = .int(Int64(counts[id])) }
            facets[name] = .object(object)
            if let numeric = data.numericColumns[name] {
                var minValue = Double.infinity
                var maxValue = -Double.infinity
                var sum = 0.0
                var n = 0
                for doc in candidates {
                    _ = numeric.forEach(doc: Int(doc)) { v in
                        minValue = min(minValue, v)
                        maxValue = max(maxValue, v)
                        sum += v
                        n += 1
                        return false
                    }
                }
                if n > 0 {
                    stats[name] = [
                        "min": numberJSON(minValue), "max": numberJSON(maxValue),
                        "avg": numberJSON(sum / Double(n)),
                        "sum": numberJSON(sum),
                    ]
                }
            }
        }
        return (facets, stats)
    }

    // MARK: - Browse

    /// Browses all records matching the query and filters, in index order, `hitsPerPage` (max 1000) at a
    /// time. The response has a `cursor` while more records remain; pass it back (the other parameters
    /// are then taken from the cursor).
    public func browse(_ params: JSON, cursor: String? = nil) throws(SearchError) -> JSON {
        let start = ContinuousClock.now
        var merged = Self.mergedParameters(params)
        var position = 0
        let cursorText = cursor ?? merged["cursor"]?.stringValue
        if let cursorText, !cursorText.isEmpty {
            guard let decoded = Base64.decode(cursorText), let state = try? JSON.parse(decoded),
                let saved = state["p"]?.objectValue, let at = state["o"]?.intValue, at >= 0,
                state["g"]?.stringValue == generation
            else {
                throw SearchError(
                    status: 400, message: "Invalid cursor: it does not belong to this index version")
            }
            let hitsOverride = merged["hitsPerPage"]
            merged = saved
            if let hitsOverride { merged["hitsPerPage"] = hitsOverride }
            position = at
        }
        merged["cursor"] = nil
        var options = SearchOptions(params: merged, settings: data.settings.raw)
        let filter = try compileFilters(options)
        let geo = try geoQuery(options)
        // Browse ignores plurals and advanced syntax (Algolia forces both off); stop words and optional
        // words apply.
        var wordParams = merged
        wordParams["ignorePlurals"] = false
        wordParams["advancedSyntax"] = false
        let parsed = try data.parseQuery(SearchOptions(params: wordParams, settings: data.settings.raw))
        let words = alternatives.apply(parsed.words, options)
        let result = data.match(options, words: words, filter: filter, geo: geo)
        let hitsPerPage = max(1, min(1000, try options.int("hitsPerPage", default: 1000)))
        // A cursor position past the end (a client may edit its cursor) gives an empty page.
        let from = min(position, result.candidates.count)
        let slice = result.candidates[from..<min(from + hitsPerPage, result.candidates.count)]
        // Browse never highlights or snippets.
        var forced = merged
        forced["attributesToHighlight"] = .array([])
        forced["attributesToSnippet"] = .array([])
        forced["getRankingInfo"] = false
        options = SearchOptions(params: forced, settings: data.settings.raw)
        let ranker = try Ranker(data: data, match: result, options: options, geo: geo)
        var response = JSONObject()
        let context = HitContext(self, options, ranker)
        response["hits"] = .array(try slice.map { doc throws(SearchError) in try hit(doc.asInt, context) })
        response["nbHits"] = .int(Int64(result.candidates.count))
        response["page"] = .int(Int64(position / hitsPerPage))
        response["nbPages"] = .int(Int64((result.candidates.count + hitsPerPage - 1) / hitsPerPage))
        response["hitsPerPage"] = .int(Int64(hitsPerPage))
        response["exhaustiveNbHits"] = true
        response["exhaustive"] = ["nbHits": true]
        response["query"] = .string(options.query)
        response["params"] = .string(JSON.formEncode(merged))
        let ignored = ignoredSettings + ignoredParameters(.object(merged))
        if !ignored.isEmpty {
            response["message"] = .string(
                "Answered locally by Mirrorgate; not applied: " + ignored.joined(separator: "; "))
        }
        let next = position + slice.count
        if next < result.candidates.count {
            let state: JSON = ["p": .object(merged), "o": .int(Int64(next)), "g": .string(generation)]
            response["cursor"] = .string(Base64.encode(state.serializedBytes()))
        }
        let elapsed = ContinuousClock.now - start
        response["processingTimeMS"] = .int(
            max(1, elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000)
        )
        return .object(response)
    }

    // MARK: - Objects and settings

    /// One record by objectID, restricted to `attributesToRetrieve` (objectID always kept,
    /// unretrievable attributes never returned).
    public func getObject(_ objectID: String, attributesToRetrieve: [String]? = nil) -> JSON? {
        guard let doc = data.docByID[objectID] else { return nil }
        return retrieved(data.record(Int(doc)), attributes: attributesToRetrieve)
    }

    /// Several records; `nil` for each unknown objectID.
    public func getObjects(_ requests: [(objectID: String, attributesToRetrieve: [String]?)]) -> [JSON?] {
        requests.map { getObject($0.objectID, attributesToRetrieve: $0.attributesToRetrieve) }
    }

    /// The settings as Algolia's `getSettings` answers: those given (key order kept), then Algolia's
    /// defaults for the ones never set (``defaultSettings``). `getVersion` 1 (Algolia's default) adds the
    /// legacy `synonyms` list (groups of multi-way synonyms) when the settings don't carry one; 2 removes
    /// it.
    public func settings(getVersion: Int? = nil) -> JSON {
        guard case .object(let given) = settingsJSON else { return settingsJSON }
        // The settings as given (key order and nulls kept), then Algolia's defaults for the settings
        // never given, as its getSettings answers.
        var object = given
        for (key, value) in Self.defaultSettings where object[key] == nil { object[key] = value }
        if getVersion == 2 {
            object["synonyms"] = nil
        } else if object["synonyms"] == nil {
            let groups: [JSON] = synonyms.compactMap { synonym in
                guard synonym["type"]?.stringValue == "synonym", let words = synonym["synonyms"] else {
                    return nil
                }
                return words
            }
            if !groups.isEmpty { object["synonyms"] = .array(groups) }
        }
        return .object(object)
    }

    /// The settings Algolia's `getSettings` reports when they were never set, in its order.
    static let defaultSettings: JSONObject = [
        "minWordSizefor1Typo": 4, "minWordSizefor2Typos": 8, "hitsPerPage": 20, "maxValuesPerFacet": 100,
        "paginationLimitedTo": 1000, "exactOnSingleWordQuery": "attribute",
        "ranking": ["typo", "geo", "words", "filters", "proximity", "attribute", "exact", "custom"],
        "separatorsToIndex": "", "removeWordsIfNoResults": "none", "queryType": "prefixLast",
        "highlightPreTag": "<em>", "highlightPostTag": "</em>", "snippetEllipsisText": "…",
        "alternativesAsExact": ["ignorePlurals", "singleWordSynonym"],
    ]

    /// `searchForFacetValues` on a `searchable()` facet: values among the records matching `params`
    /// (query and filters) whose words start with the `facetQuery` words, highlighted, by count.
    public func searchForFacetValues(facet: String, params: JSON) throws(SearchError) -> JSON {
        let start = ContinuousClock.now
        guard data.settings.facets.contains(where: { $0.path == facet && $0.searchable }),
            let column = data.facetColumns[facet]
        else {
            throw SearchError(
                status: 400,
                message:
                    "Cannot search in `\(facet)` attribute, you need to add `searchable(\(facet))` to attributesForFaceting."
            )
        }
        var merged = Self.mergedParameters(params)
        let facetQuery = merged["facetQuery"]?.stringValue ?? ""
        let maxHits = max(1, min(100, intParam(merged["maxFacetHits"]) ?? 10))
        merged["facetQuery"] = nil
        let options = SearchOptions(params: merged, settings: data.settings.raw)
        let filter = try compileFilters(options)
        let parsed = try data.parseQuery(options)
        let result = data.match(
            options, words: alternatives.apply(parsed.words, options), filter: filter,
            geo: try geoQuery(options),
            exclusions: parsed.exclusions, phrases: parsed.phrases)
        var counts = [Int32](repeating: 0, count: column.originals.count)
        for doc in result.candidates {
            for i in Int(column.offsets[Int(doc)])..<Int(column.offsets[Int(doc) + 1]) {
                counts[Int(column.values[i])] += 1
            }
        }
        let queryTokens = data.normalizer.tokens(facetQuery)
        let words = queryTokens.map {
            QueryWord(
                text: String(decoding: $0.normalized, as: UTF8.self), bytes: $0.normalized, prefix: true,
                maxTypos: 0)
        }
        let highlighter = Highlighter(
            normalizer: data.normalizer, words: words, preTag: options.string("highlightPreTag") ?? "<em>",
            postTag: options.string("highlightPostTag") ?? "</em>", ellipsis: "")
        var hits: [(String, String, Int32)] = []
        for (id, count) in counts.enumerated() where count > 0 {
            let value = column.originals[id]
            if words.isEmpty {
                hits.append((value, value, count))
                continue
            }
            let highlighted = highlighter.highlight(value)
            if highlighted.matched.count == words.count { hits.append((value, highlighted.value, count)) }
        }
        hits.sort { $0.2 != $1.2 ? $0.2 > $1.2 : $0.0 < $1.0 }
        let elapsed = ContinuousClock.now - start
        var ignored = ignoredSettings + ignoredParameters(.object(merged))
        ignored.removeAll { $0 == "facetQuery" || $0 == "maxFacetHits" }
        var answer: JSONObject = [
            "facetHits": .array(
                hits.prefix(maxHits).map {
                    ["value": .string($0.0), "highlighted": .string($0.1), "count": .int(Int64($0.2))]
                }),
            "exhaustiveFacetsCount": true,
            "processingTimeMS": .int(
                max(
                    1,
                    elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000
                )),
        ]
        if !ignored.isEmpty {
            answer["message"] = .string(
                "Answered locally by Mirrorgate; not applied: " + ignored.joined(separator: "; "))
        }
        return .object(answer)
    }

    /// Synonym search: `query` (substring, case-insensitive, over the synonym's words), `type` (one type
    /// or comma-separated types), `page`, `hitsPerPage` (default 100).
    public func searchSynonyms(params: JSON) -> JSON {
        let merged = Self.mergedParameters(params)
        let query = Normalizer.facetKey(merged["query"]?.stringValue ?? "")
        let types = Set(
            (merged["type"].map(stringList) ?? []).map { type in
                switch type.lowercased() {
                case "onewaysynonym": return "onewaysynonym"
                case "altcorrection1": return "altcorrection1"
                case "altcorrection2": return "altcorrection2"
                default: return type.lowercased()
                }
            })
        let page = max(0, intParam(merged["page"]) ?? 0)
        let hitsPerPage = max(1, min(1000, intParam(merged["hitsPerPage"]) ?? 100))
        let matching = synonyms.filter { synonym in
            if !types.isEmpty, !types.contains((synonym["type"]?.stringValue ?? "").lowercased()) {
                return false
            }
            if query.isEmpty { return true }
            var texts: [String] = []
            for key in ["objectID", "input", "word", "placeholder"] {
                if let s = synonym[key]?.stringValue { texts.append(s) }
            }
            for key in ["synonyms", "corrections", "replacements"] {
                texts += synonym[key].map(stringList) ?? []
            }
            return texts.contains { Normalizer.facetKey($0).contains(query) }
        }
        let (skip, overflow) = page.multipliedReportingOverflow(by: hitsPerPage)
        let slice = matching.dropFirst(overflow ? Int.max : skip).prefix(hitsPerPage)
        return ["hits": .array(Array(slice)), "nbHits": .int(Int64(matching.count))]
    }
}

func numberJSON(_ value: Double) -> JSON {
    if value == value.rounded(), abs(value) < 1e15 { return .int(Int64(value)) }
    return .double(value)
}

/// URL-safe base64 without padding, for opaque cursors.
enum Base64 {
    private static let alphabet = Array(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var i = 0
        while i + 2 < bytes.count {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
            out += [
                alphabet[Int(n >> 18 & 63)], alphabet[Int(n >> 12 & 63)], alphabet[Int(n >> 6 & 63)],
                alphabet[Int(n & 63)],
            ]
            i += 3
        }
        if bytes.count - i == 1 {
            let n = UInt32(bytes[i]) << 16
            out += [alphabet[Int(n >> 18 & 63)], alphabet[Int(n >> 12 & 63)]]
        } else if bytes.count - i == 2 {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8
            out += [alphabet[Int(n >> 18 & 63)], alphabet[Int(n >> 12 & 63)], alphabet[Int(n >> 6 & 63)]]
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func decode(_ text: String) -> [UInt8]? {
        var values: [UInt8] = []
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): values.append(byte - 65)
            case UInt8(ascii: "a")...UInt8(ascii: "z"): values.append(byte - 97 + 26)
            case UInt8(ascii: "0")...UInt8(ascii: "9"): values.append(byte - 48 + 52)
            case UInt8(ascii: "-"), UInt8(ascii: "+"): values.append(62)
            case UInt8(ascii: "_"), UInt8(ascii: "/"): values.append(63)
            case UInt8(ascii: "="): continue
            default: return nil
            }
        }
        var out: [UInt8] = []
        var i = 0
        while i + 3 < values.count {
            let n =
                UInt32(values[i]) << 18 | UInt32(values[i + 1]) << 12 | UInt32(values[i + 2]) << 6
                | UInt32(values[i + 3])
            out += [UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF)]
            i += 4
        }
        let rest = values.count - i
        if rest == 1 { return nil }
        if rest >= 2 {
            var n = UInt32(values[i]) << 18 | UInt32(values[i + 1]) << 12
            if rest == 3 { n |= UInt32(values[i + 2]) << 6 }
            out.append(UInt8(n >> 16 & 0xFF))
            if rest == 3 { out.append(UInt8(n >> 8 & 0xFF)) }
        }
        return out
    }
}

@inline(__always) func memcmpEqual(_ a: UnsafePointer<UInt8>, _ b: UnsafePointer<UInt8>?, _ count: Int)
    -> Bool
{
    guard let b else { return count == 0 }
    var i = 0
    while i < count {
        if a[i] != b[i] { return false }
        i += 1
    }
    return true
}

/// The top-level (key, value) byte ranges of a compact serialized object (as ``JSON/write(to:)``
/// writes it); nil when `bytes` is not such an object or a key holds an escape.
func topLevelFields(_ bytes: UnsafeBufferPointer<UInt8>) -> [(key: Range<Int>, value: Range<Int>)]? {
    let quote = UInt8(ascii: "\"")
    guard bytes.count >= 2, bytes[0] == UInt8(ascii: "{") else { return nil }
    var fields: [(key: Range<Int>, value: Range<Int>)] = []
    if bytes[1] == UInt8(ascii: "}") { return bytes.count == 2 ? fields : nil }
    var i = 1
    while i < bytes.count {
        guard bytes[i] == quote else { return nil }
        let keyStart = i + 1
        var j = keyStart
        while j < bytes.count && bytes[j] != quote {
            if bytes[j] == UInt8(ascii: "\\") { return nil }
            j += 1
        }
        guard j + 1 < bytes.count, bytes[j + 1] == UInt8(ascii: ":") else { return nil }
        let valueStart = j + 2
        guard let valueEnd = skipJSONValue(bytes, from: valueStart), valueEnd < bytes.count else {
            return nil
        }
        fields.append((keyStart..<j, valueStart..<valueEnd))
        if bytes[valueEnd] == UInt8(ascii: "}") { return valueEnd == bytes.count - 1 ? fields : nil }
        guard bytes[valueEnd] == UInt8(ascii: ",") else { return nil }
        i = valueEnd + 1
    }
    return nil
}

/// The end of the compact JSON value starting at `start` (exclusive), or nil when unterminated.
private func skipJSONValue(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> Int? {
    var i = start
    var depth = 0
    while i < bytes.count {
        let c = bytes[i]
        if c == UInt8(ascii: "\"") {
            i += 1
            while i < bytes.count && bytes[i] != UInt8(ascii: "\"") {
                if bytes[i] == UInt8(ascii: "\\") { i += 1 }
                i += 1
            }
            i += 1
            if depth == 0 { return i <= bytes.count ? i : nil }
            continue
        }
        if c == UInt8(ascii: "{") || c == UInt8(ascii: "[") {
            depth += 1
        } else if c == UInt8(ascii: "}") || c == UInt8(ascii: "]") {
            if depth == 0 { return i }
            depth -= 1
            if depth == 0 { return i + 1 }
        } else if depth == 0 && c == UInt8(ascii: ",") {
            return i
        }
        i += 1
    }
    return depth == 0 && i > start ? i : nil
}

/// Splits a JSON array text arriving in chunks into its elements' bytes (each handed over once
/// complete; parsing is the caller's). Keeps only the unfinished element between chunks.
struct JSONArrayStream {
    private var buffer: [UInt8] = []
    /// Bytes of the text before `buffer[0]` (for error offsets).
    private var base = 0
    private var position = 0
    private var elementStart = -1
    private var depth = 0
    private var inString = false
    private var escaped = false
    private var scalar = false
    private var started = false
    private var finished = false

    private static func isSpace(_ c: UInt8) -> Bool { c == 0x20 || c == 0x0A || c == 0x0D || c == 0x09 }

    private func failure(_ message: String) -> JSONParseError {
        JSONParseError(offset: base + position, message: message)
    }

    mutating func feed(_ chunk: [UInt8], _ body: (UnsafeBufferPointer<UInt8>) throws -> Void) throws {
        buffer.append(contentsOf: chunk)
        while position < buffer.count {
            let c = buffer[position]
            if finished {
                guard Self.isSpace(c) else { throw failure("Unexpected data after the array") }
                position += 1
                continue
            }
            if !started {
                if Self.isSpace(c) {
                    position += 1
                    continue
                }
                guard c == UInt8(ascii: "[") else { throw failure("Expected a JSON array") }
                started = true
                position += 1
                continue
            }
            if elementStart < 0 {
                if Self.isSpace(c) || c == UInt8(ascii: ",") {
                    position += 1
                    continue
                }
                if c == UInt8(ascii: "]") {
                    finished = true
                    position += 1
                    continue
                }
                elementStart = position
                depth = 0
                inString = false
                escaped = false
                scalar = false
                switch c {
                case UInt8(ascii: "{"), UInt8(ascii: "["): depth = 1
                case UInt8(ascii: "\""): inString = true
                default: scalar = true
                }
                position += 1
                continue
            }
            var end = -1
            if inString {
                if escaped {
                    escaped = false
                } else if c == UInt8(ascii: "\\") {
                    escaped = true
                } else if c == UInt8(ascii: "\"") {
                    inString = false
                    if depth == 0 { end = position + 1 }
                }
            } else if scalar {
                if Self.isSpace(c) || c == UInt8(ascii: ",") || c == UInt8(ascii: "]") { end = position }
            } else if c == UInt8(ascii: "\"") {
                inString = true
            } else if c == UInt8(ascii: "{") || c == UInt8(ascii: "[") {
                depth += 1
            } else if c == UInt8(ascii: "}") || c == UInt8(ascii: "]") {
                depth -= 1
                if depth == 0 { end = position + 1 }
            }
            if end >= 0 {
                let range = elementStart..<end
                try buffer.withUnsafeBufferPointer { try body(UnsafeBufferPointer(rebasing: $0[range])) }
                elementStart = -1
                position = end
                continue
            }
            position += 1
        }
        // Keep only the unfinished element.
        let keep = elementStart >= 0 ? elementStart : position
        if keep > 0 {
            buffer.removeSubrange(0..<keep)
            base += keep
            position -= keep
            if elementStart >= 0 { elementStart = 0 }
        }
    }

    mutating func finish() throws {
        guard started, finished, elementStart < 0 else { throw failure("Unterminated JSON array") }
    }
}
