import Foundation
import GatewayConfig
import JSONCore
import Logging
import Synchronization

/// Log output of the process: text (logfmt, one line per event) or JSON (one object per line), on
/// stderr. Level and format can change while the gateway runs (a reload): handlers read them at each
/// event. Nothing in the gateway logs API keys, tokens or bodies; handlers get only what callers pass.
public enum LogSetup {
    private static let done = Mutex(false)
    private static let level = Atomic<Int>(2)
    private static let json = Atomic<Bool>(false)
    private static let levels = Logger.Level.allCases

    /// Bootstraps swift-log once per process with the configured format and level.
    public static func bootstrap(_ config: LogConfig) {
        let first = done.withLock { d -> Bool in
            defer { d = true }
            return !d
        }
        apply(config)
        guard first else { return }
        LoggingSystem.bootstrap { label in
            EventLogHandler(label: label, level: { currentLevel }) { label, event, metadata in
                LineOutput.emit(
                    label: label, event: event, metadata: metadata, json: json.load(ordering: .relaxed))
            }
        }
    }

    /// Sets the level and format of every logger (at start and on reload).
    public static func apply(_ config: LogConfig) {
        let l = Logger.Level(rawValue: config.level.rawValue) ?? .info
        level.store(levels.firstIndex(of: l) ?? 2, ordering: .relaxed)
        json.store(config.format == .json, ordering: .relaxed)
    }

    /// The level in force.
    static var currentLevel: Logger.Level { levels[level.load(ordering: .relaxed)] }
}

/// A swift-log handler that gives each event that passes its level, with the logger's metadata and the
/// event's merged (the event's win), to one function: the process's line output on stderr, or a test's
/// recorder (`MirrorgateTesting.LogRecorder`).
public struct EventLogHandler: LogHandler {
    /// The logger's label.
    public let label: String
    private var fixedLevel: Logger.Level?
    private let dynamicLevel: (@Sendable () -> Logger.Level)?
    public var metadata: Logger.Metadata = [:]
    private let output: @Sendable (_ label: String, _ event: LogEvent, _ metadata: Logger.Metadata) -> Void

    /// A handler for the logger `label` at level `info` that hands every event to `output`.
    public init(
        label: String,
        output: @escaping @Sendable (_ label: String, _ event: LogEvent, _ metadata: Logger.Metadata) -> Void
    ) {
        self.label = label
        self.fixedLevel = .info
        self.dynamicLevel = nil
        self.output = output
    }

    /// A handler whose level is `level()` at each event until a level is set on it.
    public init(
        label: String, level: @escaping @Sendable () -> Logger.Level,
        output: @escaping @Sendable (_ label: String, _ event: LogEvent, _ metadata: Logger.Metadata) -> Void
    ) {
        self.label = label
        self.fixedLevel = nil
        self.dynamicLevel = level
        self.output = output
    }

    public var logLevel: Logger.Level {
        get { fixedLevel ?? dynamicLevel?() ?? .info }
        set { fixedLevel = newValue }
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

/// One line per log event on stderr: a JSON object (metadata as fields; numbers and booleans given as
/// `.stringConvertible` stay numbers and booleans) or logfmt (`time=… level=… logger=… msg=… key=value`,
/// values quoted when they hold spaces, quotes, `=` or nothing).
enum LineOutput {
    static func emit(label: String, event: LogEvent, metadata merged: Logger.Metadata, json: Bool) {
        var bytes = Array(
            line(label: label, event: event, metadata: merged, json: json, time: timestamp()).utf8)
        bytes.withUnsafeMutableBytes { raw in
            var offset = 0
            while offset < raw.count {
                let n = write(2, raw.baseAddress! + offset, raw.count - offset)
                if n <= 0 { break }
                offset += n
            }
        }
    }

    /// The line for one event, with its newline.
    static func line(
        label: String, event: LogEvent, metadata merged: Logger.Metadata, json: Bool, time: String
    )
        -> String
    {
        if json {
            var o = JSONObject()
            o["time"] = .string(time)
            o["level"] = .string(event.level.rawValue)
            o["logger"] = .string(label)
            o["message"] = .string(event.message.description)
            for key in merged.keys.sorted() where o[key] == nil { o[key] = jsonValue(merged[key]!) }
            return JSON.object(o).serialized() + "\n"
        }
        var line =
            "time=\(time) level=\(event.level.rawValue) logger=\(logfmt(label)) msg=\(logfmt(event.message.description))"
        for key in merged.keys.sorted() {
            line += " \(logfmtKey(key))=\(logfmt(text(merged[key]!)))"
        }
        return line + "\n"
    }

    static func jsonValue(_ value: Logger.MetadataValue) -> JSON {
        switch value {
        case .string(let s): return .string(s)
        case .stringConvertible(let v):
            switch v {
            case let b as Bool: return .bool(b)
            case let i as Int: return .int(Int64(i))
            case let i as Int64: return .int(i)
            case let u as UInt64 where u <= UInt64(Int64.max): return .int(Int64(u))
            case let d as Double where d.isFinite: return .double(d)
            default: return .string(v.description)
            }
        case .array(let a): return .array(a.map(jsonValue))
        case .dictionary(let d):
            var o = JSONObject()
            for k in d.keys.sorted() { o[k] = jsonValue(d[k]!) }
            return .object(o)
        }
    }

    static func text(_ value: Logger.MetadataValue) -> String {
        switch value {
        case .string(let s): return s
        case .stringConvertible(let v): return v.description
        case .array, .dictionary: return jsonValue(value).serialized()
        }
    }

    /// A logfmt value: bare when it is a non-empty run of visible ASCII other than `"`, `=` and `\\`, else
    /// a quoted string with JSON's escapes (which logfmt readers accept).
    static func logfmt(_ s: String) -> String {
        let bare =
            !s.isEmpty
            && s.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && $0 != 0x22 && $0 != 0x3D && $0 != 0x5C }
        return bare ? s : JSON.string(s).serialized()
    }

    /// A key: its characters outside `[A-Za-z0-9_.-]` become `_`.
    static func logfmtKey(_ s: String) -> String {
        let mapped = s.unicodeScalars.map { c -> Character in
            let ok =
                (c >= "a" && c <= "z") || (c >= "A" && c <= "Z") || (c >= "0" && c <= "9") || c == "_"
                || c == "." || c == "-"
            return ok ? Character(c) : "_"
        }
        return mapped.isEmpty ? "_" : String(mapped)
    }

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
