import CMicroHTTPD
import GatewaySupport

/// A client's IP address, the key of the per-address limits (IPv4 and IPv6 alike; the port is not part
/// of it).
struct PeerAddress: Hashable, Sendable, CustomStringConvertible {
    let family: UInt8
    let high: UInt64
    let low: UInt64

    /// The address of an unknown peer (no socket address): all such peers share one budget.
    static let unknown = PeerAddress(family: 0, high: 0, low: 0)

    init(family: UInt8, high: UInt64, low: UInt64) {
        self.family = family
        self.high = high
        self.low = low
    }

    /// The address in `sa` (AF_INET or AF_INET6), or nil for another family.
    init?(_ sa: UnsafePointer<sockaddr>) {
        switch Int32(sa.pointee.sa_family) {
        case AF_INET:
            let ip = sa.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                UInt32(bigEndian: $0.pointee.sin_addr.s_addr)
            }
            self.init(family: 4, high: 0, low: UInt64(ip))
        case AF_INET6:
            let (h, l) = sa.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { p -> (UInt64, UInt64) in
                withUnsafeBytes(of: p.pointee.sin6_addr) { raw in
                    var h: UInt64 = 0
                    var l: UInt64 = 0
                    for i in 0..<8 { h = h << 8 | UInt64(raw[i]) }
                    for i in 8..<16 { l = l << 8 | UInt64(raw[i]) }
                    return (h, l)
                }
            }
            self.init(family: 6, high: h, low: l)
        default:
            return nil
        }
    }

    var description: String {
        switch family {
        case 4: return "\(low >> 24).\(low >> 16 & 255).\(low >> 8 & 255).\(low & 255)"
        case 6:
            let groups =
                (0..<4).map { String(high >> (48 - 16 * $0) & 0xFFFF, radix: 16) }
                + (0..<4).map { String(low >> (48 - 16 * $0) & 0xFFFF, radix: 16) }
            return groups.joined(separator: ":")
        default: return "unknown"
        }
    }
}

/// One TCP connection, from libmicrohttpd's "started" notification to its "closed" one (retained by the
/// connection's socket context). Its mutable state is guarded by the server's ``PendingTable`` lock.
final class ConnectionSlot: @unchecked Sendable {
    /// The socket; ours to shut down only while `closed` is false (libmicrohttpd closes it after
    /// reporting the close, so a descriptor number reused by a newer connection is never touched).
    let fd: Int32
    let peer: PeerAddress
    /// The server the connection belongs to (which outlives its connections; nil in table tests).
    unowned let core: ServerCore?
    /// The target of the connection's current or last request (its request line, or a peek at its first
    /// bytes when accepted), so that an answer libmicrohttpd gives before the request reaches the server
    /// still takes the format of the API it addressed. Touched only on the connection's polling thread.
    var target: String?
    /// Since when the connection has been waiting for (or receiving) a request head; nil while a
    /// request is in progress. Guarded by the table's lock.
    var pendingSince: UInt64?
    /// libmicrohttpd reported the close. Guarded by the table's lock.
    var closed = false
    /// The server shut the socket down (deadline, limit, or an answer it wrote itself). Guarded by the
    /// table's lock.
    var shut = false
    /// The pending count of this connection's address, shared by its connections (so that a request
    /// starting or ending updates it without a lookup). Guarded by the table's lock.
    var addressPending: PendingCount?

    init(fd: Int32, peer: PeerAddress, core: ServerCore? = nil) {
        self.fd = fd
        self.peer = peer
        self.core = core
    }
}

/// How many connections of one address are pending, and how many it has open (the entry goes when
/// the last one closes). Guarded by the table's lock.
final class PendingCount: @unchecked Sendable {
    var pending = 0
    var open = 0
}

