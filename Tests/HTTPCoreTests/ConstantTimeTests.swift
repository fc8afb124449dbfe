import HTTPCore
import Testing

@Suite struct ConstantTimeTests {
    @Test func tokenComparison() {
        #expect(constantTimeEqual("Bearer abc", "Bearer abc"))
        #expect(!constantTimeEqual("Bearer abd", "Bearer abc"))
        #expect(!constantTimeEqual("Bearer ab", "Bearer abc"))
        #expect(!constantTimeEqual("", "Bearer abc"))
    }
}
