/// RFC 9112's rules for a request head, checked before any byte of the body is read: how the body is
/// delimited (§6), the `Host` field (§3.2), field names (§5.1) and the request target (§3.2). A head
/// that breaks them is refused, never guessed at: an ambiguous length is how requests are smuggled past
/// one parser and into another.
///
/// The server adapter applies these rules to every request and answers a refusal with its status, in
/// the format of the API the request addressed, and then closes the connection (RFC 9112 §6.3: after a
/// framing error the rest of the stream cannot be trusted, so a pipelined request behind it is never
/// read).
public enum RequestFraming {
    /// How the body of an accepted request is delimited.
    public enum Body: Equatable, Sendable {
        /// No body.
        case none
        /// `Content-Length` bytes.
        case length(Int)
        /// The chunked transfer coding.
        case chunked
    }

    /// Why a head is refused: the status to answer (400, or 501 for a transfer coding the server does
    /// not implement) and a message for the client.
    public struct Refusal: Error, Equatable, Sendable {
        /// 400 or 501.
        public let status: Int
        /// What was wrong, for the error body.
        public let message: String

        /// Creates a refusal.
        public init(status: Int, message: String) {
            self.status = status
            self.message = message
        }
    }

    /// Checks a request head (`version` as sent, e.g. `HTTP/1.1`, and its fields in order) and returns
    /// how the body is delimited, or why the request must be refused:
    /// - every field name is a token (no whitespace before the colon), no value holds a CR: else 400;
    /// - exactly one `Host` in HTTP/1.1, at most one in HTTP/1.0, with a valid value: else 400;
    /// - `Transfer-Encoding` and `Content-Length` together: 400; `Transfer-Encoding` in HTTP/1.0: 400;
    ///   `chunked` not the final coding: 400; another coding before a final `chunked`: 501; `chunked`
    ///   other than as the one coding of one field: 400 (see ``transferCoding(_:)``);
    /// - every `Content-Length` a decimal number, and all of them equal: else 400.
    public static func check(version: String, headers: HTTPHeaders) -> Result<Body, Refusal> {
        var hosts = 0
        var hostValue = ""
        var lengths: [String] = []
        var codings: [String] = []
        for (name, value) in headers {
            // One pass over each name's bytes: token syntax, and which of the three fields it is.
            let kind = withBytes(name, fieldKind)
            guard kind != .invalid else {
                return .failure(
                    Refusal(
                        status: 400,
                        message:
                            "header field name '\(printable(name))' is not a token (no whitespace before the colon)"
                    ))
            }
            if withBytes(value, { $0.contains(13) }) {
                return .failure(
                    Refusal(
                        status: 400,
                        message: "header field '\(printable(name))' contains a bare CR (RFC 9112 §2.2)"))
            }
            switch kind {
            case .host:
                hosts += 1
                hostValue = value
            case .contentLength: lengths.append(value)
            case .transferEncoding: codings.append(value)
            case .other, .invalid: break
            }
        }
        let http10 = version == "HTTP/1.0"
        if hosts > 1 { return .failure(Refusal(status: 400, message: "more than one Host header field")) }
        if hosts == 0 && !http10 {
            return .failure(Refusal(status: 400, message: "an HTTP/1.1 request needs a Host header field"))
        }
        if hosts == 1 && !isValidHost(hostValue) {
            return .failure(Refusal(status: 400, message: "the Host header field is not a valid host[:port]"))
        }
        if !codings.isEmpty {
            if !lengths.isEmpty {
                return .failure(
                    Refusal(
                        status: 400,
                        message: "a request may not carry both Content-Length and Transfer-Encoding"))
            }
            if http10 {
                return .failure(
                    Refusal(status: 400, message: "Transfer-Encoding is not defined for HTTP/1.0"))
            }
            return transferCoding(codings)
        }
        guard let first = lengths.first else { return .success(.none) }
        guard let n = decimal(first), lengths.dropFirst().allSatisfy({ decimal($0) == n }) else {
            return .failure(
                Refusal(
                    status: 400,
                    message: "Content-Length must be one decimal number (conflicting or invalid values)")
            )
        }
        return .success(n > 0 ? .length(n) : .none)
    }

