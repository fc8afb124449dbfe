/// German plural (and dative plural) forms from the language's inflection rules, written for this
/// engine: no dictionary, so no third-party word list is compiled in (the dictionaries packaged for
/// German are GPL). Tokens arrive normalized (lower case, umlauts folded, `ß` as `ss`), so an umlaut
/// plural (`Haus`/`Häuser`) is the stem plus its ending.
///
/// Promises: for a token of at least three letters, the candidate forms that differ from it only by a
/// German plural ending (`-e`, `-en`, `-n`, `-er`, `-ern`, `-s`, `-nen` after `-in`), in both directions
/// (singular → plurals, plural → singular); stems shorter than three letters are never produced. A
/// candidate matters only if the index holds it, so over-generation costs a lookup, not a false hit on a
/// word that does not exist; it can relate two distinct words that happen to differ by an ending
/// (`Rat`/`Raten`), which a dictionary would not.
enum GermanPlurals {
    static func forms(of word: [UInt8]) -> [[UInt8]] {
        guard word.count >= 3, word.allSatisfy({ $0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "z") }) else {
            return []
        }
        var out: [[UInt8]] = []
        func add(_ form: [UInt8]) {
            if form.count >= 3, form != word, !out.contains(form) { out.append(form) }
        }
        func ends(_ suffix: String) -> Bool { word.count > suffix.utf8.count && word.ends(with: suffix.utf8) }
        func plus(_ suffix: String) { add(word + Array(suffix.utf8)) }
        func minus(_ n: Int) { if word.count - n >= 3 { add(Array(word.dropLast(n))) } }

        // As a singular: the plural endings its final letters allow.
        let last = word[word.count - 1]
        if ends("in") {
            plus("nen")
        } else if ["ung", "heit", "keit", "schaft", "ion", "tat", "ik", "ur", "ei"].contains(where: ends) {
            plus("en")
        } else if last == UInt8(ascii: "e") {
            plus("n")
            plus("s")
        } else if ["er", "el", "en", "chen", "lein"].contains(where: ends) {
            plus("n")
        } else if [
            UInt8(ascii: "a"), UInt8(ascii: "i"), UInt8(ascii: "o"), UInt8(ascii: "u"), UInt8(ascii: "y"),
        ]
        .contains(last) {
            plus("s")
        } else {
            for suffix in ["e", "en", "er", "ern", "s", "es"] { plus(suffix) }
        }

        // As a plural: the singulars it may come from.
        if ends("innen") { minus(3) }
        if ends("ern") {
            minus(3)
            minus(1)
        } else if ends("en") {
            minus(2)
            minus(1)
        } else if ends("er") {
            minus(2)
        } else if last == UInt8(ascii: "n") {
            minus(1)
        }
        if last == UInt8(ascii: "e") { minus(1) }
        if ends("es") { minus(2) }
        if last == UInt8(ascii: "s") { minus(1) }
        return out
    }
}

extension Array where Element == UInt8 {
    fileprivate func ends(with suffix: String.UTF8View) -> Bool {
        count >= suffix.count && zip(self[(count - suffix.count)...], suffix).allSatisfy { $0 == $1 }
    }
}
