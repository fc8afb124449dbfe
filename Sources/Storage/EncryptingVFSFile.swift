import CCryptoBoringSSL
import CSQLite
import Crypto
import Foundation

// The page codec of the encrypting VFS (EncryptingVFS.swift): one open database or WAL file's state,
// its pages sealed and opened with AES-256-GCM.
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

// MARK: Open files

/// The state of one open database or WAL file (one connection's; SQLite never calls one file from two
/// threads at once).
final class CryptFile {
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
    /// The page key's AES-256-GCM context (key schedule computed once per open file).
    let cipher: PageCipher
    /// Bytes from the kernel's random generator (`getrandom`), taken 12 at a time as nonces, never twice.
    private let random = UnsafeMutableRawBufferPointer.allocate(byteCount: 12 * 256, alignment: 16)
    private var randomUsed = 12 * 256
    /// The associated data of the page at hand (at most "W" ‖ offset ‖ frame header: 33 bytes).
    private var aad = [UInt8](repeating: 0, count: 1 + 8 + frameHeaderSize)
    private var aadCount = 0

    init(
        owner: StoreEncryption, kind: Kind, real: UnsafeMutablePointer<sqlite3_file>, keys: FileKeys,
        cipher: PageCipher, databaseName: String
    ) {
        self.owner = owner
        self.cipher = cipher
        self.kind = kind
        self.real = real
        self.keys = keys
        self.databaseName = databaseName
    }