/// The connections that are still waiting for, or receiving, a request head ("pending": from accept, or
/// from the end of the previous response on a kept-alive connection, until the head is complete), with
/// the rules that keep slow clients from holding the server:
///
/// - a head must be complete `headDeadline` after the connection started waiting for it, however steadily
///   its bytes trickle in;
/// - one address may hold at most `perAddressLimit` pending connections, and all addresses together at
///   most `totalLimit`. A new connection beyond a limit closes the oldest pending connection in that
///   scope, however young, and is admitted: a new connection is never refused for the limits (a
///   loopback gateway sees every client as 127.0.0.1, so refusing newcomers would let a few hundred
///   connections that never finish their head keep every client out, issue 23; a working client's head
///   arrives within milliseconds of its connection, so it is rarely the oldest). Connections that become
///   pending again after a response (kept alive) are trimmed to the limits oldest first once pending for
///   `slowAfter`; until then their address may hold more than its limit, so a new connection beyond the
///   total limit first closes the oldest pending connection of an address beyond its own limit (else one
///   address whose requests complete, and whose connections are then kept alive, could fill the total
///   limit alone and make every other address's newcomers evict each other).
///
/// Pure bookkeeping (time is passed in), so that it can be tested without sockets; the server calls it
/// under one lock and shuts down the connections it returns while still holding that lock.
struct PendingTable {
    let perAddressLimit: Int
    let totalLimit: Int
    let slowAfter: UInt64
    let headDeadline: UInt64
    /// Every open connection (added and removed once per connection; a request starting or ending only
    /// flips its slot's `pendingSince` and two counters, without hashing).
    private(set) var open: [ObjectIdentifier: ConnectionSlot] = [:]
    private var perAddress: [PeerAddress: PendingCount] = [:]
    /// Pending connections in all.
    private(set) var pendingCount = 0
    /// Connections the server shut down that libmicrohttpd has not closed yet: still open, but no longer
    /// anyone's (not counted against `maxConnections`, or evicting slow heads could refuse real clients).
    private(set) var shutOpen = 0

    init(perAddressLimit: Int, totalLimit: Int, slowAfter: UInt64, headDeadline: UInt64) {
        self.perAddressLimit = max(1, perAddressLimit)
        self.totalLimit = max(1, totalLimit)
        self.slowAfter = slowAfter
        self.headDeadline = headDeadline
    }

    /// Pending connections from `peer`.
    func pending(from peer: PeerAddress) -> Int { perAddress[peer]?.pending ?? 0 }

    /// Whether a new connection from `peer` may be accepted at `now`, and the pending connections to
    /// close to make room for it (already marked `shut` and no longer pending).
    mutating func admit(_ peer: PeerAddress, now: UInt64) -> (admit: Bool, close: [ConnectionSlot]) {
        var close: [ConnectionSlot] = []
        if pending(from: peer) >= perAddressLimit {
            guard let victim = oldestPending(of: peer) else { return (false, close) }
            shut(victim)
            close.append(victim)
        }
        if pendingCount >= totalLimit {
            // An address beyond its own limit (kept-alive connections pending again after their
            // responses) pays first: otherwise one address could fill the total limit on its own.
            guard let victim = oldestBeyondAddressLimit() ?? oldestPending(of: nil) else {
                return (false, close)
            }
            shut(victim)
            close.append(victim)
        }
        return (true, close)
    }

    /// A connection was accepted: it waits for its first request head.
    mutating func opened(_ slot: ConnectionSlot, now: UInt64) {
        let count: PendingCount
        if let c = perAddress[slot.peer] {
            count = c
        } else {
            count = PendingCount()
            perAddress[slot.peer] = count
        }
        count.open += 1
        slot.addressPending = count
        open[ObjectIdentifier(slot)] = slot
        makePending(slot, now: now)
    }

    /// A request head is complete: the connection is no longer pending.
    mutating func requestStarted(_ slot: ConnectionSlot) { leavePending(slot) }

