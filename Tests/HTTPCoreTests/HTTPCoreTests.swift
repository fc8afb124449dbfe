import GatewaySupport
import Synchronization
import Testing

@testable import HTTPCore

@Suite struct FormCodecTests {
    @Test func pairsDecodePlusAndEscapesAndKeepInvalidEscapes() {
        let pairs = FormCodec.pairs("a=b+c&%41=%zz%4&&flag&x=%C3%A9")
        #expect(pairs.map(\.name) == ["a", "A", "flag", "x"])
        #expect(pairs.map(\.value) == ["b c", "%zz%4", "", "é"])
    }

    @Test func decodingRepairsInvalidUTF8AndKeepsPlusInPaths() {
        #expect(FormCodec.percentDecode("a+b%2Fc") == "a+b/c")
        #expect(FormCodec.percentDecode("a+b", plusAsSpace: true) == "a b")
        #expect(FormCodec.percentDecode("%FF") == "\u{FFFD}")
        #expect(FormCodec.percentDecode(bytes: Array("%".utf8)) == "%")
    }

    @Test func encodingKeepsOnlyTheChosenSetAndRoundTrips() {
        #expect(FormCodec.percentEncode("a b/é~") == "a%20b%2F%C3%A9~")
        #expect(FormCodec.percentEncode("'x y',k=1&z", keeping: .pathSegment) == "'x%20y',k=1%26z")
        #expect(FormCodec.encode([("q", "a&b"), ("n", "1")]) == "q=a%26b&n=1")
        #expect(
            FormCodec.percentEncode("$filter=a b%20\"é'&x{|}", keeping: .url)
                == "$filter=a%20b%20%22%C3%A9'&x%7B%7C%7D")
        let text = "päth/with spaces?&=+%"
        #expect(FormCodec.percentDecode(Substring(FormCodec.percentEncode(text))) == text)
    }

    @Test func requestQueryItemsUseTheCodec() {
        let r = HTTPRequest(method: "GET", target: "/x?a=1+2&b=%26")
        #expect(r.queryValue("a") == "1 2")
        #expect(r.queryValue("b") == "&")
        #expect(RequestPath.refusal("/odata/s/%2e%2E/x") != nil)
        #expect(RequestPath.refusal("/odata/s/a.b/x") == nil)
    }
}

@Suite struct StatusAndHeaderTests {
    @Test func oneReasonPhraseTable() {
        #expect(HTTPStatus.reasonPhrase(404) == "Not Found")
        #expect(HTTPStatus.reasonPhrase(412) == "Precondition Failed")
        #expect(HTTPStatus.reasonPhrase(424) == "Failed Dependency")
        #expect(HTTPStatus.reasonPhrase(799) == "Unknown")
        #expect(MirrorgateHeader.origin == "X-Mirrorgate-Origin")
    }

    struct Teapot: GatewayError {
        func response() -> HTTPResponse { .json(418, #"{"message":"short and stout"}"#) }
    }

    @Test func aGatewayErrorRendersItself() {
        let error: any GatewayError = Teapot()
        #expect(error.response().status == 418)
        #expect(error.response().headers["content-type"] == "application/json; charset=utf-8")
    }
}

@Suite struct ResponderTests {
    @Test func corsAddsForAllowedOriginsAndStripsUpstreamHeaders() {
        let rec = RecordingResponder()
        let upstream = HTTPResponse(status: 200, headers: ["Access-Control-Allow-Origin": "*", "X": "1"])
        CORSResponder(inner: rec, origin: nil).respond(upstream)
        CORSResponder(inner: rec, origin: "https://a.example").respond(upstream)
        let (plain, allowed) = (rec.responses[0].headers, rec.responses[1].headers)
        #expect(plain["Access-Control-Allow-Origin"] == nil && plain["X"] == "1")
        #expect(allowed["Access-Control-Allow-Origin"] == "https://a.example")
        #expect(allowed["Access-Control-Expose-Headers"] == MirrorgateHeader.origin)
        #expect(allowed["Vary"] == "Origin")
    }

