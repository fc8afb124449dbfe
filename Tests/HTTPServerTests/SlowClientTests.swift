import Testing

@testable import HTTPServer

/// The pending-connection rules (deadline, per-address and total limits) on made-up time.
@Suite struct PendingTableTests {
    let second: UInt64 = 1_000_000_000
    let a = PeerAddress(family: 4, high: 0, low: 0x7F00_0002)
    let b = PeerAddress(family: 4, high: 0, low: 0x7F00_0001)

    func table(perAddress: Int = 2, total: Int = 4) -> PendingTable {
        PendingTable(
            perAddressLimit: perAddress, totalLimit: total, slowAfter: second, headDeadline: 10 * second)
    }

    func open(_ t: inout PendingTable, _ peer: PeerAddress, at now: UInt64) -> ConnectionSlot? {
        let decision = t.admit(peer, now: now)
        guard decision.admit else { return nil }
        let slot = ConnectionSlot(fd: -1, peer: peer)
        t.opened(slot, now: now)
        return slot
    }

    /// Issue 23: hundreds of connections from 127.0.0.1 that never finish their head must not keep the
    /// next client from 127.0.0.1 out: a newcomer is admitted and the oldest pending one closed, however
    /// young.
    @Test func anAddressAtItsLimitClosesItsOldestPendingConnectionHoweverYoung() {
        var t = table()
        let first = open(&t, a, at: 0)!
        let second = open(&t, a, at: 1)!
        let third = open(&t, a, at: 2)
        #expect(third != nil, "a third pending connection from one address is admitted")
        #expect(first.shut && !second.shut && !(third?.shut ?? true))
        #expect(open(&t, b, at: 3) != nil, "another address has its own budget")
        #expect(t.pending(from: a) == 2 && t.pendingCount == 3)
        for i in 0..<600 { #expect(open(&t, a, at: 4 + UInt64(i)) != nil) }
        #expect(t.pending(from: a) == 2 && t.pendingCount == 3)
        #expect(t.shutOpen == 601, "shut down, not closed yet: not counted as anyone's connection")
        t.closed(first)
        #expect(t.shutOpen == 600)
    }

    @Test func aNewConnectionClosesTheOldestSlowOneOfItsAddress() {
        var t = table()
        let first = open(&t, a, at: 0)!
        let second = open(&t, a, at: 1)!
        let decision = t.admit(a, now: 2 * self.second)
        #expect(decision.admit)
        #expect(decision.close.map(ObjectIdentifier.init) == [ObjectIdentifier(first)])
        #expect(first.shut && !second.shut && t.pending(from: a) == 1)
    }

    @Test func theTotalLimitClosesTheOldestSlowConnectionOfAnyAddress() {
        var t = table(perAddress: 4, total: 2)
        let old = open(&t, b, at: 0)!
        _ = open(&t, a, at: second / 2)!
        let decision = t.admit(a, now: second / 2 + 1)
        #expect(decision.admit && decision.close.count == 1 && decision.close[0] === old, "however young")
    }

    @Test func aHeadPastTheDeadlineIsClosedHoweverActiveItIs() {
        var t = table()
        let slow = open(&t, a, at: 0)!
        let fresh = open(&t, b, at: 5 * second)!
        #expect(t.sweep(now: 9 * second).isEmpty)
        let closed = t.sweep(now: 10 * second)
        #expect(closed.count == 1 && closed[0] === slow && slow.shut && !fresh.shut)
        #expect(t.sweep(now: 11 * second).isEmpty, "closed once")
    }

    @Test func aRequestInProgressIsNotPendingAndAKeptAliveConnectionStartsAnew() {
        var t = table()
        let slot = open(&t, a, at: 0)!
        t.requestStarted(slot)
        #expect(t.pendingCount == 0 && t.pending(from: a) == 0)
        #expect(t.sweep(now: 20 * second).isEmpty, "a request's own deadline is not the head's")
        t.requestEnded(slot, now: 20 * second)
        #expect(t.sweep(now: 29 * second).isEmpty)
        #expect(t.sweep(now: 30 * second).first === slot)
    }

    @Test func aClockStartedAfterTheSweepReadTheTimeIsNotOverdue() {
        // The watchdog reads the time, then takes the lock; a polling thread may start a head clock in
        // between. Its age is zero, not a wrapped-around eternity.
        var t = table()
        let slot = open(&t, a, at: 5 * second)!
        #expect(t.sweep(now: 5 * second - 1).isEmpty)
        #expect(t.admit(a, now: 5 * second - 1).admit)
        #expect(!slot.shut)
    }

    @Test func closedConnectionsAreNeverTouched() {
        var t = table()
        let slot = open(&t, a, at: 0)!
        t.closed(slot)
        t.requestEnded(slot, now: 1)
        #expect(t.pendingCount == 0 && t.sweep(now: 100 * second).isEmpty && !slot.shut)
    }

    @Test func keptAliveConnectionsOverTheLimitAreTrimmedOldestFirstOnceSlow() {
        var t = table(perAddress: 2, total: 8)
        let slots = (0..<4).map { i -> ConnectionSlot in
            let s = open(&t, i < 2 ? a : b, at: UInt64(i))!
            t.requestStarted(s)
            return s
        }
        for (i, s) in slots.enumerated() where i < 2 { t.requestEnded(s, now: UInt64(i)) }
        let extra = ConnectionSlot(fd: -1, peer: a)
        t.opened(extra, now: 0)
        t.requestStarted(extra)
        t.requestEnded(extra, now: 5)
        #expect(t.pending(from: a) == 3)
        #expect(t.sweep(now: second / 2).isEmpty, "not slow yet")
        let trimmed = t.sweep(now: 2 * second)
        #expect(trimmed.count == 1 && trimmed[0] === slots[0])
        #expect(t.pending(from: a) == 2)
    }

    @Test func anAddressWhoseKeptAliveConnectionsFillTheTotalLimitDoesNotKeepAnotherOut() {
        // As measured under a slowloris whose trickled bytes sometimes complete a head: an address's
        // requests start and end (kept alive, pending again with a fresh clock) while it fills its
        // per-address limit with new connections, so it alone holds the total limit, none of it slow.
        var t = table(perAddress: 8, total: 16)
        let first = (0..<8).map { i in open(&t, a, at: UInt64(i))! }
        for s in first { t.requestStarted(s) }
        let second = (0..<8).map { i in open(&t, a, at: self.second / 4 + UInt64(i))! }
        for s in first { t.requestEnded(s, now: self.second / 4 + 10) }
        #expect(t.pending(from: a) == 16 && t.pendingCount == 16)
        let decision = t.admit(b, now: self.second / 2)
        #expect(decision.admit, "an address with nothing pending is refused")
        #expect(decision.close.count == 1 && decision.close[0] === second[0], "the oldest pending of a")
        #expect(t.pending(from: a) == 15)
        let again = t.admit(a, now: self.second / 2 + 1)
        #expect(again.admit && again.close.count == 1 && again.close[0] === second[1], "a pays for itself")
    }

    @Test func addressesPrintAsIPs() {
        #expect(a.description == "127.0.0.2")
        #expect(PeerAddress(family: 6, high: 0, low: 1).description == "0:0:0:0:0:0:0:1")
    }
}

/// libmicrohttpd 0.9.75's head layout, simulated as it was observed: lines end at LF (a CR right before
/// it dropped), each terminator byte and each field's colon overwritten with NUL, a value starting after
/// the blanks that follow the colon and measured up to the first NUL.
@Suite struct HeadLayoutTests {
    struct Parsed {
        var bytes: [UInt8]
        var versionEnd: Int
        var headEnd: Int
        var fields: [HeadLayout.Field]
    }

