import Foundation
import JSONCore
import Testing

@Suite struct TimestampsTests {
    @Test func rfc3339MatchesFoundation() {
        let reference = ISO8601DateFormatter()
        reference.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        for t in [0.0, 784_111_777.5, 1_795_000_000.123, 951_782_400.999, 4_102_444_799.0, -1.5] {
            let date = Date(timeIntervalSince1970: t)
            #expect(Timestamps.rfc3339(secondsSince1970: t) == reference.string(from: date))
        }
    }

    @Test func imfDateIsHTTPsFixedDate() {
        #expect(Timestamps.imfDate(secondsSince1970: 784_111_777) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(Timestamps.imfDate(secondsSince1970: 951_782_400.7) == "Tue, 29 Feb 2000 00:00:00 GMT")
        #expect(Timestamps.rfc3339(secondsSince1970: 784_111_777.25) == "1994-11-06T08:49:37.250Z")
    }
}
