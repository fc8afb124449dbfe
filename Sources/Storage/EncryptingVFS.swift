import CSQLite
import Foundation

// The SQLite VFS behind ``StoreEncryption``: a shim over the default VFS ("unix") that encrypts the
// database file and its WAL and refuses every other file SQLite could ask for. This file holds the
// `sqlite3_vfs` and `sqlite3_io_methods` entry points; the stored format and the per-file page codec are
// in EncryptingVFSFile.swift (`CryptFile`).

private let headerSize = Int64(StoreHeader.size)
private let ioerrShortRead = mg_sqlite_ioerr_short_read()

/// The registered `sqlite3_vfs` of one ``StoreEncryption``.
///
/// The struct and its name stay allocated after `unregister()` (a few hundred bytes per instance): SQLite
/// may still hold the pointer of a connection that is closing; with `pAppData` cleared, every entry point
/// then only delegates to the default VFS or refuses to open.
struct RegisteredVFS: @unchecked Sendable {
    let pointer: UnsafeMutablePointer<sqlite3_vfs>

    init(name: String) {
        let base = defaultVFS
        pointer = .allocate(capacity: 1)
        pointer.initialize(
            to: sqlite3_vfs(
                iVersion: 2, szOsFile: mg_crypt_file_header_size() + base.pointee.szOsFile,
                mxPathname: base.pointee.mxPathname, pNext: nil, zName: UnsafePointer(strdup(name)),
                pAppData: nil, xOpen: vfsOpen, xDelete: vfsDelete, xAccess: vfsAccess,
                xFullPathname: vfsFullPathname, xDlOpen: nil, xDlError: nil, xDlSym: nil, xDlClose: nil,
                xRandomness: vfsRandomness, xSleep: vfsSleep, xCurrentTime: vfsCurrentTime,
                xGetLastError: vfsGetLastError, xCurrentTimeInt64: vfsCurrentTimeInt64, xSetSystemCall: nil,
                xGetSystemCall: nil, xNextSystemCall: nil))
    }

    func register(owner: UnsafeMutableRawPointer) {
        pointer.pointee.pAppData = owner
        sqlite3_vfs_register(pointer, 0)
    }

    func unregister() {
        sqlite3_vfs_unregister(pointer)
        pointer.pointee.pAppData = nil
    }
}

/// The VFS every encrypted file is stored through ("unix" on Linux).
nonisolated(unsafe) private let defaultVFS: UnsafeMutablePointer<sqlite3_vfs> = sqlite3_vfs_find(nil)

private func owner(_ vfs: UnsafeMutablePointer<sqlite3_vfs>?) -> StoreEncryption? {
    guard let app = vfs?.pointee.pAppData else { return nil }
    return Unmanaged<StoreEncryption>.fromOpaque(app).takeUnretainedValue()
}

// MARK: VFS entry points

private let vfsOpen:
    @convention(c) (
        UnsafeMutablePointer<sqlite3_vfs>?, sqlite3_filename?, UnsafeMutablePointer<sqlite3_file>?, Int32,
        UnsafeMutablePointer<Int32>?
    ) -> Int32 = { vfs, name, file, flags, outFlags in
        guard let file else { return SQLITE_CANTOPEN }
        file.pointee.pMethods = nil
        UnsafeMutableRawPointer(file).assumingMemoryBound(to: mg_crypt_file.self).pointee.state = nil
        guard let store = owner(vfs) else { return SQLITE_CANTOPEN }
        return store.open(name: name, file: file, flags: flags, outFlags: outFlags)
    }

private let vfsDelete:
    @convention(c) (UnsafeMutablePointer<sqlite3_vfs>?, UnsafePointer<CChar>?, Int32) -> Int32 =
        { _, name, syncDir in defaultVFS.pointee.xDelete(defaultVFS, name, syncDir) }

private let vfsAccess:
    @convention(c) (
        UnsafeMutablePointer<sqlite3_vfs>?, UnsafePointer<CChar>?, Int32, UnsafeMutablePointer<Int32>?
    )
        -> Int32 = { _, name, flags, out in defaultVFS.pointee.xAccess(defaultVFS, name, flags, out) }

private let vfsFullPathname:
    @convention(c) (
        UnsafeMutablePointer<sqlite3_vfs>?, UnsafePointer<CChar>?, Int32, UnsafeMutablePointer<CChar>?
    )
        -> Int32 = { _, name, n, out in defaultVFS.pointee.xFullPathname(defaultVFS, name, n, out) }

private let vfsRandomness:
    @convention(c) (UnsafeMutablePointer<sqlite3_vfs>?, Int32, UnsafeMutablePointer<CChar>?) -> Int32 =
        { _, n, out in defaultVFS.pointee.xRandomness(defaultVFS, n, out) }

private let vfsSleep: @convention(c) (UnsafeMutablePointer<sqlite3_vfs>?, Int32) -> Int32 = { _, micros in
    defaultVFS.pointee.xSleep(defaultVFS, micros)
}

