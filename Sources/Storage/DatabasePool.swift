import Synchronization

/// One writer connection and N reader connections on one WAL database file. Thread-safe.
///
/// Promises: writes are serialized on the single writer; reads run on separate `query_only`
/// connections and see the last committed state without waiting for the writer.
/// With `readers: 0` (or an in-memory database) reads use the writer connection.
public final class DatabasePool: Sendable {
    public let path: String
    private let writer: Guarded
    private let readers: [Guarded]
    private let nextReader = Atomic<Int>(0)

    public init(path: String, options: DatabaseOptions = .init(), readers: Int = 2) throws {
        self.path = path
        var writerOptions = options
        writerOptions.readOnly = false
        writer = Guarded(try Database(path: path, options: writerOptions))
        let isMemory = path == ":memory:" || path.isEmpty
        var list: [Guarded] = []
        if !isMemory {
            for _ in 0..<max(0, readers) {
                list.append(Guarded(try Database(path: path, options: writerOptions, role: .poolReader)))
            }
        }
        self.readers = list
    }

    /// Runs `body` with exclusive use of the writer connection.
    public func write<T>(_ body: (Database) throws -> T) throws -> T {
        try writer.use(body)
    }

    /// Runs `body` with exclusive use of one reader connection (query-only).
    public func read<T>(_ body: (Database) throws -> T) throws -> T {
        if readers.isEmpty { return try writer.use(body) }
        // First a free reader, else wait on the next one in turn.
        for reader in readers {
            if let result = try reader.useIfAvailable(body) { return result }
        }
        let i = nextReader.wrappingAdd(1, ordering: .relaxed).oldValue
        let index = ((i % readers.count) + readers.count) % readers.count
        return try readers[index].use(body)
    }

    /// `wal_checkpoint(TRUNCATE)` on the writer.
    public func checkpoint() throws {
        try write { try $0.checkpoint(truncate: true) }
    }

    /// Closes every connection; later calls throw a "closed" error.
    public func close() {
        for reader in readers { reader.closeConnection() }
        writer.closeConnection()
    }
}

/// A connection behind its own lock.
private final class Guarded: Sendable {
    private let lock = Mutex(())
    private let database: Database

    init(_ db: Database) { database = db }

    func use<T>(_ body: (Database) throws -> T) throws -> T {
        var result: Result<T, any Error>?
        lock.withLock { _ in result = run(body) }
        return try result!.get()
    }

    func useIfAvailable<T>(_ body: (Database) throws -> T) throws -> T? {
        var result: Result<T, any Error>?
        _ = lock.withLockIfAvailable { _ in result = run(body) }
        return try result?.get()
    }

    private func run<T>(_ body: (Database) throws -> T) -> Result<T, any Error> {
        guard database.isOpen else { return .failure(SQLiteError.closed(sql: nil)) }
        return Result { try body(database) }
    }

    func closeConnection() {
        lock.withLock { _ in database.close() }
    }
}
