import Testing

@testable import SearchEngine

@Test func placeholder() { #expect(Bool(true)) }
