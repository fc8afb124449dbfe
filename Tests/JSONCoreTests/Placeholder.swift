import Testing

@testable import JSONCore

@Test func placeholder() { #expect(Bool(true)) }
