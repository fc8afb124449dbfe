import CSQLite
import Crypto
import Synchronization
import _CryptoExtras

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The cost of deriving a store's key-encryption key from its secret with scrypt (RFC 7914).
///
/// Scrypt is memory-hard: a guess at the secret costs `128 · r · 2^log2N` bytes of memory as well as time,
/// which makes guessing on GPUs and ASICs far dearer than with PBKDF2 at the same wall-clock cost on a
/// server. The cost is recorded in each file's header, so files made with one cost stay readable when
/// the default changes.
public struct KeyDerivationCost: Sendable, Equatable {
    /// `log2(N)`, the CPU/memory cost.
    public var log2N: UInt8
    /// The block size `r`.
    public var r: UInt8
    /// The parallelism `p`.
    public var p: UInt8

    public init(log2N: UInt8, r: UInt8, p: UInt8) {
        self.log2N = log2N
        self.r = r
        self.p = p
    }

    /// N = 2^15, r = 8, p = 1: 32 MiB and about 0.1 s per derivation on one core of a server, once per
    /// store file at start (the derived keys are cached while the process runs).
    public static let standard = KeyDerivationCost(log2N: 15, r: 8, p: 1)
    /// N = 2^10: for unit tests only (fast, and far too cheap for real secrets).
    public static let testing = KeyDerivationCost(log2N: 10, r: 8, p: 1)
}

/// Why an encrypted store could not be opened (or an encrypted one was opened without a key).
///
/// Messages name the file and where the secret was configured (the `label`), never the secret.
public struct StoreEncryptionError: Error, CustomStringConvertible, Sendable, Equatable {
    /// What went wrong.
    public enum Kind: Sendable, Equatable {
        /// The secret does not open the file's key (or the header was altered: the two cannot be told apart).
        case wrongKey
        /// A plaintext SQLite file where an encrypted store was expected.
        case notEncrypted
        /// An encrypted store opened without a key.
        case encryptedWithoutKey
        /// Neither an encrypted store nor a SQLite file.
        case notAStore
        /// An encrypted store made by a newer version, or with parameters this version does not accept.
        case unsupportedFormat
        /// The file could not be read or written.
        case io
        /// The configured secret cannot be used (empty).
        case invalidSecret
        /// A rewrite by ``StoreRekey`` did not produce a sound copy (the original is kept).
        case rekeyFailed
    }

    /// What went wrong.
    public let kind: Kind
    /// The store file.
    public let path: String
    /// The whole message.
    public let description: String

    init(_ kind: Kind, path: String, _ description: String) {
        self.kind = kind
        self.path = path
        self.description = description
    }
}

/// The keys of one encrypted file: the page key (AES-256-GCM) and the key that masks WAL frame checksums.
/// `@unchecked`: `SymmetricKey` is an immutable value (its bytes are never written after creation) that
/// swift-crypto 3 does not mark `Sendable` on Linux.
struct FileKeys: @unchecked Sendable {
    let page: SymmetricKey
    let mask: SymmetricKey

    init(dataKey: SymmetricKey) {
        page = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: dataKey, info: Array("mirrorgate store v1 page key".utf8), outputByteCount: 32)
        mask = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: dataKey, info: Array("mirrorgate store v1 wal checksum mask".utf8),
            outputByteCount: 32)
    }
}

/// Encryption at rest for SQLite stores: one configured secret, and the SQLite VFS that encrypts every
/// file opened with it. Pass it in ``DatabaseOptions/encryption``; one instance may serve several stores.
///
/// Promises:
/// - every database page and every WAL frame's page is encrypted and authenticated with AES-256-GCM
///   (a random 96-bit nonce per write, nonce and tag in the page's 28 reserved bytes, the page number —
///   or for a WAL frame its offset and frame header — as associated data); a page that fails
///   authentication is an error (`SQLITE_IOERR_DATA`), never data;
/// - each file has its own random 256-bit data key, stored wrapped (AES-256-GCM) under a key derived from
///   the secret with scrypt and a random 256-bit per-file salt, in a 4096-byte header before the first page;
///   a wrong secret is refused before SQLite reads anything (``StoreEncryptionError/Kind-swift.enum/wrongKey``);
/// - rollback journals, temporary files and statement journals are never written: connections run with
///   `temp_store=MEMORY` and the VFS refuses to open any file but the database and its WAL;
/// - the secret and the keys are never logged and never part of an error message.
///
/// Not protected (see README, "Encryption at rest"): the `-shm` index, file sizes and access patterns,
/// the rollback of a file to an older copy of itself, and the secret where it is configured.
public final class StoreEncryption: Sendable {
    /// Where the secret was configured (e.g. `algolia.storeEncryptionKey`), for messages.
    public let label: String
    /// The scrypt cost of files created with this secret.
    public let cost: KeyDerivationCost
    /// The name under which the VFS is registered with SQLite.
    public let vfsName: String