    /// How a body with these `Transfer-Encoding` field values (in order) is delimited, or why it is
    /// refused (RFC 9112 §6.1, §6.3): the codings of all fields form one list; when `chunked` is not its
    /// last element the body's length cannot be known (400, then close: `gzip`, `xchunked`, `chunked`
    /// followed by a field `identity`); any other coding before a final `chunked` is one the server does
    /// not implement (501: `gzip, chunked`); `chunked` named twice, or an empty element, is 400.
    static func transferCoding(_ fields: [String]) -> Result<Body, Refusal> {
        var names: [Substring] = []
        for field in fields {
            for coding in field.split(separator: ",", omittingEmptySubsequences: false) {
                names.append(trimmingOWS(coding))
            }
        }
        let isChunked = { (name: Substring) in String(name).equalsIgnoringASCIICase("chunked") }
        guard let last = names.last, isChunked(last) else {
            return .failure(
                Refusal(
                    status: 400,
                    message:
                        "chunked must be the final transfer coding (got '\(printable(fields.joined(separator: ", ")))')"
                ))
        }
        if names.contains(where: \.isEmpty) {
            return .failure(Refusal(status: 400, message: "Transfer-Encoding has an empty element"))
        }
        if let unknown = names.dropLast().first(where: { !isChunked($0) }) {
            return .failure(
                Refusal(status: 501, message: "transfer coding '\(printable(unknown))' is not implemented"))
        }
        // libmicrohttpd decodes the body as chunked only for one field whose value is exactly `chunked`.
        guard names.count == 1, fields.count == 1 else {
            return .failure(
                Refusal(status: 400, message: "chunked must be the one transfer coding, named once"))
        }
        return .success(.chunked)
    }

