import CSQLite
import Crypto
import Foundation
import _CryptoExtras

// The SQLite VFS behind ``StoreEncryption``: a shim over the default VFS ("unix") that encrypts the
// database file and its WAL and refuses every other file SQLite could ask for.
//
// Database file: a 4096-byte header (see `StoreHeader`), then SQLite's pages, each stored as
// AES-256-GCM(pageKey, nonce, page[0..<4068], aad: "D" ‖ pgno) ‖ nonce ‖ tag — the last 28 bytes of every
// page are reserved by SQLite (`SQLITE_FCNTL_RESERVE_BYTES`, set before the first write), so a stored
// page is exactly one page. Offsets SQLite asks for are shifted by the header.
//
// WAL file: SQLite's 32-byte WAL header in the clear (magic, page size, checkpoint sequence, salts and
// its own checksum: no data), then frames of a 24-byte frame header and one page. The page is stored as
// for the database, with "W" ‖ frame offset ‖ frame header as associated data, so a frame's page number,
// commit mark, salts and checksum are authenticated with its page. The frame checksum — which SQLite
// computes over the plaintext page — is stored XOR a mask, the first 8 bytes of AES-256(maskKey, salts ‖
// offset), so the file does not carry a function of the plaintext. SQLite writes a frame header and then its
// page in two calls: the header is held until the page arrives (or, for a header rewritten alone, the
// page on disk is re-encrypted under the new header).
//
// A frame that fails authentication is an error (`SQLITE_IOERR_DATA`), except during WAL recovery for
// the last frame of the log (no later frame of the same WAL generation follows it): a write torn by a
// power loss, which SQLite itself would ignore as a frame with a bad checksum. Dropping it is what
// truncating the file would do, which no format can detect.

/// The page geometry every encrypted store uses.
private let pageSize = StoreHeader.pageSize
private let usable = StoreHeader.usable
private let headerSize = Int64(StoreHeader.size)
private let walHeaderSize: Int64 = 32
private let frameHeaderSize = 24
private let frameSize = frameHeaderSize + pageSize

private let ioerrData = mg_sqlite_ioerr_data()
private let ioerrShortRead = mg_sqlite_ioerr_short_read()
private let ioerrRead = mg_sqlite_ioerr_read()
private let ioerrWrite = mg_sqlite_ioerr_write()

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
        let state = CryptFile(owner: self, kind: kind, real: real, keys: keys, databaseName: databaseName)
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

// MARK: Open files

/// The state of one open database or WAL file (one connection's; SQLite never calls one file from two
/// threads at once).
private final class CryptFile {
    enum Kind { case database, wal }

    let owner: StoreEncryption
    let kind: Kind
    let real: UnsafeMutablePointer<sqlite3_file>
    let keys: FileKeys
    let databaseName: String
    /// A WAL frame header SQLite wrote and whose page has not come yet: (frame offset, header).
    var pending: (offset: Int64, header: [UInt8])?
    /// One frame's worth of stored bytes, and one page of plaintext.
    let disk = UnsafeMutableRawBufferPointer.allocate(byteCount: frameSize, alignment: 16)
    let plain = UnsafeMutableRawBufferPointer.allocate(byteCount: pageSize, alignment: 16)
    /// Bytes from the kernel's random generator (`getrandom`), taken 12 at a time as nonces, never twice.
    private var random = [UInt8](repeating: 0, count: 12 * 256)
    private var randomUsed = 12 * 256
    /// The associated data of the page at hand (at most "W" ‖ offset ‖ frame header: 33 bytes).
    private var aad = [UInt8](repeating: 0, count: 1 + 8 + frameHeaderSize)
    private var aadCount = 0

    init(
        owner: StoreEncryption, kind: Kind, real: UnsafeMutablePointer<sqlite3_file>, keys: FileKeys,
        databaseName: String
    ) {
        self.owner = owner
        self.kind = kind
        self.real = real
        self.keys = keys
        self.databaseName = databaseName
    }

