import Foundation
import GatewayConfig
import JSONCore
import Logging
import Synchronization

/// Log output of the process: text (one line per event) or JSON (one object per line), on stderr.
/// Nothing in the gateway logs API keys, tokens or bodies; handlers get only what callers pass.
public enum LogSetup {
    private static let done = Mutex(false)

    /// Bootstraps swift-log once per process with the configured format and level.
    public static func bootstrap(_ config: LogConfig) {
        let first = done.withLock { d -> Bool in
            defer { d = true }
            return !d
        }
        guard first else { return }
        let level = Logger.Level(rawValue: config.level.rawValue) ?? .info
        let json = config.format == .json
        LoggingSystem.bootstrap { label in
            var h = EventLogHandler(label: label) { label, event, metadata in
                LineOutput.emit(label: label, event: event, metadata: metadata, json: json)
            }
            h.logLevel = level
            return h
        }
    }
}

/// A swift-log handler that gives each event that passes its level, with the logger's metadata and the
/// event's merged (the event's win), to one function: the process's line output on stderr, or a test's
/// recorder (`MirrorgateTesting.LogRecorder`).
public struct EventLogHandler: LogHandler {
    /// The logger's label.
    public let label: String
    public var logLevel: Logger.Level = .info
    public var metadata: Logger.Metadata = [:]
    private let output: @Sendable (_ label: String, _ event: LogEvent, _ metadata: Logger.Metadata) -> Void

    /// A handler for the logger `label` that hands every event to `output`.
    public init(
        label: String,
        output: @escaping @Sendable (_ label: String, _ event: LogEvent, _ metadata: Logger.Metadata) -> Void
    ) {
        self.label = label
        self.output = output
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = metadata
        if let extra = event.metadata { merged.merge(extra) { $1 } }
        output(label, event, merged)
    }
}

/// One line per log event on stderr, as text or as a JSON object.
enum LineOutput {
    static func emit(label: String, event: LogEvent, metadata merged: Logger.Metadata, json: Bool) {
        let time = timestamp()
        var line: String
        if json {
            line =
                "{\"time\":\(quote(time)),\"level\":\(quote(event.level.rawValue)),\"logger\":\(quote(label)),"
            line += "\"message\":\(quote(event.message.description))"
            for key in merged.keys.sorted() {
                line += ",\(quote(key)):\(quote("\(merged[key]!)"))"
            }
            line += "}\n"
        } else {
            line = "\(time) \(event.level.rawValue.uppercased()) \(label): \(event.message)"
            for key in merged.keys.sorted() { line += " \(key)=\(merged[key]!)" }
            line += "\n"
        }
        var bytes = Array(line.utf8)
        bytes.withUnsafeMutableBytes { raw in
            var offset = 0
            while offset < raw.count {
                let n = write(2, raw.baseAddress! + offset, raw.count - offset)
                if n <= 0 { break }
                offset += n
            }
        }
    }

    private static func quote(_ s: String) -> String { JSON.string(s).serialized() }

    private static func timestamp() -> String {
        var tv = timeval()
        gettimeofday(&tv, nil)
        var t = tv.tv_sec
        var tmv = tm()
        gmtime_r(&t, &tmv)
        let ms = Int(tv.tv_usec / 1000)
        return String(
            format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tmv.tm_year + 1900, tmv.tm_mon + 1, tmv.tm_mday,
            tmv.tm_hour, tmv.tm_min, tmv.tm_sec, ms)
    }
}
