/// What a reload changes (`SIGHUP`, `POST /_mirrorgate/reload`): the configuration to run and the keys
/// that differ, split into those applied now and those that need a restart.
///
/// Restart-only keys (``restartOnlyKeys``) keep their running value in ``effective``: the listener's
/// address, limits and deadline are fixed when it starts, and `dataDir` holds the open stores. Every other
/// key applies: CORS origins, shutdown grace, the admin token, log level and format, policies, and every
/// Algolia and OData key (indices and services added, removed or changed).
public struct ConfigurationReload: Sendable, Equatable {
    /// One key whose value differs.
    public struct Change: Sendable, Equatable, Hashable {
        /// The dotted key (`algolia.indices.products`, `log.level`); never a value.
        public var key: String
        /// `added`, `removed` or `changed`.
        public var kind: String
        /// Creates a change.
        public init(key: String, kind: String) {
            self.key = key
            self.kind = kind
        }
    }

    /// The configuration to run: the new one, with the restart-only keys at their running values.
    public var effective: MirrorgateConfiguration
    /// The keys applied now, in a stable order.
    public var applied: [Change]
    /// The restart-only keys whose new value is not applied.
    public var restartRequired: [String]

    /// Keys that a running gateway cannot change.
    public static let restartOnlyKeys = [
        "server.listen", "server.allowRemote", "server.maxBodySize", "server.maxConnections",
        "server.requestTimeout", "dataDir", "algolia.storeEncryptionKey",
        "odata.services.*.storeEncryptionKey",
    ]

    /// Compares the running configuration with a newly loaded one. Only the keys this type knows to be
    /// reloadable are taken from `loaded`; a key it does not know (added to the configuration later)
    /// keeps its running value and is reported as needing a restart (`other keys`).
    public init(running: MirrorgateConfiguration, loaded: MirrorgateConfiguration) {
        var effective = running
        effective.server.shutdownGrace = loaded.server.shutdownGrace
        effective.server.cors = loaded.server.cors
        effective.admin = loaded.admin
        effective.log = loaded.log
        effective.policies = loaded.policies
        effective.algolia = loaded.algolia
        effective.algolia.storeEncryptionKey = running.algolia.storeEncryptionKey
        effective.odata = loaded.odata
        // An open store keeps its key: `mirrorgate rekey` changes it, with the gateway stopped.
        for (name, service) in running.odata.services where effective.odata.services[name] != nil {
            effective.odata.services[name]!.storeEncryptionKey = service.storeEncryptionKey
        }
        effective.baseDirectory = loaded.baseDirectory
        var restart: [String] = []
        var check = effective
        func restartOnly<T: Equatable>(_ key: String, _ path: WritableKeyPath<MirrorgateConfiguration, T>) {
            if running[keyPath: path] != loaded[keyPath: path] { restart.append(key) }
            check[keyPath: path] = loaded[keyPath: path]
        }
        restartOnly("server.listen", \.server.listen)
        restartOnly("server.allowRemote", \.server.allowRemote)
        restartOnly("server.maxBodySize", \.server.maxBodySize)
        restartOnly("server.maxConnections", \.server.maxConnections)
        restartOnly("server.requestTimeout", \.server.requestTimeout)
        restartOnly("dataDir", \.dataDir)
        restartOnly("algolia.storeEncryptionKey", \.algolia.storeEncryptionKey)
        for (name, service) in running.odata.services.sorted(by: { $0.key < $1.key }) {
            guard let new = loaded.odata.services[name] else { continue }
            if new.storeEncryptionKey != service.storeEncryptionKey {
                restart.append("odata.services.\(name).storeEncryptionKey")
            }
            check.odata.services[name]!.storeEncryptionKey = new.storeEncryptionKey
        }
        if check != loaded { restart.append("other keys") }
        self.effective = effective
        self.restartRequired = restart
        self.applied = Self.changes(running, effective)
    }

    /// Problems of the effective configuration that the file alone does not show: a listener kept from the
    /// command line (`--listen`) on a non-loopback address needs `allowRemote` and `admin.token`.
    public var issues: [String] {
        let server = effective.server
        if !server.listen.isLoopback, !(server.allowRemote && effective.admin.token != nil) {
            return [
                "the gateway listens on \(server.listen), which needs server.allowRemote: true and admin.token"
            ]
        }
        return []
    }

    private static func changes(_ a: MirrorgateConfiguration, _ b: MirrorgateConfiguration) -> [Change] {
        var out: [Change] = []
        func scalar<T: Equatable>(_ key: String, _ path: KeyPath<MirrorgateConfiguration, T>) {
            if a[keyPath: path] != b[keyPath: path] { out.append(Change(key: key, kind: "changed")) }
        }
        func named<T: Equatable>(_ prefix: String, _ x: [String: T], _ y: [String: T]) {
            for name in Set(x.keys).union(y.keys).sorted() {
                switch (x[name], y[name]) {
                case (nil, _?): out.append(Change(key: "\(prefix).\(name)", kind: "added"))
                case (_?, nil): out.append(Change(key: "\(prefix).\(name)", kind: "removed"))
                case (let p?, let q?) where p != q:
                    out.append(Change(key: "\(prefix).\(name)", kind: "changed"))
                default: break
                }
            }
        }
        scalar("server.shutdownGrace", \.server.shutdownGrace)
        scalar("server.cors.allowOrigins", \.server.cors)
        scalar("admin.token", \.admin.token)
        scalar("admin.maxBodySize", \.admin.maxBodySize)
        scalar("log.level", \.log.level)
        scalar("log.format", \.log.format)
        named("policies", a.policies, b.policies)
        scalar("algolia.appId", \.algolia.appId)
        scalar("algolia.apiKey", \.algolia.apiKey)
        scalar("algolia.hosts", \.algolia.hosts)
        scalar("algolia.connectTimeout", \.algolia.connectTimeout)
        scalar("algolia.timeout", \.algolia.timeout)
        scalar("algolia.writeTimeout", \.algolia.writeTimeout)
        scalar("algolia.unavailableStatus", \.algolia.unavailableStatus)
        named("algolia.indices", a.algolia.indices, b.algolia.indices)
        named("algolia.offlineIndices", a.algolia.offlineIndices, b.algolia.offlineIndices)
        named("odata.services", a.odata.services, b.odata.services)
        scalar("baseDirectory", \.baseDirectory)
        return out
    }

    /// Whether the Algolia service must be rebuilt (its keys or indices changed). Changed policies do not
    /// rebuild it: the replication scheduler applies them to the mirrors' jobs.
    public var algoliaChanged: Bool {
        applied.contains { $0.key.hasPrefix("algolia.") || $0.key == "baseDirectory" }
    }
}

extension ConfigurationReload {
    /// Whether OData service `name` must be reopened: its keys or the directory its bootstrap files
    /// resolve against changed. The policy it follows is not among them: the replication scheduler
    /// applies a changed one to the kept service's job (the assembly's reschedule).
    public static func odataServiceChanged(
        _ name: String, _ a: MirrorgateConfiguration, _ b: MirrorgateConfiguration
    )
        -> Bool
    {
        guard var x = a.odata.services[name], let y = b.odata.services[name] else { return true }
        x.policy = y.policy
        return x != y || a.baseDirectory != b.baseDirectory
    }
}
