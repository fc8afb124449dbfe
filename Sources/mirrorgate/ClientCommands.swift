import ArgumentParser
import Foundation
import GatewayConfig
import GatewaySupport
import HTTPCore
import JSONCore

/// Prints to standard error.
func printError(_ text: String) {
    FileHandle.standardError.write(Data("\(text)\n".utf8))
}

/// Runs a client command body: a ``CommandFailure`` is printed and exits 1.
func runtime(_ body: () throws -> Void) throws {
    do {
        try body()
    } catch let failure as CommandFailure {
        printError("mirrorgate: \(failure.description)")
        throw ExitCode(1)
    }
}

/// `mirrorgate status [--config FILE] [--json]`: asks the running gateway, prints a table or the JSON.
struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the running gateway's status (upstreams, mirrored and offline indices).")

    @OptionGroup var options: ConfigOptions

    @Flag(name: .long, help: "Print the status document as JSON.")
    var json = false

    func run() throws {
        let (config, _) = try options.load()
        let client = AdminClient(configuration: config)
        try runtime {
            let (status, body) = try client.call("GET", "/_mirrorgate/status", timeout: .seconds(10))
            guard status == 200, let doc = try? JSON.parse(body) else {
                throw CommandFailure(
                    description: "GET /_mirrorgate/status: \(status) \(AdminClient.message(body))")
            }
            if json {
                print(String(decoding: body, as: UTF8.self))
            } else {
                print(StatusTable.render(doc, base: client.base), terminator: "")
            }
        }
    }
}

/// The readable form of `GET /_mirrorgate/status`.
enum StatusTable {
    static func render(_ doc: JSON, base: String) -> String {
        var out = "mirrorgate \(doc["version"]?.stringValue ?? "?") at \(base)"
        if let started = doc["startedAt"]?.stringValue { out += ", started \(started)" }
        out += "\n\n"
        var rows = [["UPSTREAM", "REACHABLE", "SINCE"]]
        for (name, u) in doc["upstreams"]?.objectValue ?? JSONObject() {
            rows.append([name, yesNo(u["reachable"]), text(u["since"])])
        }
        out += table(rows) + "\n"
        let indices = doc["algolia"]?["indices"]?.objectValue ?? JSONObject()
        if indices.keys.isEmpty {
            out += "no Algolia indices configured\n"
        } else {
            var r = [
                [
                    "INDEX", "KIND", "OFFLINE DATA", "OBJECTS", "LAST SYNC", "POLICY", "USE", "NEXT SYNC",
                    "WAITING FOR", "SYNCING", "LAST ERROR",
                ]
            ]
            var notApplied: [String] = []
            for (name, i) in indices {
                let mirrored = i["mirrored"]?.boolValue ?? false
                let p = i["replication"]
                r.append([
                    name, mirrored ? "mirrored" : "offline", yesNo(i["hasOfflineData"]), text(i["objects"]),
                    text(i["lastSuccessfulSyncAt"]), text(p?["policy"]), use(p), text(i["nextSyncAt"]),
                    waiting(p), mirrored ? yesNo(i["syncing"]) : "-", text(i["lastError"]),
                ])
                notApplied += notAppliedLines(name, i["notApplied"])
                for (replica, entry) in i["replicas"]?.objectValue ?? JSONObject() {
                    let kind = entry["virtual"]?.boolValue == true ? "virtual replica" : "replica"
                    r.append([
                        replica, "\(kind) of \(name)", "yes", text(entry["objects"]), "-", "-", "-", "-", "-",
                        "-", "-",
                    ])
                    notApplied += notAppliedLines(replica, entry["notApplied"])
                }
            }
            out += table(r) + "\n"
            if !notApplied.isEmpty {
                out += "not applied by local answers (each such answer says so in its message):\n"
                out += notApplied.joined(separator: "\n") + "\n\n"
            }
        }
        let services = doc["odata"]?["services"]?.objectValue ?? JSONObject()
        if !services.keys.isEmpty {
            var r = [
                [
                    "SERVICE", "REACHABLE", "PENDING", "HELD", "WAITING", "IN DOUBT", "ERROR ARCHIVE",
                    "LAST UPLOAD", "LAST DOWNLOAD", "POLICY", "USE", "NEXT RUN", "WAITING FOR", "LAST ERROR",
                ]
            ]
            var why: [String] = []
            for (name, s) in services {
                let p = s["replication"]
                r.append([
                    name, yesNo(s["reachable"]), text(s["pendingRequests"]), text(s["held"]),
                    text(s["waitingForCredentials"]), text(s["inDoubt"]),
                    text(s["errorArchive"]), text(s["lastUploadAt"]), text(s["lastDownloadAt"]),
                    text(p?["policy"]), use(p), text(s["nextSyncAt"]), waiting(p), text(s["lastError"]),
                ])
                for hold in s["credentialHolds"]?.arrayValue ?? [] {
                    why.append(
                        "\(name): requests of \(text(hold["writer"])) wait for credentials: the upstream answered "
                            + "\(text(hold["status"])) at upload (since \(text(hold["since"]))); "
                            + (hold["newerCredentialsOffered"]?.boolValue == true
                                ? "newer credentials are being tried"
                                : "a newer request from this writer with valid credentials releases them"))
                }
                if let last = s["lastUpload"], last != .null,
                    let before = last["requestsBefore"]?.intValue,
                    let after = last["requestsAfter"]?.intValue,
                    before != after
                {
                    why.append("\(name): last upload prepared \(before) queued requests into \(after)")
                }
                if let last = s["lastDownload"], last != .null, let kind = last["kind"]?.stringValue {
                    let removed = last["removed"].flatMap { $0 == .null ? nil : text($0) }
                    why.append(
                        "\(name): last download \(kind): \(text(last["changed"])) entities stored"
                            + (removed.map { ", \($0) removed" } ?? "")
                            + ", \(text(last["keptLocal"])) kept local, \(text(last["durationMs"])) ms")
                }
            }
            out += table(r) + "\n"
            for line in why { out += line + "\n" }
        }
        let policies = doc["policies"]?.objectValue ?? JSONObject()
        if !policies.keys.isEmpty {
            var r = [["POLICY", "PAUSED", "ACTIVE", "IDLE", "WINDOW", "BUDGET", "MIRRORS"]]
            for (name, p) in policies {
                let windows = (p["window"]?.arrayValue ?? []).compactMap(\.stringValue)
                let budget = p["maxRunDurationSeconds"]?.doubleValue ?? 0
                r.append([
                    name, yesNo(p["paused"]), seconds(p["activeIntervalSeconds"]),
                    seconds(p["idleIntervalSeconds"]),
                    windows.isEmpty ? "any time" : windows.joined(separator: ","),
                    budget > 0 ? seconds(p["maxRunDurationSeconds"]) : "none",
                    (p["mirrors"]?.arrayValue ?? []).compactMap(\.stringValue).joined(separator: " "),
                ])
            }
            out += table(r) + "\n"
        }
        return out
    }

