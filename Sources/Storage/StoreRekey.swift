import CSQLite

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// What a store file is, read from its first bytes.
public enum StoreFileKind: Sendable, Equatable {
    /// No file, or an empty one.
    case missing
    /// A plaintext SQLite database.
    case plaintext
    /// An encrypted store (see ``StoreEncryption``).
    case encrypted
    /// Anything else.
    case unknown

    /// The kind of the file at `path`.
    public static func of(_ path: String) throws -> StoreFileKind {
        let prefix = try StoreFile.readPrefix(path, count: StoreHeader.magic.count)
        if prefix.isEmpty { return .missing }
        if prefix == StoreHeader.magic { return .encrypted }
        if prefix == StoreHeader.sqliteMagic { return .plaintext }
        return .unknown
    }
}

/// Re-encrypting a store file with another key, encrypting a plaintext one, or decrypting one.
///
/// Promises: the file is replaced whole or not at all. The new content is written to `PATH.rekey` with
/// SQLite's `VACUUM INTO` (through the new key's VFS, so no plaintext page reaches the disk when both keys
/// are set), put in WAL mode, checked with `PRAGMA integrity_check`, synced, and renamed over `PATH` only
/// after the old file's WAL was checkpointed and removed; the directory is synced after the rename. A crash
/// at any point leaves either the old file (openable with the old key) or the new one (openable with the
/// new key), and at most a `PATH.rekey*` leftover, which the next rekey removes. The caller makes sure no
/// other process has the store open (see ``DataDirectoryLock``).
public enum StoreRekey {
    /// Points of `rekey` after which a test may stop it as a crash would (no cleanup).
    enum Step: Sendable, CaseIterable { case copied, verified, sourceClosed, renamed }

    struct SimulatedCrash: Error {}

    /// Whether `encryption` opens the store at `path` (its header, without SQLite); `false` for a wrong key.
    public static func opens(_ path: String, with encryption: StoreEncryption) throws -> Bool {
        do {
            _ = try encryption.unlock(header: StoreFile.readPrefix(path, count: StoreHeader.size), path: path)
            return true
        } catch let error as StoreEncryptionError where error.kind == .wrongKey {
            return false
        }
    }

    /// Rewrites the store at `path`, now readable with `current` (`nil`: plaintext), so that it is readable
    /// with `target` only (`nil`: plaintext).
    public static func rekey(path: String, from current: StoreEncryption?, to target: StoreEncryption?) throws
    {
        try rekey(path: path, from: current, to: target, crashAfter: nil)
    }

    static func rekey(
        path: String, from current: StoreEncryption?, to target: StoreEncryption?, crashAfter: Step?
    ) throws {
        let temporary = path + ".rekey"
        let plaintextStage = path + ".rekey-plain"
        removeLeftovers(temporary)
        removeLeftovers(plaintextStage)
        var crashed = false
        defer {
            if !crashed {
                removeLeftovers(temporary)
                removeLeftovers(plaintextStage)
            }
        }
        func step(_ s: Step) throws {
            if s == crashAfter {
                crashed = true
                throw SimulatedCrash()
            }
        }

        let source = try Database(
            path: path, options: DatabaseOptions(encryption: current), role: .primary, uri: true)
        var sourceOpen = true
        defer { if sourceOpen { source.close() } }
        try source.checkpoint(truncate: true)
        if let target {
            // The copy is written through the new key's VFS as WAL frames (SQLite's backup, page by page:
            // pages keep their reserved bytes, which a plaintext source must first be given).
            var from = source
            var staged: Database?
            defer { staged?.close() }
            if current == nil {
                try vacuum(source, into: plaintextStage, reserve: true)
                let plain = try Database(path: plaintextStage)
                staged = plain
                from = plain
            }
            let copy = try Database(path: temporary, options: DatabaseOptions(encryption: target))
            defer { copy.close() }
            try backup(from: from, to: copy)
        } else {
            try vacuum(source, into: temporary, reserve: false)
        }
        removeLeftovers(plaintextStage)
        try step(.copied)

        let copy = try Database(path: temporary, options: DatabaseOptions(encryption: target))
        do {
            let check = try copy.query("PRAGMA integrity_check").compactMap { $0[0].string }
            guard check == ["ok"] else {
                throw StoreEncryptionError(
                    .rekeyFailed, path: path,
                    "the rewritten copy of \(path) fails its integrity check: \(check.prefix(3))")
            }
            let tables = "SELECT count(*) FROM sqlite_schema"
            guard try copy.scalar(tables) == source.scalar(tables) else {
                throw StoreEncryptionError(
                    .rekeyFailed, path: path, "the rewritten copy of \(path) lacks part of the schema")
            }
            try copy.checkpoint(truncate: true)
        } catch {
            copy.close()
            throw error
        }
        copy.close()
        try StoreFile.syncFile(temporary)
        try step(.verified)

        source.close()
        sourceOpen = false
        // Closing the last connection checkpointed the WAL into the old file and deleted it; a WAL left
        // with frames would belong to the old file and must not meet the new one.
        if let size = try? StoreFile.size(path + "-wal"), size > 0 {
            throw StoreEncryptionError(
                .rekeyFailed, path: path,
                "\(path)-wal still holds frames after closing: the store is in use elsewhere")
        }
        _ = unlink(path + "-wal")
        _ = unlink(path + "-shm")
        try step(.sourceClosed)

        guard rename(temporary, path) == 0 else { throw StoreFile.failure("rename", temporary) }
        StoreFile.syncDirectory(of: path)
        try step(.renamed)
    }