    /// A raw request target in origin form, and the authority when it was sent in absolute form
    /// (`http://host:port/path?query`, RFC 9112 §3.2.2: a server accepts it, routes by its path and takes
    /// its authority as the Host). The scheme is `http` or `https`, in any case; an empty path is `/`.
    /// Any other target (origin form, `*`, or something unparseable) is returned unchanged, without an
    /// authority.
    public static func originForm(_ target: String) -> (target: String, authority: String?) {
        withBytes(target) { bytes in
            guard let first = bytes.first, first != UInt8(ascii: "/") else { return (target, nil) }
            var i = 0
            while i < bytes.count, i < 6, bytes[i] != UInt8(ascii: ":") { i += 1 }
            let scheme = String(decoding: UnsafeBufferPointer(rebasing: bytes[..<i]), as: UTF8.self)
            guard scheme.equalsIgnoringASCIICase("http") || scheme.equalsIgnoringASCIICase("https"),
                bytes.count >= i + 3, bytes[i] == UInt8(ascii: ":"), bytes[i + 1] == UInt8(ascii: "/"),
                bytes[i + 2] == UInt8(ascii: "/")
            else { return (target, nil) }
            let start = i + 3
            var end = start
            while end < bytes.count, bytes[end] != UInt8(ascii: "/"), bytes[end] != UInt8(ascii: "?"),
                bytes[end] != UInt8(ascii: "#")
            {
                end += 1
            }
            let authority = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self)
            let rest = String(decoding: UnsafeBufferPointer(rebasing: bytes[end...]), as: UTF8.self)
            return (rest.hasPrefix("/") ? rest : "/" + rest, authority)
        }
    }

    /// The request target of the request line that `bytes` start with (up to the space before the
    /// version, or as much of it as `bytes` hold), in origin form (see ``originForm(_:)``); nil when
    /// `bytes` do not start with a method and a space.
    public static func target(ofRequestLine bytes: UnsafeRawBufferPointer) -> String? {
        var i = 0
        while i < bytes.count, i < 32, isTokenByte(bytes[i]) { i += 1 }
        // Blanks before the target: libmicrohttpd ends the method at the first space only, so a tab before
        // it (`GET\t /1/...`) still reaches a target, whose API's format the answer must have.
        var start = i
        while start < bytes.count, bytes[start] == UInt8(ascii: "\t") || bytes[start] == UInt8(ascii: " ") {
            start += 1
        }
        guard i > 0, start > i, start < bytes.count else { return nil }
        var end = start
        while end < bytes.count, bytes[end] > 0x20, bytes[end] != 0x7F { end += 1 }
        guard end > start else { return nil }
        let raw = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self)
        return originForm(raw).target
    }

    /// Whether `byte` may appear in a token (a method, a field name).
    static func isTokenByte(_ byte: UInt8) -> Bool {
        let mask: UInt64 = byte < 64 ? tokenBytesBelow64 : byte < 128 ? tokenBytesFrom64 : 0
        return mask & (1 << UInt64(byte & 63)) != 0
    }

    /// Why a raw request target (as sent on the request line) is refused, or nil: whitespace and control
    /// characters are not allowed in it (RFC 9112 §3.2, RFC 3986).
    public static func targetRefusal(_ target: String) -> String? {
        guard withBytes(target, { $0.contains { $0 <= 0x20 || $0 == 0x7F } }) else { return nil }
        return "the request target contains whitespace or a control character"
    }

    /// A non-negative decimal header value with optional surrounding spaces or tabs (`Content-Length`),
    /// parsed on bytes (Foundation's trimming showed up in the per-request profile). Saturates: a length
    /// too large for `Int` is still "larger than any limit".
    public static func decimal(_ text: String) -> Int? {
        var value = 0
        var digits = 0
        var trailing = false
        for byte in text.utf8 {
            if byte == 32 || byte == 9 {
                if digits > 0 { trailing = true }
                continue
            }
            guard !trailing, byte >= 48, byte <= 57 else { return nil }
            value = digits < 18 ? value * 10 + Int(byte - 48) : Int.max
            digits += 1
        }
        return digits > 0 ? value : nil
    }

    /// What a field name is, for the checks: one of the three framing fields, another token, or not a
    /// token at all.
    enum FieldKind {
        case host
        case contentLength
        case transferEncoding
        case other
        case invalid
    }

    /// Whether `name` is an RFC 9110 token (the syntax of a field name): ALPHA, DIGIT and
    /// ``!#$%&'*+-.^_`|~``.
    static func isToken(_ name: String) -> Bool { withBytes(name, fieldKind) != .invalid }

    /// The kind of the field named by `bytes`, in one pass (it runs for every field of every request):
    /// each byte against the token bit masks, then, for the three lengths that matter, an ASCII
    /// case-insensitive comparison.
    static func fieldKind(_ bytes: UnsafeBufferPointer<UInt8>) -> FieldKind {
        guard !bytes.isEmpty else { return .invalid }
        for byte in bytes where !isTokenByte(byte) { return .invalid }
        switch bytes.count {
        case 4: return equalsLowercase(bytes, "host") ? .host : .other
        case 14: return equalsLowercase(bytes, "content-length") ? .contentLength : .other
        case 17: return equalsLowercase(bytes, "transfer-encoding") ? .transferEncoding : .other
        default: return .other
        }
    }

    /// Token bytes 0–63 as bits: `!#$%&'*+-.` and the digits.
    static let tokenBytesBelow64: UInt64 = 0x03FF_6CFA_0000_0000
    /// Token bytes 64–127 as bits: the letters and `^_`|~`.
    static let tokenBytesFrom64: UInt64 = 0x57FF_FFFF_C7FF_FFFE

    /// Whether `bytes` (a token) equals `lowercase` ignoring ASCII case.
    private static func equalsLowercase(_ bytes: UnsafeBufferPointer<UInt8>, _ lowercase: StaticString)
        -> Bool
    {
        let expected = UnsafeBufferPointer(start: lowercase.utf8Start, count: lowercase.utf8CodeUnitCount)
        guard expected.count == bytes.count else { return false }
        for i in 0..<bytes.count where bytes[i] | 0x20 != expected[i] {
            // `| 0x20` lowercases letters; the only other byte of these names, '-', has that bit set,
            // and the one byte that differs from it only there (CR) is not a token.
            return false
        }
        return true
    }

    /// `body` over the UTF-8 bytes of `text` (contiguous for native strings; copied otherwise).
    @inline(__always)
    static func withBytes<R>(_ text: String, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        if let r = text.utf8.withContiguousStorageIfAvailable(body) { return r }
        return Array(text.utf8).withUnsafeBufferPointer(body)
    }

    /// Whether `value` is `uri-host [ ":" port ]` (RFC 9110 §7.2): a registered name (unreserved,
    /// percent-encoded or sub-delim characters), an IPv4 address, or an IP literal in brackets. Empty is
    /// allowed (a target without an authority).
    static func isValidHost(_ value: String) -> Bool {
        withBytes(value) { all in
            var i = 0
            var end = all.count
            while i < end, all[i] == 0x20 || all[i] == 0x09 { i += 1 }
            while end > i, all[end - 1] == 0x20 || all[end - 1] == 0x09 { end -= 1 }
            if i < end && all[i] == UInt8(ascii: "[") {
                let open = i
                i += 1
                while i < end && all[i] != UInt8(ascii: "]") {
                    guard isRegNameByte(all[i]) || all[i] == UInt8(ascii: ":") else { return false }
                    i += 1
                }
                guard i < end, i > open + 1 else { return false }
                i += 1
            } else {
                while i < end && all[i] != UInt8(ascii: ":") {
                    guard isRegNameByte(all[i]) else { return false }
                    i += 1
                }
            }
            // Then nothing, or a port: a colon and digits.
            guard i < end else { return true }
            guard all[i] == UInt8(ascii: ":") else { return false }
            return all[(i + 1)..<end].allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
        }
    }

    private static func isRegNameByte(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "%"),
            UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("),
            UInt8(ascii: ")"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: ";"),
            UInt8(ascii: "="):
            return true
        default:
            return false
        }
    }

    /// `s` without leading and trailing spaces and tabs (HTTP's optional whitespace).
    static func trimmingOWS(_ s: Substring) -> Substring {
        let isOWS: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let start = s.firstIndex(where: { !isOWS($0) }), let end = s.lastIndex(where: { !isOWS($0) })
        else {
            return s[s.endIndex...]
        }
        return s[start...end]
    }

    /// `text` with bytes outside printable ASCII replaced, short enough for an error message.
    private static func printable<S: StringProtocol>(_ text: S) -> String {
        let bytes = text.utf8.prefix(64).map { $0 >= 0x20 && $0 < 0x7F ? $0 : UInt8(ascii: "?") }
        return String(decoding: bytes, as: UTF8.self)
    }
}

extension HTTPResponse {
    /// The response as the bytes of an HTTP/1.1 message that announces `Connection: close`, for a
    /// server that must write an answer itself (while libmicrohttpd is still reading the request) and
    /// then close the connection. Nil for a streamed body.
    public func closingMessage() -> [UInt8]? {
        guard case .bytes(let body) = body else { return nil }
        var head = "HTTP/1.1 \(status) \(HTTPStatus.reasonPhrase(status))\r\n"
        for (name, value) in headers
        where !name.equalsIgnoringASCIICase("Content-Length")
            && !name.equalsIgnoringASCIICase("Transfer-Encoding")
            && !name.equalsIgnoringASCIICase("Connection")
        {
            head += "\(name): \(value)\r\n"
        }
        head += "Content-Length: \(body.count)\r\nConnection: close\r\n\r\n"
        return Array(head.utf8) + body
    }
}
