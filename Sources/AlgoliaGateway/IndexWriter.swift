import Foundation
import GatewaySupport
import SearchEngine
import Storage

/// The one writer of the local indices (offline indices, and mirrors with queued writes): every write
/// runs on its single thread, in the order submitted.
///
/// Promises: a commit computes the new version of each index it touches from the current one
/// (incrementally, ``SearchIndex/applying(_:)``), writes all of it — records, settings, the tasks and
/// any queue row — in one SQLite transaction (`synchronous=FULL`), and only then installs the new
/// versions, so that what a reader sees is always on disk and never half a commit; a commit that fails
/// changes nothing, on disk or in memory.
final class IndexWriter: Sendable {
    /// One change of a commit, applied in order (later steps see what earlier ones did).
    enum Step: Sendable {
        /// Applies a write to the index (created, empty, when it does not exist).
        case write(String, IndexWrite)
        /// Replaces `to` with a copy of `from` (records, settings, synonyms, rules).
        case copy(from: String, to: String)
        /// Renames `from` to `to` (replacing it).
        case move(from: String, to: String)
        /// Deletes the index.
        case delete(String)
    }

    /// Why a commit did not happen.
    enum Failure: Error {
        /// The store refused (disk full, I/O error…): nothing changed.
        case storage(any Error)
        /// A mirror changed under the write (a sync installed a new version): retry from the new one.
        case conflict
    }

    let store: IndexStore
    let registry: OfflineIndexRegistry
    let mirrors: [String: MirroredIndex]
    let tasks: TaskLog
    private let executor = WorkerPool(threads: 1, name: "mg-writer", stackSize: 16 << 20)

    init(store: IndexStore, registry: OfflineIndexRegistry, mirrors: [String: MirroredIndex]) throws {
        self.store = store
        self.registry = registry
        self.mirrors = mirrors
        tasks = try TaskLog(pool: store.pool)
    }

    /// Runs `job` on the writer thread after every job submitted before it.
    func submit(_ job: @escaping @Sendable () -> Void) { executor.submit(job) }

    /// Lets queued writes finish (at shutdown).
    func stop() { executor.shutdown() }

    /// The version of `name` that answers now: an offline index, or a mirror's current version.
    func current(_ name: String) -> SearchIndex? {
        if let offline = registry.lookup(name) { return offline.index }
        return mirrors[name]?.current
    }

    /// Applies `steps` atomically and records a task for each of `taskIndices` (queued tasks when
    /// `queued`); `extra` runs in the same transaction (a queue row). Returns the task ids by index.
    func commit(
        _ steps: [Step], taskIndices: [String], queued: Bool = false,
        extra: ((Database, [String: Int64]) throws -> Void)? = nil
    ) throws(Failure) -> [String: Int64] {
        var working: [String: SearchIndex?] = [:]
        func base(_ name: String) -> SearchIndex? {
            if let w = working[name] { return w }
            return current(name)
        }
        let ids: [String: Int64]
        do {
            ids = try store.write { tx in
                for step in steps {
                    switch step {
                    case .write(let name, let write):
                        let old = base(name) ?? SearchIndex(name: name, settings: [:], records: [])
                        let (new, change) = old.applying(write)
                        let version = try tx.apply(change, to: new, expectedVersion: old.storeVersion)
                        working[name] = new.stored(as: version)
                    case .copy(let from, let to):
                        guard let source = base(from) else { continue }
                        let version = try tx.copy(from: from, to: to)
                        working[to] = source.renamed(to, storeVersion: version)
                    case .move(let from, let to):
                        guard let source = base(from) else { continue }
                        let version = try tx.move(from: from, to: to)
                        working[to] = source.renamed(to, storeVersion: version)
                        working[from] = .some(nil)
                    case .delete(let name):
                        try tx.delete(name)
                        working[name] = .some(nil)
                    }
                }
                var ids: [String: Int64] = [:]
                for name in taskIndices where ids[name] == nil {
                    ids[name] = try tasks.record(index: name, queued: queued, in: tx.database)
                }
                try extra?(tx.database, ids)
                return ids
            }
        } catch is IndexStore.VersionConflict {
            throw .conflict
        } catch {
            throw .storage(error)
        }
        for (name, index) in working {
            if let mirror = mirrors[name], registry.lookup(name) == nil {
                if let index { mirror.installPrimary(index) }
            } else if let index {
                registry.install(index)
            } else {
                registry.remove(name)
            }
        }
        return ids
    }
}
