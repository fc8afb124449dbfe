import CSQLite
import Foundation
import Testing

@testable import Storage

/// A key with the cheap test cost of scrypt.
private func key(_ secret: String = "correct horse battery staple") throws -> StoreEncryption {
    try StoreEncryption(secret: secret, label: "test.storeEncryptionKey", cost: .testing)
}

private func bytes(_ path: String) -> [UInt8] {
    (try? [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))) ?? []
}

private func contains(_ haystack: [UInt8], _ needle: String) -> Bool {
    let n = Array(needle.utf8)
    guard haystack.count >= n.count, let first = n.first else { return false }
    var i = 0
    while i <= haystack.count - n.count {
        if haystack[i] == first && Array(haystack[i..<(i + n.count)]) == n { return true }
        i += 1
    }
    return false
}

/// Flips one bit of the byte at `offset` of the file at `path`.
private func flip(_ path: String, at offset: Int) throws {
    let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
    defer { try? handle.close() }
    try handle.seek(toOffset: UInt64(offset))
    let byte = try #require(try handle.read(upToCount: 1)).first!
    try handle.seek(toOffset: UInt64(offset))
    try handle.write(contentsOf: [byte ^ 0x01])
}

private let marker = "PLAINTEXT-MARKER-7f3a"

/// Rows whose text would be found in a plaintext file: `count` rows of ~1 KB, each with the marker.
private func fill(_ db: Database, count: Int, from start: Int = 0) throws {
    try db.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
    try db.transaction {
        for i in start..<(start + count) {
            try db.run(
                "INSERT INTO t (id, body) VALUES (?, ?)",
                [.integer(Int64(i)), .text("\(marker) \(i) " + String(repeating: "x", count: 1000))])
        }
    }
}

private func count(_ db: Database) throws -> Int64? {
    try db.scalar("SELECT count(*) FROM t")?.int64
}

/// Copies the database and its WAL as they are now (as a crash would leave them).
private func snapshot(_ path: String, to copy: String) throws {
    for suffix in ["", "-wal"] where FileManager.default.fileExists(atPath: path + suffix) {
        try? FileManager.default.removeItem(atPath: copy + suffix)
        try FileManager.default.copyItem(atPath: path + suffix, toPath: copy + suffix)
    }
}

private func expectAuthenticationFailure(_ body: () throws -> Void) {
    do {
        try body()
        Issue.record("expected an authentication failure, got none")
    } catch let error as SQLiteError {
        #expect(error.isAuthenticationFailure, "\(error)")
        #expect(error.description.contains("failed authentication"))
    } catch {
        Issue.record("expected an authentication failure, got \(error)")
    }
}

@Suite struct EncryptionTests {
    @Test func roundTripLeavesNoPlaintextOnDisk() throws {
        let dir = try TempDir()
        defer { dir.cleanup() }
        let path = dir.path("s.sqlite")
        let k = try key()
        do {
            let pool = try DatabasePool(path: path, options: DatabaseOptions(encryption: k), readers: 2)
            try pool.write { try fill($0, count: 300) }
            #expect(try pool.read { try count($0) } == 300)
            // While open: the WAL holds the rows, the database file its first pages.
            #expect(!contains(bytes(path + "-wal"), marker))
            #expect(!contains(bytes(path), marker))
            try pool.checkpoint()
            #expect(!contains(bytes(path), marker))
            pool.close()
        }
        let raw = bytes(path)
        #expect(raw.starts(with: Array("MG encrypted v1".utf8)))
        #expect(!contains(raw, "SQLite format 3"))
        #expect(!contains(raw, marker))
        #expect(!contains(raw, "CREATE TABLE"))
        let names = try FileManager.default.contentsOfDirectory(atPath: dir.url.path)
        #expect(!names.contains { $0.hasSuffix("-journal") })

        let again = try DatabasePool(path: path, options: DatabaseOptions(encryption: try key()), readers: 1)
        defer { again.close() }
        #expect(try again.read { try count($0) } == 300)
        let body = try again.read { try $0.scalar("SELECT body FROM t WHERE id = 123") }?.string
        #expect(body?.hasPrefix("\(marker) 123 ") == true)
        #expect(try again.read { try $0.scalar("PRAGMA integrity_check") } == .text("ok"))
    }