    /// `in use` or `idle` from a mirror's replication status.
    static func use(_ p: JSON?) -> String {
        guard let p, p != .null else { return "-" }
        return p["inUse"]?.boolValue == true ? "in use" : "idle"
    }

    /// Why a mirror waits: `running`, `paused`, `window`, `condition (exit 1)`, `backoff (2 failures)`, …
    static func waiting(_ p: JSON?) -> String {
        guard let p, p != .null else { return "-" }
        if p["running"]?.boolValue == true { return "running" }
        guard let reason = p["waitingFor"]?.stringValue else { return "-" }
        switch reason {
        case "condition": return "condition (\(p["condition"]?.stringValue ?? "refused"))"
        case "backoff": return "backoff (\(p["failures"]?.intValue ?? 0) failures)"
        default: return reason
        }
    }

    /// `90s`, `5m`, `24h` from seconds.
    static func seconds(_ v: JSON?) -> String {
        guard let s = v?.doubleValue else { return "-" }
        if s >= 3600, s.truncatingRemainder(dividingBy: 3600) == 0 { return "\(Int(s / 3600))h" }
        if s >= 60, s.truncatingRemainder(dividingBy: 60) == 0 { return "\(Int(s / 60))m" }
        return s == s.rounded() ? "\(Int(s))s" : "\(s)s"
    }

    /// `  NAME: a; b` for an index's `notApplied` settings and parameters (nothing when both are empty).
    static func notAppliedLines(_ name: String, _ v: JSON?) -> [String] {
        let names =
            (v?["settings"]?.arrayValue ?? [])
            + (v?["parameters"]?.arrayValue ?? []).map {
                .string("parameter " + ($0.stringValue ?? ""))
            }
        let list = names.compactMap(\.stringValue)
        return list.isEmpty ? [] : ["  \(name): " + list.joined(separator: "; ")]
    }

    static func yesNo(_ v: JSON?) -> String {
        switch v {
        case .bool(true)?: "yes"
        case .bool(false)?: "no"
        default: "-"
        }
    }