    private let secret: Secret
    let vfs: RegisteredVFS
    /// Data keys already unwrapped, by header (the header names salt, cost and wrapped key exactly).
    private let unwrapped = Mutex<[[UInt8]: FileKeys]>([:])
    /// Keys of the database files open now, by the name SQLite gave them: their WAL files use them.
    private let openDatabases = Mutex<[String: (keys: FileKeys, count: Int)]>([:])
    /// The last file SQLite asked for that the VFS refused, for error messages.
    private let refusal = Mutex<String?>(nil)

    private static let counter = Atomic<Int>(0)
    /// WAL frames whose header SQLite rewrote alone (their page re-encrypted under it), for tests.
    let rewrittenFrames = Atomic<Int>(0)

    /// Registers a VFS for `secret`. Throws when the secret is empty.
    public init(secret: String, label: String, cost: KeyDerivationCost = .standard) throws {
        guard !secret.isEmpty else {
            throw StoreEncryptionError(.invalidSecret, path: "", "\(label) is empty")
        }
        self.label = label
        self.cost = cost
        self.secret = Secret(key: SymmetricKey(data: Array(secret.utf8)))
        let n = Self.counter.wrappingAdd(1, ordering: .relaxed).oldValue
        vfsName = "mirrorgate-crypt-\(n)"
        vfs = RegisteredVFS(name: vfsName)
        vfs.register(owner: Unmanaged.passUnretained(self).toOpaque())
    }

    deinit {
        vfs.unregister()
    }

    // MARK: Header

    /// Reads the header of the file at `path` and unwraps its key, so that SQLite's opens find it cached;
    /// creates the file with a fresh header when it is missing or empty and `create` is set.
    /// Returns `true` when the store has no page yet (new, or created and never written).
    @discardableResult
    public func prepare(path: String, create: Bool) throws -> Bool {
        let bytes = try StoreFile.readPrefix(path, count: StoreHeader.size)
        if bytes.isEmpty {
            guard create else {
                throw StoreEncryptionError(.io, path: path, "\(path): the encrypted store does not exist")
            }
            let (header, keys) = try makeHeader()
            try StoreFile.createAtomically(path, contents: header)
            unwrapped.withLock { $0[Array(header[..<StoreHeader.authenticatedEnd])] = keys }
            return true
        }
        _ = try unlock(header: bytes, path: path)
        StoreFile.restrictMode(path)
        return try StoreFile.size(path) <= Int64(StoreHeader.size)
    }

    /// The keys of a file with this header; runs scrypt unless cached. Throws a clear error otherwise.
    func unlock(header bytes: [UInt8], path: String) throws -> FileKeys {
        let header = try StoreHeader.parse(bytes, path: path, label: label)
        if let keys = unwrapped.withLock({ $0[header.identity] }) { return keys }
        let kek = try deriveKEK(salt: header.salt, cost: header.cost, path: path)
        let dataKey: SymmetricKey
        do {
            let box = try AES.GCM.SealedBox(
                nonce: AES.GCM.Nonce(data: header.wrapNonce), ciphertext: header.wrappedKey,
                tag: header.wrapTag)
            dataKey = SymmetricKey(
                data: try AES.GCM.open(box, using: kek, authenticating: header.authenticated))
        } catch {
            throw StoreEncryptionError(
                .wrongKey, path: path,
                "\(path): \(label) does not open this store (wrong key, or the file header was altered)")
        }
        let keys = FileKeys(dataKey: dataKey)
        unwrapped.withLock { $0[header.identity] = keys }
        return keys
    }

