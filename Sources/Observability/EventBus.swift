import Foundation
import JSONCore
import Synchronization

/// Server-Sent Events of the gateway (`GET /_mirrorgate/events`): every subscriber gets each event
/// published after it subscribed, in order.
///
/// Promises: each event is one `event:`/`data:` frame with an `at` timestamp added to its object; a
/// subscriber whose sink refuses a frame gets no further events.
public final class EventBus: Sendable {
    private let subscribers = Mutex<[UInt64: @Sendable (String) -> Bool]>([:])
    private let nextID = Atomic<UInt64>(0)

    /// No subscribers yet.
    public init() {}

    /// Publishes `name` with `data`; subscribers whose sink refuses are dropped.
    public func publish(_ name: String, _ data: JSON) {
        var payload = data.objectValue ?? JSONObject()
        payload["at"] = .string(ISO8601DateFormatter().string(from: Date()))
        let text = "event: \(name)\ndata: \(JSON.object(payload).serialized())\n\n"
        let sinks = subscribers.withLock { $0 }
        for (id, sink) in sinks where !sink(text) {
            _ = subscribers.withLock { $0.removeValue(forKey: id) }
        }
    }

    /// Adds a subscriber; returns its id.
    public func subscribe(_ sink: @escaping @Sendable (String) -> Bool) -> UInt64 {
        let id = nextID.add(1, ordering: .relaxed).newValue
        subscribers.withLock { $0[id] = sink }
        return id
    }

    /// Removes subscriber `id`.
    public func unsubscribe(_ id: UInt64) { _ = subscribers.withLock { $0.removeValue(forKey: id) } }
}
