import JSONCore

/// The net effect of one write on one index, in Algolia's terms: optionally every record removed first,
/// then records deleted and records added or replaced (the last state of each objectID, in the order
/// written), and settings, synonyms or rules replaced as a whole.
public struct IndexWrite: Sendable {
    /// Remove every record first (`clear`), keeping settings, synonyms and rules unless replaced here.
    public var clear = false
    /// objectIDs whose records are removed (unknown ones are ignored).
    public var deletes: [String] = []
    /// Records added or replaced, each with a string `objectID`, no objectID twice, none also in
    /// `deletes`.
    public var upserts: [JSON] = []
    /// The whole new settings object, when they change.
    public var settings: JSON?
    /// The whole new synonym list, when it changes.
    public var synonyms: [JSON]?
    /// The whole new rule list, when it changes.
    public var rules: [JSON]?

    /// An empty write.
    public init() {}
}

/// One record as ``IndexStore`` keeps it: its key (the sequence that orders the index) and its
/// canonical JSON bytes.
public struct StoredRecord: Sendable {
    /// The record's key.
    public var key: Int64
    /// The record's serialization.
    public var bytes: [UInt8]
}

/// What ``IndexStore`` must do to one stored version so that it holds what an ``IndexWrite`` made of
/// the index in memory (see ``SearchIndex/applying(_:)``).
public struct StoredChange: Sendable {
    /// Delete every stored record first.
    public var clear = false
    /// Keys of the records that died (deleted or replaced).
    public var deletedKeys: [Int64] = []
    /// Records added (replacements included).
    public var inserted: [StoredRecord] = []
    /// New settings, synonyms, rules (nil: unchanged).
    public var settings: JSON?
    public var synonyms: [JSON]?
    public var rules: [JSON]?
    /// The number of records afterwards.
    public var recordCount = 0
}

extension SearchIndex {
    /// The settings whose change needs the records indexed again (the others are read per query).
    static let indexingSettings: [String] = [
        "searchableAttributes", "attributesToIndex", "attributesForFaceting", "customRanking", "ranking",
        "attributeForDistinct", "numericAttributesForFiltering", "numericAttributesToIndex",
        "separatorsToIndex", "disableTypoToleranceOnAttributes", "disablePrefixOnAttributes",
        "disableExactOnAttributes",
    ]

    /// This index with `write` applied, as a new value (this one is unchanged: readers holding it keep
    /// a consistent view), and what the store must change to match. Records are added incrementally
    /// (``IndexUpdate``); a change of the settings that shape the index, or of the placeholder synonyms,
    /// indexes the kept records again. Records keep their storage keys; added ones get new, larger keys,
    /// so that a reload in key order gives the same index.
    public func applying(_ write: IndexWrite) -> (index: SearchIndex, change: StoredChange) {
        let newSettings =
            write.settings.map { $0.objectValue != nil ? $0 : .object(JSONObject()) } ?? settingsJSON
        let newSynonyms = write.synonyms ?? synonyms
        let newRules = write.rules ?? rules
        let engine = EngineSettings(newSettings)
        let placeholders = SynonymTable.placeholderKeys(newSynonyms)
        var change = StoredChange()
        change.clear = write.clear
        change.settings = write.settings.map { _ in newSettings }
        change.synonyms = write.synonyms
        change.rules = write.rules
        var data = self.data
        if write.clear {
            var parts = IndexParts(settings: engine, placeholders: placeholders)
            parts.nextStorageKey = data.parts.nextStorageKey
            data = IndexData(parts)
        } else {
            let old = settingsJSON.objectValue ?? JSONObject()
            let new = newSettings.objectValue ?? JSONObject()
            let reindex =
                Self.indexingSettings.contains { old[$0] != new[$0] }
                || placeholders != data.parts.placeholders
            if reindex {
                data = IndexUpdate.rebuild(from: data.parts, settings: engine, placeholders: placeholders)
            } else if write.settings != nil {
                var parts = data.parts
                parts.settings = engine
                data = IndexData(parts)
            }
        }
        if !write.deletes.isEmpty || !write.upserts.isEmpty {
            let keys = data.parts.storageKeys
            for id in write.deletes {
                if let doc = data.docByID[id] { change.deletedKeys.append(keys[Int(doc)]) }
            }
            for record in write.upserts {
                if let id = IndexUpdate.objectID(record), let doc = data.docByID[id] {
                    change.deletedKeys.append(keys[Int(doc)])
                }
            }
            data = IndexUpdate.apply(to: data, deleting: write.deletes, adding: write.upserts)
            let newKeys = data.parts.storageKeys
            for record in write.upserts {
                guard let id = IndexUpdate.objectID(record), let doc = data.docByID[id] else { continue }
                change.inserted.append(
                    StoredRecord(key: newKeys[Int(doc)], bytes: Array(data.recordBytes(Int(doc)))))
            }
        }
        change.recordCount = data.liveCount
        let index = SearchIndex(
            name: name, settings: newSettings, synonyms: newSynonyms, rules: newRules, data: data,
            generation: Self.nextGeneration(generation), storeVersion: storeVersion,
            relevantSort: relevantSort)
        return (index, change)
    }

    /// `g` with its write counter increased (`v12` → `v12.1` → `v12.2`).
    static func nextGeneration(_ g: String) -> String {
        if let dot = g.lastIndex(of: "."), let n = Int(g[g.index(after: dot)...]) {
            return g[..<dot] + "." + String(n + 1)
        }
        return g + ".1"
    }

    /// The record stored under `objectID`, whole (unretrievable attributes included), or nil.
    public func storedRecord(_ objectID: String) -> JSON? {
        guard let doc = data.docByID[objectID] else { return nil }
        return data.record(Int(doc))
    }

    /// The same index under another name (and store version): the data is shared, never copied.
    public func renamed(_ newName: String, storeVersion version: Int64?) -> SearchIndex {
        SearchIndex(
            name: newName, settings: settingsJSON, synonyms: synonyms, rules: rules, data: data,
            generation: Self.nextGeneration(generation), storeVersion: version,
            relevantSort: relevantSort)
    }

    /// This index with another store version (after the store saved it).
    public func stored(as version: Int64?) -> SearchIndex {
        SearchIndex(
            name: name, settings: settingsJSON, synonyms: synonyms, rules: rules, data: data,
            generation: generation, storeVersion: version, relevantSort: relevantSort)
    }

    /// The objectIDs of every record matching `params` (`query`, `filters`, `facetFilters`,
    /// `numericFilters`, `tagFilters`, geo parameters), in index order: what `deleteBy` removes.
    public func objectIDs(matching params: JSON) throws(SearchError) -> [String] {
        let merged = Self.mergedParameters(params)
        let options = SearchOptions(params: merged, settings: data.settings.raw)
        let filter = try compileFilters(options)
        let geo = try geoQuery(options)
        let parsed = try data.parseQuery(options)
        let result = data.match(
            options, words: alternatives.apply(parsed.words, options), filter: filter, geo: geo,
            exclusions: parsed.exclusions, phrases: parsed.phrases)
        defer { data.recycle(result) }
        return result.candidates.compactMap { IndexUpdate.objectID(data.record(Int($0))) }
    }
}