    /// A new header: fresh salt and data key, wrapped under the secret with this instance's cost.
    func makeHeader() throws -> ([UInt8], FileKeys) {
        let salt = SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) }
        let dataKey = SymmetricKey(size: .bits256)
        var header = StoreHeader.prefix(cost: cost, salt: salt)
        let kek = try deriveKEK(salt: salt, cost: cost, path: "")
        let nonce = AES.GCM.Nonce()
        let box = try dataKey.withUnsafeBytes {
            try AES.GCM.seal($0, using: kek, nonce: nonce, authenticating: header)
        }
        header += Array(nonce) + Array(box.ciphertext) + Array(box.tag)
        header += [UInt8](repeating: 0, count: StoreHeader.size - header.count)
        return (header, FileKeys(dataKey: dataKey))
    }

    private func deriveKEK(salt: [UInt8], cost: KeyDerivationCost, path: String) throws -> SymmetricKey {
        do {
            return try secret.key.withUnsafeBytes { secretBytes in
                try KDF.Scrypt.deriveKey(
                    from: secretBytes, salt: salt, outputByteCount: 32, rounds: 1 << Int(cost.log2N),
                    blockSize: Int(cost.r), parallelism: Int(cost.p))
            }
        } catch {
            throw StoreEncryptionError(
                .unsupportedFormat, path: path, "\(path): the key derivation failed (\(error))")
        }
    }

    // MARK: Open files (called by the VFS)

    func databaseOpened(name: String, keys: FileKeys) {
        openDatabases.withLock { open in
            let count = open[name]?.count ?? 0
            open[name] = (keys, count + 1)
        }
    }

    func databaseClosed(name: String) {
        openDatabases.withLock { open in
            guard let entry = open[name] else { return }
            if entry.count <= 1 { open[name] = nil } else { open[name] = (entry.keys, entry.count - 1) }
        }
    }

    func keysOfOpenDatabase(name: String) -> FileKeys? {
        openDatabases.withLock { $0[name]?.keys }
    }

    func refuse(_ note: String) {
        refusal.withLock { $0 = note }
    }

    /// The reason of the VFS's last refusal to open a file, cleared by reading it.
    public func takeRefusal() -> String? {
        refusal.withLock { note in
            defer { note = nil }
            return note
        }
    }
}

/// The configured secret, kept in swift-crypto's zeroed-on-release storage (see `FileKeys` for `@unchecked`).
private struct Secret: @unchecked Sendable {
    let key: SymmetricKey
}

/// The 4096-byte header in front of an encrypted database file (all integers big-endian):
///
/// ```
///   0  16  magic "MG encrypted v1\0"
///  16   1  cipher: 1 = AES-256-GCM pages (12-byte nonce + 16-byte tag in each page's reserved bytes)
///  17   1  key derivation: 1 = scrypt
///  18   3  scrypt log2(N), r, p
///  21   1  reserved bytes per page (28)
///  22   2  zero
///  24   4  page size (4096)
///  28   4  header size (4096)
///  32  32  scrypt salt
///  64  12  nonce of the wrapped data key
///  76  32  data key, AES-256-GCM under scrypt(secret, salt), bytes 0..<64 as associated data
/// 108  16  its tag
/// 124      zeros up to 4096
/// ```
struct StoreHeader {
    static let size = 4096
    static let pageSize = 4096
    static let reserve = 28
    static let nonceSize = 12
    static let tagSize = 16
    /// Bytes of a page that carry SQLite's data (the rest is nonce and tag).
    static let usable = pageSize - reserve
    static let authenticatedEnd = 124
    static let magic: [UInt8] = Array("MG encrypted v1".utf8) + [0]
    static let sqliteMagic: [UInt8] = Array("SQLite format 3".utf8) + [0]

    let cost: KeyDerivationCost
    let salt: [UInt8]
    let wrapNonce: [UInt8]
    let wrappedKey: [UInt8]
    let wrapTag: [UInt8]
    /// Bytes 0..<64: what the wrapped key authenticates.
    let authenticated: [UInt8]
    /// Bytes 0..<124: the cache key of the unwrapped data key.
    let identity: [UInt8]

    static func prefix(cost: KeyDerivationCost, salt: [UInt8]) -> [UInt8] {
        var h = magic
        h += [1, 1, cost.log2N, cost.r, cost.p, UInt8(reserve), 0, 0]
        h += bigEndian(UInt32(pageSize)) + bigEndian(UInt32(size))
        h += salt
        return h
    }