    func parse(_ head: String) -> Parsed {
        var bytes = Array(head.utf8)
        var lines: [(start: Int, end: Int)] = []
        var start = 0
        for i in bytes.indices where bytes[i] == 10 {
            let end = i > start && bytes[i - 1] == 13 ? i - 1 : i
            for j in end...i { bytes[j] = 0 }
            lines.append((start, end))
            start = i + 1
            if end == lines.last!.start { break }  // the empty line
        }
        let request = lines[0]
        _ = bytes[request.start..<request.end].lastIndex(of: 32)!  // the request line has its version
        var fields: [HeadLayout.Field] = []
        for line in lines.dropFirst() where line.end > line.start {
            let colon = bytes[line.start..<line.end].firstIndex(of: 58)!
            bytes[colon] = 0
            var value = colon + 1
            while bytes[value] == 32 || bytes[value] == 9 { value += 1 }
            var valueEnd = value
            while bytes[valueEnd] != 0 { valueEnd += 1 }
            fields.append(
                .init(
                    name: line.start, nameCount: colon - line.start, value: value,
                    valueCount: valueEnd - value))
        }
        return Parsed(bytes: bytes + [0, 0, 0, 0], versionEnd: request.end, headEnd: start, fields: fields)
    }

    func check(_ p: Parsed) -> String? {
        HeadLayout.check(versionEnd: p.versionEnd, headEnd: p.headEnd, fields: p.fields) {
            precondition($0 >= p.versionEnd && $0 < p.headEnd, "read outside the head at \($0)")
            return p.bytes[$0]
        }
    }