private let vfsCurrentTime:
    @convention(c) (UnsafeMutablePointer<sqlite3_vfs>?, UnsafeMutablePointer<Double>?) -> Int32 =
        { _, out in defaultVFS.pointee.xCurrentTime(defaultVFS, out) }

private let vfsGetLastError:
    @convention(c) (UnsafeMutablePointer<sqlite3_vfs>?, Int32, UnsafeMutablePointer<CChar>?) -> Int32 =
        { _, n, out in defaultVFS.pointee.xGetLastError(defaultVFS, n, out) }

private let vfsCurrentTimeInt64:
    @convention(c) (UnsafeMutablePointer<sqlite3_vfs>?, UnsafeMutablePointer<sqlite3_int64>?) -> Int32 = {
        _, out in
        defaultVFS.pointee.xCurrentTimeInt64(defaultVFS, out)
    }

extension StoreEncryption {
    /// `xOpen`: the database file and its WAL only.
    fileprivate func open(
        name: sqlite3_filename?, file: UnsafeMutablePointer<sqlite3_file>, flags: Int32,
        outFlags: UnsafeMutablePointer<Int32>?
    ) -> Int32 {
        let kind: CryptFile.Kind
        if flags & SQLITE_OPEN_MAIN_DB != 0 {
            kind = .database
        } else if flags & SQLITE_OPEN_WAL != 0 {
            kind = .wal
        } else {
            refuse(
                "SQLite asked for a rollback journal or a temporary file, which an encrypted store never "
                    + "writes (they would hold plaintext; open flags 0x\(String(flags, radix: 16)))")
            return SQLITE_CANTOPEN
        }
        guard let name else { return SQLITE_CANTOPEN }
        let real = mg_crypt_file_real(file)!
        let rc = defaultVFS.pointee.xOpen(defaultVFS, name, real, flags, outFlags)
        guard rc == SQLITE_OK else { return rc }
        let keys: FileKeys
        let databaseName: String
        switch kind {
        case .database:
            databaseName = String(cString: name)
            do {
                keys = try databaseKeys(
                    real: real, path: databaseName, writable: flags & SQLITE_OPEN_READWRITE != 0)
            } catch {
                refuse("\(error)")
                _ = real.pointee.pMethods.pointee.xClose(real)
                return SQLITE_CANTOPEN
            }
            databaseOpened(name: databaseName, keys: keys)
        case .wal:
            databaseName = String(cString: sqlite3_filename_database(name))
            guard let found = keysOfOpenDatabase(name: databaseName) else {
                refuse("the WAL of \(databaseName) was opened before its database")
                _ = real.pointee.pMethods.pointee.xClose(real)
                return SQLITE_CANTOPEN
            }
            keys = found
        }
        guard let cipher = PageCipher(key: keys.page, maskKey: keys.mask) else {
            refuse("the page key of \(databaseName) was refused by the cipher")
            _ = real.pointee.pMethods.pointee.xClose(real)
            if kind == .database { databaseClosed(name: databaseName) }
            return SQLITE_CANTOPEN
        }
        let state = CryptFile(
            owner: self, kind: kind, real: real, keys: keys, cipher: cipher, databaseName: databaseName)
        UnsafeMutableRawPointer(file).assumingMemoryBound(to: mg_crypt_file.self).pointee.state =
            Unmanaged.passRetained(state).toOpaque()
        file.pointee.pMethods = UnsafePointer(cryptMethods)
        return SQLITE_OK
    }

    /// The keys of a database file opened through SQLite: from its header, or a new header when the file
    /// is empty and writable (the target of `VACUUM INTO`).
    private func databaseKeys(real: UnsafeMutablePointer<sqlite3_file>, path: String, writable: Bool) throws
        -> FileKeys
    {
        var size: sqlite3_int64 = 0
        guard real.pointee.pMethods.pointee.xFileSize(real, &size) == SQLITE_OK else {
            throw StoreEncryptionError(.io, path: path, "cannot read the size of \(path)")
        }
        if size == 0 {
            guard writable else {
                throw StoreEncryptionError(.io, path: path, "\(path) is empty and opened read-only")
            }
            let (header, keys) = try makeHeader()
            let rc = header.withUnsafeBytes {
                real.pointee.pMethods.pointee.xWrite(real, $0.baseAddress, Int32(header.count), 0)
            }
            guard rc == SQLITE_OK, real.pointee.pMethods.pointee.xSync(real, SQLITE_SYNC_NORMAL) == SQLITE_OK
            else {
                throw StoreEncryptionError(.io, path: path, "cannot write the encryption header of \(path)")
            }
            return keys
        }
        var header = [UInt8](repeating: 0, count: StoreHeader.size)
        let rc = header.withUnsafeMutableBytes {
            real.pointee.pMethods.pointee.xRead(real, $0.baseAddress, Int32(StoreHeader.size), 0)
        }
        guard rc == SQLITE_OK || rc == ioerrShortRead else {
            throw StoreEncryptionError(.io, path: path, "cannot read the encryption header of \(path)")
        }
        let count = min(Int(size), StoreHeader.size)
        return try unlock(header: Array(header[..<count]), path: path)
    }
}

