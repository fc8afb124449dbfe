import HTTPCore

/// Request IDs (``ServerConfiguration/requestIDHeader``): a client's ID is kept when it is a plausible
/// one (1 to 128 visible ASCII characters, no quote, backslash or comma), else replaced by a minted one
/// (32 lowercase hexadecimal digits from the system's random source), so that logs and upstreams never
/// see a field a client could use to forge log lines.
enum RequestID {
    /// Whether `value` may be kept as a request ID.
    static func isAcceptable(_ value: String) -> Bool {
        let bytes = value.utf8
        guard !bytes.isEmpty, bytes.count <= 128 else { return false }
        return bytes.allSatisfy { $0 > 0x20 && $0 < 0x7F && $0 != 0x22 && $0 != 0x5C && $0 != 0x2C }
    }

    /// A new random ID.
    static func mint() -> String {
        var generator = SystemRandomNumberGenerator()
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(32)
        for _ in 0..<2 {
            var word = generator.next() as UInt64
            for _ in 0..<16 {
                out.append(digits[Int(word & 0xF)])
                word >>= 4
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}

extension RequestContext {
    /// Gives the request its ID in `field` (the client's if acceptable, else a minted one replacing it).
    func assignRequestID(field: String) {
        let given = headers.values(field)
        if given.count == 1, RequestID.isAcceptable(given[0]) {
            requestID = (field, given[0])
            return
        }
        let id = RequestID.mint()
        headers.remove(field)
        headers.add(field, id)
        requestID = (field, id)
    }

    /// Puts the request's ID on `response` (a handler's own value for the field wins).
    func stamp(_ response: inout HTTPResponse) {
        guard let requestID, !response.headers.contains(requestID.field) else { return }
        response.headers.add(requestID.field, requestID.value)
    }
}