    deinit {
        disk.deallocate()
        plain.deallocate()
        random.deallocate()
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

    /// Writes a fresh random nonce to `out`: 12 bytes of a buffer filled by `getrandom` (one call per 256
    /// nonces).
    func nextNonce(into out: UnsafeMutableRawPointer) -> Bool {
        if randomUsed + 12 > random.count {
            var got = 0
            while got < random.count {
                let n = mg_getrandom(random.baseAddress! + got, UInt(random.count - got))
                if n < 0 {
                    if errno == EINTR { continue }
                    return false
                }
                got += n
            }
            randomUsed = 0
        }
        out.copyMemory(from: random.baseAddress! + randomUsed, byteCount: 12)
        randomUsed += 12
        return true
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
        guard nextNonce(into: out.baseAddress! + usable) else { return false }
        return aad.withUnsafeBufferPointer {
            cipher.seal(plain.baseAddress!, into: out.baseAddress!, aad: $0.baseAddress!, aadCount: aadCount)
        }
    }

    /// Decrypts one stored page into `plain` (its reserved bytes zeroed) with the associated data set
    /// before; `false` when it does not verify.
    func open(_ stored: UnsafeRawBufferPointer) -> Bool {
        let verified = aad.withUnsafeBufferPointer {
            cipher.open(
                stored.baseAddress!, into: plain.baseAddress!, aad: $0.baseAddress!, aadCount: aadCount)
        }
        guard verified else { return false }
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
        var block: (UInt64, UInt64) = (0, 0)
        withUnsafeMutableBytes(of: &block) { b in
            for i in 0..<8 {
                b[i] = header[8 + i]
                b[8 + i] = UInt8(truncatingIfNeeded: UInt64(start) >> (56 - 8 * i))
            }
            cipher.mask(b.baseAddress!)
            for i in 0..<8 { header[16 + i] ^= b[i] }
        }
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

// MARK: Page cipher

/// AES-256-GCM over one stored page — ciphertext of the page's first `usable` bytes, then the 12-byte nonce,
/// then the 16-byte tag — in place, with the key schedule computed once per open file.
///
/// swift-crypto's `AES.GCM.seal` and `open` build a BoringSSL context (the key schedule) on every call and
/// return their results in newly allocated `Data`, which the page then copies: about 1.6 µs per 4 KiB page,
/// most of it not the cipher. This calls the same BoringSSL AEAD (the `CCryptoBoringSSL` module swift-crypto
/// is built on, pinned with it at 3.12.3) through one `EVP_AEAD_CTX` per file, reading and writing the stored
/// page's own bytes (`seal_scatter` / `open_gather`). The format is unchanged.
final class PageCipher {
    private let context = UnsafeMutablePointer<EVP_AEAD_CTX>.allocate(capacity: 1)
    /// The WAL checksum mask's AES-256 key schedule (`AES.permute` of `_CryptoExtras` computes it per call).
    private let maskKey = UnsafeMutablePointer<AES_KEY>.allocate(capacity: 1)

    /// nil when BoringSSL refuses the key (never for a 32-byte key). The context starts zeroed, so that
    /// `deinit` (which Swift runs for a failed initializer too) may clean it up in every case.
    init?(key: SymmetricKey, maskKey mask: SymmetricKey) {
        context.initialize(to: EVP_AEAD_CTX())
        maskKey.initialize(to: AES_KEY())
        let maskSet = mask.withUnsafeBytes { k -> Bool in
            k.count == 32
                && CCryptoBoringSSL_AES_set_encrypt_key(
                    k.baseAddress!.assumingMemoryBound(to: UInt8.self), 256, maskKey) == 0
        }
        guard maskSet else { return nil }
        let ok = key.withUnsafeBytes { k -> Int32 in
            guard k.count == 32 else { return 0 }
            return CCryptoBoringSSL_EVP_AEAD_CTX_init(
                context, CCryptoBoringSSL_EVP_aead_aes_256_gcm(),
                k.baseAddress!.assumingMemoryBound(to: UInt8.self),
                k.count, 16, nil)
        }
        guard ok == 1 else { return nil }
    }

    deinit {
        CCryptoBoringSSL_EVP_AEAD_CTX_cleanup(context)
        // The key schedules are key material: wiped before the memory is given back.
        CCryptoBoringSSL_OPENSSL_cleanse(context, MemoryLayout<EVP_AEAD_CTX>.size)
        CCryptoBoringSSL_OPENSSL_cleanse(maskKey, MemoryLayout<AES_KEY>.size)
        context.deallocate()
        maskKey.deallocate()
    }

    /// AES-256 of the 16 bytes at `block` under the mask key, in place (the WAL checksum mask).
    func mask(_ block: UnsafeMutableRawPointer) {
        let b = block.assumingMemoryBound(to: UInt8.self)
        CCryptoBoringSSL_AES_encrypt(b, b, maskKey)
    }

    /// Seals `usable` bytes at `plain` into the stored page at `out`, whose nonce (at `usable`) is set.
    func seal(
        _ plain: UnsafeRawPointer, into out: UnsafeMutableRawPointer, aad: UnsafePointer<UInt8>, aadCount: Int
    ) -> Bool {
        let o = out.assumingMemoryBound(to: UInt8.self)
        let nonce = UnsafePointer(o + usable)
        var tagLength = 0
        let rc = CCryptoBoringSSL_EVP_AEAD_CTX_seal_scatter(
            context, o, o + usable + 12, &tagLength, 16, nonce, 12, plain.assumingMemoryBound(to: UInt8.self),
            usable, nil, 0, aad, aadCount)
        if rc != 1 { CCryptoBoringSSL_ERR_clear_error() }
        return rc == 1 && tagLength == 16
    }

    /// Opens the stored page at `stored` into `usable` bytes at `out`; `false` when it does not verify.
    func open(
        _ stored: UnsafeRawPointer, into out: UnsafeMutableRawPointer, aad: UnsafePointer<UInt8>,
        aadCount: Int
    ) -> Bool {
        let s = stored.assumingMemoryBound(to: UInt8.self)
        let rc = CCryptoBoringSSL_EVP_AEAD_CTX_open_gather(
            context, out.assumingMemoryBound(to: UInt8.self), s + usable, 12, s, usable, s + usable + 12, 16,
            aad,
            aadCount)
        if rc != 1 { CCryptoBoringSSL_ERR_clear_error() }
        return rc == 1
    }
}
