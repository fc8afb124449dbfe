import CFuzzDriver
import FuzzSupport
import HTTPCore

@testable import HTTPServer

// An HTTP request head as a client sends it: laid out in a buffer the way libmicrohttpd 0.9.75 leaves it
// (line ends and each field's colon overwritten with NULs) and checked by HeadLayout, then the framing
// rules (RequestFraming.check, targetRefusal, decimal), the refusal's closing message, and the request
// target's query through FormCodec. HeadLayout is also given field offsets taken from the input, which must
// never make it read outside `versionEnd..<headEnd`.

@_cdecl("FuzzHTTP_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
    mg_fuzz_main(argc, argv)
}

/// The head as libmicrohttpd's in-place parser leaves it, with where the version ends and the fields lie.
struct LaidOutHead {
    var buffer: [UInt8]
    var method = ""
    var target = ""
    var version = ""
    var versionEnd = 0
    var fields: [HeadLayout.Field] = []
    var headers = HTTPHeaders()

    init(_ input: [UInt8]) {
        // The head ends after the first empty line (CRLF or LF); without one, the input is the head.
        var end = input.count
        var i = 0
        while i < input.count {
            if input[i] == 10 {
                if i + 1 < input.count, input[i + 1] == 10 {
                    end = i + 2
                    break
                }
                if i + 2 < input.count, input[i + 1] == 13, input[i + 2] == 10 {
                    end = i + 3
                    break
                }
            }
            i += 1
        }
        buffer = Array(input[..<end])
        var lines: [Range<Int>] = []
        var start = 0
        for j in buffer.indices where buffer[j] == 10 {
            var stop = j
            if stop > start, buffer[stop - 1] == 13 {
                stop -= 1
                buffer[stop] = 0
            }
            buffer[j] = 0
            lines.append(start..<stop)
            start = j + 1
        }
        if start < buffer.count { lines.append(start..<buffer.count) }
        guard let requestLine = lines.first else { return }
        let words = buffer[requestLine].split(separator: 32, maxSplits: 2, omittingEmptySubsequences: false)
        method = String(decoding: words.first ?? [], as: UTF8.self)
        if words.count > 1 { target = String(decoding: words[1], as: UTF8.self) }
        if words.count > 2 {
            version = String(decoding: words[2], as: UTF8.self)
            versionEnd = words[2].endIndex
        }
        for line in lines.dropFirst() where !line.isEmpty {
            guard let colon = buffer[line].firstIndex(of: 58) else { continue }
            buffer[colon] = 0
            var value = colon + 1
            while value < line.upperBound, buffer[value] == 32 || buffer[value] == 9 { value += 1 }
            // libmicrohttpd measures names and values with strlen: a NUL shortens them.
            let nameEnd = buffer[line.lowerBound..<colon].firstIndex(of: 0) ?? colon
            let valueEnd = buffer[value..<line.upperBound].firstIndex(of: 0) ?? line.upperBound
            fields.append(
                HeadLayout.Field(
                    name: line.lowerBound, nameCount: nameEnd - line.lowerBound, value: value,
                    valueCount: valueEnd - value))
            headers.add(
                String(decoding: buffer[line.lowerBound..<nameEnd], as: UTF8.self),
                String(decoding: buffer[value..<valueEnd], as: UTF8.self))
        }
    }

    /// HeadLayout's answer; its byte reader stops the run when asked for an offset outside the range it
    /// promises to stay in.
    func layoutRefusal(versionEnd: Int, fields: [HeadLayout.Field]) -> String? {
        HeadLayout.check(versionEnd: versionEnd, headEnd: buffer.count, fields: fields) { offset in
            FuzzSupport.require(
                offset >= versionEnd && offset < buffer.count,
                "HeadLayout read offset \(offset) outside \(versionEnd)..<\(buffer.count)")
            return buffer[offset]
        }
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    let head = LaidOutHead(input)
    var refusal = head.layoutRefusal(versionEnd: head.versionEnd, fields: head.fields)
    refusal = refusal ?? RequestFraming.targetRefusal(head.target)
    switch RequestFraming.check(version: head.version, headers: head.headers) {
    case .success(let body):
        if case .length(let n) = body { FuzzSupport.require(n > 0, "a zero or negative Content-Length body") }
    case .failure(let r):
        FuzzSupport.require(r.status == 400 || r.status == 501, "refusal status \(r.status)")
        refusal = refusal ?? r.message
    }
    if let refusal {
        _ = HTTPResponse.json(400, "{\"message\":\"\(refusal)\"}").closingMessage()
    }
    for (_, value) in head.headers { _ = RequestFraming.decimal(value) }
    _ = HeadLayout.applies(toVersion: head.version)

    // Field offsets straight from the input bytes (four per field).
    var arbitrary: [HeadLayout.Field] = []
    var k = 0
    let bound = head.buffer.count + 8
    while k + 4 <= min(input.count, 64) {
        arbitrary.append(
            HeadLayout.Field(
                name: Int(input[k]) % bound, nameCount: Int(input[k + 1]) % bound - 2,
                value: Int(input[k + 2]) % bound, valueCount: Int(input[k + 3]) % bound - 2))
        k += 4
    }
    _ = head.layoutRefusal(versionEnd: Int(input.first ?? 0) % bound - 1, fields: arbitrary)

    // The target's path and query as the routers read them.
    let parts = head.target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
    let path = FormCodec.percentDecode(parts.first ?? "")
    let encoded = FormCodec.percentEncode(path, keeping: .pathSegment)
    FuzzSupport.require(
        FormCodec.percentDecode(Substring(encoded)) == path, "percent-encoding does not round-trip")
    if parts.count > 1 {
        let pairs = FormCodec.pairs(parts[1])
        let again = FormCodec.pairs(Substring(FormCodec.encode(pairs.map { ($0.name, $0.value) })))
        FuzzSupport.require(
            again.map(\.name) == pairs.map(\.name) && again.map(\.value) == pairs.map(\.value),
            "form encoding does not round-trip")
    }
    return 0
}