    @Test func wrongKeyIsRefusedBeforeAnyQuery() throws {
        let dir = try TempDir()
        defer { dir.cleanup() }
        let path = dir.path("s.sqlite")
        do {
            let db = try Database(path: path, options: DatabaseOptions(encryption: try key("first secret")))
            try fill(db, count: 3)
            db.close()
        }
        #expect {
            _ = try Database(path: path, options: DatabaseOptions(encryption: try key("second secret")))
        } throws: { error in
            guard let e = error as? StoreEncryptionError else { return false }
            return e.kind == .wrongKey && e.description.contains("test.storeEncryptionKey does not open")
                && !e.description.contains("second secret")
        }
        #expect {
            _ = try Database(path: path)
        } throws: { ($0 as? StoreEncryptionError)?.kind == .encryptedWithoutKey }
    }

    @Test func plaintextStoreWithAKeyIsRefused() throws {
        let dir = try TempDir()
        defer { dir.cleanup() }
        let path = dir.path("p.sqlite")
        do {
            let db = try Database(path: path)
            try fill(db, count: 2)
            db.close()
        }
        #expect {
            _ = try Database(path: path, options: DatabaseOptions(encryption: try key()))
        } throws: { error in
            guard let e = error as? StoreEncryptionError else { return false }
            return e.kind == .notEncrypted && e.description.contains("mirrorgate rekey")
        }
        // Untouched: still a readable plaintext database.
        let db = try Database(path: path)
        #expect(try count(db) == 2)
    }

    @Test func flippedByteInAPageIsAnError() throws {
        let dir = try TempDir()
        defer { dir.cleanup() }
        let path = dir.path("s.sqlite")
        do {
            let db = try Database(path: path, options: DatabaseOptions(encryption: try key()))
            try fill(db, count: 200)
            try db.checkpoint()
            db.close()
        }
        let pages = (bytes(path).count - StoreHeader.size) / StoreHeader.pageSize
        #expect(pages > 20)
        // Page 10: in the ciphertext, in the nonce, in the tag; and page 1 (the schema).
        let page10 = StoreHeader.size + 9 * StoreHeader.pageSize
        for offset in [
            page10 + 100, page10 + StoreHeader.usable + 3, page10 + StoreHeader.pageSize - 1,
            StoreHeader.size + 50,
        ] {
            let copy = dir.path("copy-\(offset).sqlite")
            try FileManager.default.copyItem(atPath: path, toPath: copy)
            try flip(copy, at: offset)
            expectAuthenticationFailure {
                let db = try Database(path: copy, options: DatabaseOptions(encryption: try key()))
                defer { db.close() }
                _ = try db.query("SELECT id, length(body) FROM t")
            }
        }
        // Two pages swapped: each is authentic, but not at that place.
        let swapped = dir.path("swapped.sqlite")
        var raw = bytes(path)
        let a = StoreHeader.size + 4 * StoreHeader.pageSize
        let b = StoreHeader.size + 5 * StoreHeader.pageSize
        let pageA = Array(raw[a..<(a + StoreHeader.pageSize)])
        raw.replaceSubrange(a..<(a + StoreHeader.pageSize), with: raw[b..<(b + StoreHeader.pageSize)])
        raw.replaceSubrange(b..<(b + StoreHeader.pageSize), with: pageA)
        try Data(raw).write(to: URL(fileURLWithPath: swapped))
        expectAuthenticationFailure {
            let db = try Database(path: swapped, options: DatabaseOptions(encryption: try key()))
            defer { db.close() }
            _ = try db.query("SELECT id, length(body) FROM t")
        }
        // A flipped byte in the header's wrapped key: refused as a wrong key, before SQLite reads.
        let header = dir.path("header.sqlite")
        try FileManager.default.copyItem(atPath: path, toPath: header)
        try flip(header, at: 90)
        #expect {
            _ = try Database(path: header, options: DatabaseOptions(encryption: try key()))
        } throws: { ($0 as? StoreEncryptionError)?.kind == .wrongKey }
    }

    /// A store with committed transactions still in its WAL, as a crash leaves it: `path` and `path-wal`.
    private func crashedStore(_ dir: TempDir, transactions: Int) throws -> String {
        let path = dir.path("live.sqlite")
        let copy = dir.path("crashed.sqlite")
        let db = try Database(
            path: path, options: DatabaseOptions(walAutocheckpointPages: 0, encryption: try key()))
        try db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
        for i in 0..<transactions { try fill(db, count: 2, from: i * 2) }
        try snapshot(path, to: copy)
        db.close()
        return copy
    }

    @Test func flippedByteInAWALFrameIsAnError() throws {
        let dir = try TempDir()
        defer { dir.cleanup() }
        let crashed = try crashedStore(dir, transactions: 10)
        let wal = bytes(crashed + "-wal")
        let frame = 24 + StoreHeader.pageSize
        let frames = (wal.count - 32) / frame
        #expect(frames >= 10)
        #expect(!contains(wal, marker))
        // The crashed copy recovers whole.
        do {
            let ok = dir.path("ok.sqlite")
            try snapshot(crashed, to: ok)
            let db = try Database(path: ok, options: DatabaseOptions(encryption: try key()))
            #expect(try count(db) == 20)
            db.close()
        }
        // Frame 3 of many: its page, its nonce, its page number, its salt, its masked checksum.
        let start = 32 + 2 * frame
        for offset in [
            start + 24 + 500, start + 24 + StoreHeader.usable + 1, start + 2, start + 9, start + 20,
        ] {
            let copy = dir.path("flip-\(offset).sqlite")
            try snapshot(crashed, to: copy)
            try flip(copy + "-wal", at: offset)
            expectAuthenticationFailure {
                let db = try Database(path: copy, options: DatabaseOptions(encryption: try key()))
                defer { db.close() }
                _ = try db.query("SELECT id, length(body) FROM t")
            }
        }
    }

    @Test func flippedByteInTheWALOfAnOpenStoreIsAnError() throws {
        let dir = try TempDir()
        defer { dir.cleanup() }
        let path = dir.path("s.sqlite")
        let pool = try DatabasePool(
            path: path, options: DatabaseOptions(walAutocheckpointPages: 0, encryption: try key()), readers: 1
        )
        defer { pool.close() }
        try pool.write { try fill($0, count: 50) }
        // Every page now lives in the WAL; flip a byte of the last frame's page (the newest version of its
        // page, which the reader takes from the WAL through the index: no recovery involved).
        try flip(path + "-wal", at: bytes(path + "-wal").count - 2000)
        expectAuthenticationFailure {
            try pool.read { db in
                try db.execute("PRAGMA cache_size = 0")
                _ = try db.query("SELECT id, length(body) FROM t")
            }
        }
    }

    @Test func aTornLastWALFrameIsIgnoredAsSQLiteWould() throws {
        let dir = try TempDir()
        defer { dir.cleanup() }
        let crashed = try crashedStore(dir, transactions: 3)
        let wal = bytes(crashed + "-wal")
        // The last frame: the commit of the third transaction (rows 4 and 5).
        try flip(crashed + "-wal", at: wal.count - 100)
        let db = try Database(path: crashed, options: DatabaseOptions(encryption: try key()))
        defer { db.close() }
        #expect(try count(db) == 4)
        #expect(try db.scalar("PRAGMA integrity_check") == .text("ok"))
    }

    @Test func bigTransactionsSpillAndRewriteFramesWithoutJournals() throws {
        let dir = try TempDir()
        defer { dir.cleanup() }
        let path = dir.path("s.sqlite")
        let k = try key()
        do {
            let db = try Database(
                path: path, options: DatabaseOptions(walAutocheckpointPages: 0, encryption: k))
            try db.execute("PRAGMA cache_size = 10")
            try db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
            // One transaction far bigger than the cache, touching the same pages again and again: SQLite
            // spills frames, overwrites them in place and rewrites their checksums before the commit.
            try db.transaction {
                for round in 0..<4 {
                    for i in 0..<400 {
                        try db.run(
                            "INSERT OR REPLACE INTO t (id, body) VALUES (?, ?)",
                            [
                                .integer(Int64(i)),
                                .text("\(marker) r\(round) " + String(repeating: "y", count: 700)),
                            ])
                    }
                }
            }
            #expect(k.rewrittenFrames.load(ordering: .relaxed) > 0)
            // A sort bigger than memory would spill to a temporary file without temp_store=MEMORY.
            let sorted = try db.query("SELECT body FROM t ORDER BY body DESC, id")
            #expect(sorted.count == 400)
            #expect(!contains(bytes(path + "-wal"), marker))
            try snapshot(path, to: dir.path("crashed.sqlite"))
            db.close()
        }
        for name in ["s.sqlite", "crashed.sqlite"] {
            let db = try Database(path: dir.path(name), options: DatabaseOptions(encryption: k))
            #expect(try count(db) == 400)
            #expect(
                try db.scalar("SELECT count(*) FROM t WHERE body LIKE ?", [.text("% r3 %")]) == .integer(400))
            #expect(try db.scalar("PRAGMA integrity_check") == .text("ok"))
            db.close()
        }
        let names = try FileManager.default.contentsOfDirectory(atPath: dir.url.path)
        #expect(!names.contains { $0.hasSuffix("-journal") || $0.hasPrefix("etilqs") })
    }

    @Test func theVFSRefusesRollbackJournals() throws {
        let dir = try TempDir()
        defer { dir.cleanup() }
        let path = dir.path("s.sqlite")
        let k = try key()
        let db = try Database(path: path, options: DatabaseOptions(encryption: k))
        defer { db.close() }
        try fill(db, count: 3)
        // Leaving WAL mode for a journal mode that writes page images to a file is refused.
        #expect(throws: SQLiteError.self) {
            try db.execute("PRAGMA journal_mode = DELETE")
            try db.run("INSERT INTO t (id, body) VALUES (?, ?)", [.integer(99), .text("x")])
        }
        #expect(k.takeRefusal()?.contains("rollback journal") == true)
    }
}

