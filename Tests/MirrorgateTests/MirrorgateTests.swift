import Foundation
import Testing

@testable import Mirrorgate

@Suite struct AdminHelpersTests {
    @Test func tokenComparison() {
        #expect(constantTimeEqual("Bearer abc", "Bearer abc"))
        #expect(!constantTimeEqual("Bearer abd", "Bearer abc"))
        #expect(!constantTimeEqual("Bearer ab", "Bearer abc"))
        #expect(!constantTimeEqual("", "Bearer abc"))
    }
}
