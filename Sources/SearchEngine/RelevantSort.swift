import JSONCore

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
