import Foundation
import HTTPCore
import JSONCore
import SearchEngine

/// `GET /1/indexes` (SPEC §3): while the upstream answers, its list with the offline indices merged in
/// (they exist only here; on the first page); while it is down, or when it fails, the local indices
/// (offline, mirrored, and the mirrors' replicas) listed in Algolia's shape,
/// `{"items":[{name, createdAt, updatedAt, entries, dataSize, fileSize, lastBuildTimeS,
/// numberOfPendingTasks, pendingTask, primary?, replicas?, virtual?}],"nbPages":1}`. Only the indices the caller's
/// key may read locally are listed.
struct IndexListing: Sendable {
    let paths: AnswerPaths
    let catalog: LocalCatalog
    let store: IndexStore?

    func start(_ request: HTTPRequest, _ out: any Responder) {
        let listing = self
        guard paths.isReachable, paths.upstream != nil else {
            out.respond(local(request))
            return
        }
        let capture = CaptureResponder(streamRefusal: tooLargeToCapture) { response in
            guard (200..<300).contains(response.status), case .bytes(let body) = response.body,
                case .object(var answer)? = try? JSON.parse(body), var items = answer["items"]?.arrayValue
            else {
                out.respond(isTooLargeToCapture(response) ? listing.local(request) : response)
                return
            }
            let page = request.queryValue("page").flatMap { Int($0) } ?? 0
            if page == 0 {
                let known = Set(items.compactMap { $0["name"]?.stringValue })
                let offline = listing.catalog.offline.names.filter { !known.contains($0) }
                items += listing.items(offline, request)
                answer["items"] = .array(items)
            }
            var merged = response
            merged.body = .bytes(JSON.object(answer).serializedBytes())
            out.respond(merged)
        }
        paths.forward(request, capture, mirrored: [], tag: false) { out.respond(listing.local(request)) }
    }

    /// The local list; `403` (as for every local read) for a key that may read no local index, which the
    /// upstream would refuse too (the configured sync key is always known).
    func local(_ request: HTTPRequest) -> HTTPResponse {
        var names = catalog.offline.names
        for (name, mirror) in catalog.mirrors.sorted(by: { $0.key < $1.key }) {
            names.append(name)
            names += mirror.replicaNames
        }
        var response: HTTPResponse
        if isKnown(AlgoliaCredentials(request), names) {
            let answer: JSON = ["items": .array(items(names, request)), "nbPages": 1]
            response = HTTPResponse.json(200, answer.serialized())
        } else {
            response = AlgoliaError.response(403, "Invalid Application-ID or API key")
        }
        response.headers.set(MirrorgateHeader.origin, "local")
        return response
    }

    /// Whether `credentials` carry an application ID and a key that may read one of the local indices
    /// `names` (whether or not it holds data), or the configured sync key.
    private func isKnown(_ credentials: AlgoliaCredentials, _ names: [String]) -> Bool {
        let access = paths.local.access
        guard let key = credentials.apiKey, !key.isEmpty, let appId = credentials.appId else { return false }
        if key == access.syncKey && appId == access.appId { return true }
        return names.contains { name in
            catalog.lookup(name).map { access.admits(credentials, to: name, $0.access) } ?? false
        }
    }

    /// The items of the indices in `names` that the request's key may read and that have local data.
    private func items(_ names: [String], _ request: HTTPRequest) -> [JSON] {
        let credentials = AlgoliaCredentials(request)
        let now = rfc3339(Date())
        return names.compactMap { name -> JSON? in
            guard let entry = catalog.lookup(name), let index = entry.index,
                paths.local.access.admits(credentials, to: name, entry.access)
            else { return nil }
            var bytes = 0
            index.forEachSerializedRecord { bytes += $0.count }
            var updatedAt = now
            if let info = try? store?.info(name: name) {
                updatedAt = info.updatedAt.replacingOccurrences(of: "Z", with: ".000Z")
            }
            var item: JSONObject = [
                "name": .string(name), "createdAt": .string(updatedAt), "updatedAt": .string(updatedAt),
                "entries": .int(Int64(index.objectCount)), "dataSize": .int(Int64(bytes)),
                "fileSize": .int(Int64(bytes)), "lastBuildTimeS": 0, "numberOfPendingTasks": 0,
                "pendingTask": false,
            ]
            if let primary = index.settingsJSON["primary"]?.stringValue { item["primary"] = .string(primary) }
            if index.isVirtualReplica { item["virtual"] = true }
            if let replicas = index.settingsJSON["replicas"], replicas.arrayValue?.isEmpty == false {
                item["replicas"] = replicas
            }
            return .object(item)
        }
    }
}
