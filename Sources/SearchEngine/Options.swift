import JSONCore

enum QueryType { case prefixLast, prefixAll, prefixNone }
enum TypoMode { case on, off, min, strict }
enum ExactSingleWord { case attribute, word, none }

/// Effective search parameters: the query's own value, else the index setting, else Algolia's default.
struct SearchOptions {
    let params: JSONObject
    let settings: JSONObject

    func value(_ name: String) -> JSON? {
        if let v = params[name], !v.isNull { return v }
        if let v = settings[name], !v.isNull { return v }
        return nil
    }

    func int(_ name: String, default fallback: Int) throws(SearchError) -> Int {
        guard let raw = value(name) else { return fallback }
        guard let v = intParam(raw) else {
            throw SearchError(
                status: 400, message: "Invalid value for \(name): \(raw.serialized()), expected an integer")
        }
        return v
    }

    func bool(_ name: String, default fallback: Bool) -> Bool { boolParam(value(name)) ?? fallback }
    func string(_ name: String) -> String? {
        guard let v = value(name) else { return nil }
        return v.stringValue ?? v.serialized()
    }
    func list(_ name: String) -> [String]? { value(name).map(stringList) }

    var query: String { params["query"]?.stringValue ?? (params["query"].map { $0.serialized() } ?? "") }

    var queryType: QueryType {
        switch string("queryType") {
        case "prefixAll": return .prefixAll
        case "prefixNone": return .prefixNone
        default: return .prefixLast
        }
    }

    var typoMode: TypoMode {
        switch value("typoTolerance") {
        case .bool(false)?: return .off
        case .string(let s)?:
            switch s {
            case "false": return .off
            case "min": return .min
            case "strict": return .strict
            default: return .on
            }
        default: return .on
        }
    }

    var exactOnSingleWordQuery: ExactSingleWord {
        switch string("exactOnSingleWordQuery") {
        case "word": return .word
        case "none": return .none
        default: return .attribute
        }
    }

    /// `distinct`: 0 (off) or the number of hits kept per distinct value.
    var distinct: Int {
        switch value("distinct") {
        case .bool(let b)?: return b ? 1 : 0
        case let v?: return Swift.max(0, Swift.min(4, intParam(v) ?? boolParam(v).map { $0 ? 1 : 0 } ?? 0))
        default: return 0
        }
    }
}