    deinit {
        disk.deallocate()
        plain.deallocate()
    }

    var methods: sqlite3_io_methods { real.pointee.pMethods.pointee }

    func realRead(_ buffer: UnsafeMutableRawPointer, _ count: Int, _ offset: Int64) -> Int32 {
        methods.xRead(real, buffer, Int32(count), offset)
    }

    func realWrite(_ buffer: UnsafeRawPointer, _ count: Int, _ offset: Int64) -> Int32 {
        methods.xWrite(real, buffer, Int32(count), offset)
    }

    func realSize() -> Int64? {
        var size: sqlite3_int64 = 0
        return methods.xFileSize(real, &size) == SQLITE_OK ? size : nil
    }

    // MARK: Pages

    /// A fresh random nonce: 12 bytes of a buffer filled by `getrandom` (one call per 256 nonces).
    func nextNonce() -> AES.GCM.Nonce? {
        if randomUsed + 12 > random.count {
            let filled = random.withUnsafeMutableBytes { buffer -> Bool in
                var got = 0
                while got < buffer.count {
                    let n = mg_getrandom(buffer.baseAddress! + got, UInt(buffer.count - got))
                    if n < 0 {
                        if errno == EINTR { continue }
                        return false
                    }
                    got += n
                }
                return true
            }
            guard filled else { return nil }
            randomUsed = 0
        }
        defer { randomUsed += 12 }
        return try? AES.GCM.Nonce(data: random[randomUsed..<(randomUsed + 12)])
    }

    /// Sets the associated data of database page `index` (0-based): "D" ‖ page number.
    func setDatabaseAAD(page index: Int64) {
        let number = UInt32(truncatingIfNeeded: index + 1)
        aad[0] = 0x44
        for i in 0..<4 { aad[1 + i] = UInt8(truncatingIfNeeded: number >> (24 - 8 * i)) }
        aadCount = 5
    }

    /// Sets the associated data of the WAL frame at `start` with `header` (checksum unmasked):
    /// "W" ‖ offset ‖ header.
    func setWALAAD(start: Int64, header: [UInt8]) {
        aad[0] = 0x57
        for i in 0..<8 { aad[1 + i] = UInt8(truncatingIfNeeded: UInt64(start) >> (56 - 8 * i)) }
        for i in 0..<frameHeaderSize { aad[9 + i] = header[i] }
        aadCount = 9 + frameHeaderSize
    }

    /// Encrypts `plain` (one page) into `out` (one page) with the associated data set before.
    func seal(_ plain: UnsafeRawBufferPointer, into out: UnsafeMutableRawBufferPointer) -> Bool {
        guard let nonce = nextNonce(),
            let box = try? AES.GCM.seal(
                UnsafeRawBufferPointer(rebasing: plain[0..<usable]), using: keys.page, nonce: nonce,
                authenticating: aad[0..<aadCount])
        else { return false }
        box.ciphertext.copyBytes(to: out.baseAddress!.assumingMemoryBound(to: UInt8.self), count: usable)
        nonce.withUnsafeBytes {
            out.baseAddress!.advanced(by: usable).copyMemory(from: $0.baseAddress!, byteCount: 12)
        }
        box.tag.copyBytes(
            to: out.baseAddress!.advanced(by: usable + 12).assumingMemoryBound(to: UInt8.self), count: 16)
        return true
    }

