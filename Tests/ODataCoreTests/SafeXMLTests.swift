import Testing

@testable import ODataCore

/// Issue 23: the one XML parser (libxml2's reader behind ``SafeXML``) builds the element tree of what is
/// well-formed and within its bounds, and refuses everything else with an error, never a crash.
@Suite struct SafeXMLTests {
    let limits = SafeXML.Limits.requestBody

    func parse(_ text: String, _ limits: SafeXML.Limits = .requestBody) throws(SafeXMLError)
        -> SafeXML.Element
    {
        try SafeXML.parse(Array(text.utf8), limits: limits)
    }

    func refusal(_ bytes: [UInt8], _ limits: SafeXML.Limits = .requestBody) -> String? {
        let error = #expect(throws: SafeXMLError.self) { try SafeXML.parse(bytes, limits: limits) }
        return error?.message
    }

    func refusal(_ text: String, _ limits: SafeXML.Limits = .requestBody) -> String? {
        refusal(Array(text.utf8), limits)
    }

    @Test func buildsNamesNamespacesAttributesChildrenAndText() throws {
        let root = try parse(
            """
            <?xml version="1.0" encoding="utf-8"?>
            <!-- a comment --><entry xmlns="http://www.w3.org/2005/Atom"
              xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata"
              xmlns:d="http://schemas.microsoft.com/ado/2007/08/dataservices">
              <category term="NS.Customer"/>
              <content type="application/xml"><m:properties>
                <d:Name>A &amp; B &#233; <![CDATA[<raw>]]></d:Name><d:Age m:null="true"/>
              </m:properties></content>
            </entry>
            """)
        #expect(root.name == "entry" && root.local == "entry")
        #expect(root.namespaceURI == "http://www.w3.org/2005/Atom")
        #expect(
            root.attributes["xmlns:m"] == "http://schemas.microsoft.com/ado/2007/08/dataservices/metadata")
        #expect(root.children.map(\.local) == ["category", "content"])
        #expect(root.children[0].attributes["term"] == "NS.Customer")
        let properties = try #require(root.children[1].children(local: "properties").first)
        #expect(properties.name == "m:properties")
        #expect(properties.namespaceURI.hasSuffix("/metadata"))
        let name = properties.children[0]
        #expect(name.name == "d:Name" && name.local == "Name")
        #expect(name.namespaceURI == "http://schemas.microsoft.com/ado/2007/08/dataservices")
        #expect(name.text == "A & B é <raw>")
        #expect(properties.children[1].attribute(local: "null") == "true")
        #expect(properties.children[1].attributes["m:null"] == "true")
    }

    @Test func emptyAndBlankDocumentsAreRefused() {
        for text in ["", "   \n", "\u{FEFF}"] {
            #expect(refusal(text)?.contains("empty") == true, "\(text.debugDescription)")
        }
    }

    @Test func malformedDocumentsAreRefused() {
        for text in [
            "<a>", "<a></b>", "<a><b></a>", "<a/><b/>", "<a x='1' x='2'/>", "<a>&undefined;</a>",
            "<a/>trailing",
            "<", "<a b=c/>", "<a>\u{01}</a>", "not xml", "<?xml version='1.0'?>",
        ] {
            #expect(refusal(text) != nil, "\(text)")
        }
    }

    @Test func dtdsAndEntitiesAreRefusedBeforeExpansion() {
        let laughs = """
            <?xml version="1.0"?>
            <!DOCTYPE lolz [<!ENTITY lol "lol">
            <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
            <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
            <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
            <!ENTITY lol9 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">]>
            <lolz>&lol9;</lolz>
            """
        let external = """
            <?xml version="1.0"?><!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]><r>&x;</r>
            """
        let remote = #"<?xml version="1.0"?><!DOCTYPE r SYSTEM "http://127.0.0.1:1/x.dtd"><r/>"#
        for text in [laughs, external, remote] {
            #expect(refusal(text)?.contains("DTD") == true)
        }
    }

    @Test func depthElementAndAttributeBoundsHold() throws {
        let deep = String(repeating: "<a>", count: 100_000) + String(repeating: "</a>", count: 100_000)
        #expect(refusal(deep)?.contains("nested more than 64") == true)
        let small = SafeXML.Limits(maxBytes: 1 << 20, maxDepth: 3, maxElements: 5, maxAttributeBytes: 8)
        _ = try parse("<a><b><c x='12345678'/></b><b/><b/></a>", small)
        #expect(refusal("<a><b><c><d/></c></b></a>", small)?.contains("nested more than 3") == true)
        #expect(refusal("<a><b/><b/><b/><b/><b/></a>", small)?.contains("more than 5 elements") == true)
        #expect(refusal("<a x='123456789'/>", small)?.contains("longer than 8 bytes") == true)
        let huge = "<a x='" + String(repeating: "y", count: 1 << 20) + "'/>"
        #expect(refusal(huge)?.contains("attribute") == true)
        let big = SafeXML.Limits(maxBytes: 100, maxDepth: 3, maxElements: 5, maxAttributeBytes: 8)
        #expect(refusal("<a>" + String(repeating: " ", count: 100) + "</a>", big)?.contains("larger") == true)
    }

    @Test func onlyUTF8OrDeclaredASCIICompatibleEncodingsAreRead() throws {
        // Latin-1 bytes without a declaration are not UTF-8.
        #expect(refusal([UInt8]("<a>caf".utf8) + [0xE9] + [UInt8]("</a>".utf8)) != nil)
        #expect(refusal([0xFF, 0xFE] + [UInt8]("<\0a\0/\0>\0".utf8)) != nil)
        #expect(refusal([0xC3, 0x28, 0xA0, 0xA1]) != nil)
        // Declared and ASCII-compatible: read and converted.
        let latin1 =
            [UInt8]("<?xml version='1.0' encoding='ISO-8859-1'?><a>caf".utf8) + [0xE9] + [UInt8]("</a>".utf8)
        #expect(try SafeXML.parse(latin1, limits: limits).text == "café")
        // A UTF-8 byte order mark is fine.
        #expect(try SafeXML.parse([0xEF, 0xBB, 0xBF] + [UInt8]("<a>é</a>".utf8), limits: limits).text == "é")
    }

    @Test func randomBytesNeverCrash() {
        var generator = SystemRandomNumberGenerator()
        let pieces = [
            "<", ">", "/", "a", "=", "'", "\"", "&", ";", "<!", "<?", "]]>", "<![CDATA[", "x:", " ", "\u{0}",
        ]
        for _ in 0..<2000 {
            var text = "<r>"
            for _ in 0..<Int.random(in: 0..<40, using: &generator) {
                text += pieces.randomElement(using: &generator)!
            }
            _ = try? parse(text)
        }
    }
}
