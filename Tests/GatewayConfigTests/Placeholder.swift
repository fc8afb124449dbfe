import Testing

@testable import GatewayConfig

@Test func placeholder() { #expect(Bool(true)) }
