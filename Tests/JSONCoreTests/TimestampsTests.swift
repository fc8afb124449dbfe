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

@Suite struct CivilDateTests {
    @Test func daysRoundTripAndMatchKnownDates() {
        #expect(CivilDate(daysSince1970: 0) == CivilDate(year: 1970, month: 1, day: 1))
        #expect(CivilDate(year: 2000, month: 2, day: 29).daysSince1970 == 11_016)
        #expect(CivilDate(daysSince1970: -1) == CivilDate(year: 1969, month: 12, day: 31))
        #expect(CivilDate(year: 1600, month: 3, day: 1).iso == "1600-03-01")
        for days in stride(from: -800_000, through: 800_000, by: 997) {
            #expect(CivilDate(daysSince1970: days).daysSince1970 == days)
        }
        #expect(CivilDate(year: 1994, month: 11, day: 6).weekday == 0)
        #expect(CivilDate(year: 1969, month: 12, day: 31).weekday == 3)
    }

    @Test func splitHandlesNegativeSecondsAndPadsClocks() {
        let (date, clock) = CivilDate.split(secondsSince1970: -1)
        #expect(date.iso == "1969-12-31" && CivilDate.clock(clock) == "23:59:59")
        #expect(
            CivilDate.pad(7, 3) == "007" && CivilDate.pad(-7, 3) == "-007"
                && CivilDate.pad(12345, 2) == "12345")
    }
}
