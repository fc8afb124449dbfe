import Foundation
import GatewayConfig
import Testing

@testable import Mirrorgate

@Suite struct AdminHelpersTests {
    @Test func tokenComparison() {
        #expect(constantTimeEqual("Bearer abc", "Bearer abc"))
        #expect(!constantTimeEqual("Bearer abd", "Bearer abc"))
        #expect(!constantTimeEqual("Bearer ab", "Bearer abc"))
        #expect(!constantTimeEqual("", "Bearer abc"))
    }

    @Test func eventsReachSubscribersInOrderAndRefusingSinksAreDropped() {
        let bus = EventBus()
        let box = Box()
        _ = bus.subscribe { text in
            box.append(text)
            return true
        }
        let refusing = bus.subscribe { _ in false }
        bus.publish("syncDidStart", ["index": "a"])
        bus.publish("syncDidFinish", ["index": "a"])
        let lines = box.all.compactMap { $0.split(separator: "\n").first.map(String.init) }
        #expect(lines == ["event: syncDidStart", "event: syncDidFinish"])
        bus.unsubscribe(refusing)
    }
}

final class Box: @unchecked Sendable {
    private var items: [String] = []
    private let lock = NSLockLike()
    func append(_ s: String) { lock.run { items.append(s) } }
    var all: [String] { lock.run { items } }
}

final class NSLockLike: @unchecked Sendable {
    private let l = NSLock()
    func run<T>(_ body: () -> T) -> T {
        l.lock()
        defer { l.unlock() }
        return body()
    }
}

/// Which reload reopens an OData service.
@Suite struct ReloadODataTests {
    func config(_ yaml: String) throws -> MirrorgateConfiguration {
        try MirrorgateConfiguration.parse(yaml: yaml, fileName: "t.yaml", environment: [:])
    }

    @Test func aNewPolicyAloneDoesNotReopenAService() throws {
        let a = try config(
            """
            policies: {p: {idleInterval: 1h}, q: {idleInterval: 2s, activeInterval: 1s}}
            odata:
              services:
                s: {upstream: "http://127.0.0.1:1/s/", policy: p}
            """)
        let renamed = try config(
            """
            policies: {p: {idleInterval: 1h}, q: {idleInterval: 2s, activeInterval: 1s}}
            odata:
              services:
                s: {upstream: "http://127.0.0.1:1/s/", policy: q}
            """)
        let retimed = try config(
            """
            policies: {p: {idleInterval: 5s, activeInterval: 1s}}
            odata:
              services:
                s: {upstream: "http://127.0.0.1:1/s/", policy: p}
            """)
        let moved = try config(
            """
            policies: {p: {idleInterval: 1h}}
            odata:
              services:
                s: {upstream: "http://127.0.0.1:2/s/", policy: p}
            """)
        #expect(!ConfigurationReload.odataServiceChanged("s", a, renamed))
        #expect(!ConfigurationReload.odataServiceChanged("s", a, retimed))
        #expect(ConfigurationReload.odataServiceChanged("s", a, moved))
        #expect(ConfigurationReload.odataServiceChanged("t", a, moved))
    }
}