    @Test func originTaggingReplacesAnyValue() {
        let rec = RecordingResponder()
        OriginResponder(inner: rec, origin: "local").respond(
            HTTPResponse(status: 200, headers: [MirrorgateHeader.origin: "remote"]))
        #expect(rec.wait()?.headers.values(MirrorgateHeader.origin) == ["local"])
    }

    @Test func firstWinsLetsOneAnswerThrough() {
        let rec = RecordingResponder()
        let race = FirstWins(rec)
        #expect(!race.isAnswered)
        #expect(race.respond(HTTPResponse(status: 200)))
        #expect(!race.respond(HTTPResponse(status: 500)))
        #expect(race.isAnswered)
        #expect(rec.responses.map(\.status) == [200])
    }

    @Test func captureTakesWholeBodiesAndRefusesStreams() {
        let got = Mutex<[Int]>([])
        let capture = CaptureResponder(streamRefusal: HTTPResponse(status: 424)) { r in
            got.withLock { $0.append(r.status) }
        }
        #expect(capture.respond(.text(200, "ok")))
        let stream = ResponseStream(timeout: .seconds(5))
        #expect(!capture.respond(HTTPResponse(status: 200, body: .stream(stream))))
        #expect(stream.isClosed)
        #expect(got.withLock { $0 } == [200, 424])
    }

    @Test func recordingResponderWaitIsBounded() {
        #expect(RecordingResponder().wait(for: .milliseconds(1)) == nil)
    }
}

/// A transport that counts suspensions and wakes.
final class FakeTransport: StreamTransport, @unchecked Sendable {
    var suspends = 0
    var resumes = 0
    var closed = false
    func suspend() { suspends += 1 }
    func resume() { resumes += 1 }
    func peerClosed() -> Bool { closed }
}

@Suite struct ResponseStreamTests {
    func read(_ stream: ResponseStream, max: Int = 64) -> (StreamRead, [UInt8]) {
        var buffer = [UInt8](repeating: 0, count: max)
        let r = buffer.withUnsafeMutableBytes { stream.read(into: $0) }
        if case .bytes(let n) = r { return (r, Array(buffer[..<n])) }
        return (r, [])
    }

    @Test func suspendsWhenEmptyResumesOnWriteAndEnds() {
        let stream = ResponseStream(timeout: .seconds(5))
        let transport = FakeTransport()
        stream.attach(transport)
        #expect(read(stream).0 == .suspended)
        #expect(stream.isSuspended && transport.suspends == 1)
        #expect(stream.write(Array("hello".utf8)))
        #expect(transport.resumes == 1 && !stream.isSuspended)
        #expect(read(stream, max: 3).1 == Array("hel".utf8))
        #expect(read(stream).1 == Array("lo".utf8))
        stream.finish()
        #expect(read(stream).0 == .end)
        #expect(!stream.write([1]))
    }

    @Test func failEndsWithAnErrorAndAPeerThatLeftClosesTheStream() {
        let failing = ResponseStream(timeout: .seconds(5))
        failing.attach(FakeTransport())
        failing.fail()
        #expect(read(failing).0 == .failed)

        let stream = ResponseStream(timeout: .seconds(5))
        let transport = FakeTransport()
        stream.attach(transport)
        #expect(read(stream).0 == .suspended)
        transport.closed = true
        stream.checkPeerClosed()
        #expect(stream.isClosed && transport.resumes == 1)
        #expect(read(stream).0 == .end)
    }

    @Test func aNonBlockingWriteClosesAStreamWhoseClientIsTooSlow() {
        let stream = ResponseStream(timeout: .seconds(5), highWater: 4)
        stream.attach(FakeTransport())
        #expect(stream.writeNonBlocking(Array("12345".utf8)))
        #expect(!stream.writeNonBlocking([1]))
        #expect(stream.isClosed)
    }
}

@Suite struct RequestFramingTests {
    func check(_ fields: [(String, String)], version: String = "HTTP/1.1") -> Result<
        RequestFraming.Body, RequestFraming.Refusal
    > {
        RequestFraming.check(
            version: version, headers: HTTPHeaders([("Host", "x")] + fields.map { ($0.0, $0.1) }))
    }