    /// `VACUUM INTO` a plaintext file (the default VFS), optionally with the reserved bytes an encrypted
    /// store needs.
    private static func vacuum(_ source: Database, into path: String, reserve: Bool) throws {
        let db = try source.requireHandle(sql: nil)
        if reserve {
            var bytes = Int32(StoreHeader.reserve)
            _ = sqlite3_file_control(db, "main", SQLITE_FCNTL_RESERVE_BYTES, &bytes)
        }
        let vfs = String(cString: sqlite3_vfs_find(nil).pointee.zName)
        try source.run("VACUUM INTO ?", [.text("file:\(uriEncoded(path))?vfs=\(uriEncoded(vfs))")])
    }

    /// Copies every page of `source` into `target` with SQLite's online backup.
    private static func backup(from source: Database, to target: Database) throws {
        let from = try source.requireHandle(sql: nil)
        let to = try target.requireHandle(sql: nil)
        guard let backup = sqlite3_backup_init(to, "main", from, "main") else {
            throw SQLiteError.from(to, code: sqlite3_errcode(to), sql: "sqlite3_backup_init")
        }
        let rc = sqlite3_backup_step(backup, -1)
        let finished = sqlite3_backup_finish(backup)
        guard rc == SQLITE_DONE, finished == SQLITE_OK else {
            throw SQLiteError.from(to, code: rc == SQLITE_DONE ? finished : rc, sql: "sqlite3_backup_step")
        }
    }

    static func removeLeftovers(_ temporary: String) {
        for suffix in ["", "-wal", "-shm", "-journal"] { _ = unlink(temporary + suffix) }
    }

    /// Percent-encodes what a URI filename or query value must not carry as is.
    static func uriEncoded(_ s: String) -> String {
        var out = ""
        for byte in s.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"),
                UInt8(ascii: "."),
                UInt8(ascii: "~"), UInt8(ascii: "/"):
                out.append(Character(UnicodeScalar(byte)))
            default:
                let hex = Array("0123456789ABCDEF")
                out += "%\(hex[Int(byte >> 4)])\(hex[Int(byte & 0x0F)])"
            }
        }
        return out
    }
}

/// An advisory lock (`flock`) on a data directory: shared by each running gateway, exclusive for a
/// command that rewrites its stores (`mirrorgate rekey`), so that the two never meet. Released when the
/// object is released or the process ends.
public final class DataDirectoryLock: Sendable {
    private let fd: Int32

    /// Locks `directory` without waiting; throws when the lock is held in a conflicting mode.
    public init(directory: String, exclusive: Bool) throws {
        let fd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw StoreFile.failure("open", directory) }
        if flock(fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0 {
            let err = errno
            _ = close(fd)
            if err == EWOULDBLOCK {
                throw StoreEncryptionError(
                    .io, path: directory,
                    exclusive
                        ? "\(directory) is in use by a running gateway: stop it first"
                        : "\(directory) is being rewritten by `mirrorgate rekey`: wait for it to finish")
            }
            throw StoreEncryptionError(
                .io, path: directory, "cannot lock \(directory): \(String(cString: strerror(err)))")
        }
        self.fd = fd
    }

    deinit { _ = close(fd) }
}