    @Test func cleanHeadsPass() {
        #expect(check(parse("GET / HTTP/1.1\r\nHost: x\r\nX-A:  b c  \r\nX-Empty:\r\n\r\n")) == nil)
        #expect(check(parse("GET / HTTP/1.0\r\n\r\n")) == nil)
        #expect(check(parse("GET / HTTP/1.1\nHost: x\nX-A: b\n\n")) == nil, "bare LF line ends are allowed")
        #expect(check(parse("GET / HTTP/1.1\r\nHost: x\nX-A:\tb\r\n\n")) == nil)
    }

    @Test func aNulInsideAValueIsFound() {
        #expect(check(parse("GET / HTTP/1.1\r\nHost: x\r\nX-A: a\u{0}b\r\nX-B: c\r\n\r\n")) != nil)
        #expect(check(parse("GET / HTTP/1.1\r\nHost: x\r\nX-A: a\u{0}b\r\n\r\n")) != nil, "in the last field")
        #expect(check(parse("GET / HTTP/1.1\r\nHost: x\r\nX-A: a\u{0}\u{0}\u{0}\u{0}b\r\n\r\n")) != nil)
        #expect(check(parse("GET / HTTP/1.1\r\nHost: x\r\nX-A: a\u{0}\r\n\r\n")) != nil)
        #expect(check(parse("GET / HTTP/1.1\r\nHost: x\r\nX-A: a \u{0} \r\nX-B: c\r\n\r\n")) != nil)
    }

    @Test func aPieceOutOfPlaceIsRefusedWithoutReadingIt() {
        var p = parse("GET / HTTP/1.1\r\nHost: x\r\nX-A: a\r\n\r\n")
        p.fields[1].name = p.headEnd + 4000  // a folded line's name, copied elsewhere
        #expect(check(p) != nil)
        p = parse("GET / HTTP/1.1\r\nHost: x\r\nX-A: a\r\n\r\n")
        p.fields.swapAt(0, 1)
        #expect(check(p) != nil)
        p = parse("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        p.fields[0].valueCount = 100
        #expect(check(p) != nil)
        #expect(
            HeadLayout.check(versionEnd: 0, headEnd: 10, fields: []) { _ in
                Issue.record("read")
                return 0
            } != nil)
    }

    @Test func onlyThe075SeriesParserIsDescribed() {
        #expect(HeadLayout.applies(toVersion: "0.9.75"))
        #expect(HeadLayout.applies(toVersion: "0.9.71"))
        #expect(!HeadLayout.applies(toVersion: "0.9.76"))
        #expect(!HeadLayout.applies(toVersion: "1.0.1"))
        #expect(!HeadLayout.applies(toVersion: ""))
    }
}
