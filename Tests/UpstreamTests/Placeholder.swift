import Testing

@testable import Upstream

@Test func placeholder() { #expect(Bool(true)) }
