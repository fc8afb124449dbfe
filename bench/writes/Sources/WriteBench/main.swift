// Incremental writes on the Debian corpus (issue 14), the way the gateway's writer does them: the new index
// version from the current one (SearchIndex.applying), the change stored in one SQLite transaction
// (synchronous=FULL), then the version installed. Measures:
//  - single: one record replaced (a new word in its description) or added, until a search for that word
//    finds it (apply + store + first search), over N writes;
//  - batch: 10,000 new records in one write (apply + store) next to a manual build of the same 10,000
//    records (SearchIndex from records + IndexStore.save), rounds alternating, medians compared.
//
// usage: WriteBench <records.json> <store-dir> <single-writes> <rounds>
import Foundation
import JSONCore
import SearchEngine
import Storage

let settings: JSON = [
    "searchableAttributes": ["name", "description", "maintainer", "_tags"],
    "attributesForFaceting": ["section", "priority", "searchable(maintainer)"],
    "customRanking": ["asc(installedSize)"],
]

func now() -> Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e6 }

func percentile(_ values: [Double], _ p: Double) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return 0 }
    return sorted[min(sorted.count - 1, Int((p * Double(sorted.count - 1)).rounded()))]
}

func stats(_ values: [Double]) -> JSON {
    [
        "p50": .double((percentile(values, 0.5) * 100).rounded() / 100),
        "p95": .double((percentile(values, 0.95) * 100).rounded() / 100),
        "max": .double(((values.max() ?? 0) * 100).rounded() / 100),
    ]
}

let args = CommandLine.arguments
guard args.count >= 5, let singles = Int(args[3]), let rounds = Int(args[4]) else {
    FileHandle.standardError.write(
        Data("usage: WriteBench <records.json> <store-dir> <single-writes> <rounds>\n".utf8))
    exit(2)
}
let records = try JSON.parse([UInt8](Data(contentsOf: URL(fileURLWithPath: args[1])))).arrayValue ?? []
let store = try IndexStore(directory: args[2])

var t0 = now()
var index = try store.build(name: "debian", settings: settings, synonyms: [], records: records)
let fullBuildMs = now() - t0

/// One write as the gateway's writer makes it: apply, store (one transaction), install.
func write(_ w: IndexWrite, to current: SearchIndex) throws -> (SearchIndex, apply: Double, store: Double) {
    let start = now()
    let (next, change) = current.applying(w)
    let applied = now()
    let version = try store.write { tx in
        try tx.apply(change, to: next, expectedVersion: current.storeVersion)
    }
    return (next.stored(as: version), applied - start, now() - applied)
}

var rng = SystemRandomNumberGenerator()
var applyMs: [Double] = []
var storeMs: [Double] = []
var visibleMs: [Double] = []
for i in 0..<singles {
    var record: JSONObject
    if i % 4 == 3 {
        record = records[Int.random(in: 0..<records.count, using: &rng)].objectValue!
        record["objectID"] = .string("new-\(i)")
    } else {
        record = records[Int.random(in: 0..<records.count, using: &rng)].objectValue!
    }
    let word = "zzmark\(i)q"
    record["description"] = .string((record["description"]?.stringValue ?? "") + " " + word)
    var w = IndexWrite()
    w.upserts = [.object(record)]
    let start = now()
    let (next, apply, stored) = try write(w, to: index)
    index = next
    let hits =
        try index.search([
            // Without typos: the previous writes' words (zzmark0q, zzmark1q, …) are one typo apart.
            "query": .string(word), "hitsPerPage": 1, "typoTolerance": false,
        ])["nbHits"]?.intValue ?? 0
    visibleMs.append(now() - start)
    guard hits == 1 else { fatalError("write \(i) not searchable: \(hits) hits") }
    applyMs.append(apply)
    storeMs.append(stored)
}

// 10,000 new records: the batch on top of the 63,666, and a manual build of the same 10,000.
let batch: [JSON] = (0..<10_000).map { i in
    var o = records[i * 6 % records.count].objectValue!
    o["objectID"] = .string("batch-\(i)")
    o["name"] = .string("batchpkg\(i)")
    return .object(o)
}
var batchApply: [Double] = []
var batchStore: [Double] = []
var batchTotal: [Double] = []
var buildIndex: [Double] = []
var buildStore: [Double] = []
var buildTotal: [Double] = []
for round in 0..<rounds {
    for kind in round % 2 == 0 ? ["batch", "build"] : ["build", "batch"] {
        if kind == "batch" {
            var w = IndexWrite()
            w.upserts = batch
            let base = index
            let (next, apply, stored) = try write(w, to: base)
            batchApply.append(apply)
            batchStore.append(stored)
            batchTotal.append(apply + stored)
            guard next.objectCount == base.objectCount + 10_000 else { fatalError("batch lost records") }
            // Back to the index without the batch for the next round (not measured).
            var undo = IndexWrite()
            undo.deletes = (0..<10_000).map { "batch-\($0)" }
            index = try write(undo, to: next).0
        } else {
            t0 = now()
            let built = SearchIndex(name: "manual", settings: settings, records: batch)
            let indexed = now()
            _ = try store.save(built)
            let done = now()
            buildIndex.append(indexed - t0)
            buildStore.append(done - indexed)
            buildTotal.append(done - t0)
        }
    }
}

let result: JSON = [
    "records": .int(Int64(records.count)),
    "fullBuildMs": .double(fullBuildMs.rounded()),
    "single": [
        "writes": .int(Int64(singles)), "applyMs": stats(applyMs), "storeMs": stats(storeMs),
        "searchableAfterMs": stats(visibleMs),
    ],
    "batch10k": [
        "applyMs": stats(batchApply), "storeMs": stats(batchStore), "totalMs": stats(batchTotal),
    ],
    "manualBuild10k": [
        "indexMs": stats(buildIndex), "storeMs": stats(buildStore), "totalMs": stats(buildTotal),
    ],
    "batchOverBuild": .double(
        (percentile(batchTotal, 0.5) / max(0.001, percentile(buildTotal, 0.5)) * 100).rounded() / 100),
]
print(result.serialized())
