import Testing

@testable import Mirrorgate

@Test func placeholder() { #expect(Bool(true)) }