    static func text(_ v: JSON?) -> String {
        switch v {
        case nil, .null?: "-"
        case .string(let s)?: s
        case let other?: other.serialized()
        }
    }

    static func table(_ rows: [[String]]) -> String {
        guard let first = rows.first else { return "" }
        var widths = Array(repeating: 0, count: first.count)
        for row in rows {
            for (i, cell) in row.enumerated() where i < widths.count {
                widths[i] = max(widths[i], cell.count)
            }
        }
        return rows.map { row in
            row.enumerated().map { i, cell in
                i == row.count - 1 ? cell : cell.padding(toLength: widths[i] + 2, withPad: " ", startingAt: 0)
            }.joined()
        }.joined(separator: "\n") + "\n"
    }
}

/// `mirrorgate sync [--config FILE] [NAME ...]`: starts a sync of each named mirrored index (all by
/// default) and follows them on `GET /_mirrorgate/events` until each has finished; a progress bar per
/// index on a terminal, one line per step otherwise. Exits 1 if a sync failed.
struct Sync: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Sync mirrored Algolia indices now (all of them by default) and show their progress.")

    @OptionGroup var options: ConfigOptions

    @Argument(help: "Mirrored index names (default: every mirrored index of the configuration).")
    var names: [String] = []

    func run() throws {
        let (config, source) = try options.load()
        let mirrored = config.algolia.indices.filter { $0.value.mirrored }
        let selected = names.isEmpty ? mirrored.keys.sorted() : names
        for name in selected where mirrored[name] == nil {
            throw ValidationError("\(name) is not a mirrored index in \(source)")
        }
        if selected.isEmpty {
            print("no mirrored index in \(source)")
            return
        }
        let targets = Dictionary(
            uniqueKeysWithValues: selected.map { name in
                (name, mirrored[name]!.dataSelectionQueries.reduce(0) { $0 + $1.maxObjects })
            })
        let client = AdminClient(configuration: config)
        try runtime {
            var failures = 0
            try SyncRun(client: client, names: selected, targets: targets).run(failures: &failures)
            if failures > 0 { throw ExitCode(1) }
        }
    }
}

/// One `mirrorgate sync` run.
struct SyncRun {
    let client: AdminClient
    let names: [String]
    let targets: [String: Int]

    enum Phase: Equatable {
        case waiting, fetching, building
        case done(String)
        case failed(String)
    }

    struct Progress {
        var phase: Phase = .waiting
        var started = ContinuousClock.now
        var objects: Int?
        var postedAt = ContinuousClock.now
        var before: String?
    }

    func run(failures: inout Int) throws {
        // Learn the status first: the gateway runs, and when each index last synced (the fallback check).
        let status = try client.json("GET", "/_mirrorgate/status", timeout: .seconds(10))
        let indices = status["algolia"]?["indices"]?.objectValue ?? JSONObject()
        for name in names where indices[name]?["mirrored"]?.boolValue != true {
            throw CommandFailure(description: "the running gateway has no mirrored index named \(name)")
        }
        let ready = DispatchSemaphore(value: 0)
        let log = EventLog()
        client.followEvents(ready: ready, log: log)
        if ready.wait(timeout: .now() + 10) == .timedOut {
            throw CommandFailure(description: "the gateway did not open its event stream within 10 s")
        }
        if let f = log.failed { throw f }

        var progress: [String: Progress] = [:]
        for name in names {
            var p = Progress()
            p.before = indices[name]?["lastSuccessfulSyncAt"]?.stringValue
            let path = "/_mirrorgate/algolia/indices/\(FormCodec.percentEncode(name))/sync"
            let (code, body) = try client.call("POST", path, timeout: .seconds(10))
            switch code {
            case 202:
                p.phase = .fetching
            case 409:
                p.phase = .fetching  // one is running already: follow it
            default:
                p.phase = .failed("\(code) \(AdminClient.message(body))")
            }
            p.postedAt = .now
            progress[name] = p
        }
        let tty = isatty(1) != 0
        var painter = Painter(tty: tty, names: names)
        var lastPoll = ContinuousClock.now
        painter.paint(progress, targets: targets)
        while progress.values.contains(where: { !$0.isFinished }) {
            // Woken by the next event, or after 100 ms to repaint the progress.
            for (event, data) in log.drain(waitingAtMost: .milliseconds(100)) {
                guard let name = data["index"]?.stringValue, var p = progress[name], !p.isFinished else {
                    continue
                }
                switch event {
                case "syncDidStart":
                    p.phase = .fetching
                    p.started = .now
                case "syncProgress":
                    if let n = data["objects"]?.intValue { p.objects = n }
                case "buildDidStart":
                    p.phase = .building
                case "syncDidFinish":
                    if let error = data["error"]?.stringValue {
                        p.phase = .failed(error)
                    } else {
                        p.objects = data["objects"]?.intValue ?? p.objects
                        p.phase = .done(Self.describe(data))
                    }
                default: break
                }
                progress[name] = p
            }
            // Fallback when an event was missed (the stream broke, or a sync ended before we followed it).
            let brokenStream = log.failed != nil
            if ContinuousClock.now - lastPoll >= .seconds(brokenStream ? 0.3 : 1) {
                lastPoll = .now
                if let doc = try? client.json("GET", "/_mirrorgate/status", timeout: .seconds(5)) {
                    for (name, p) in progress
                    where !p.isFinished && ContinuousClock.now - p.postedAt > .seconds(1.5) {
                        guard let i = doc["algolia"]?["indices"]?[name], i["syncing"]?.boolValue == false
                        else {
                            continue
                        }
                        var q = p
                        if let at = i["lastSuccessfulSyncAt"]?.stringValue, at != p.before {
                            q.phase = .done(Self.describe(i["lastSync"] ?? .null))
                        } else {
                            q.phase = .failed(i["lastError"]?.stringValue ?? "the sync did not succeed")
                        }
                        progress[name] = q
                    }
                }
            }
            painter.paint(progress, targets: targets)
        }
        painter.finish(progress)
        failures = progress.values.filter { if case .failed = $0.phase { true } else { false } }.count
    }