@Suite struct RekeyTests {
    private func store(_ dir: TempDir, key k: StoreEncryption?) throws -> String {
        let path = dir.path("r.sqlite")
        let db = try Database(path: path, options: DatabaseOptions(encryption: k))
        try fill(db, count: 150)
        try db.execute("CREATE INDEX t_body ON t (body)")
        db.close()
        return path
    }

    private func expectContent(_ path: String, key k: StoreEncryption?) throws {
        let db = try Database(path: path, options: DatabaseOptions(encryption: k))
        defer { db.close() }
        #expect(try count(db) == 150)
        #expect(try db.scalar("PRAGMA integrity_check") == .text("ok"))
        #expect(try db.scalar("SELECT body FROM t WHERE id = 77")?.string?.hasPrefix("\(marker) 77 ") == true)
    }

    @Test func rotatesToANewKey() throws {
        let dir = try TempDir()
        defer { dir.cleanup() }
        let old = try key("old secret")
        let new = try key("new secret")
        let path = try store(dir, key: old)
        let before = bytes(path)
        try StoreRekey.rekey(path: path, from: old, to: new)
        try expectContent(path, key: new)
        #expect(try StoreRekey.opens(path, with: new))
        #expect(try !StoreRekey.opens(path, with: try key("old secret")))
        let after = bytes(path)
        #expect(!contains(after, marker))
        // A new salt and data key: nothing of the old header or pages survives.
        #expect(Array(after[32..<124]) != Array(before[32..<124]))
        let names = try FileManager.default.contentsOfDirectory(atPath: dir.url.path)
        #expect(names.sorted() == ["r.sqlite"])
    }