    /// Decrypts one stored page into `plain` (its reserved bytes zeroed) with the associated data set
    /// before; `false` when it does not verify.
    func open(_ stored: UnsafeRawBufferPointer) -> Bool {
        guard
            let nonce = try? AES.GCM.Nonce(
                data: UnsafeRawBufferPointer(rebasing: stored[usable..<usable + 12])),
            let box = try? AES.GCM.SealedBox(
                nonce: nonce, ciphertext: UnsafeRawBufferPointer(rebasing: stored[0..<usable]),
                tag: UnsafeRawBufferPointer(rebasing: stored[(usable + 12)..<pageSize])),
            let data = try? AES.GCM.open(box, using: keys.page, authenticating: aad[0..<aadCount]),
            data.count == usable
        else { return false }
        data.copyBytes(to: plain.baseAddress!.assumingMemoryBound(to: UInt8.self), count: usable)
        (plain.baseAddress! + usable).initializeMemory(as: UInt8.self, repeating: 0, count: pageSize - usable)
        return true
    }

    // MARK: Database file

    enum PageRead {
        case ok, missing
        case failed(Int32)
    }

    /// Page `index` (0-based) into `plain`.
    func readDatabasePage(_ index: Int64) -> PageRead {
        let offset = headerSize + index * Int64(pageSize)
        let rc = realRead(disk.baseAddress!, pageSize, offset)
        if rc == ioerrShortRead {
            guard let size = realSize() else { return .failed(ioerrRead) }
            if size <= offset { return .missing }
            owner.refuse("a page of \(databaseName) is truncated")
            return .failed(ioerrData)
        }
        guard rc == SQLITE_OK else { return .failed(rc) }
        setDatabaseAAD(page: index)
        guard open(UnsafeRawBufferPointer(rebasing: disk[0..<pageSize]))
        else {
            owner.refuse("page \(index + 1) of \(databaseName) failed authentication")
            return .failed(ioerrData)
        }
        return .ok
    }

    func readDatabase(_ buffer: UnsafeMutableRawPointer, _ amount: Int, _ offset: Int64) -> Int32 {
        var done = 0
        var short = false
        while done < amount {
            let position = offset + Int64(done)
            let index = position / Int64(pageSize)
            let within = Int(position % Int64(pageSize))
            let n = min(pageSize - within, amount - done)
            switch readDatabasePage(index) {
            case .ok:
                (buffer + done).copyMemory(from: plain.baseAddress! + within, byteCount: n)
            case .missing:
                (buffer + done).initializeMemory(as: UInt8.self, repeating: 0, count: n)
                short = true
            case .failed(let rc):
                return rc
            }
            done += n
        }
        return short ? ioerrShortRead : SQLITE_OK
    }

    func writeDatabase(_ buffer: UnsafeRawPointer, _ amount: Int, _ offset: Int64) -> Int32 {
        guard amount == pageSize, offset % Int64(pageSize) == 0 else {
            owner.refuse("SQLite wrote \(amount) bytes at \(offset) of \(databaseName): not one whole page")
            return ioerrWrite
        }
        let page = UnsafeRawBufferPointer(start: buffer, count: pageSize)
        if offset == 0 {
            // SQLite's header: page size at 16 (big-endian, 1 meaning 65536), reserved bytes at 20.
            let size = Int(page[16]) << 8 | Int(page[17])
            guard size == pageSize, Int(page[20]) == StoreHeader.reserve else {
                owner.refuse(
                    "\(databaseName) would be written with page size \(size) and \(page[20]) reserved bytes "
                        + "(an encrypted store needs \(pageSize) and \(StoreHeader.reserve))")
                return ioerrWrite
            }
        }
        setDatabaseAAD(page: offset / Int64(pageSize))
        guard seal(page, into: UnsafeMutableRawBufferPointer(rebasing: disk[0..<pageSize])) else {
            return ioerrWrite
        }
        return realWrite(disk.baseAddress!, pageSize, headerSize + offset)
    }

    // MARK: WAL file

    /// The offset of the frame holding `offset`, and where in the frame it is.
    static func frame(_ offset: Int64) -> (start: Int64, within: Int)? {
        guard offset >= walHeaderSize else { return nil }
        let relative = offset - walHeaderSize
        return (
            walHeaderSize + relative / Int64(frameSize) * Int64(frameSize), Int(relative % Int64(frameSize))
        )
    }

