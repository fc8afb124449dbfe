import HTTPCore
import JSONCore
import SearchEngine
import Synchronization

/// Bounds on the work one call may ask for, so that no request keeps the worker pool or memory busy
/// without end (issue 19, D10). The request limits are Algolia's own, with its error; whatever passes
/// them is answered unless the local answer would exceed ``answerBytes``.
public enum AlgoliaLimits {
    /// Queries in one multi-query: Algolia answers more with `400` "Too many queries in multi query
    /// request" (its clients document the limit and split longer lists).
    public static let queriesPerMultiQuery = 50
    /// Records asked for in one getObjects call: Algolia refuses more than 1000.
    public static let objectsPerGetObjects = 1000
    /// The largest local answer: a local search, multi-query or getObjects whose answer would be larger is
    /// refused with `400` (ask for fewer hits, attributes or queries) instead of building it.
    public static let answerBytes = 32 << 20

    /// The error answer for a call over a request limit, or nil when it is within them (`parts` are the
    /// `requests` of a multi-query or getObjects body).
    public static func refusal(_ route: AlgoliaRoute, parts: [JSON]?) -> HTTPResponse? {
        guard let parts, let error = error(route, count: parts.count) else { return nil }
        return AlgoliaError.response(error.status, error.message)
    }

    /// The error of a call with `count` parts over a request limit, or nil.
    static func error(_ route: AlgoliaRoute, count: Int) -> SearchError? {
        switch route {
        case .multiQuery where count > queriesPerMultiQuery:
            return SearchError(status: 400, message: "Too many queries in multi query request")
        case .getObjects where count > objectsPerGetObjects:
            return SearchError(
                status: 400,
                message: "Too many objects in getObjects request: at most \(objectsPerGetObjects) per call")
        default:
            return nil
        }
    }

    /// The error for a local answer that would pass ``answerBytes``.
    static let tooLarge = SearchLimits.answerTooLarge(answerBytes)
}

/// The search parameters that local answers did not apply, per index, as the engine reported them (each
/// such answer also says so in its `message`): what `GET /_mirrorgate/status` lists beside the settings
/// an index does not apply. At most 64 names per index are kept.
public final class NotAppliedLog: Sendable {
    private let names = Mutex<[String: Set<String>]>([:])

    /// An empty log.
    public init() {}

    /// Notes that a local answer from `index` did not apply `parameters`.
    public func record(_ index: String, _ parameters: [String]) {
        guard !parameters.isEmpty else { return }
        names.withLock { all in
            var set = all[index, default: []]
            for p in parameters where set.count < 64 { set.insert(p) }
            all[index] = set
        }
    }

    /// The parameters noted for `index`, sorted.
    public func parameters(_ index: String) -> [String] { names.withLock { ($0[index] ?? []).sorted() } }
}
