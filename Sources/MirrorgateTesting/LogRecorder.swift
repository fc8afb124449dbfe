import Logging
import Mirrorgate
import Observability
import Synchronization

/// Keeps the log events of the loggers it makes, in memory, so that a test can check what was logged
/// (and that nothing secret was). Make a logger with ``logger(_:level:)``; read ``entries``.
public final class LogRecorder: Sendable {
    /// One recorded event.
    public struct Entry: Sendable, Equatable {
        /// The logger's label.
        public let label: String
        /// The level.
        public let level: Logger.Level
        /// The message.
        public let message: String
        /// The metadata (the logger's and the event's), values as text.
        public let metadata: [String: String]
    }

    private let recorded = Mutex<[Entry]>([])

    /// An empty recorder.
    public init() {}

    /// A logger labelled `label` that records events at `level` and above here.
    public func logger(_ label: String = "test", level: Logger.Level = .trace) -> Logger {
        var logger = Logger(label: label) { label in
            EventLogHandler(label: label) { label, event, metadata in
                self.append(
                    Entry(
                        label: label, level: event.level, message: event.message.description,
                        metadata: metadata.mapValues { "\($0)" }))
            }
        }
        logger.logLevel = level
        return logger
    }

    /// Every event recorded so far, in order.
    public var entries: [Entry] { recorded.withLock { $0 } }

    /// The messages recorded so far, in order.
    public var messages: [String] { entries.map(\.message) }

    private func append(_ entry: Entry) { recorded.withLock { $0.append(entry) } }
}