    /// Applies (or removes: XOR) the checksum mask to a 24-byte frame header: the first 8 bytes of
    /// AES-256(mask key, salts ‖ offset), a pseudorandom function of the frame's place in this WAL generation.
    func toggleMask(_ header: inout [UInt8], start: Int64) {
        var block = [UInt8](repeating: 0, count: 16)
        for i in 0..<8 {
            block[i] = header[8 + i]
            block[8 + i] = UInt8(truncatingIfNeeded: UInt64(start) >> (56 - 8 * i))
        }
        // A 32-byte key and a 16-byte block: permute cannot fail.
        try? AES.permute(&block, key: keys.mask)
        for i in 0..<8 { header[16 + i] ^= block[i] }
    }

    enum FrameRead {
        case ok([UInt8])
        case short, unauthenticated
        case failed(Int32)
    }

    /// Reads the frame at `start`: its header (checksum unmasked) and, when it verifies, its page into `plain`.
    func readFrame(_ start: Int64) -> FrameRead {
        let rc = realRead(disk.baseAddress!, frameSize, start)
        if rc == ioerrShortRead { return .short }
        guard rc == SQLITE_OK else { return .failed(rc) }
        var header = Array(UnsafeRawBufferPointer(rebasing: disk[0..<frameHeaderSize]))
        toggleMask(&header, start: start)
        setWALAAD(start: start, header: header)
        guard open(UnsafeRawBufferPointer(rebasing: disk[frameHeaderSize..<frameSize])) else {
            return .unauthenticated
        }
        return .ok(header)
    }

    /// The header of the frame at `start` as SQLite wrote it (checksum unmasked), unauthenticated.
    func readFrameHeader(_ start: Int64) -> [UInt8]? {
        var header = [UInt8](repeating: 0, count: frameHeaderSize)
        let rc = header.withUnsafeMutableBytes { realRead($0.baseAddress!, frameHeaderSize, start) }
        guard rc == SQLITE_OK else { return nil }
        toggleMask(&header, start: start)
        return header
    }

