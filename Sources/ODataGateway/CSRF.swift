import Foundation
import GatewaySupport
import HTTPCore
import Synchronization
import Upstream

/// The gateway's side of SAP-style CSRF protection: it hands out its own token to clients (`X-CSRF-Token:
/// Fetch` is answered by the gateway, online or offline), checks that token on writes, and does its own
/// handshake with the upstream (per set of credentials: the client's `Authorization`), attaching the
/// upstream's token and session cookies to forwarded writes and fetching a fresh token once when the
/// upstream answers `403` with `x-csrf-token: Required`.
///
/// Promises: a client's token never reaches the upstream; tokens handed to clients stay valid across
/// changes of connectivity (they are the gateway's, for the life of the process); a write that carries no
/// token is accepted (V4 clients never send one); a write with a token the gateway did not issue gets
/// `403` and `x-csrf-token: Required`.
public final class ODataCSRF: Sendable {
    /// The token clients get.
    public let gatewayToken: String
    private let upstreamTokens = Mutex<[String: UpstreamSession]>([:])

    struct UpstreamSession: Sendable {
        var token: String?
        var cookies: [String]
    }

    /// Creates a random gateway token.
    public init() {
        var bytes = [UInt8](repeating: 0, count: 18)
        for i in bytes.indices { bytes[i] = UInt8.random(in: 0...255) }
        gatewayToken = Data(bytes).base64EncodedString().replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "+", with: "-")
    }

    static func key(_ request: HTTPRequest) -> String { request.headers["Authorization"] ?? "" }

    func forget(_ request: HTTPRequest) {
        _ = upstreamTokens.withLock { $0.removeValue(forKey: Self.key(request)) }
    }

    /// Blocking (call on a worker): `request` with the upstream's CSRF token and session cookies added,
    /// fetching them first when this set of credentials has none yet (within `settings.timeout`); when
    /// the fetch gets no answer the request goes without them.
    func prepare(_ request: HTTPRequest, settings: ODataServiceSettings, client: UpstreamClient)
        -> HTTPRequest
    {
        if let prepared = try? prepare(request, settings: settings, client: client, within: settings.timeout)
        {
            return prepared
        }
        var bare = request
        bare.headers.remove("X-CSRF-Token")
        return bare
    }

    /// Blocking (call on a worker): `request` with the upstream's CSRF token and session cookies added,
    /// fetching them first, within `budget`, when this set of credentials has none yet. Throws the fetch's
    /// error when it got no HTTP answer (refused, timed out, connection lost): the caller then must not
    /// send the request as if it had a session. A fetch answered with any status counts as done (an
    /// upstream without CSRF protection answers without a token).
    func prepare(
        _ request: HTTPRequest, settings: ODataServiceSettings, client: UpstreamClient,
        within budget: Duration
    ) throws(UpstreamError) -> HTTPRequest {
        let key = Self.key(request)
        var session = upstreamTokens.withLock { $0[key] }
        if session == nil {
            var headers: [(name: String, value: String)] = [
                ("X-CSRF-Token", "Fetch"), ("Accept", "application/json"),
            ]
            if let auth = request.headers["Authorization"] { headers.append(("Authorization", auth)) }
            headers += settings.customHeaders.map { (name: $0.0, value: $0.1) }
            if !settings.customCookies.isEmpty {
                headers.append(
                    ("Cookie", settings.customCookies.map { "\($0.0)=\($0.1)" }.joined(separator: "; ")))
            }
            var url = settings.upstream
            if let suffix = settings.urlSuffix, !suffix.isEmpty { url += "?" + suffix }
            let r = try client.perform(
                UpstreamRequest(
                    method: "GET", url: url, headers: headers,
                    connectTimeout: min(settings.connectTimeout, budget), timeout: budget))
            let token = r.header("x-csrf-token").flatMap { $0.lowercased() == "required" ? nil : $0 }
            let cookies = r.headers.filter { $0.name.lowercased() == "set-cookie" }.compactMap {
                $0.value.split(separator: ";").first.map {
                    String($0).trimmingCharacters(in: .whitespaces)
                }
            }
            let fetched = UpstreamSession(token: token, cookies: cookies)
            // A failing upstream's answer is no session to keep: the next write asks again.
            if r.status < 500 { upstreamTokens.withLock { $0[key] = fetched } }
            session = fetched
        }
        var prepared = request
        prepared.headers.remove("X-CSRF-Token")
        guard let session else { return prepared }
        if let token = session.token { prepared.headers.set("X-CSRF-Token", token) }
        if !session.cookies.isEmpty {
            let mine = session.cookies.joined(separator: "; ")
            if let existing = prepared.headers["Cookie"], !existing.isEmpty {
                prepared.headers.set("Cookie", existing + "; " + mine)
            } else {
                prepared.headers.set("Cookie", mine)
            }
        }
        return prepared
    }
}

/// Adds the gateway's CSRF token to a response (the answer to `X-CSRF-Token: Fetch`).
struct CSRFTokenResponder: Responder {
    let inner: any Responder
    let token: String
    @discardableResult func respond(_ response: HTTPResponse) -> Bool {
        var r = response
        r.headers.remove("x-csrf-token")
        r.headers.set("X-CSRF-Token", token)
        return inner.respond(r)
    }
}

/// Watches a forwarded write's answer: on `403` + `x-csrf-token: Required` the upstream session is
/// forgotten and the write retried once with a fresh token; everything else is passed on.
struct CSRFRetryResponder: Responder {
    let inner: any Responder
    let retry: (@Sendable () -> Void)?
    let forget: @Sendable () -> Void

    @discardableResult func respond(_ response: HTTPResponse) -> Bool {
        if response.status == 403, response.headers["x-csrf-token"]?.lowercased() == "required" {
            forget()
            if let retry {
                retry()
                return true
            }
        }
        var r = response
        r.headers.remove("x-csrf-token")
        return inner.respond(r)
    }
}
