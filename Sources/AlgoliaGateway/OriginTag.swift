import JSONCore
import Proxying

/// Inserts `"origin":"remote"` as the first member of a JSON object body without re-serialising it:
/// the bytes after the first `{` are kept exactly. Bodies that are not JSON objects pass unchanged.
public enum OriginTag {
    /// Tags a whole body.
    public static func tag(_ body: [UInt8], origin: String = "remote") -> [UInt8] {
        guard let brace = body.firstIndex(where: { !isSpace($0) }), body[brace] == UInt8(ascii: "{") else {
            return body
        }
        var out = [UInt8]()
        out.reserveCapacity(body.count + 20)
        out.append(contentsOf: body[...brace])
        out.append(contentsOf: Array("\"origin\":\"\(origin)\"".utf8))
        var rest = body[(brace + 1)...]
        while let f = rest.first, isSpace(f) { rest = rest.dropFirst() }
        if rest.first != UInt8(ascii: "}") { out.append(UInt8(ascii: ",")) }
        out.append(contentsOf: body[(brace + 1)...])
        return out
    }

    /// Tags a multi-query or getObjects envelope: the envelope and every object element of its top-level
    /// `results` array get `"origin":"…"` as their first member; all other bytes are kept.
    public static func tagResults(_ body: [UInt8], origin: String = "remote") -> [UInt8] {
        let insert = Array("\"origin\":\"\(origin)\"".utf8)
        var out = [UInt8]()
        out.reserveCapacity(body.count + 64)
        var depth = 0
        var inString = false
        var escaped = false
        var keyStart = -1
        var lastKey: ArraySlice<UInt8> = []
        var inResults = false
        var i = 0
        while i < body.count {
            let b = body[i]
            out.append(b)
            if inString {
                if escaped {
                    escaped = false
                } else if b == UInt8(ascii: "\\") {
                    escaped = true
                } else if b == UInt8(ascii: "\"") {
                    inString = false
                    if depth == 1 && keyStart >= 0 { lastKey = body[(keyStart + 1)..<i] }
                }
                i += 1
                continue
            }
            switch b {
            case UInt8(ascii: "\""):
                inString = true
                keyStart = i
            case UInt8(ascii: "{"):
                depth += 1
                if depth == 1 || (depth == 3 && inResults) {
                    out.append(contentsOf: insert)
                    var j = i + 1
                    while j < body.count && isSpace(body[j]) { j += 1 }
                    if j < body.count && body[j] != UInt8(ascii: "}") { out.append(UInt8(ascii: ",")) }
                }
            case UInt8(ascii: "["):
                depth += 1
                if depth == 2 && Array(lastKey) == Array("results".utf8) { inResults = true }
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                if depth == 2 && b == UInt8(ascii: "]") { inResults = false }
                depth -= 1
            case UInt8(ascii: ","), UInt8(ascii: ":"):
                if b == UInt8(ascii: ",") && depth == 1 { lastKey = [] }
            default: break
            }
            if b != UInt8(ascii: "\"") { keyStart = inString ? keyStart : -1 }
            i += 1
        }
        return out
    }

    /// A local envelope with `"origin":"local"` as its first member.
    public static func json(_ envelope: JSON, origin: String = "local") -> JSON {
        guard case .object(let o) = envelope else { return envelope }
        var tagged = JSONObject()
        tagged["origin"] = .string(origin)
        for (k, v) in o where k != "origin" { tagged[k] = v }
        return .object(tagged)
    }

    static func isSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09 }

    /// The same for a body that arrives in pieces.
    public struct Streaming: StreamTransform {
        private var pending: [UInt8] = []
        private var done = false
        private let origin: String

        /// Creates a tagger.
        public init(origin: String = "remote") { self.origin = origin }

        public mutating func feed(_ bytes: [UInt8]) -> [UInt8] {
            if done { return bytes }
            pending += bytes
            // Wait until the first non-space byte after `{` is known, so `{}` stays valid.
            guard let brace = pending.firstIndex(where: { !OriginTag.isSpace($0) }) else { return [] }
            if pending[brace] != UInt8(ascii: "{") {
                done = true
                defer { pending = [] }
                return pending
            }
            guard pending[(brace + 1)...].contains(where: { !OriginTag.isSpace($0) }) else { return [] }
            done = true
            defer { pending = [] }
            return OriginTag.tag(pending, origin: origin)
        }

        public mutating func flush() -> [UInt8] {
            defer { pending = [] }
            return done ? pending : OriginTag.tag(pending, origin: origin)
        }
    }
}
