// The durable append of an offline OData write, in process, against raw SQLite with the same durability.
//
//   QueueBench DIR N ROUNDS
//   QB_ONLY=plain|encrypted QueueBench DIR N ROUNDS     (one kind of append only: for profiling)
//
// Per round (order alternating), N transactions of each kind on its own fresh file in DIR, one JSON line
// per kind and round: {"kind", "round", "n", "perSec", "p50ms", "p99ms"}.
// - raw: the SQLite C API directly: WAL, synchronous=FULL, BEGIN IMMEDIATE; one ~1 KB row; COMMIT.
// - append: the shape of ODataRequestQueue.append through the Storage module (DatabasePool writer,
//   `PRAGMA synchronous=FULL` for the transaction, then back to NORMAL), with the mirror's row (an entity
//   table like the mirror's: `_json`, `_etag`, `_dr` and typed, indexed property columns) and the queue's
//   row (the `_mg_queue` schema and insert) in one immediate transaction; as in the gateway, the ~1 KB entity
//   is written twice (the mirror's `_json` and the queued body).
// - append-encrypted: the same on a store encrypted as with `storeEncryptionKey` (key derived before the
//   timed loop, as at the gateway's start).
import CSQLite
import Foundation
import Storage

let arguments = CommandLine.arguments
guard arguments.count == 4, let n = Int(arguments[2]), let rounds = Int(arguments[3]), n > 0, rounds > 0
else {
    FileHandle.standardError.write(Data("usage: QueueBench DIR N ROUNDS\n".utf8))
    exit(2)
}
let dir = arguments[1]

/// ~1 KB of entity JSON (the queued body) and the same row's JSON in the mirror.
func entityJSON(_ i: Int) -> String {
    let pad = String(repeating: "x", count: 900)
    return #"{"ID":-\#(i),"Name":"item \#(i)","Category":"tools","Price":12.50,"Note":"\#(pad)"}"#
}

func percentile(_ xs: [Double], _ p: Double) -> Double {
    let s = xs.sorted()
    return s[min(s.count - 1, Int((p / 100 * Double(s.count - 1)).rounded()))]
}

func report(_ kind: String, _ round: Int, _ ms: [Double], _ seconds: Double) {
    let line =
        #"{"kind":"\#(kind)","round":\#(round),"n":\#(ms.count),"perSec":\#(Double(ms.count) / seconds),"#
        + #""p50ms":\#(percentile(ms, 50)),"p99ms":\#(percentile(ms, 99))}"#
    print(line)
}

func fresh(_ name: String) -> String {
    let path = dir + "/" + name
    for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
    return path
}

func check(_ rc: Int32, _ db: OpaquePointer?, _ what: String) {
    if rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW {
        let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "?"
        FileHandle.standardError.write(Data("\(what): \(rc) \(message)\n".utf8))
        exit(1)
    }
}