    static func describe(_ stats: JSON) -> String {
        var parts: [String] = []
        if let n = stats["objects"]?.intValue { parts.append("\(n) objects") }
        if let n = stats["pages"]?.intValue { parts.append("\(n) pages") }
        if let ms = stats["durationMs"]?.intValue {
            parts.append(String(format: "%.1f s", Double(ms) / 1000))
        }
        return parts.isEmpty ? "done" : parts.joined(separator: ", ")
    }
}

extension SyncRun.Progress {
    var isFinished: Bool {
        switch phase {
        case .done, .failed: true
        default: false
        }
    }
}

/// Draws the progress of each index: redrawn bars on a terminal, one line per change otherwise.
struct Painter {
    let tty: Bool
    let names: [String]
    private var drawn = false
    private var printed: [String: SyncRun.Phase] = [:]
    private let width: Int

    init(tty: Bool, names: [String]) {
        self.tty = tty
        self.names = names
        width = names.map(\.count).max() ?? 0
    }

    mutating func paint(_ progress: [String: SyncRun.Progress], targets: [String: Int]) {
        if tty {
            var text = drawn ? "\u{1B}[\(names.count)A" : ""
            for name in names {
                guard let p = progress[name] else { continue }
                text += "\r\u{1B}[2K" + line(name, p, target: targets[name] ?? 0) + "\n"
            }
            drawn = true
            FileHandle.standardOutput.write(Data(text.utf8))
            return
        }
        for name in names {
            guard let p = progress[name], printed[name] != p.phase else { continue }
            printed[name] = p.phase
            switch p.phase {
            case .waiting: break
            case .fetching: print("\(name): syncing")
            case .building: print("\(name): building")
            case .done(let d): print("\(name): done (\(d))")
            case .failed(let e): print("\(name): FAILED: \(e)")
            }
        }
    }

    mutating func finish(_ progress: [String: SyncRun.Progress]) {
        if !tty { return }
        // The bars already show the final state; failures are repeated on stderr.
        for name in names {
            if case .failed(let e)? = progress[name]?.phase {
                printError("mirrorgate: sync of \(name) failed: \(e)")
            }
        }
    }

    func line(_ name: String, _ p: SyncRun.Progress, target: Int) -> String {
        let barWidth = 30
        let label = name.padding(toLength: width + 2, withPad: " ", startingAt: 0)
        let elapsed = String(format: "%5.1fs", (ContinuousClock.now - p.started).seconds)
        var bar: String
        switch p.phase {
        case .done(let d):
            return label + "[" + String(repeating: "#", count: barWidth) + "] done: \(d)"
        case .failed(let e):
            return label + "[" + String(repeating: "!", count: barWidth) + "] FAILED: \(e)"
        case .waiting, .fetching, .building:
            if let objects = p.objects, target > 0 {
                let filled = min(barWidth, objects * barWidth / target)
                bar = String(repeating: "#", count: filled) + String(repeating: ".", count: barWidth - filled)
            } else {
                // No page-level progress from the gateway: an indeterminate bar that moves.
                let position = Int((ContinuousClock.now - p.started).seconds * 10) % (2 * (barWidth - 6))
                let at = position < barWidth - 6 ? position : 2 * (barWidth - 6) - position
                bar =
                    String(repeating: ".", count: at) + "======"
                    + String(repeating: ".", count: barWidth - 6 - at)
            }
            let phase = p.phase == .building ? "building" : "fetching"
            let count = p.objects.map { " \($0) objects" } ?? ""
            return label + "[" + bar + "] \(phase)\(count) \(elapsed)"
        }
    }
}

