import JSONCore

/// What the query text asks for once parsed: the words to match (with their prefix, typo budget,
/// optional flag and alternatives), the words to exclude (`-word` with `advancedSyntax`), the exact
/// phrases (`"…"`), and what was dropped (stop words).
struct ParsedQuery {
    var words: [QueryWord]
    /// Normalized words whose records are excluded.
    var exclusions: [[UInt8]] = []
    /// Word indices of each exact phrase, in order.
    var phrases: [[Int]] = []
    /// Languages requested for `ignorePlurals` / `removeStopWords` that have no local dictionary.
    var unsupportedLanguages: [String: [String]] = [:]
}

/// One token of the query text and the role advanced syntax gives it.
private struct QueryToken {
    var bytes: [UInt8]
    var phrase: Int
    var excluded: Bool
}

extension IndexData {
    /// The languages a language feature (`ignorePlurals`, `removeStopWords`) applies to: nil when off.
    /// `true` means `queryLanguages` when set, else every language Algolia supports (here: the local
    /// dictionaries, the others are reported as unsupported); a list overrides `queryLanguages`.
    static func featureLanguages(_ name: String, _ options: SearchOptions) -> (
        use: [String], missing: [String]
    )? {
        guard let value = options.value(name) else { return nil }
        var requested: [String]
        switch value {
        case .bool(false): return nil
        case .bool(true):
            requested = options.list("queryLanguages") ?? []
        case .string(let s) where s.lowercased() == "false" || s.isEmpty: return nil
        case .string(let s) where s.lowercased() == "true":
            requested = options.list("queryLanguages") ?? []
        default:
            requested = stringList(value)
            if requested.isEmpty { return nil }
        }
        if requested.isEmpty {
            return (LanguageTables.supported, ["all other languages"])
        }
        let codes = requested.map { $0.trimmingSpaces.lowercased() }
        return (
            codes.filter { LanguageTables.supported.contains($0) },
            codes.filter { !LanguageTables.supported.contains($0) }
        )
    }

    /// Splits the query into words and decides, per word: prefix, typo budget, optional, phrase,
    /// exclusion, plural alternatives; removes stop words.
    func parseQuery(_ options: SearchOptions) throws(SearchError) -> ParsedQuery {
        let text = options.query
        let advanced = options.bool("advancedSyntax", default: false)
        let features = Set(options.list("advancedSyntaxFeatures") ?? ["exactPhrase", "excludeWords"])
        let phrasesOn = advanced && features.contains("exactPhrase")
        let exclusionOn = advanced && features.contains("excludeWords")
        var tokens: [QueryToken] = []
        var phraseCount = 0
        if phrasesOn || exclusionOn {
            // Quoted segments are phrases; outside quotes, a chunk starting with '-' is excluded.
            var segments: [(String, Bool)] = []
            var current = ""
            var inQuote = false
            for char in text {
                if char == "\"" && phrasesOn {
                    segments.append((current, inQuote))
                    current = ""
                    inQuote.toggle()
                } else {
                    current.append(char)
                }
            }
            segments.append((current, inQuote))
            for (segment, quoted) in segments {
                if quoted {
                    let words = normalizer.tokens(segment).map(\.normalized)
                    guard !words.isEmpty else { continue }
                    for word in words {
                        tokens.append(QueryToken(bytes: word, phrase: phraseCount, excluded: false))
                    }
                    phraseCount += 1
                    continue
                }
                for chunk in segment.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" }) {
                    let excluded = exclusionOn && chunk.hasPrefix("-") && chunk.count > 1
                    for token in normalizer.tokens(String(excluded ? chunk.dropFirst() : chunk)) {
                        tokens.append(QueryToken(bytes: token.normalized, phrase: -1, excluded: excluded))
                    }
                }
            }
        } else {
            tokens = normalizer.tokens(text).map {
                QueryToken(bytes: $0.normalized, phrase: -1, excluded: false)
            }
        }
        var parsed = ParsedQuery(words: [])
        parsed.exclusions = tokens.filter(\.excluded).map(\.bytes)
        var positive = Array(tokens.filter { !$0.excluded }.prefix(32))