    /// A response is complete: a kept-alive connection waits for its next request head.
    mutating func requestEnded(_ slot: ConnectionSlot, now: UInt64) { makePending(slot, now: now) }

    /// libmicrohttpd closed the connection: its descriptor is no longer ours to touch.
    mutating func closed(_ slot: ConnectionSlot) {
        forget(slot)
        if slot.shut && !slot.closed { shutOpen -= 1 }
        slot.closed = true
    }

    /// Marks `slot` as shut down by the server: it is no longer pending, and never will be again.
    mutating func shut(_ slot: ConnectionSlot) {
        leavePending(slot)
        if !slot.shut && !slot.closed { shutOpen += 1 }
        slot.shut = true
    }

    /// The pending connections to close at `now`: those past the head deadline, then the slow ones
    /// beyond the limits, oldest first (marked `shut` and no longer pending).
    mutating func sweep(now: UInt64) -> [ConnectionSlot] {
        guard pendingCount > 0 else { return [] }
        var close: [ConnectionSlot] = []
        var overAddress = false
        for slot in open.values where slot.pendingSince != nil {
            if age(slot, now) >= headDeadline {
                close.append(slot)
            } else if let c = slot.addressPending, c.pending > perAddressLimit {
                overAddress = true
            }
        }
        for slot in close { shut(slot) }
        guard pendingCount > totalLimit || overAddress else { return close }
        let slowest = open.values.filter { $0.pendingSince != nil && age($0, now) >= slowAfter }
            .sorted { $0.pendingSince! < $1.pendingSince! }
        for slot in slowest
        where pendingCount > totalLimit || (slot.addressPending?.pending ?? 0) > perAddressLimit {
            shut(slot)
            close.append(slot)
        }
        return close
    }

    /// How long `slot` has been pending at `now`; zero when its clock started after `now` was read
    /// (another thread may start it between the two).
    private func age(_ slot: ConnectionSlot, _ now: UInt64) -> UInt64 {
        let since = slot.pendingSince!
        return now > since ? now - since : 0
    }

    /// The oldest pending connection of an address holding more than `perAddressLimit` pending ones.
    private func oldestBeyondAddressLimit() -> ConnectionSlot? {
        var oldest: ConnectionSlot?
        for slot in open.values where slot.pendingSince != nil {
            guard let c = slot.addressPending, c.pending > perAddressLimit else { continue }
            if let o = oldest, o.pendingSince! <= slot.pendingSince! { continue }
            oldest = slot
        }
        return oldest
    }

    /// The pending connection (of `peer`, or of any address) that has been pending longest.
    private func oldestPending(of peer: PeerAddress?) -> ConnectionSlot? {
        var oldest: ConnectionSlot?
        for slot in open.values where slot.pendingSince != nil && (peer == nil || slot.peer == peer) {
            if let o = oldest, o.pendingSince! <= slot.pendingSince! { continue }
            oldest = slot
        }
        return oldest
    }

    /// Starts the head clock, unless it already runs (a request that ends before its head was complete,
    /// as when libmicrohttpd answers a malformed head itself, does not restart it).
    private mutating func makePending(_ slot: ConnectionSlot, now: UInt64) {
        guard !slot.closed, !slot.shut, slot.pendingSince == nil, let count = slot.addressPending else {
            return
        }
        slot.pendingSince = now
        count.pending += 1
        pendingCount += 1
    }

    private mutating func leavePending(_ slot: ConnectionSlot) {
        guard slot.pendingSince != nil, let count = slot.addressPending else { return }
        slot.pendingSince = nil
        count.pending -= 1
        pendingCount -= 1
    }

    private mutating func forget(_ slot: ConnectionSlot) {
        leavePending(slot)
        guard open.removeValue(forKey: ObjectIdentifier(slot)) != nil, let count = slot.addressPending else {
            return
        }
        count.open -= 1
        if count.open == 0 { perAddress.removeValue(forKey: slot.peer) }
    }
}
