// Search benchmark: loads the Debian records, builds the index (records/s, peak RSS), runs the committed
// query set per class and prints one JSON object with p50/p99 per class and zero-hit typo queries.
//
// usage: SearchBench build <records.json> <queries.json> <repetitions> [<store-dir>]
//        SearchBench restart <queries.json> <store-dir>      (open the store, load, answer one query)
//        SearchBench copy <from-store-dir> <to-store-dir>    (load; time opening a new store, then the save)
//        SearchBench features <records.json> <queries.json> <repetitions>
//            (the same query set with ignorePlurals, removeStopWords, both, and with 200 query rules)
// With MG_BENCH_STORE_KEY set, the stores written and read are encrypted with it (as with
// `algolia.storeEncryptionKey`); key derivation happens when a store is opened and is timed with it.
import Foundation
import JSONCore
import SearchEngine
import Storage

/// The store in `directory`, encrypted when MG_BENCH_STORE_KEY is set.
func openStore(_ directory: String) throws -> IndexStore {
    let key = ProcessInfo.processInfo.environment["MG_BENCH_STORE_KEY"]
    return try IndexStore(
        directory: directory,
        encryption: try key.map { try StoreEncryption(secret: $0, label: "MG_BENCH_STORE_KEY") })
}

let settings: JSON = [
    "searchableAttributes": ["name", "description", "maintainer", "_tags"],
    "attributesForFaceting": ["section", "priority", "architecture"],
]

func now() -> Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e6 }

/// CPU time of this process so far (user + system), in ms: what the machine's other tenants slow down least.
func cpuNow() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    func ms(_ t: timeval) -> Double { Double(t.tv_sec) * 1000 + Double(t.tv_usec) / 1000 }
    return ms(usage.ru_utime) + ms(usage.ru_stime)
}

func peakRSSMiB() -> Double {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
    for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
        let kb = Double(line.split(separator: " ").dropFirst().first ?? "0") ?? 0
        return kb / 1024
    }
    return 0
}

func params(_ entry: JSON) -> JSON {
    var object: JSONObject = ["query": entry["q"] ?? ""]
    if entry["facets"] == true { object["facets"] = ["section", "priority"] }
    if let range = entry["installedSize"]?.arrayValue, range.count == 2 {
        object["numericFilters"] = .array([.string("installedSize:\(range[0]) TO \(range[1])")])
    }
    return .object(object)
}

func percentile(_ values: [Double], _ p: Double) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return 0 }
    let index = min(sorted.count - 1, Int((p * Double(sorted.count - 1)).rounded()))
    return sorted[index]
}

func loadQueries(_ path: String) throws -> JSONObject {
    let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
    return try JSON.parse(bytes).objectValue!
}

nonisolated(unsafe) var sink = 0

func runQueries(
    _ index: SearchIndex, _ queries: JSONObject, repetitions: Int, extra: JSONObject = [:]
) throws -> JSONObject {
    var out = JSONObject()
    var zeroHitTypos: [JSON] = []
    for (className, list) in queries {
        let entries = list.arrayValue ?? []
        var latencies: [Double] = []
        for entry in entries {
            var object = params(entry).objectValue!
            for (key, value) in extra { object[key] = value }
            let p = JSON.object(object)
            let warm = try index.search(p)
            if className.contains("typo"), warm["nbHits"]?.intValue == 0 {
                zeroHitTypos.append(entry["q"] ?? "")
            }
            for _ in 0..<repetitions {
                let t0 = now()
                // The response as bytes, ready to send (searchSerialized = search + serialization).
                let bytes = try index.searchSerialized(p)
                latencies.append(now() - t0)
                sink &+= bytes.count
            }
        }
        if ProcessInfo.processInfo.environment["BENCH_VERBOSE"] != nil {
            var perQuery: [(Double, String)] = []
            for (i, entry) in entries.enumerated() {
                let slice = latencies[(i * repetitions)..<((i + 1) * repetitions)]
                perQuery.append((slice.max() ?? 0, entry["q"]?.stringValue ?? ""))
            }
            for (ms, q) in perQuery.sorted(by: { $0.0 > $1.0 }).prefix(3) {
                FileHandle.standardError.write("\(className) \(q): max \(ms) ms\n".data(using: .utf8)!)
            }
        }
        out[className] = [
            "p50": .double(percentile(latencies, 0.5)), "p99": .double(percentile(latencies, 0.99)),
            "n": .int(Int64(latencies.count)),
        ]
    }
    return ["classes": .object(out), "zeroHitTypoQueries": .array(zeroHitTypos)]
}