    static func parse(_ b: [UInt8], path: String, label: String) throws -> StoreHeader {
        if b.starts(with: sqliteMagic) {
            throw StoreEncryptionError(
                .notEncrypted, path: path,
                "\(path) is not encrypted, but \(label) is set: encrypt it with `mirrorgate rekey` "
                    + "(or remove the key)")
        }
        guard b.starts(with: magic) else {
            throw StoreEncryptionError(
                .notAStore, path: path,
                "\(path) is neither an encrypted Mirrorgate store nor a SQLite database")
        }
        guard b.count >= size else {
            throw StoreEncryptionError(
                .notAStore, path: path, "\(path): the encryption header is truncated (\(b.count) bytes)")
        }
        let cost = KeyDerivationCost(log2N: b[18], r: b[19], p: b[20])
        guard b[16] == 1, b[17] == 1, Int(b[21]) == reserve, b[22] == 0, b[23] == 0,
            Array(b[24..<32]) == bigEndian(UInt32(pageSize)) + bigEndian(UInt32(size)),
            (10...22).contains(cost.log2N), (1...32).contains(cost.r), (1...16).contains(cost.p)
        else {
            throw StoreEncryptionError(
                .unsupportedFormat, path: path,
                "\(path): unsupported encryption parameters (a newer version's store, or an altered header)")
        }
        return StoreHeader(
            cost: cost, salt: Array(b[32..<64]), wrapNonce: Array(b[64..<76]), wrappedKey: Array(b[76..<108]),
            wrapTag: Array(b[108..<124]), authenticated: Array(b[0..<64]), identity: Array(b[0..<124]))
    }
}

func bigEndian(_ v: UInt32) -> [UInt8] {
    [UInt8(v >> 24), UInt8((v >> 16) & 0xFF), UInt8((v >> 8) & 0xFF), UInt8(v & 0xFF)]
}

func bigEndian(_ v: UInt64) -> [UInt8] {
    bigEndian(UInt32(v >> 32)) + bigEndian(UInt32(v & 0xFFFF_FFFF))
}

/// Plain file operations on store files, outside SQLite.
enum StoreFile {
    /// Up to `count` bytes from the start of the file; empty when it does not exist.
    static func readPrefix(_ path: String, count: Int) throws -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 {
            let err = errno
            if err == ENOENT { return [] }
            throw StoreEncryptionError(
                .io, path: path, "cannot open \(path): \(String(cString: strerror(err)))")
        }
        defer { _ = close(fd) }
        var buffer = [UInt8](repeating: 0, count: count)
        var got = 0
        while got < count {
            let n = buffer.withUnsafeMutableBytes {
                pread(fd, $0.baseAddress! + got, count - got, off_t(got))
            }
            if n < 0 {
                if errno == EINTR { continue }
                let err = errno
                throw StoreEncryptionError(
                    .io, path: path, "cannot read \(path): \(String(cString: strerror(err)))")
            }
            if n == 0 { break }
            got += n
        }
        return Array(buffer[..<got])
    }

    static func size(_ path: String) throws -> Int64 {
        var st = stat()
        guard stat(path, &st) == 0 else {
            let err = errno
            throw StoreEncryptionError(
                .io, path: path, "cannot stat \(path): \(String(cString: strerror(err)))")
        }
        return Int64(st.st_size)
    }

    static func restrictMode(_ path: String) {
        _ = chmod(path, 0o600)
    }

    /// Writes `contents` to a temporary sibling (mode 0600), syncs it and renames it to `path`, then syncs
    /// the directory: the file appears whole or not at all.
    static func createAtomically(_ path: String, contents: [UInt8]) throws {
        let temporary = path + ".mg-new"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw failure("create", temporary) }
        var written = 0
        while written < contents.count {
            let n = contents.withUnsafeBytes {
                write(fd, $0.baseAddress! + written, contents.count - written)
            }
            if n < 0 {
                if errno == EINTR { continue }
                let error = failure("write", temporary)
                _ = close(fd)
                _ = unlink(temporary)
                throw error
            }
            written += n
        }
        _ = fchmod(fd, 0o600)
        if fsync(fd) != 0 {
            let error = failure("sync", temporary)
            _ = close(fd)
            _ = unlink(temporary)
            throw error
        }
        _ = close(fd)
        guard rename(temporary, path) == 0 else {
            let error = failure("rename", temporary)
            _ = unlink(temporary)
            throw error
        }
        syncDirectory(of: path)
    }

    static func syncDirectory(of path: String) {
        var directory = path
        if let slash = directory.lastIndex(of: "/") {
            directory = slash == directory.startIndex ? "/" : String(directory[..<slash])
        } else {
            directory = "."
        }
        let fd = open(directory, O_RDONLY | O_CLOEXEC)
        if fd >= 0 {
            _ = fsync(fd)
            _ = close(fd)
        }
    }

    static func syncFile(_ path: String) throws {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw failure("open", path) }
        defer { _ = close(fd) }
        guard fsync(fd) == 0 else { throw failure("sync", path) }
    }

    static func failure(_ what: String, _ path: String) -> StoreEncryptionError {
        let err = errno
        return StoreEncryptionError(
            .io, path: path, "cannot \(what) \(path): \(String(cString: strerror(err)))")
    }
}