        let queryType = options.queryType
        let typoMode = options.typoMode
        let min1 = try options.int("minWordSizefor1Typo", default: 4)
        let min2 = try options.int("minWordSizefor2Typos", default: 8)
        let typosOnNumbers = options.bool("allowTyposOnNumericTokens", default: true)
        func isPrefix(_ i: Int, of count: Int) -> Bool {
            guard positive[i].phrase < 0 else { return false }
            switch queryType {
            case .prefixAll: return true
            case .prefixNone: return false
            case .prefixLast: return i == count - 1
            }
        }

        // Stop words: never removed from words read as prefixes, nor from phrases.
        if let stop = Self.featureLanguages("removeStopWords", options) {
            if !stop.missing.isEmpty { parsed.unsupportedLanguages["removeStopWords"] = stop.missing }
            let sets = stop.use.compactMap(LanguageTables.stopWords)
            if !sets.isEmpty {
                let count = positive.count
                positive = positive.enumerated().filter { i, token in
                    isPrefix(i, of: count) || token.phrase >= 0 || !sets.contains { $0.contains(token.bytes) }
                }.map(\.element)
            }
        }

        let plural = Self.featureLanguages("ignorePlurals", options)
        if let plural, !plural.missing.isEmpty {
            parsed.unsupportedLanguages["ignorePlurals"] = plural.missing
        }
        let pluralTables = (plural?.use ?? []).compactMap(LanguageTables.plurals)
        let exactKinds = Set(options.list("alternativesAsExact") ?? ["ignorePlurals", "singleWordSynonym"])
        var optionalSet = Set<[UInt8]>()
        for entry in options.list("optionalWords") ?? [] {
            for token in normalizer.tokens(entry) { optionalSet.insert(token.normalized) }
        }

        var phraseWords: [Int: [Int]] = [:]
        for (i, token) in positive.enumerated() {
            let prefix = isPrefix(i, of: positive.count)
            var maxTypos = 0
            let length = String(decoding: token.bytes, as: UTF8.self).count
            if typoMode != .off && token.phrase < 0 {
                if length >= min2 { maxTypos = 2 } else if length >= min1 { maxTypos = 1 }
                if !typosOnNumbers && token.bytes.isNumericToken { maxTypos = 0 }
                if settings.disableTypoOnWords.contains(String(decoding: token.bytes, as: UTF8.self)) {
                    maxTypos = 0
                }
            }
            var word = QueryWord(
                text: String(decoding: token.bytes, as: UTF8.self), bytes: token.bytes, prefix: prefix,
                maxTypos: maxTypos)
            word.optional = optionalSet.contains(token.bytes)
            word.phrase = token.phrase
            if token.phrase < 0 {
                var seen = Set<[UInt8]>([token.bytes])
                for table in pluralTables {
                    for form in table.forms(of: token.bytes) where seen.insert(form).inserted {
                        word.alternatives.append(
                            Alternative(
                                tokens: [form], typos: 0, nonExact: !exactKinds.contains("ignorePlurals"),
                                kind: .plural))
                    }
                }
            } else {
                phraseWords[token.phrase, default: []].append(i)
            }
            parsed.words.append(word)
        }
        parsed.phrases = phraseWords.keys.sorted().compactMap { phraseWords[$0] }.filter { $0.count > 1 }
        return parsed
    }

    /// Whether `doc` holds each phrase's words consecutively in one allowed searchable attribute.
    func holdsPhrases(_ doc: Int, _ phrases: [[Int]], words: [QueryWord], allowed: [Bool]) -> Bool {
        let record = record(doc)
        for phrase in phrases {
            let wanted = phrase.map { words[$0].bytes }
            var found = false
            for (index, slot) in slots.enumerated() where allowed[index] && !found {
                guard let value = value(at: slot.path, in: record) else { continue }
                forEachString(value) { text in
                    guard !found else { return }
                    let tokens = normalizer.tokens(text).map(\.normalized)
                    guard tokens.count >= wanted.count else { return }
                    for start in 0...(tokens.count - wanted.count)
                    where tokens[start..<(start + wanted.count)].elementsEqual(wanted) {
                        found = true
                        return
                    }
                }
            }
            if !found { return false }
        }
        return true
    }
}

/// Calls `body` with every string (and number, as text) inside `value`, arrays and objects walked.
func forEachString(_ value: JSON, _ body: (String) -> Void) {
    switch value {
    case .string(let s): body(s)
    case .int, .double: body(value.serialized())
    case .array(let items): for item in items { forEachString(item, body) }
    case .object(let object): for (_, child) in object { forEachString(child, body) }
    default: break
    }
}
