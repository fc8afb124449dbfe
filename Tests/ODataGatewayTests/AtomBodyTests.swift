import JSONCore
import MirrorgateTesting
import Testing

@testable import ODataGateway

/// Issue 23 item 2: Atom bodies are read by the one hardened XML parser; an empty body (which made
/// FoundationXML's `XMLDocument(data:)` segfault), malformed, DTD, deep or oversized bodies are 400s.
@Suite struct AtomBodyTests {
    let model: MirrorModel

    init() throws {
        model = try MirrorModel(metadata: Array(ODataFixtures.customersOrdersV2.utf8))
    }

    static let head =
        #"<entry xmlns="http://www.w3.org/2005/Atom" "#
        + #"xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata" "#
        + #"xmlns:d="http://schemas.microsoft.com/ado/2007/08/dataservices">"#

    @Test func anEntryIsReadIntoV2JSON() throws {
        let body =
            Self.head
            + #"<content type="application/xml"><m:properties><d:OrderID>7</d:OrderID>"#
            + #"<d:CustomerID>A &amp; B</d:CustomerID><d:Freight m:null="true"/></m:properties></content>"#
            + #"<link rel="http://schemas.microsoft.com/ado/2007/08/dataservices/related/Customer" "#
            + #"href="Customers('ALFKI')"/></entry>"#
        let json = try ODataAtomBody.object(Array(body.utf8), type: "S.Order", model: model)
        #expect(json["OrderID"] == .number("7"))
        #expect(json["CustomerID"] == .string("A & B"))
        #expect(json["Freight"] == .null)
        #expect(json["Customer"]?["__metadata"]?["uri"] == .string("Customers('ALFKI')"))
    }

    @Test func hostileBodiesAre400s() {
        let bodies: [[UInt8]] = [
            [], Array("  \n".utf8), Array("<entry>".utf8), Array("hello".utf8), Array("<feed/>".utf8),
            Array(#"<?xml version="1.0"?><!DOCTYPE a [<!ENTITY b "c">]><a>&b;</a>"#.utf8),
            Array((String(repeating: "<a>", count: 50_000) + String(repeating: "</a>", count: 50_000)).utf8),
            Array(
                (Self.head + "<category term='" + String(repeating: "x", count: 100_000) + "'/></entry>").utf8
            ),
            Array(Self.head.utf8) + [0xE9] + Array("</entry>".utf8),
        ]
        for body in bodies {
            let error = #expect(throws: ODataServiceError.self) {
                try ODataAtomBody.object(body, type: "S.Order", model: model)
            }
            #expect(error?.status == 400, "\(body.prefix(40))")
        }
    }
}