    func status(_ result: Result<RequestFraming.Body, RequestFraming.Refusal>) -> Int? {
        if case .failure(let r) = result { return r.status }
        return nil
    }

    @Test func bodiesAreDelimitedByOneLengthOrChunked() {
        #expect(check([]) == .success(.none))
        #expect(check([("Content-Length", "0")]) == .success(.none))
        #expect(check([("content-length", " 12 ")]) == .success(.length(12)))
        #expect(check([("Content-Length", "5"), ("Content-Length", "5")]) == .success(.length(5)))
        #expect(check([("Transfer-Encoding", "chunked")]) == .success(.chunked))
        #expect(check([("transfer-encoding", "Chunked")]) == .success(.chunked))
    }

    @Test func ambiguousLengthsAreRefusedWith400() {
        #expect(status(check([("Content-Length", "5"), ("Transfer-Encoding", "chunked")])) == 400)
        #expect(status(check([("Transfer-Encoding", "chunked"), ("Content-Length", "0")])) == 400)
        #expect(status(check([("Content-Length", "5"), ("Content-Length", "6")])) == 400)
        #expect(status(check([("Content-Length", "5"), ("Content-Length", "x")])) == 400)
        #expect(status(check([("Content-Length", "5, 5")])) == 400)
        #expect(status(check([("Content-Length", "-1")])) == 400)
        #expect(status(check([("Transfer-Encoding", "chunked, chunked")])) == 400)
        #expect(status(check([("Transfer-Encoding", "chunked"), ("Transfer-Encoding", "chunked")])) == 400)
        #expect(status(check([("Transfer-Encoding", "chunked")], version: "HTTP/1.0")) == 400)
    }

    @Test func unknownTransferCodingsBeforeAFinalChunkedAreNotImplemented() {
        for coding in ["gzip, chunked", "x-custom,chunked", "identity , chunked"] {
            #expect(status(check([("Transfer-Encoding", coding)])) == 501, "\(coding)")
        }
        #expect(status(check([("Transfer-Encoding", "gzip"), ("Transfer-Encoding", "chunked")])) == 501)
    }

    /// RFC 9112 §6.3: when chunked is not the final coding the length cannot be known: 400 (issue 23).
    @Test func chunkedThatIsNotTheFinalCodingIs400() {
        for coding in [
            "gzip", "xchunked", "chunkedx", "chunked, gzip", "identity", "x-custom", "", "chunked,",
        ] {
            #expect(status(check([("Transfer-Encoding", coding)])) == 400, "\(coding)")
        }
        #expect(status(check([("Transfer-Encoding", "chunked"), ("Transfer-Encoding", "identity")])) == 400)
        #expect(status(check([("Transfer-Encoding", ", chunked")])) == 400)
    }

    /// Issue 23: absolute-form targets (RFC 9112 §3.2.2) are routed by their path, their authority
    /// taken as the Host.
    @Test func absoluteFormTargetsBecomeOriginFormWithTheirAuthority() {
        func form(_ t: String) -> [String?] {
            let f = RequestFraming.originForm(t)
            return [f.target, f.authority]
        }
        #expect(form("http://127.0.0.1:8080/1/indexes/x/query") == ["/1/indexes/x/query", "127.0.0.1:8080"])
        #expect(form("HTTPS://h/a?b=/c") == ["/a?b=/c", "h"])
        #expect(form("http://h?x=1") == ["/?x=1", "h"])
        #expect(form("http://h") == ["/", "h"])
        #expect(form("/1/indexes") == ["/1/indexes", nil])
        #expect(form("*") == ["*", nil])
        #expect(form("ftp://h/x") == ["ftp://h/x", nil])
        #expect(form("http:/x") == ["http:/x", nil])
        #expect(form("") == ["", nil])
    }

