import ODataCore
import Storage

/// The references to gateway-minted keys that queued requests hold, as text: every `Set(…)` whose key
/// text contains a `-` (negative integers, `'local-…'` strings, GUIDs, composite keys with one of them)
/// and every `local-…` token, found in a request's URL and body. A reference found that names no local
/// entity (a negative price in a key, a date) costs one look at one row later and nothing else.
enum ODataKeyReferences {
    /// Key texts longer than this are not indexed (no minted key is that long).
    static let maxKeyLength = 256

    /// The references in a request's URL and body.
    static func extract(url: String, body: [UInt8]) -> Set<String> {
        var refs = Set<String>()
        collect(Array(url.utf8), into: &refs)
        collect(body, into: &refs)
        return refs
    }

    /// Adds the references in `bytes` to `refs`.
    static func collect(_ bytes: [UInt8], into refs: inout Set<String>) {
        let local = Array("local-".utf8)
        var i = 0
        let n = bytes.count
        while i < n {
            let c = bytes[i]
            if c == UInt8(ascii: "("), i > 0, isIdentifier(bytes[i - 1]) {
                var start = i - 1
                while start > 0, isIdentifier(bytes[start - 1]) { start -= 1 }
                if let close = closing(bytes, from: i), close - i - 1 <= maxKeyLength,
                    bytes[(i + 1)..<close].contains(UInt8(ascii: "-"))
                {
                    refs.insert(String(decoding: bytes[start...close], as: UTF8.self))
                }
            } else if c == UInt8(ascii: "l"), i + local.count <= n,
                bytes[i..<(i + local.count)].elementsEqual(local),
                i == 0 || !isLetter(bytes[i - 1])
            {
                var end = i + local.count
                while end < n, isTokenByte(bytes[end]) { end += 1 }
                refs.insert(String(decoding: bytes[i..<end], as: UTF8.self))
                i = end
                continue
            }
            i += 1
        }
    }

    /// The index of the `)` closing the `(` at `open`, honouring `'…'` quotes (`''` inside them).
    private static func closing(_ bytes: [UInt8], from open: Int) -> Int? {
        var quoted = false
        var j = open + 1
        while j < bytes.count, j - open <= maxKeyLength + 1 {
            let b = bytes[j]
            if b == UInt8(ascii: "'") {
                quoted.toggle()
            } else if b == UInt8(ascii: ")"), !quoted {
                return j
            }
            j += 1
        }
        return nil
    }

    private static func isIdentifier(_ b: UInt8) -> Bool {
        (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x5F
    }

    private static func isLetter(_ b: UInt8) -> Bool { (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) }

    private static func isTokenByte(_ b: UInt8) -> Bool { isIdentifier(b) || b == UInt8(ascii: "-") }

    // MARK: the index (`_mg_keyref`)

    /// Inside `db`'s transaction: indexes the references of queued request `id` (see ``ODataKeyReferences``).
    static func index(id: Int64, url: String, body: [UInt8], in db: Database) throws {
        for ref in ODataKeyReferences.extract(url: url, body: body) {
            try db.run(
                #"INSERT OR IGNORE INTO "_mg_keyref" (ref, id) VALUES (?, ?)"#, [.text(ref), .integer(id)])
        }
    }

    /// Inside `db`'s transaction: forgets the references of queued request `id`.
    static func drop(id: Int64, in db: Database) throws {
        try db.run(#"DELETE FROM "_mg_keyref" WHERE id = ?"#, [.integer(id)])
    }

    /// Inside `db`'s transaction: the ids of the queued requests whose URL or body holds `ref`, in order.
    static func referencing(_ ref: String, in db: Database) throws -> [Int64] {
        try db.query(#"SELECT id FROM "_mg_keyref" WHERE ref = ? ORDER BY id"#, [.text(ref)]).compactMap {
            $0[0].int64
        }
    }

    /// Inside `db`'s transaction: every queued request's URL and body with `old` (a key predicate like `(-1)`,
    /// preceded by `set`) replaced by `new`; a string local key (`stringKey`) is replaced wherever it
    /// appears. Only the requests the reference index names are read and rewritten (never the whole
    /// queue); the local-to-server key map keeps `old` resolving.
    static func replaceKey(set: String, old: String, new: String, stringKey: String?, in db: Database) throws
    {
        var ids = try referencing(set + old, in: db)
        if let stringKey { ids += try referencing(stringKey, in: db) }
        let serverString = ODataKeyText.unquote(new)
        for id in Set(ids).sorted() {
            guard
                let r = try db.query(#"SELECT url, body FROM "_mg_queue" WHERE id = ?"#, [.integer(id)])
                    .first,
                let url = r[0].string
            else { continue }
            var newURL = url.replacingOccurrences(of: set + old, with: set + new)
            var body = String(decoding: r[1].bytes ?? [], as: UTF8.self)
            body = body.replacingOccurrences(of: set + old, with: set + new)
            if let stringKey, let serverString {
                newURL = newURL.replacingOccurrences(of: stringKey, with: serverString)
                body = body.replacingOccurrences(of: stringKey, with: serverString)
            }
            let bytes = Array(body.utf8)
            try db.run(
                #"UPDATE "_mg_queue" SET url = ?, body = ? WHERE id = ?"#,
                [.text(newURL), .blob(bytes), .integer(id)])
            try drop(id: id, in: db)
            try index(id: id, url: newURL, body: bytes, in: db)
        }
        try db.run(
            #"INSERT OR REPLACE INTO "_mg_keymap" (entitySet, localKey, serverKey) VALUES (?, ?, ?)"#,
            [.text(set), .text(old), .text(new)])
    }
}