func runRaw(_ round: Int) {
    var db: OpaquePointer?
    check(
        sqlite3_open_v2(fresh("raw.sqlite"), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nil), db, "open"
    )
    defer { sqlite3_close_v2(db) }
    for pragma in ["PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL"] {
        check(sqlite3_exec(db, pragma, nil, nil, nil), db, pragma)
    }
    check(
        sqlite3_exec(db, "CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT NOT NULL)", nil, nil, nil), db,
        "create")
    var insert: OpaquePointer?
    check(sqlite3_prepare_v2(db, "INSERT INTO t (body) VALUES (?)", -1, &insert, nil), db, "prepare")
    defer { sqlite3_finalize(insert) }
    var ms: [Double] = []
    ms.reserveCapacity(n)
    let start = DispatchTime.now().uptimeNanoseconds
    for i in 0..<n {
        let body = entityJSON(i)
        let a = DispatchTime.now().uptimeNanoseconds
        check(sqlite3_exec(db, "BEGIN IMMEDIATE", nil, nil, nil), db, "begin")
        sqlite3_bind_text(insert, 1, body, -1, mg_sqlite_transient())
        check(sqlite3_step(insert), db, "insert")
        sqlite3_reset(insert)
        check(sqlite3_exec(db, "COMMIT", nil, nil, nil), db, "commit")
        ms.append(Double(DispatchTime.now().uptimeNanoseconds - a) / 1e6)
    }
    report("raw", round, ms, Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
}

func runAppend(_ round: Int, encrypted: Bool = false) throws {
    let encryption = encrypted ? try StoreEncryption(secret: "bench store key 0123", label: "bench") : nil
    let pool = try DatabasePool(
        path: fresh(encrypted ? "append-encrypted.sqlite" : "append.sqlite"),
        options: DatabaseOptions(synchronous: .normal, encryption: encryption), readers: 4)
    try pool.write { db in
        try db.execute(
            """
            CREATE TABLE "Items" ("_json" TEXT NOT NULL, "_etag" TEXT, "_dr" TEXT NOT NULL, "ID" INTEGER PRIMARY KEY,
              "Name" TEXT, "Category" TEXT, "Price" REAL);
            CREATE INDEX "_mg_ix_Items_Name" ON "Items" ("Name");
            CREATE INDEX "_mg_ix_Items_Category" ON "Items" ("Category");
            CREATE TABLE "_mg_queue" (id INTEGER PRIMARY KEY AUTOINCREMENT,
              entitySet TEXT NOT NULL, method TEXT NOT NULL, url TEXT NOT NULL, body BLOB NOT NULL,
              contentType TEXT, authorization TEXT, ifMatch TEXT, localKey TEXT, gatewayRoot TEXT NOT NULL,
              requestID TEXT NOT NULL, firstSent TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,
              createdAt TEXT NOT NULL, sentAt TEXT);
            """)
    }
    var ms: [Double] = []
    ms.reserveCapacity(n)
    let start = DispatchTime.now().uptimeNanoseconds
    for i in 0..<n {
        let json = entityJSON(i)
        let a = DispatchTime.now().uptimeNanoseconds
        try pool.write { db in
            try db.execute("PRAGMA synchronous=FULL")
            defer { try? db.execute("PRAGMA synchronous=NORMAL") }
            try db.transaction(.immediate) {
                try db.run(
                    #"INSERT OR REPLACE INTO "Items" ("_json", "_etag", "_dr", "ID", "Name", "Category", "Price") VALUES (?, ?, ?, ?, ?, ?, ?)"#,
                    [
                        .text(json), .null, .text("local"), .integer(Int64(-i - 1)), .text("item \(i)"),
                        .text("tools"), .real(12.5),
                    ])
                try db.run(
                    """
                    INSERT INTO "_mg_queue" (entitySet, method, url, body, contentType, authorization, ifMatch,
                      localKey, gatewayRoot, requestID, firstSent, createdAt) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)
                    """,
                    [
                        .text("Items"), .text("POST"), .text("Items"), .blob(Array(json.utf8)),
                        .text("application/json"), .null, .null, .text("(-\(i + 1))"),
                        .text("http://127.0.0.1:8080/odata/bench/"), .text(UUID().uuidString.lowercased()),
                        .text("Tue, 24 Nov 2026 10:00:00 GMT"), .text("2026-11-24T10:00:00Z"),
                    ])
            }
        }
        ms.append(Double(DispatchTime.now().uptimeNanoseconds - a) / 1e6)
    }
    report(
        encrypted ? "append-encrypted" : "append", round, ms,
        Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
    pool.close()
}

if let only = ProcessInfo.processInfo.environment["QB_ONLY"] {
    for round in 1...rounds { try runAppend(round, encrypted: only == "encrypted") }
    exit(0)
}
for round in 1...rounds {
    if round % 2 == 1 {
        runRaw(round)
        try runAppend(round)
        try runAppend(round, encrypted: true)
    } else {
        try runAppend(round, encrypted: true)
        try runAppend(round)
        runRaw(round)
    }
}