/// `mirrorgate build [--config FILE] INDEX --settings FILE --objects FILE... [--synonyms FILE] [--rules FILE]`:
/// asks the running gateway to build a new version of a mirrored index from files (paths sent as absolute
/// paths).
struct Build: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Build a mirrored index from a settings file and object files (manual bootstrap).")

    @OptionGroup var options: ConfigOptions

    @Argument(help: "The mirrored index to build.")
    var index: String

    @Option(name: .long, help: "Settings file (a JSON object).")
    var settings: String?

    @Option(
        name: .long, parsing: .upToNextOption,
        help: "Object files (JSON arrays of records, or browse answers with `hits`).")
    var objects: [String] = []

    @Option(name: .long, help: "Synonyms file (a JSON array of Algolia synonym objects), optional.")
    var synonyms: String?

    @Option(name: .long, help: "Query rules file (a JSON array of Algolia rule objects), optional.")
    var rules: String?

    func validate() throws {
        if objects.isEmpty { throw ValidationError("give at least one file with --objects") }
    }

    func run() throws {
        let (config, source) = try options.load()
        guard config.algolia.indices[index]?.mirrored == true else {
            throw ValidationError("\(index) is not a mirrored index in \(source)")
        }
        let settingsPath = try settings.map(Self.absolute)
        let synonymsPath = try synonyms.map(Self.absolute)
        let rulesPath = try rules.map(Self.absolute)
        let objectPaths = try objects.map(Self.absolute)
        var body = JSONObject()
        if let settingsPath { body["settingsFile"] = .string(settingsPath) }
        if let synonymsPath { body["synonymsFile"] = .string(synonymsPath) }
        if let rulesPath { body["rulesFile"] = .string(rulesPath) }
        body["objectFiles"] = .array(objectPaths.map { .string($0) })
        let client = AdminClient(configuration: config)
        let index = self.index
        try runtime {
            // Follow the events too: a build longer than server.requestTimeout is answered 504 by the
            // server while it goes on, and then its buildDidFinish event tells the result.
            let ready = DispatchSemaphore(value: 0)
            let log = EventLog()
            _ = try client.json("GET", "/_mirrorgate/health", timeout: .seconds(10))
            client.followEvents(ready: ready, log: log)
            _ = ready.wait(timeout: .now() + 5)
            let path = "/_mirrorgate/algolia/indices/\(FormCodec.percentEncode(index))/build"
            let (code, reply) = try client.call("POST", path, body: .object(body), timeout: .seconds(86400))
            if code == 200, let json = try? JSON.parse(reply) {
                print(
                    "\(index): built \(json["objects"]?.intValue ?? 0) objects in "
                        + String(format: "%.1f s", Double(json["durationMs"]?.intValue ?? 0) / 1000))
                return
            }
            guard code == 504, log.failed == nil else {
                throw CommandFailure(
                    description: "build of \(index) failed: \(code) \(AdminClient.message(reply))")
            }
            print("\(index): still building (the request timed out); waiting for the gateway to finish")
            while true {
                for (event, data) in log.drain(waitingAtMost: .seconds(1))
                where event == "buildDidFinish" && data["index"]?.stringValue == index {
                    if let error = data["error"]?.stringValue {
                        throw CommandFailure(description: "build of \(index) failed: \(error)")
                    }
                    print("\(index): built \(data["objects"]?.intValue ?? 0) objects")
                    return
                }
                if let f = log.failed { throw f }
            }
        }
    }

    /// An absolute path for `path` that exists and is readable here (else a usage error).
    static func absolute(_ path: String) throws -> String {
        let url = URL(
            fileURLWithPath: path, relativeTo: URL(fileURLWithPath: FileManager.default.currentDirectoryPath))
        let full = url.standardizedFileURL.path
        guard FileManager.default.isReadableFile(atPath: full) else {
            throw ValidationError("cannot read \(path)")
        }
        return full
    }
}
