import Foundation
import JSONCore
import Testing

@testable import Observability

@Suite struct EventBusTests {
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
