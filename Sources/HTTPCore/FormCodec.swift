/// The gateway's one percent/form codec (RFC 3986 percent-encoding, `application/x-www-form-urlencoded`).
///
/// Decoding never fails: an invalid escape (`%zz`, a lone `%`) is kept literally and invalid UTF-8 is
/// repaired with U+FFFD, so that a hostile query string yields text, never an error or a crash.
public enum FormCodec {
    /// Which bytes ``percentEncode(_:keeping:)`` leaves as they are (every other byte becomes `%XX`).
    public struct Keep: Sendable {
        private let table: [Bool]

        private init(_ extra: String) {
            var t = [Bool](repeating: false, count: 256)
            for b in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~".utf8 {
                t[Int(b)] = true
            }
            for b in extra.utf8 { t[Int(b)] = true }
            table = t
        }

        /// RFC 3986 unreserved characters only: ASCII letters, digits, `-._~` (a form value, a path
        /// segment that must not be split or reinterpreted).
        public static let unreserved = Keep("")
        /// Unreserved characters plus the path delimiters that keep their meaning inside one segment:
        /// `'()*+,;=:@!$` (everything `pchar` allows except `&`). Used for key predicates such as
        /// `Set('a b',x=1)` in links the gateway writes.
        public static let pathSegment = Keep("'()*+,;=:@!$")

        /// What may stand in a URL as it is: printable ASCII except space and `"<>\^`{|}`. Reserved
        /// characters and `%` stay, so a query that is already encoded (`a%20b&c=d`) passes unchanged and
        /// only what a URL cannot hold (spaces, quotes, non-ASCII) is escaped.
        public static let url = Keep(
            "!#$%&'()*+,/:;=?@[]" + "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

        func keeps(_ byte: UInt8) -> Bool { table[Int(byte)] }
    }

    /// Splits `a=b&c=d` into decoded pairs, in order; `+` is a space; empty parts are skipped; a part
    /// without `=` has an empty value.
    public static func pairs(_ text: Substring) -> [(name: String, value: String)] {
        var result: [(String, String)] = []
        for part in text.split(separator: "&", omittingEmptySubsequences: true) {
            if let eq = part.firstIndex(of: "=") {
                result.append(
                    (
                        percentDecode(part[..<eq], plusAsSpace: true),
                        percentDecode(part[part.index(after: eq)...], plusAsSpace: true)
                    ))
            } else {
                result.append((percentDecode(part, plusAsSpace: true), ""))
            }
        }
        return result
    }

    /// Percent-decodes `text` (with `plusAsSpace`, `+` is a space, as in form values).
    public static func percentDecode(_ text: Substring, plusAsSpace: Bool = false) -> String {
        if !text.utf8.contains(where: { $0 == UInt8(ascii: "%") || (plusAsSpace && $0 == UInt8(ascii: "+")) })
        {
            return String(text)
        }
        return percentDecode(bytes: text.utf8, plusAsSpace: plusAsSpace)
    }

    /// Percent-decodes raw bytes.
    public static func percentDecode(bytes: some Collection<UInt8>, plusAsSpace: Bool = false) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = bytes.startIndex
        while i != bytes.endIndex {
            let byte = bytes[i]
            if byte == UInt8(ascii: "%") {
                let h1 = bytes.index(after: i)
                if h1 != bytes.endIndex {
                    let h2 = bytes.index(after: h1)
                    if h2 != bytes.endIndex, let high = hex(bytes[h1]), let low = hex(bytes[h2]) {
                        out.append(high << 4 | low)
                        i = bytes.index(after: h2)
                        continue
                    }
                }
                out.append(byte)
            } else if byte == UInt8(ascii: "+") && plusAsSpace {
                out.append(0x20)
            } else {
                out.append(byte)
            }
            i = bytes.index(after: i)
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Percent-encodes every byte of `text`'s UTF-8 that `keeping` does not keep, with upper-case hex.
    public static func percentEncode(_ text: String, keeping: Keep = .unreserved) -> String {
        if text.utf8.allSatisfy(keeping.keeps) { return text }
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count + 8)
        for byte in text.utf8 {
            if keeping.keeps(byte) {
                out.append(byte)
            } else {
                out.append(UInt8(ascii: "%"))
                out.append(hexDigits[Int(byte >> 4)])
                out.append(hexDigits[Int(byte & 0xF)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// `text` as one name or value of an `application/x-www-form-urlencoded` string (the WHATWG URL
    /// standard's serializer, which Algolia's `params` echo follows): ASCII letters, digits and `*-._`
    /// kept, a space as `+`, every other byte of its UTF-8 as `%XX` with upper-case hex
    /// (`editor:'visual studio'` → `editor%3A%27visual+studio%27`).
    public static func formComponent(_ text: String) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count + 8)
        for byte in text.utf8 {
            switch byte {
            case 0x30...0x39, 0x41...0x5A, 0x61...0x7A, UInt8(ascii: "*"), UInt8(ascii: "-"),
                UInt8(ascii: "."),
                UInt8(ascii: "_"):
                out.append(byte)
            case UInt8(ascii: " "):
                out.append(UInt8(ascii: "+"))
            default:
                out.append(UInt8(ascii: "%"))
                out.append(hexDigits[Int(byte >> 4)])
                out.append(hexDigits[Int(byte & 0xF)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Encodes ordered pairs as a form string (`a=b&c=d`), names and values with ``Keep/unreserved``.
    public static func encode(_ pairs: some Sequence<(String, String)>) -> String {
        pairs.map { percentEncode($0.0) + "=" + percentEncode($0.1) }.joined(separator: "&")
    }

    private static let hexDigits = Array("0123456789ABCDEF".utf8)

    private static func hex(_ c: UInt8) -> UInt8? {
        switch c {
        case 48...57: return c - 48
        case 65...70: return c - 55
        case 97...102: return c - 87
        default: return nil
        }
    }
}