// MARK: I/O methods

private func state(_ file: UnsafeMutablePointer<sqlite3_file>?) -> CryptFile {
    let raw = UnsafeMutableRawPointer(file!).assumingMemoryBound(to: mg_crypt_file.self).pointee.state!
    return Unmanaged<CryptFile>.fromOpaque(raw).takeUnretainedValue()
}

/// Version 2: with the shared-memory methods (WAL), without xFetch, so SQLite never maps the file.
nonisolated(unsafe) private let cryptMethods: UnsafeMutablePointer<sqlite3_io_methods> = {
    let methods = UnsafeMutablePointer<sqlite3_io_methods>.allocate(capacity: 1)
    methods.initialize(
        to: sqlite3_io_methods(
            iVersion: 2,
            xClose: { file in
                let header = UnsafeMutableRawPointer(file!).assumingMemoryBound(to: mg_crypt_file.self)
                let f = Unmanaged<CryptFile>.fromOpaque(header.pointee.state!).takeRetainedValue()
                header.pointee.state = nil
                let flushed = f.kind == .wal ? f.flushPending() : SQLITE_OK
                let rc = f.methods.xClose(f.real)
                if f.kind == .database { f.owner.databaseClosed(name: f.databaseName) }
                return flushed != SQLITE_OK ? flushed : rc
            },
            xRead: { file, buffer, amount, offset in
                let f = state(file)
                return f.kind == .database
                    ? f.readDatabase(buffer!, Int(amount), offset) : f.readWAL(buffer!, Int(amount), offset)
            },
            xWrite: { file, buffer, amount, offset in
                let f = state(file)
                return f.kind == .database
                    ? f.writeDatabase(buffer!, Int(amount), offset) : f.writeWAL(buffer!, Int(amount), offset)
            },
            xTruncate: { file, size in
                let f = state(file)
                if f.kind == .wal {
                    let flushed = f.flushPending()
                    guard flushed == SQLITE_OK else { return flushed }
                    return f.methods.xTruncate(f.real, size)
                }
                return f.methods.xTruncate(f.real, size + headerSize)
            },
            xSync: { file, flags in
                let f = state(file)
                let flushed = f.kind == .wal ? f.flushPending() : SQLITE_OK
                guard flushed == SQLITE_OK else { return flushed }
                return f.methods.xSync(f.real, flags)
            },
            xFileSize: { file, out in
                let f = state(file)
                let flushed = f.kind == .wal ? f.flushPending() : SQLITE_OK
                guard flushed == SQLITE_OK else { return flushed }
                var size: sqlite3_int64 = 0
                let rc = f.methods.xFileSize(f.real, &size)
                guard rc == SQLITE_OK else { return rc }
                out?.pointee = f.kind == .database ? max(0, size - headerSize) : size
                return SQLITE_OK
            },
            xLock: { file, level in
                let f = state(file)
                return f.methods.xLock(f.real, level)
            },
            xUnlock: { file, level in
                let f = state(file)
                return f.methods.xUnlock(f.real, level)
            },
            xCheckReservedLock: { file, out in
                let f = state(file)
                return f.methods.xCheckReservedLock(f.real, out)
            },
            xFileControl: { file, op, arg in
                let f = state(file)
                switch op {
                case SQLITE_FCNTL_MMAP_SIZE:
                    return SQLITE_NOTFOUND
                case SQLITE_FCNTL_SIZE_HINT where f.kind == .database:
                    guard let arg else { return SQLITE_NOTFOUND }
                    var hint = arg.assumingMemoryBound(to: sqlite3_int64.self).pointee + headerSize
                    return f.methods.xFileControl(f.real, op, &hint)
                default:
                    return f.methods.xFileControl(f.real, op, arg)
                }
            },
            xSectorSize: { file in
                let f = state(file)
                return f.methods.xSectorSize(f.real)
            },
            xDeviceCharacteristics: { file in
                // Whole pages and frames only, so no atomic-write shortcuts; powersafe overwrite (as the
                // default VFS) so that SQLite never pads the WAL with partial frames.
                let f = state(file)
                let inherited = f.methods.xDeviceCharacteristics(f.real) & SQLITE_IOCAP_UNDELETABLE_WHEN_OPEN
                return inherited | SQLITE_IOCAP_POWERSAFE_OVERWRITE
            },
            xShmMap: { file, region, size, extend, out in
                let f = state(file)
                return f.methods.xShmMap(f.real, region, size, extend, out)
            },
            xShmLock: { file, offset, n, flags in
                let f = state(file)
                return f.methods.xShmLock(f.real, offset, n, flags)
            },
            xShmBarrier: { file in
                let f = state(file)
                f.methods.xShmBarrier(f.real)
            },
            xShmUnmap: { file, delete in
                let f = state(file)
                return f.methods.xShmUnmap(f.real, delete)
            },
            xFetch: nil, xUnfetch: nil))
    return methods
}()
