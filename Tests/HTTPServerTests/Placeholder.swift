import Testing

@testable import HTTPServer

@Test func placeholder() { #expect(Bool(true)) }
