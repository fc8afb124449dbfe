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
            var h = LineLogHandler(label: label, json: json)
            h.logLevel = level
            return h
        }
    }
}

/// Writes one line per log event to stderr, as text or as a JSON object.
public struct LineLogHandler: LogHandler {
    /// The logger's label.
    public let label: String
    /// JSON lines instead of text.
    public let json: Bool
    public var logLevel: Logger.Level = .info
    public var metadata: Logger.Metadata = [:]

    /// Creates a handler.
    public init(label: String, json: Bool) {
        self.label = label
        self.json = json
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = metadata
        if let extra = event.metadata { merged.merge(extra) { $1 } }
        let time = Self.timestamp()
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

    private func quote(_ s: String) -> String { JSON.string(s).serialized() }

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
