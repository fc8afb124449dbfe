/// The gateway's one table of HTTP reason phrases (RFC 9110 §15), for the status lines it writes itself
/// (the parts of a `$batch` response); libmicrohttpd writes the status line of the response itself.
public enum HTTPStatus {
    /// The reason phrase of `status`; `"Unknown"` for a code the table does not list.
    public static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 100: return "Continue"
        case 200: return "OK"
        case 201: return "Created"
        case 202: return "Accepted"
        case 204: return "No Content"
        case 206: return "Partial Content"
        case 301: return "Moved Permanently"
        case 302: return "Found"
        case 304: return "Not Modified"
        case 307: return "Temporary Redirect"
        case 308: return "Permanent Redirect"
        case 400: return "Bad Request"
        case 401: return "Unauthorized"
        case 403: return "Forbidden"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 406: return "Not Acceptable"
        case 408: return "Request Timeout"
        case 409: return "Conflict"
        case 410: return "Gone"
        case 411: return "Length Required"
        case 412: return "Precondition Failed"
        case 413: return "Content Too Large"
        case 414: return "URI Too Long"
        case 415: return "Unsupported Media Type"
        case 422: return "Unprocessable Content"
        case 424: return "Failed Dependency"
        case 428: return "Precondition Required"
        case 429: return "Too Many Requests"
        case 431: return "Request Header Fields Too Large"
        case 500: return "Internal Server Error"
        case 501: return "Not Implemented"
        case 502: return "Bad Gateway"
        case 503: return "Service Unavailable"
        case 504: return "Gateway Timeout"
        default: return "Unknown"
        }
    }
}

/// The header names that are the gateway's own (SPEC §3), written in one place.
public enum MirrorgateHeader {
    /// `X-Mirrorgate-Origin: remote|local`: where an answer came from.
    public static let origin = "X-Mirrorgate-Origin"
    /// `X-Mirrorgate-Strategy`: a request's choice of strategy for a mirrored Algolia index.
    public static let strategy = "X-Mirrorgate-Strategy"
    /// `X-Request-Id`: the request's ID, the client's or one the gateway minted; returned in every response
    /// and forwarded upstream.
    public static let requestID = "X-Request-Id"
}

/// An error that knows how to answer a request in the format of the API it belongs to (Algolia's
/// `{"message","status"}`, OData's `{"error":{…}}`, …), so that a failure deep in a service becomes an
/// answer the client's SDK understands, never a bare 500.
public protocol GatewayError: Error {
    /// The response that reports this error.
    func response() -> HTTPResponse
}
