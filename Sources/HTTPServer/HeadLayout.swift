/// The check of a request head for what libmicrohttpd 0.9.75 lets through: a NUL inside a field and
/// obs-fold (RFC 9112 §5.2, RFC 9110 §5.5: a server must refuse or repair each; a NUL hides the rest of a
/// value from whatever reads it as a C string).
///
/// libmicrohttpd 0.9.75 parses the head in place in its read buffer and hands out pointers into it: it
/// ends a line at LF (dropping a CR right before it) and overwrites the terminator with NUL bytes (CRLF
/// becomes two NULs, a bare LF one), replaces each field's colon with a NUL, and measures names and values
/// with `strlen`, so a NUL inside a value silently shortens it; a folded line it glues onto a copy of the
/// name made elsewhere. The layout of a clean head is therefore exact: the version, one or two NULs, then
/// per field its name, a NUL, optional blanks, its value, one or two NULs; after the last field one or two
/// more (the empty line), ending exactly where libmicrohttpd says the head ends. Any other byte between
/// those pieces is what followed a NUL inside a value, and a piece out of place is a folded line.
/// (A bare CR stays inside the value, where ``RequestFraming`` refuses it.)
///
/// One case cannot be told apart: a NUL as the very last byte of a value, right before a bare LF, looks
/// like a CRLF; nothing can hide behind it, so it is dropped like a line end.
///
/// Later libmicrohttpd versions parse heads differently and refuse these themselves, so the server
/// applies this check only to the 0.9 series up to 0.9.75 (see ``HeadLayout/applies(toVersion:)``).
enum HeadLayout {
    /// Where one field lies, as offsets from the start of the head (the method).
    struct Field: Equatable {
        var name: Int
        var nameCount: Int
        var value: Int
        var valueCount: Int
    }

    static let refusal = "the header section contains a NUL or a folded line (RFC 9112 §5.2)"

    /// Why the head is refused, or nil when its layout is clean. Offsets count from the start of the
    /// head: `versionEnd` is where the request line's version ends, `headEnd` where the head (with its
    /// empty line) ends, and `fields` are in arrival order. `byte(i)` is only called for offsets in
    /// `versionEnd..<headEnd`: a piece that lies elsewhere is refused without a read.
    static func check(versionEnd: Int, headEnd: Int, fields: [Field], byte: (Int) -> UInt8) -> String? {
        guard versionEnd > 0, versionEnd < headEnd else { return refusal }
        var cursor = versionEnd
        for field in fields {
            let colon = field.name + field.nameCount
            guard field.name > cursor, field.nameCount > 0, colon < field.value,
                field.valueCount >= 0, field.value + field.valueCount <= headEnd
            else { return refusal }
            // The previous line's end, the colon, and the blanks before the value.
            guard isLineEnd(from: cursor, to: field.name, nuls: 1...2, byte: byte), byte(colon) == 0 else {
                return refusal
            }
            for i in (colon + 1)..<field.value where !isBlank(byte(i)) { return refusal }
            cursor = field.value + field.valueCount
        }
        // The last line's end and the empty line, up to the end of the head.
        return isLineEnd(from: cursor, to: headEnd, nuls: 2...4, byte: byte) ? nil : refusal
    }

    /// Whether this check applies to the running libmicrohttpd (`MHD_get_version()`): the 0.9 series up
    /// to 0.9.75, whose in-place parser it describes.
    static func applies(toVersion version: String) -> Bool {
        let parts = version.split(separator: ".").map { Int($0) }
        guard parts.count >= 3, parts[0] == 0, parts[1] == 9, let patch = parts[2] else { return false }
        return patch <= 75
    }

    /// Whether the bytes in `from..<to` are optional blanks and then `nuls` NUL bytes (line ends turned
    /// into NULs), and nothing else.
    private static func isLineEnd(from: Int, to: Int, nuls: ClosedRange<Int>, byte: (Int) -> UInt8) -> Bool {
        var i = from
        while i < to, isBlank(byte(i)) { i += 1 }
        guard nuls.contains(to - i) else { return false }
        while i < to {
            if byte(i) != 0 { return false }
            i += 1
        }
        return true
    }

    private static func isBlank(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 }
}
