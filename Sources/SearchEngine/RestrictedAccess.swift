import JSONCore

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
