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
