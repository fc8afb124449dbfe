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
    /// A value that changes with every build and write; browse cursors are tied to it.
    public let generation: String
    /// The version of ``IndexStore`` this index was loaded from or saved as (nil: not stored).
    public let storeVersion: Int64?
    let data: IndexData
    /// Query-time alternatives from `synonyms` (see ``SynonymTable``).
    let alternatives: SynonymTable
    /// Query rules as given (Algolia's rule objects); applied by ``search(_:)`` unless `enableRules` is
    /// false, listed by ``searchRules(params:)``.
    public let rules: [JSON]
    let ruleSet: RuleSet
    /// A virtual replica's relevant sort (see ``asVirtualReplica()``).
    let relevantSort: Bool

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
            for record in records { add(record, nil, nil) }
        }
        self.generation = generation ?? String(UInt64.random(in: 0...UInt64.max), radix: 36)
        storeVersion = nil
        relevantSort = false
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
                        add(try JSON.parse(buffer: buffer), buffer, nil)
                    }
                }
            }
        } catch let error as JSONParseError {
            throw error
        } catch {
            throw JSONParseError(offset: 0, message: "\(error)")
        }
        self.generation = generation ?? String(UInt64.random(in: 0...UInt64.max), radix: 36)
        storeVersion = nil
        relevantSort = false
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
                try JSON.forEachArrayElement(bytes) { value, slice in add(value, slice, nil) }
            }
        } catch let error as JSONParseError {
            throw error
        } catch {
            throw JSONParseError(offset: 0, message: "\(error)")
        }
        self.generation = generation ?? String(UInt64.random(in: 0...UInt64.max), radix: 36)
        storeVersion = nil
        relevantSort = false
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
                try stream.feed(chunk) { element in add(try JSON.parse(buffer: element), element, nil) }
            }
            try stream.finish()
        }
        self.init(
            name: name, settings: settingsJSON, synonyms: synonyms, rules: rules, data: data,
            generation: generation ?? String(UInt64.random(in: 0...UInt64.max), radix: 36))
    }

    init(
        name: String, settings: JSON, synonyms: [JSON], rules: [JSON] = [], data: IndexData,
        generation: String, storeVersion: Int64? = nil, relevantSort: Bool = false
    ) {
        self.relevantSort = relevantSort
        self.name = name
        settingsJSON = settings
        self.synonyms = synonyms
        self.rules = rules
        ruleSet = RuleSet(rules)
        self.data = data
        self.generation = generation
        self.storeVersion = storeVersion
        alternatives = SynonymTable(synonyms, normalizer: data.normalizer)
    }

    /// Number of records.
    public var objectCount: Int { data.liveCount }

    /// The number of word forms in the compiled plural table of a language (en, fr, de, es), 0 for
    /// others (for benchmarks and status).
    public func pluralFormCount(language: String) -> Int { LanguageTables.plurals(language)?.count ?? 0 }

    /// The index settings the local engine does not apply (each local answer names them in its
    /// `message`; `mirrorgate status` can list them).
    public var ignoredSettings: [String] {
        var settings = settingsJSON.objectValue ?? JSONObject()
        if relevantSort { settings["relevancyStrictness"] = nil }
        return ParameterAudit.ignored(settings, settings: true).map { "setting " + $0 }
    }

    /// The same index (records, settings, synonyms and rules shared) answering as one of Algolia's
    /// virtual replicas: relevant sort. A search ranks the matches by the ranking formula without the
    /// custom criterion, keeps the most relevant ones (`relevancyStrictness`, 100 by default), and
    /// orders those by the index's `customRanking` (then by relevance). Exact when `relevancyStrictness`
    /// is 0 (every match, sorted by `customRanking`) and for queries without words; otherwise Algolia's
    /// own relevance threshold is not public, and the answer's `message` says the selection was
    /// approximated (see ``search(_:)``).
    public func asVirtualReplica() -> SearchIndex {
        SearchIndex(
            name: name, settings: settingsJSON, synonyms: synonyms, rules: rules, data: data,
            generation: generation, relevantSort: true)
    }

    /// Whether this index answers as a virtual replica (``asVirtualReplica()``).
    public var isVirtualReplica: Bool { relevantSort }

    /// All records in index order (parsed from the compact stored form on each call).
    public var records: [JSON] { data.liveDocs.map { data.record($0) } }

    /// The serialized bytes of every record, in index order (what ``IndexStore`` persists).
    public func forEachSerializedRecord(_ body: (UnsafeBufferPointer<UInt8>) throws -> Void) rethrows {
        for doc in 0..<data.count where data.isLive(doc) {
            try data.recordBytes(doc).withUnsafeBufferPointer { try body($0) }
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

    func compileFilters(_ options: SearchOptions) throws(SearchError) -> CompiledFilter {
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
        try SearchLimits.checkFilterCount(cnf.reduce(0) { $0 + $1.count })
        return CompiledFilter(cnf, data: data)
    }

    func geoQuery(_ options: SearchOptions) throws(SearchError) -> GeoQuery? {
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
            guard numbers.count / 4 <= SearchLimits.boundingBoxes else {
                throw SearchError(
                    status: 400,
                    message: "insideBoundingBox: at most \(SearchLimits.boundingBoxes) rectangles per search")
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
            guard ranges.count <= SearchLimits.precisionRanges else {
                throw SearchError(
                    status: 400, message: "aroundPrecision: at most \(SearchLimits.precisionRanges) ranges")
            }
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
        guard lists.reduce(0, { $0 + $1.count }) <= 2 * SearchLimits.polygonPoints else {
            throw SearchError(
                status: 400, message: "insidePolygon: at most \(SearchLimits.polygonPoints) points per search"
            )
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

    // MARK: - Facets

    func requestedFacets(_ options: SearchOptions) -> [String] {
        guard let list = options.params["facets"].map(stringList) ?? options.list("facets"), !list.isEmpty
        else {
            return []
        }
        let declared = data.settings.facets.filter { !$0.filterOnly }.map(\.path)
        if list.contains("*") { return declared }
        return list.filter { declared.contains($0) }
    }

    func facetCounts(
        _ names: [String], _ candidates: [Int32], _ options: SearchOptions
    ) throws(SearchError) -> (JSONObject, JSONObject) {
        let maxValues = max(1, min(1000, try options.int("maxValuesPerFacet", default: 100)))
        let alpha = options.string("sortFacetValuesBy") == "alpha"
        var facets = JSONObject()
        var stats = JSONObject()
        let all = candidates.count == data.liveCount
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
        try SearchLimits.check(options)
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
        let echo = (cursorText ?? "").isEmpty ? JSON.echoedParameters(params) : JSON.formEncode(merged)
        response["params"] = .string(echo)
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
        try SearchLimits.check(SearchOptions(params: merged, settings: data.settings.raw))
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

extension SearchIndex {
    /// The search parameters in `params` (object form, `params` string merged) that the local engine
    /// does not apply: a local answer that carries them differs from the service's, so answers name them
    /// in their `message`.
    public func ignoredParameters(_ params: JSON) -> [String] {
        let merged = params.objectValue.map { _ in Self.mergedParameters(params) } ?? JSONObject()
        var out = ParameterAudit.ignored(merged, settings: false)
        // A virtual replica applies it (relevant sort); see `relevantCandidates`.
        if relevantSort { out.removeAll { $0 == "relevancyStrictness" } }
        if merged["aroundLatLng"] != nil && merged["aroundRadius"] == nil
            && merged["insideBoundingBox"] == nil
            && merged["insidePolygon"] == nil
        {
            out.append("aroundRadius (automatic radius: all records are ranked by distance)")
        }
        return out
    }
}