let args = CommandLine.arguments
guard args.count >= 3 else {
    print(
        "usage: SearchBench build <records.json> <queries.json> <repetitions> [<store-dir>] | restart <queries.json> <store-dir>"
    )
    exit(2)
}

do {
    var result = JSONObject()
    switch args[1] {
    case "build":
        // The file is streamed in 1 MiB chunks (the build never holds the whole text).
        let size = (try FileManager.default.attributesOfItem(atPath: args[2])[.size] as? Int) ?? 0
        guard let file = FileHandle(forReadingAtPath: args[2]) else { throw CocoaError(.fileNoSuchFile) }
        let t0 = now()
        let index = try SearchIndex(
            name: "debian", settings: settings,
            jsonArrayChunks: {
                guard let data = try file.read(upToCount: 1 << 20), !data.isEmpty else { return nil }
                return [UInt8](data)
            }, sizeHint: size)
        let t1 = now()
        try file.close()
        result["records"] = .int(Int64(index.objectCount))
        result["jsonBytes"] = .int(Int64(size))
        result["buildMs"] = .double(t1 - t0)
        result["buildRecordsPerSecond"] = .double(Double(index.objectCount) / ((t1 - t0) / 1000))
        result["peakRSSAfterBuildMiB"] = .double(peakRSSMiB())
        let queries = try loadQueries(args[3])
        let repetitions = Int(args[4]) ?? 5
        let run = try runQueries(index, queries, repetitions: repetitions)
        for (key, value) in run { result[key] = value }
        if args.count > 5 {
            try? FileManager.default.removeItem(atPath: args[5])
            try FileManager.default.createDirectory(atPath: args[5], withIntermediateDirectories: true)
            let store = try openStore(args[5])
            let s0 = now()
            try store.save(index)
            result["storeBuildMs"] = .double(now() - s0)
        }
        result["peakRSSMiB"] = .double(peakRSSMiB())
    case "restart":
        let queries = try loadQueries(args[2])
        let t0 = now()
        let c0 = cpuNow()
        let store = try openStore(args[3])
        guard let index = try store.load(name: "debian") else {
            print("no stored index")
            exit(1)
        }
        let first = queries.values.first?.arrayValue?.first ?? ["q": "library"]
        let response = try index.search(params(first))
        let t1 = now()
        result["firstAnswerAfterRestartMs"] = .double(t1 - t0)
        result["cpuMs"] = .double(cpuNow() - c0)
        result["firstAnswerHits"] = response["nbHits"] ?? .null
        result["peakRSSMiB"] = .double(peakRSSMiB())
    case "copy":
        // copy <from-store-dir> <to-store-dir>: the store write alone, from an index loaded from a plain store.
        let from = try IndexStore(directory: args[2])
        guard let index = try from.load(name: "debian") else {
            print("no stored index")
            exit(1)
        }
        try? FileManager.default.removeItem(atPath: args[3])
        try FileManager.default.createDirectory(atPath: args[3], withIntermediateDirectories: true)
        // Opening a new store derives its key once (encrypted) — a start-up cost; then the save itself.
        let o0 = now()
        let oc0 = cpuNow()
        let store = try openStore(args[3])
        result["storeOpenMs"] = .double(now() - o0)
        result["storeOpenCPUMs"] = .double(cpuNow() - oc0)
        let s0 = now()
        let c0 = cpuNow()
        try store.save(index)
        result["storeBuildMs"] = .double(now() - s0)
        result["cpuMs"] = .double(cpuNow() - c0)
        result["encrypted"] = .bool(ProcessInfo.processInfo.environment["MG_BENCH_STORE_KEY"] != nil)
    case "features":
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: args[2])))
        let queries = try loadQueries(args[3])
        let repetitions = Int(args[4]) ?? 5
        let t0 = now()
        let plain = try SearchIndex(name: "debian", settings: settings, jsonArray: bytes)
        result["buildMs"] = .double(now() - t0)
        result["rssAfterBuildMiB"] = .double(peakRSSMiB())
        var variants = JSONObject()
        variants["baseline"] = try runQueries(plain, queries, repetitions: repetitions)["classes"]
        let r0 = peakRSSMiB()
        variants["ignorePlurals_en"] = try runQueries(
            plain, queries, repetitions: repetitions, extra: ["ignorePlurals": ["en"]])["classes"]
        result["rssGrowthFirstPluralUseMiB"] = .double(peakRSSMiB() - r0)
        variants["removeStopWords_en"] = try runQueries(
            plain, queries, repetitions: repetitions, extra: ["removeStopWords": ["en"]])["classes"]
        variants["plurals_and_stopWords_en"] = try runQueries(
            plain, queries, repetitions: repetitions,
            extra: ["ignorePlurals": ["en"], "removeStopWords": ["en"]]
        )["classes"]
        variants["ignorePlurals_all4"] = try runQueries(
            plain, queries, repetitions: repetitions, extra: ["ignorePlurals": ["en", "fr", "de", "es"]])[
                "classes"]
        // 200 rules: contains-patterns on words of the query set and of the corpus, with promote, hide,
        // userData and a filter consequence; none on most queries.
        let words = [
            "library", "python", "editor", "kernel", "game", "server", "font", "perl", "java", "network",
            "audio", "image", "database", "firmware", "compiler", "ruby", "gnome", "plugin", "tool", "data",
        ]
        var rules: [JSON] = []
        for i in 0..<200 {
            let word = i < words.count ? words[i] : "zzword\(i)"
            rules.append([
                "objectID": .string("rule-\(i)"),
                "conditions": [
                    ["pattern": .string(word), "anchoring": i % 2 == 0 ? "contains" : "startsWith"]
                ],
                "consequence": [
                    "userData": ["rule": .int(Int64(i))], "promote": [["objectID": "0ad", "position": 0]],
                    "hide": [["objectID": "vim"]],
                ],
            ])
        }
        let r1 = now()
        let ruled = try SearchIndex(name: "debian", settings: settings, rules: rules, jsonArray: bytes)
        result["buildWithRulesMs"] = .double(now() - r1)
        result["rulesJSONBytes"] = .int(Int64(JSON.array(rules).serializedBytes().count))
        variants["rules_200"] = try runQueries(ruled, queries, repetitions: repetitions)["classes"]
        result["variants"] = .object(variants)
        result["pluralTableForms"] = .int(
            Int64(["en", "fr", "de", "es"].map { plain.pluralFormCount(language: $0) }.reduce(0, +)))
        result["peakRSSMiB"] = .double(peakRSSMiB())
    case "profile":
        // profile <queries.json> <store-dir> <iterations> [class]: loops over the queries (for perf/callgrind).
        let queries = try loadQueries(args[2])
        let store = try openStore(args[3])
        guard let index = try store.load(name: "debian") else { exit(1) }
        let iterations = Int(args[4]) ?? 100
        let only = args.count > 5 ? args[5] : nil
        var list: [JSON] = []
        for (className, entries) in queries where only == nil || only == className {
            list += (entries.arrayValue ?? []).map(params)
        }
        let t0 = now()
        for _ in 0..<iterations {
            if ProcessInfo.processInfo.environment["PROFILE_SEARCH_JSON"] != nil {
                // search() then serialization, as a caller of the JSON API does.
                for p in list { sink &+= try index.search(p).serializedBytes().count }
            } else {
                for p in list { sink &+= try index.searchSerialized(p).count }
            }
        }
        result["msPerQuery"] = .double((now() - t0) / Double(iterations * list.count))
    case "dump":
        // dump <queries.json> <store-dir>: every response (processingTimeMS removed), one per line.
        let queries = try loadQueries(args[2])
        let store = try openStore(args[3])
        guard let index = try store.load(name: "debian") else { exit(1) }
        for (_, entries) in queries {
            for entry in entries.arrayValue ?? [] {
                var variants = [params(entry)]
                var more = params(entry).objectValue!
                more["attributesToSnippet"] = ["description:5"]
                more["getRankingInfo"] = true
                more["page"] = 1
                variants.append(.object(more))
                for p in variants {
                    guard case .object(var response) = try index.search(p),
                        case .object(var fast) = try JSON.parse(index.searchSerialized(p))
                    else { continue }
                    response["processingTimeMS"] = nil
                    fast["processingTimeMS"] = nil
                    let a = JSON.object(response).serialized()
                    if a != JSON.object(fast).serialized() { print("MISMATCH searchSerialized") }
                    print(a)
                }
            }
        }
        exit(0)
    default:
        print("unknown mode \(args[1])")
        exit(2)
    }
    print(JSON.object(result).serialized())
} catch {
    print("error: \(error)")
    exit(1)
}
