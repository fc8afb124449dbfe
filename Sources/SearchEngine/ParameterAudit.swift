import JSONCore

/// Which of Algolia's search parameters and index settings the local engine honours. Every answer
/// names what it did not apply (``SearchIndex/ignoredParameters(_:)``, ``SearchIndex/ignoredSettings``),
/// so that a local answer is never silently different from the service's.
enum ParameterAudit {
    /// Parameters (search time, or settings usable at search time) honoured, or that never change a
    /// search answer (analytics and the like).
    static let honoured: Set<String> = [
        "query", "params", "filters", "facetFilters", "optionalFilters", "numericFilters", "tagFilters",
        "sumOrFiltersScores", "restrictSearchableAttributes", "facets", "page", "offset", "length",
        "hitsPerPage", "aroundLatLng", "aroundRadius", "aroundPrecision", "minimumAroundRadius",
        "insideBoundingBox", "insidePolygon", "getRankingInfo", "synonyms", "attributesToRetrieve",
        "attributesToHighlight", "attributesToSnippet", "highlightPreTag", "highlightPostTag",
        "snippetEllipsisText", "minWordSizefor1Typo", "minWordSizefor2Typos", "typoTolerance",
        "allowTyposOnNumericTokens", "disableTypoToleranceOnAttributes", "ignorePlurals", "removeStopWords",
        "queryLanguages", "indexLanguages", "queryType", "removeWordsIfNoResults", "advancedSyntax",
        "advancedSyntaxFeatures", "optionalWords", "disableExactOnAttributes", "exactOnSingleWordQuery",
        "alternativesAsExact", "distinct", "minProximity", "responseFields", "maxFacetHits",
        "maxValuesPerFacet", "sortFacetValuesBy", "paginationLimitedTo", "renderingContent", "enableRules",
        "ruleContexts", "facetQuery", "cursor",
        // No effect on the answer's content.
        "analytics", "analyticsTags", "percentileComputation", "enableABTest", "userToken",
        "enableReRanking", "reRankingApplyFilter", "x-algolia-agent", "decompoundQuery",
        // Secured API key and multi-query envelope fields.
        "validUntil", "restrictIndices", "restrictSources", "referers", "indexName", "type",
    ]

    /// Index settings honoured, or without effect on search answers.
    static let honouredSettings: Set<String> = honoured.union([
        "searchableAttributes", "attributesToIndex", "attributesForFaceting", "unretrievableAttributes",
        "ranking", "customRanking", "replicas", "slaves", "primary", "numericAttributesForFiltering",
        "numericAttributesToIndex", "separatorsToIndex", "disableTypoToleranceOnWords",
        "disablePrefixOnAttributes", "attributeForDistinct", "allowCompressionOfIntegerArray", "userData",
        "version", "synonyms", "searchableAttributesWithoutPrefix", "unretrievableAttributesForAdmin",
        // getVersion=1's legacy copies of synonyms: the synonyms themselves come with the index.
        "placeholders", "altCorrections",
    ])

    /// Parameters accepted but not applied by the local engine when their value would change the
    /// answer (`true` for "it would").
    static func changesAnswer(_ name: String, _ value: JSON) -> Bool {
        switch name {
        case "clickAnalytics", "enablePersonalization", "restrictHighlightAndSnippetArrays",
            "replaceSynonymsInHighlight", "attributeCriteriaComputedByMinProximity", "aroundLatLngViaIP",
            "facetingAfterDistinct":
            return boolParam(value) == true
        case "relevancyStrictness":
            return (intParam(value) ?? 100) < 100
        case "personalizationImpact", "getRankingInfo":
            return false
        case "mode":
            return value.stringValue != nil && value.stringValue != "keywordSearch"
        case "camelCaseAttributes", "decompoundedAttributes", "keepDiacriticsOnCharacters",
            "customNormalization", "attributesToTransliterate", "naturalLanguages", "similarQuery",
            "semanticSearch", "reRankingApplyFilter":
            switch value {
            case .null: return false
            case .array(let items): return !items.isEmpty
            case .object(let object): return !object.isEmpty
            case .string(let s): return !s.isEmpty
            default: return true
            }
        default:
            return true
        }
    }

    /// The names (with a reason when useful) of `params` entries not applied.
    static func ignored(_ params: JSONObject, settings: Bool) -> [String] {
        let known = settings ? honouredSettings : honoured
        var out: [String] = []
        for (name, value) in params where !known.contains(name) && !value.isNull {
            if changesAnswer(name, value) { out.append(name) }
        }
        return out
    }
}