    @Test func encryptsAPlaintextStoreAndDecryptsItAgain() throws {
        let dir = try TempDir()
        defer { dir.cleanup() }
        let k = try key()
        let path = try store(dir, key: nil)
        #expect(try StoreFileKind.of(path) == .plaintext)
        try StoreRekey.rekey(path: path, from: nil, to: k)
        #expect(try StoreFileKind.of(path) == .encrypted)
        #expect(!contains(bytes(path), marker))
        try expectContent(path, key: k)
        try StoreRekey.rekey(path: path, from: k, to: nil)
        #expect(try StoreFileKind.of(path) == .plaintext)
        try expectContent(path, key: nil)
    }

    @Test(arguments: StoreRekey.Step.allCases)
    func aCrashLeavesOneOfTheTwoStoresWhole(after step: StoreRekey.Step) throws {
        let dir = try TempDir()
        defer { dir.cleanup() }
        let old = try key("old secret")
        let new = try key("new secret")
        let path = try store(dir, key: old)
        #expect(throws: StoreRekey.SimulatedCrash.self) {
            try StoreRekey.rekey(path: path, from: old, to: new, crashAfter: step)
        }
        let renamed = step == .renamed
        #expect(try StoreRekey.opens(path, with: renamed ? new : old))
        #expect(try !StoreRekey.opens(path, with: renamed ? old : new))
        try expectContent(path, key: renamed ? new : old)
        // Running the command again finishes the job and removes the leftovers.
        if !renamed { try StoreRekey.rekey(path: path, from: old, to: new) }
        try expectContent(path, key: new)
        let names = try FileManager.default.contentsOfDirectory(atPath: dir.url.path)
        #expect(!names.contains { $0.contains(".rekey") })
    }

    @Test func theDataDirectoryLockKeepsARekeyAwayFromARunningGateway() throws {
        let dir = try TempDir()
        defer { dir.cleanup() }
        do {
            let gateway = try DataDirectoryLock(directory: dir.url.path, exclusive: false)
            let second = try DataDirectoryLock(directory: dir.url.path, exclusive: false)
            #expect(throws: StoreEncryptionError.self) {
                _ = try DataDirectoryLock(directory: dir.url.path, exclusive: true)
            }
            withExtendedLifetime((gateway, second)) {}
        }
        do {
            let rekey = try DataDirectoryLock(directory: dir.url.path, exclusive: true)
            #expect(throws: StoreEncryptionError.self) {
                _ = try DataDirectoryLock(directory: dir.url.path, exclusive: false)
            }
            withExtendedLifetime(rekey) {}
        }
        // Released with the objects.
        _ = try DataDirectoryLock(directory: dir.url.path, exclusive: true)
    }
}