    /// Writes the frame at `start`: `header` (as SQLite wrote it) masked, and `page` encrypted under it.
    func writeFrame(_ start: Int64, header: [UInt8], page: UnsafeRawBufferPointer) -> Int32 {
        setWALAAD(start: start, header: header)
        guard seal(page, into: UnsafeMutableRawBufferPointer(rebasing: disk[frameHeaderSize..<frameSize]))
        else {
            return ioerrWrite
        }
        var masked = header
        toggleMask(&masked, start: start)
        masked.withUnsafeBytes {
            disk.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: frameHeaderSize)
        }
        return realWrite(disk.baseAddress!, frameSize, start)
    }

    /// Writes a held frame header: alone when its page is not on disk yet, else with the page re-encrypted
    /// under it (SQLite rewrites the headers of frames whose checksums changed).
    func flushPending() -> Int32 {
        guard let (start, header) = pending else { return SQLITE_OK }
        pending = nil
        switch readFrame(start) {
        case .ok:
            owner.rewrittenFrames.add(1, ordering: .relaxed)
            let copy = Array(UnsafeRawBufferPointer(plain))
            return copy.withUnsafeBytes { writeFrame(start, header: header, page: $0) }
        case .short:
            var masked = header
            toggleMask(&masked, start: start)
            return masked.withUnsafeBytes { realWrite($0.baseAddress!, frameHeaderSize, start) }
        case .unauthenticated:
            owner.refuse("a WAL frame of \(databaseName) failed authentication")
            return ioerrData
        case .failed(let rc):
            return rc
        }
    }

    /// `true` when no later frame of the current WAL generation follows the frame at `start`: the next
    /// frame is missing or carries other salts than the WAL header (the frame's own salts are not trusted
    /// here: it failed authentication).
    func isLastFrame(_ start: Int64) -> Bool {
        var walHeader = [UInt8](repeating: 0, count: Int(walHeaderSize))
        let rc = walHeader.withUnsafeMutableBytes { realRead($0.baseAddress!, Int(walHeaderSize), 0) }
        guard rc == SQLITE_OK, let next = readFrameHeader(start + Int64(frameSize)) else { return true }
        return next[8..<16] != walHeader[16..<24]
    }

    func readWAL(_ buffer: UnsafeMutableRawPointer, _ amount: Int, _ offset: Int64) -> Int32 {
        let flushed = flushPending()
        guard flushed == SQLITE_OK else { return flushed }
        if offset + Int64(amount) <= walHeaderSize { return realRead(buffer, amount, offset) }
        guard let (start, within) = Self.frame(offset) else { return ioerrRead }
        switch (within, amount) {
        case (0, frameSize), (frameHeaderSize, pageSize):
            switch readFrame(start) {
            case .ok(let header):
                if within == 0 {
                    header.withUnsafeBytes {
                        buffer.copyMemory(from: $0.baseAddress!, byteCount: frameHeaderSize)
                    }
                    (buffer + frameHeaderSize).copyMemory(from: plain.baseAddress!, byteCount: pageSize)
                } else {
                    buffer.copyMemory(from: plain.baseAddress!, byteCount: pageSize)
                }
                return SQLITE_OK
            case .short:
                buffer.initializeMemory(as: UInt8.self, repeating: 0, count: amount)
                return ioerrShortRead
            case .unauthenticated:
                if within == 0 && isLastFrame(start) {
                    // Recovery reading a torn last frame: SQLite ends the log at a frame that is all zeros.
                    buffer.initializeMemory(as: UInt8.self, repeating: 0, count: amount)
                    return SQLITE_OK
                }
                owner.refuse("a WAL frame of \(databaseName) failed authentication")
                return ioerrData
            case .failed(let rc):
                return rc
            }
        case (0, frameHeaderSize), (16, 8):
            guard let header = readFrameHeader(start) else { return ioerrRead }
            header[within..<(within + amount)].withUnsafeBytes {
                buffer.copyMemory(from: $0.baseAddress!, byteCount: amount)
            }
            return SQLITE_OK
        default:
            owner.refuse("SQLite read \(amount) bytes at \(offset) of the WAL of \(databaseName)")
            return ioerrRead
        }
    }

    func writeWAL(_ buffer: UnsafeRawPointer, _ amount: Int, _ offset: Int64) -> Int32 {
        if offset + Int64(amount) <= walHeaderSize {
            let flushed = flushPending()
            guard flushed == SQLITE_OK else { return flushed }
            return realWrite(buffer, amount, offset)
        }
        guard let (start, within) = Self.frame(offset) else { return ioerrWrite }
        if let held = pending, held.offset != start {
            let flushed = flushPending()
            guard flushed == SQLITE_OK else { return flushed }
        }
        switch (within, amount) {
        case (0, frameHeaderSize):
            pending = (start, Array(UnsafeRawBufferPointer(start: buffer, count: frameHeaderSize)))
            return SQLITE_OK
        case (frameHeaderSize, pageSize):
            let header: [UInt8]
            if let held = pending {
                header = held.header
                pending = nil
            } else if let onDisk = readFrameHeader(start) {
                header = onDisk
            } else {
                owner.refuse("SQLite wrote a WAL page of \(databaseName) before its frame header")
                return ioerrWrite
            }
            return writeFrame(
                start, header: header, page: UnsafeRawBufferPointer(start: buffer, count: pageSize))
        case (0, frameSize):
            pending = nil
            let header = Array(UnsafeRawBufferPointer(start: buffer, count: frameHeaderSize))
            return writeFrame(
                start, header: header,
                page: UnsafeRawBufferPointer(start: buffer + frameHeaderSize, count: pageSize))
        default:
            owner.refuse("SQLite wrote \(amount) bytes at \(offset) of the WAL of \(databaseName)")
            return ioerrWrite
        }
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
