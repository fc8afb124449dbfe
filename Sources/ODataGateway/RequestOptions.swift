import HTTPCore
import JSONCore

/// SAP's per-request options of the offline store (`OfflineODataRequestOptions`), which an unmodified
/// client sends as request headers with SAP's names (SPEC §4): `OfflineOData.TransactionID: <id>`,
/// `OfflineOData.NonMergeable: true` (SAP's unmodifiable request), `OfflineOData.RemoveAfterUpload: true`
/// and `OfflineOData.CustomTag: <text>`. They are read from a single request or from each part of a
/// `$batch` (a part's own header wins over the batch's), recorded with the queued request, shown in the
/// RequestQueue entity set, and never forwarded (``isOptionHeader(_:)``, ``strippingOptionHeaders(_:contentType:)``).
struct ODataRequestOptions: Sendable, Equatable {
    static let transactionIDHeader = "OfflineOData.TransactionID"
    static let nonMergeableHeader = "OfflineOData.NonMergeable"
    static let removeAfterUploadHeader = "OfflineOData.RemoveAfterUpload"
    static let customTagHeader = "OfflineOData.CustomTag"
    /// Every option header, in the order above.
    static let headers = [transactionIDHeader, nonMergeableHeader, removeAfterUploadHeader, customTagHeader]

    /// `OfflineOData.TransactionID`.
    var transactionID: String?
    /// `OfflineOData.NonMergeable: true`.
    var nonMergeable = false
    /// `OfflineOData.RemoveAfterUpload: true`.
    var removeAfterUpload = false
    /// `OfflineOData.CustomTag`.
    var customTag: String?

    init() {}

    /// The options `headers` carry; a boolean option that is not `true` or `false` (any case) is a `400`.
    init(headers: HTTPHeaders) throws(ODataServiceError) {
        if let id = headers[Self.transactionIDHeader]?.trimmingCharacters(in: .whitespaces), !id.isEmpty {
            transactionID = id
        }
        nonMergeable = try Self.flag(headers, Self.nonMergeableHeader)
        removeAfterUpload = try Self.flag(headers, Self.removeAfterUploadHeader)
        if let tag = headers[Self.customTagHeader], !tag.isEmpty { customTag = tag }
    }

    private static func flag(_ headers: HTTPHeaders, _ name: String) throws(ODataServiceError) -> Bool {
        guard let value = headers[name]?.trimmingCharacters(in: .whitespaces) else { return false }
        switch value.lowercased() {
        case "true": return true
        case "false", "": return false
        default: throw ODataServiceError(400, "BadRequest", "\(name) must be true or false, not '\(value)'")
        }
    }

    /// Whether a header is one of the offline store's (`OfflineOData.*`, any case): never forwarded.
    static func isOptionHeader(_ name: String) -> Bool {
        name.utf8.count > 13 && name.lowercased().hasPrefix("offlineodata.")
    }

    /// A `$batch` body without the offline store's headers in its requests (multipart: the header lines of
    /// each inner HTTP request, other bytes untouched; JSON: the members of each request's `headers`). The
    /// body itself when it holds none.
    static func strippingOptionHeaders(_ body: [UInt8], contentType: String) -> [UInt8] {
        let marker = Array("offlineodata.".utf8)
        let lowered = body.map { $0 >= 0x41 && $0 <= 0x5A ? $0 + 0x20 : $0 }
        guard lowered.count >= marker.count,
            (0...(lowered.count - marker.count)).contains(where: {
                lowered[$0..<($0 + marker.count)].elementsEqual(marker)
            })
        else { return body }
        let type = contentType.lowercased()
        if type.hasPrefix("application/json") {
            guard let json = try? RawJSON.parse(body), let members = json.members,
                let requests = json["requests"]?.elements
            else { return body }
            let stripped = requests.map { request -> RawJSON in
                guard var fields = request.members else { return request }
                for i in fields.indices where fields[i].0 == "headers" {
                    if let headers = fields[i].1.members {
                        fields[i].1 = .object(headers.filter { !isOptionHeader($0.0) })
                    }
                }
                return .object(fields)
            }
            return Array(
                RawJSON.object(members.map { $0.0 == "requests" ? ($0.0, .array(stripped)) : $0 })
                    .serialized().utf8)
        }
        guard let boundary = ODataBatchCodec.boundary(contentType) else { return body }
        return stripMultipart(body, boundary: boundary)
    }

    /// Where a line of a multipart batch is.
    private enum Place {
        /// Before a part, or after a nested multipart closed.
        case outside
        /// The MIME headers of a part (`multipart`: a changeset starts after them).
        case mimeHeaders(changeset: String?)
        case requestLine
        case requestHeaders
        case requestBody
    }

    /// Drops the option header lines of every inner HTTP request of a multipart batch.
    private static func stripMultipart(_ body: [UInt8], boundary: String) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(body.count)
        var boundaries = [boundary]
        var place = Place.outside
        var start = 0
        while start < body.count {
            var end = start
            while end < body.count, body[end] != 0x0A { end += 1 }
            let lineEnd = min(end + 1, body.count)
            var content = body[start..<end]
            if content.last == 0x0D { content = content.dropLast() }
            let text = String(decoding: content, as: UTF8.self)
            var keep = true
            if let current = boundaries.last, text.hasPrefix("--" + current) {
                let rest = text.dropFirst(2 + current.utf8.count).trimmingCharacters(in: .whitespaces)
                if rest == "--" {
                    boundaries.removeLast()
                    place = .outside
                } else if rest.isEmpty {
                    place = .mimeHeaders(changeset: nil)
                }
            } else {
                switch place {
                case .outside, .requestBody: break
                case .mimeHeaders(let changeset):
                    if text.isEmpty {
                        if let changeset {
                            boundaries.append(changeset)
                            place = .outside
                        } else {
                            place = .requestLine
                        }
                    } else if let colon = text.firstIndex(of: ":"),
                        text[..<colon].trimmingCharacters(in: .whitespaces).lowercased() == "content-type",
                        text.lowercased().contains("multipart/mixed")
                    {
                        place = .mimeHeaders(
                            changeset: ODataBatchCodec.boundary(String(text[text.index(after: colon)...])))
                    }
                case .requestLine:
                    if !text.isEmpty { place = .requestHeaders }
                case .requestHeaders:
                    if text.isEmpty {
                        place = .requestBody
                    } else if let colon = text.firstIndex(of: ":"),
                        isOptionHeader(text[..<colon].trimmingCharacters(in: .whitespaces))
                    {
                        keep = false
                    }
                }
            }
            if keep { out += body[start..<lineEnd] }
            start = lineEnd
        }
        return out
    }
}