    @Test func theTargetOfAPeekedRequestLine() {
        func target(_ line: String) -> String? {
            Array(line.utf8).withUnsafeBytes { RequestFraming.target(ofRequestLine: $0) }
        }
        #expect(target("POST /1/indexes/x/query HTTP/2.0\r\n") == "/1/indexes/x/query")
        #expect(target("GET /odata/S/Customers?$top=1 HTTP/1.1\r\nHost: x") == "/odata/S/Customers?$top=1")
        #expect(target("GET http://h:1/1/keys HTTP/1.1") == "/1/keys")
        #expect(target("GET /1/indexes/aaaaa") == "/1/indexes/aaaaa", "as much as arrived")
        #expect(target("\u{16}\u{3}\u{1}") == nil)
        #expect(target("GET ") == nil)
        #expect(target("GET\t /1/indexes/i/batch HTTP/9.9\r\n") == "/1/indexes/i/batch", "blanks before it")
        #expect(target("") == nil)
    }

    @Test func hostMustBeThereOnceAndValid() {
        #expect(status(RequestFraming.check(version: "HTTP/1.1", headers: [:])) == 400)
        #expect(RequestFraming.check(version: "HTTP/1.0", headers: [:]) == .success(.none))
        #expect(status(check([("HOST", "y")])) == 400)
        for host in ["localhost:8080", "127.0.0.1", "[::1]:8080", "example.com", "", "a-b.c_d~e"] {
            #expect(
                RequestFraming.check(version: "HTTP/1.1", headers: ["Host": host]) == .success(.none),
                "\(host)")
        }
        for host in ["a b", "a/b", "x\"y", "a:b:c", "[::1", "host:80x", "a@b"] {
            #expect(
                status(RequestFraming.check(version: "HTTP/1.1", headers: ["Host": host])) == 400, "\(host)")
        }
    }

    @Test func fieldNamesAreTokensAndValuesHoldNoCR() {
        #expect(status(check([("X-Note ", "a")])) == 400)
        #expect(status(check([("X Note", "a")])) == 400)
        #expect(status(check([("", "a")])) == 400)
        #expect(status(check([("X-Note", "a\rb")])) == 400)
        #expect(check([("X-Note", "a\tb c\u{1}")]) == .success(.none))
        #expect(check([("X_Odd!#$%&'*+.^`|~", "v")]) == .success(.none))
    }

    @Test func targetsWithoutWhitespaceOrControlsPass() {
        #expect(RequestFraming.targetRefusal("/1/indexes/a%20b/query?x=1") == nil)
        #expect(RequestFraming.targetRefusal("/päth") == nil)
        #expect(RequestFraming.targetRefusal("/a b") != nil)
        #expect(RequestFraming.targetRefusal("/a\u{1}b") != nil)
        #expect(RequestFraming.targetRefusal("/a\u{7F}") != nil)
    }

    @Test func lengthsParseAsDecimalsWithBlanksAndSaturate() {
        #expect(RequestFraming.decimal("0") == 0)
        #expect(RequestFraming.decimal(" \t42 ") == 42)
        for text in ["", "  ", "-1", "1 2", "12a", "+5"] {
            #expect(RequestFraming.decimal(text) == nil, "\(text)")
        }
        #expect(RequestFraming.decimal("99999999999999999999999") == Int.max)
        #expect(RequestFraming.decimal("123456789012345678") == 123_456_789_012_345_678)
    }

    @Test func aClosingMessageIsACompleteResponse() {
        var r = HTTPResponse.json(413, #"{"message":"too big","status":413}"#)
        r.headers.add("Content-Length", "999")
        r.headers.add("Connection", "keep-alive")
        let text = String(decoding: r.closingMessage() ?? [], as: UTF8.self)
        #expect(
            text
                == "HTTP/1.1 413 Content Too Large\r\nContent-Type: application/json; charset=utf-8\r\n"
                + "Content-Length: 34\r\nConnection: close\r\n\r\n" + #"{"message":"too big","status":413}"#)
        #expect(
            HTTPResponse(status: 200, body: .stream(ResponseStream(timeout: .seconds(1)))).closingMessage()
                == nil)
    }
}
