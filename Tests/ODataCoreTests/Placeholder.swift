import Testing

@testable import ODataCore

@Test func placeholder() { #expect(Bool(true)) }
