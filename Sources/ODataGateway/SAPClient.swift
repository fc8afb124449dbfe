import HTTPCore

/// SAP's `sap-client` (the tenant of an ABAP system): the mirror holds one client's data — the one its
/// defining requests were downloaded with — and never answers another client from it.
///
/// The mirrored client is the `sap-client` of `urlSuffix`, else of a custom header, else of the first
/// defining request that names one; none means the upstream's default client. A local answer (read or
/// write) to a request that names another client (`?sap-client=…` or the `sap-client` header) is a clear
/// OData error (503 `ClientNotMirrored`) instead of that other client's data; a request naming no client,
/// or the mirrored one, is answered as usual.
enum SAPClient {
    /// The client a request names, if any.
    static func of(_ request: HTTPRequest) -> String? {
        if let value = request.queryValue("sap-client"), !value.isEmpty { return value }
        if let value = request.headers["sap-client"], !value.isEmpty { return value }
        return nil
    }

    /// The client named in a raw query (`a=b&sap-client=100`).
    static func of(query: String) -> String? {
        var q = Substring(query)
        if let i = q.firstIndex(of: "?") { q = q[q.index(after: i)...] }
        for piece in q.split(separator: "&") where piece.lowercased().hasPrefix("sap-client=") {
            let value = piece.dropFirst("sap-client=".count)
            if !value.isEmpty { return String(value) }
        }
        return nil
    }

    /// The client the mirror's data belongs to; nil for the upstream's default client.
    static func mirrored(_ settings: ODataServiceSettings, _ mirrorSettings: ODataMirrorSettings) -> String? {
        if let suffix = settings.urlSuffix, let c = of(query: suffix) { return c }
        if let header = settings.customHeaders.first(where: { $0.0.lowercased() == "sap-client" }) {
            return header.1
        }
        for request in mirrorSettings.definingRequests {
            if let c = of(query: request.query) { return c }
        }
        return nil
    }

    /// The error answer for a request naming a client the mirror does not hold; nil when it may be
    /// answered locally.
    static func refusal(
        _ request: HTTPRequest, _ settings: ODataServiceSettings, _ mirrorSettings: ODataMirrorSettings,
        version: ODataVersion
    ) -> HTTPResponse? {
        guard let asked = of(request) else { return nil }
        let held = mirrored(settings, mirrorSettings)
        guard asked != held else { return nil }
        let which = held.map { "sap-client \($0)" } ?? "the upstream's default client"
        return ODataServiceError.response(
            503, code: "ClientNotMirrored",
            "the upstream is unreachable and the mirror holds the data of \(which), not of sap-client \(asked)",
            version: version)
    }
}
