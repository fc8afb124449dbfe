/// The store files of a data directory and the encryption of each, from the configured secrets (the
/// assembly passes them from the configuration): `algolia.storeEncryptionKey` protects `state.sqlite` (remembered key hashes, sync
/// checkpoints and staged records) and `search.sqlite` (mirrors and offline indices);
/// `odata.services.NAME.storeEncryptionKey` protects `odata-NAME.sqlite`.
///
/// Promises: one ``StoreEncryption`` per configured secret (stores sharing a secret share it); a store
/// without a secret has no encryption; secrets appear in no message (each encryption is labelled with the
/// configuration key that holds its secret).
public struct StoreLayout: Sendable {
    /// One store file.
    public struct Store: Sendable {
        /// Its path (`dataDir/NAME.sqlite`).
        public let path: String
        /// The configuration key of its secret.
        public let keyName: String
        /// Its encryption, `nil` when its secret is not configured.
        public let encryption: StoreEncryption?
    }

    /// The data directory.
    public let dataDir: String
    /// `state.sqlite`.
    public let state: Store
    /// `search.sqlite` (as the search engine's `IndexStore` names it).
    public let search: Store
    /// `odata-NAME.sqlite` per configured service.
    public let odata: [String: Store]

    /// Every store, in a stable order.
    public var all: [Store] { [state, search] + odata.keys.sorted().map { odata[$0]! } }

    /// Builds the layout of `dataDir` from the secrets of the Algolia stores and of each OData service's
    /// store (`nil`: no secret configured); throws when a secret cannot be used.
    public init(
        dataDir: String, algoliaSecret: String?, odataSecrets: [String: String?],
        cost: KeyDerivationCost = .standard
    ) throws {
        let dir = dataDir.hasSuffix("/") ? String(dataDir.dropLast()) : dataDir
        self.dataDir = dir
        let algoliaKey = "algolia.storeEncryptionKey"
        let algolia = try algoliaSecret.map {
            try StoreEncryption(secret: $0, label: algoliaKey, cost: cost)
        }
        state = Store(path: dir + "/state.sqlite", keyName: algoliaKey, encryption: algolia)
        search = Store(path: dir + "/search.sqlite", keyName: algoliaKey, encryption: algolia)
        var odata: [String: Store] = [:]
        for (name, secret) in odataSecrets {
            let keyName = "odata.services.\(name).storeEncryptionKey"
            odata[name] = Store(
                path: dir + "/odata-\(name).sqlite", keyName: keyName,
                encryption: try secret.map {
                    try StoreEncryption(secret: $0, label: keyName, cost: cost)
                })
        }
        self.odata = odata
    }
}

/// Stores whose encryption does not match the configuration, one line each.
public struct StoreKeyProblems: Error, CustomStringConvertible, Sendable {
    /// One line per store.
    public let problems: [String]
    public var description: String { problems.joined(separator: "\n") }
}

extension StoreLayout {
    /// Checks every existing store against its configured secret before anything opens them: a wrong key,
    /// a plaintext store with a secret configured, an encrypted one without, all reported at once. The
    /// keys found are cached, so opening the stores afterwards derives no key twice.
    public func verifyKeys() throws {
        var problems: [String] = []
        for store in all {
            do {
                switch (try StoreFileKind.of(store.path), store.encryption) {
                case (.missing, _), (.plaintext, nil):
                    break
                case (.unknown, _):
                    problems.append("\(store.path) is neither a SQLite database nor an encrypted store")
                case (.encrypted, nil):
                    problems.append(
                        "\(store.path) is encrypted, but \(store.keyName) is not set: set it (or decrypt the "
                            + "store with `mirrorgate rekey --old-key-env VAR`)")
                case (_, let encryption?):
                    try encryption.prepare(path: store.path, create: false)
                }
            } catch {
                problems.append("\(error)")
            }
        }
        if !problems.isEmpty { throw StoreKeyProblems(problems: problems) }
    }

    /// What `rekey` did to one store.
    public struct RekeyOutcome: Sendable, Equatable {
        /// The store file.
        public let path: String
        /// One line for the operator (never a secret).
        public let message: String
        /// `true` when the store is not in its configured state afterwards.
        public let failed: Bool
    }

    /// Brings every store to its configured encryption (`mirrorgate rekey`): a plaintext store whose secret
    /// is configured is encrypted; an encrypted one that its configured secret does not open is rewritten
    /// from `oldSecret` (re-encrypted, or decrypted when no secret is configured); a store already in its
    /// configured state is left alone, so that running it again after an interruption finishes the work.
    /// Takes the data directory's lock exclusively: throws while a gateway runs on it.
    public func rekey(oldSecret: String?, cost: KeyDerivationCost = .standard) throws -> [RekeyOutcome] {
        var outcomes: [RekeyOutcome] = []
        let lock = try DataDirectoryLock(directory: dataDir, exclusive: true)
        defer { withExtendedLifetime(lock) {} }
        let old = try oldSecret.map { try StoreEncryption(secret: $0, label: "the old key", cost: cost) }
        for store in all {
            let name = store.path.split(separator: "/").last.map(String.init) ?? store.path
            func done(_ message: String, failed: Bool = false) {
                outcomes.append(
                    RekeyOutcome(path: store.path, message: "\(name): \(message)", failed: failed))
            }
            do {
                switch (try StoreFileKind.of(store.path), store.encryption) {
                case (.missing, _):
                    done("no file")
                case (.unknown, _):
                    done("neither a SQLite database nor an encrypted store; left alone", failed: true)
                case (.plaintext, nil):
                    done("plaintext, as configured (\(store.keyName) is not set)")
                case (.plaintext, let target?):
                    try StoreRekey.rekey(path: store.path, from: nil, to: target)
                    done("encrypted with \(store.keyName)")
                case (.encrypted, let target?) where try StoreRekey.opens(store.path, with: target):
                    done("already encrypted with \(store.keyName)")
                case (.encrypted, let target):
                    guard let old, try StoreRekey.opens(store.path, with: old) else {
                        done(
                            (target == nil
                                ? "encrypted, but \(store.keyName) is not set"
                                : "encrypted with another key than \(store.keyName)")
                                + ": give the key it has now with --old-key-env or --old-key-file",
                            failed: true)
                        continue
                    }
                    try StoreRekey.rekey(path: store.path, from: old, to: target)
                    done(
                        target == nil
                            ? "decrypted (\(store.keyName) is not set)" : "re-encrypted with \(store.keyName)"
                    )
                }
            } catch {
                done("\(error) (the store is unchanged)", failed: true)
            }
        }
        return outcomes
    }
}
