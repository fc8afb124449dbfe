/// The whole gateway configuration (SPEC §2). Every default lives in the initializers of these structs.
///
/// Promises: a value returned by `load`/`parse` has passed every check of SPEC §2 (types, enums,
/// references, the remote-listen rule, unsupported keys); `policies` always contains `default`.
public struct MirrorgateConfiguration: Sendable, Equatable {
    public var server: ServerConfig
    /// Directory of the SQLite files, relative to the current directory (like `--data-dir`).
    public var dataDir: String
    public var admin: AdminConfig
    public var log: LogConfig
    /// Replication policies by name; always contains `"default"`.
    public var policies: [String: PolicyConfig]
    public var algolia: AlgoliaConfig
    public var odata: ODataConfig
    /// Directory that relative paths in the configuration (dataDir, bootstrap files) resolve against:
    /// the config file's directory.
    public var baseDirectory: String

    public init(
        server: ServerConfig = .init(), dataDir: String = "./mirrorgate-data", admin: AdminConfig = .init(),
        log: LogConfig = .init(), policies: [String: PolicyConfig] = [:], algolia: AlgoliaConfig = .init(),
        odata: ODataConfig = .init(), baseDirectory: String = "."
    ) {
        self.server = server
        self.dataDir = dataDir
        self.admin = admin
        self.log = log
        var policies = policies
        if policies["default"] == nil { policies["default"] = PolicyConfig() }
        self.policies = policies
        self.algolia = algolia
        self.odata = odata
        self.baseDirectory = baseDirectory
    }

    /// `path` if absolute, else `baseDirectory/path` (bootstrap files and other files named in the
    /// configuration; `dataDir` is the exception: it is relative to the current directory).
    public func resolve(path: String) -> String {
        if path.hasPrefix("/") || baseDirectory.isEmpty || baseDirectory == "." { return path }
        return baseDirectory.hasSuffix("/") ? baseDirectory + path : baseDirectory + "/" + path
    }

    /// The policy named `name`, or `default` when there is none by that name.
    public func policy(named name: String) -> PolicyConfig {
        policies[name] ?? policies["default"] ?? PolicyConfig()
    }
}

/// `server:` — the HTTP listener.
public struct ServerConfig: Sendable, Equatable {
    /// Where to listen; a non-loopback host needs `allowRemote` and `admin.token`.
    public var listen: ListenAddress
    public var allowRemote: Bool
    /// Larger request bodies get 413 before they are read.
    public var maxBodySize: Int
    public var maxConnections: Int
    public var requestTimeout: Duration
    /// On SIGTERM in-flight requests get this long, then are closed.
    public var shutdownGrace: Duration
    public var cors: CORSConfig

    public init(
        listen: ListenAddress = ListenAddress(host: "127.0.0.1", port: 8080), allowRemote: Bool = false,
        maxBodySize: Int = 10 * 1024 * 1024, maxConnections: Int = 512,
        requestTimeout: Duration = .seconds(30),
        shutdownGrace: Duration = .seconds(5), cors: CORSConfig = .init()
    ) {
        self.listen = listen
        self.allowRemote = allowRemote
        self.maxBodySize = maxBodySize
        self.maxConnections = maxConnections
        self.requestTimeout = requestTimeout
        self.shutdownGrace = shutdownGrace
        self.cors = cors
    }
}

/// `server.cors:` — browser origins allowed; preflights are answered locally.
public struct CORSConfig: Sendable, Equatable {
    /// Origins such as `https://app.example.com`, or `*`; empty = CORS off.
    public var allowOrigins: [String]
    public init(allowOrigins: [String] = []) { self.allowOrigins = allowOrigins }
}

/// `admin:` — the `/_mirrorgate/` API.
public struct AdminConfig: Sendable, Equatable {
    /// When set, `/_mirrorgate/*` needs `Authorization: Bearer <token>`. Never log it.
    public var token: String?
    /// Largest admin upload (manual builds).
    public var maxBodySize: Int
    public init(token: String? = nil, maxBodySize: Int = 512 * 1024 * 1024) {
        self.token = token
        self.maxBodySize = maxBodySize
    }
}

/// `log.level` values.
public enum LogLevel: String, Sendable, CaseIterable {
    case trace, debug, info, notice, warning, error, critical
}

/// `log.format` values.
public enum LogFormat: String, Sendable, CaseIterable {
    case text, json
}

/// `log:`.
public struct LogConfig: Sendable, Equatable {
    public var level: LogLevel
    public var format: LogFormat
    public init(level: LogLevel = .info, format: LogFormat = .text) {
        self.level = level
        self.format = format
    }
}

/// `policies.NAME:` — a replication policy (SPEC §6): when the runs of the mirrors and services that name
/// it start (Algolia syncs; OData uploads then downloads), and how long each may take.
public struct PolicyConfig: Sendable, Equatable {
    /// Between runs while clients use the mirror.
    public var activeInterval: Duration
    /// Between runs otherwise.
    public var idleInterval: Duration
    /// "In use" = a client request touched the mirror within this window.
    public var activeWindow: Duration
    /// Runs start only while the upstream is believed reachable.
    public var onlyWhenReachable: Bool
    /// Runs start only inside one of these local-time windows (empty = any time). Written `window:
    /// "22:00-06:00"`, or a list of such strings.
    public var windows: [TimeWindow]
    /// 0 = unbounded; else a run stops at its first checkpoint past this budget and the next run resumes.
    public var maxRunDuration: Duration
    /// A command run before each run: the run starts only when it exits 0 within its timeout.
    public var condition: ConditionConfig?
    /// A random delay between 0 and this added to each scheduled run.
    public var jitter: Duration
    public var retry: RetryConfig

    public init(
        activeInterval: Duration = .seconds(3600), idleInterval: Duration = .seconds(86400),
        activeWindow: Duration = .seconds(600), onlyWhenReachable: Bool = true, windows: [TimeWindow] = [],
        maxRunDuration: Duration = .zero, condition: ConditionConfig? = nil, jitter: Duration = .zero,
        retry: RetryConfig = .init()
    ) {
        self.activeInterval = activeInterval
        self.idleInterval = idleInterval
        self.activeWindow = activeWindow
        self.onlyWhenReachable = onlyWhenReachable
        self.windows = windows
        self.maxRunDuration = maxRunDuration
        self.condition = condition
        self.jitter = jitter
        self.retry = retry
    }
}

/// `policies.NAME.condition:` — `{command: [ARGV...], timeout: 5s}`: the command (no shell; `argv[0]` is
/// looked up in `PATH`) runs before each run, which starts only if it exits 0 within `timeout`.
public struct ConditionConfig: Sendable, Equatable {
    public var command: [String]
    public var timeout: Duration
    public init(command: [String], timeout: Duration = .seconds(5)) {
        self.command = command
        self.timeout = timeout
    }
}

/// `policies.NAME.retry:` — exponential backoff with jitter after a failed run.
public struct RetryConfig: Sendable, Equatable {
    public var initial: Duration
    public var max: Duration
    public init(initial: Duration = .seconds(5), max: Duration = .seconds(900)) {
        self.initial = initial
        self.max = max
    }
}

/// `algolia:` — the upstream Algolia application and the indices served.
public struct AlgoliaConfig: Sendable, Equatable {
    public var appId: String?
    /// The gateway's own key for syncs (ACLs search, browse, settings). Never log it.
    public var apiKey: String?
    /// Hosts as configured; `nil` = Algolia's defaults (see `effectiveHosts`).
    public var hosts: [AlgoliaHost]?
    public var connectTimeout: Duration
    /// Whole budget of one read across all hosts.
    public var timeout: Duration
    /// Whole budget of one write across all hosts.
    public var writeTimeout: Duration
    /// Status when no host answers and nothing local can (always 4xx).
    public var unavailableStatus: Int
    public var indices: [String: AlgoliaIndexConfig]
    public var offlineIndices: [String: OfflineIndexConfig]
    /// Encrypts every Algolia store — mirrors and offline indices (`search.sqlite`) and the gateway's state
    /// (`state.sqlite`: remembered key hashes, sync checkpoints and staged records) — with a key derived
    /// from this secret; `nil` stores them unencrypted. Never log it.
    public var storeEncryptionKey: String?

    public init(
        appId: String? = nil, apiKey: String? = nil, hosts: [AlgoliaHost]? = nil,
        connectTimeout: Duration = .seconds(1), timeout: Duration = .milliseconds(2500),
        writeTimeout: Duration = .seconds(25), unavailableStatus: Int = 424,
        indices: [String: AlgoliaIndexConfig] = [:], offlineIndices: [String: OfflineIndexConfig] = [:],
        storeEncryptionKey: String? = nil
    ) {
        self.storeEncryptionKey = storeEncryptionKey
        self.appId = appId
        self.apiKey = apiKey
        self.hosts = hosts
        self.connectTimeout = connectTimeout
        self.timeout = timeout
        self.writeTimeout = writeTimeout
        self.unavailableStatus = unavailableStatus
        self.indices = indices
        self.offlineIndices = offlineIndices
    }

    /// The offline index configuration that `index` falls under: its own name, else the pattern with the
    /// longest prefix that it matches.
    public func offlineIndex(for index: String) -> OfflineIndexConfig? {
        if let exact = offlineIndices[index], !exact.isPattern { return exact }
        return offlineIndices.values.filter { $0.isPattern && $0.matches(index) }.max {
            $0.name.count < $1.name.count
        }
    }

    /// `hosts` if configured; else read `https://{appId}-dsn.algolia.net`, write
    /// `https://{appId}.algolia.net`, then `https://{appId}-1..3.algolianet.com` for both (in this
    /// order); empty when neither hosts nor appId is set.
    public var effectiveHosts: [AlgoliaHost] {
        if let hosts { return hosts }
        guard let appId else { return [] }
        var list = [
            AlgoliaHost(url: "https://\(appId)-dsn.algolia.net", accept: .read),
            AlgoliaHost(url: "https://\(appId).algolia.net", accept: .write),
        ]
        for i in 1...3 {
            list.append(AlgoliaHost(url: "https://\(appId)-\(i).algolianet.com", accept: .readWrite))
        }
        return list
    }
}

/// What an Algolia host is used for.
public enum HostAccept: String, Sendable, CaseIterable {
    case read, write, readWrite
    public var allowsRead: Bool { self != .write }
    public var allowsWrite: Bool { self != .read }
}

/// One upstream Algolia host: base URL without trailing slash (`https://X-dsn.algolia.net`).
public struct AlgoliaHost: Sendable, Hashable {
    public var url: String
    public var accept: HostAccept
    public init(url: String, accept: HostAccept = .readWrite) {
        self.url = url
        self.accept = accept
    }
}

/// `algolia.indices.NAME.requestStrategy` (Algolia Offline SDK's `MirroredIndex` strategies).
public enum RequestStrategy: String, Sendable, CaseIterable {
    case onlineOnly, offlineOnly, fallbackOnFailure, fallbackOnTimeout, preventive
}

/// `algolia.indices.NAME:` — an upstream index, optionally mirrored locally.
public struct AlgoliaIndexConfig: Sendable, Equatable {
    public var name: String
    public var mirrored: Bool
    public var requestStrategy: RequestStrategy
    /// For `fallbackOnTimeout`.
    public var offlineFallbackTimeout: Duration
    /// For `preventive`.
    public var preventiveOfflineSearchDelay: Duration
    /// What a sync downloads; required (non-empty) when `mirrored`.
    public var dataSelectionQueries: [DataSelectionQuery]
    /// syncIfNeeded threshold.
    public var delayBetweenSyncs: Duration
    /// Name of a policy in `MirrorgateConfiguration.policies`.
    public var policy: String
    /// Manual build when there is no offline data yet.
    public var bootstrap: AlgoliaBootstrap?
    /// Writes while the upstream is unreachable: rejected, or applied locally and queued.
    public var offlineWrites: OfflineWrites

    public init(
        name: String, mirrored: Bool = true, requestStrategy: RequestStrategy = .fallbackOnFailure,
        offlineFallbackTimeout: Duration = .seconds(1),
        preventiveOfflineSearchDelay: Duration = .milliseconds(200),
        dataSelectionQueries: [DataSelectionQuery] = [], delayBetweenSyncs: Duration = .seconds(86400),
        policy: String = "default", bootstrap: AlgoliaBootstrap? = nil, offlineWrites: OfflineWrites = .reject
    ) {
        self.offlineWrites = offlineWrites
        self.name = name
        self.mirrored = mirrored
        self.requestStrategy = requestStrategy
        self.offlineFallbackTimeout = offlineFallbackTimeout
        self.preventiveOfflineSearchDelay = preventiveOfflineSearchDelay
        self.dataSelectionQueries = dataSelectionQueries
        self.delayBetweenSyncs = delayBetweenSyncs
        self.policy = policy
        self.bootstrap = bootstrap
    }
}

/// One data selection query of a mirrored index: a browse query and a cap on objects.
public struct DataSelectionQuery: Sendable, Equatable {
    /// The query as given.
    public enum Selection: Sendable, Equatable {
        /// `query: {…}`: search parameters as a JSON object.
        case query(ConfigValue)
        /// `params: "a=b&c=d"`: URL-encoded search parameters.
        case params(String)
    }
    public var selection: Selection
    public var maxObjects: Int

    public init(selection: Selection, maxObjects: Int) {
        self.selection = selection
        self.maxObjects = maxObjects
    }

    /// The JSON object text of `query:` (nil for `params:`).
    public var queryJSON: String? {
        if case .query(let v) = selection { return v.jsonString }
        return nil
    }

    /// The URL-encoded `params:` text (nil for `query:`).
    public var params: String? {
        if case .params(let p) = selection { return p }
        return nil
    }
}

/// `bootstrap:` of an Algolia index: files for a manual build (paths as written; see
/// `MirrorgateConfiguration.resolve(path:)`).
public struct AlgoliaBootstrap: Sendable, Equatable {
    /// A settings object.
    public var settings: String?
    /// Record files (JSON arrays, or browse answers with `hits`).
    public var objects: [String]
    /// A synonyms file (a JSON array of Algolia synonym objects, or a synonyms search answer).
    public var synonyms: String?
    /// A query rules file (a JSON array of Algolia rule objects, or a rules search answer).
    public var rules: String?
    public init(
        settings: String? = nil, objects: [String] = [], synonyms: String? = nil, rules: String? = nil
    ) {
        self.settings = settings
        self.objects = objects
        self.synonyms = synonyms
        self.rules = rules
    }
}

/// `algolia.offlineIndices.NAME:` — a purely local index, readable and writable through Algolia's API.
/// A name ending with `*` is a pattern: every index whose name starts with the rest is such an index,
/// created on its first write.
public struct OfflineIndexConfig: Sendable, Equatable {
    public var name: String
    public var bootstrap: AlgoliaBootstrap?
    /// Keys accepted for this index and the ACLs of each; nil = any key, every ACL. A key given in a
    /// plain list has every ACL.
    public var apiKeys: [String: Set<AlgoliaACL>]?
    public init(name: String, bootstrap: AlgoliaBootstrap? = nil, apiKeys: [String: Set<AlgoliaACL>]? = nil) {
        self.name = name
        self.bootstrap = bootstrap
        self.apiKeys = apiKeys
    }

    /// Whether the name is a pattern (ends with `*`).
    public var isPattern: Bool { name.hasSuffix("*") }

    /// Whether `index` is this index, or matches this pattern.
    public func matches(_ index: String) -> Bool {
        isPattern ? index.hasPrefix(name.dropLast()) && index.count >= name.count - 1 : index == name
    }
}

/// Algolia's ACL names that offline indices distinguish (`algolia.offlineIndices.NAME.apiKeys`).
public enum AlgoliaACL: String, Sendable, CaseIterable, Hashable {
    case search, browse, addObject, deleteObject, deleteIndex, settings, editSettings, listIndexes
}

/// `algolia.indices.NAME.offlineWrites`: what a write to a mirrored index gets while the upstream is
/// unreachable.
public enum OfflineWrites: String, Sendable, CaseIterable {
    /// Answered with the unavailable status, as any call the gateway cannot serve.
    case reject
    /// Applied to the mirror, queued durably and replayed in order when the upstream returns.
    case queue
}

/// `odata:`.
public struct ODataConfig: Sendable, Equatable {
    public var services: [String: ODataServiceConfig]
    public init(services: [String: ODataServiceConfig] = [:]) { self.services = services }
}

/// `odata.services.NAME.version`.
public enum ODataVersionSetting: String, Sendable, CaseIterable {
    case auto, v4, v2
}

/// `odata.services.NAME.routing`.
public enum ODataRouting: String, Sendable, CaseIterable {
    case onlineFirst, localFirst
}

/// `odata.services.NAME.uploadCredentials`.
public enum UploadCredentials: String, Sendable, CaseIterable {
    case client, service
}

/// `odata.services.NAME.uploadIfMatch`: what a write sent without If-Match gets upstream.
public enum UploadIfMatch: String, Sendable, CaseIterable {
    /// The mirror's ETag.
    case mirror
    /// `If-Match: *`.
    case star
    /// No If-Match (YAML `none`).
    case omit = "none"
}

/// `odata.services.NAME.repeatabilityHeaders`.
public enum RepeatabilityHeaders: String, Sendable, CaseIterable {
    case oasis, sap, both
}

/// `odata.services.NAME.upstreamSupportsRepeatability`: `auto | true | false`.
public enum RepeatabilitySupport: String, Sendable, CaseIterable {
    /// Learned from a Repeatability-Result / RepeatabilityResult response header.
    case auto
    case yes = "true"
    case no = "false"
}

/// One defining request: what is mirrored (`{name, query}`, query relative to the service root).
public struct DefiningRequest: Sendable, Equatable {
    public var name: String
    public var query: String
    public init(name: String, query: String) {
        self.name = name
        self.query = query
    }
}

/// `bootstrap:` of an OData service: `$metadata` file and data files per entity set.
public struct ODataBootstrap: Sendable, Equatable {
    public var metadata: String
    /// Entity set name → JSON file.
    public var data: [String: String]
    public init(metadata: String, data: [String: String] = [:]) {
        self.metadata = metadata
        self.data = data
    }
}

/// `odata.services.NAME:` — one OData service.
public struct ODataServiceConfig: Sendable, Equatable {
    public var name: String
    /// Local service root; starts and ends with `/`.
    public var mount: String
    /// Upstream service root URL.
    public var upstream: String
    public var version: ODataVersionSetting
    public var routing: ODataRouting
    public var definingRequests: [DefiningRequest]
    public var uploadCredentials: UploadCredentials
    public var uploadIfMatch: UploadIfMatch
    public var customHeaders: [String: String]
    public var customCookies: [String: String]
    public var urlSuffix: String?
    public var timeout: Duration
    public var pageSize: Int?
    public var enableRepeatableRequests: Bool
    public var repeatabilityHeaders: RepeatabilityHeaders
    public var upstreamSupportsRepeatability: RepeatabilitySupport
    public var enableRequestQueueOptimization: Bool
    public var enableUndoLocalCreation: Bool
    public var enableTransactionBuilder: Bool
    public var enableIndividualErrorArchiveDeletion: Bool
    /// Encrypts this service's store (`odata-NAME.sqlite`: mirror, request queue, error archive, queued
    /// credentials) with a key derived from this secret; `nil` stores it unencrypted. Never log it.
    public var storeEncryptionKey: String?
    public var policy: String
    public var bootstrap: ODataBootstrap?

    /// `mount` defaults to `/odata/NAME/`.
    public init(
        name: String, upstream: String, mount: String? = nil, version: ODataVersionSetting = .auto,
        routing: ODataRouting = .onlineFirst, definingRequests: [DefiningRequest] = [],
        uploadCredentials: UploadCredentials = .client, uploadIfMatch: UploadIfMatch = .mirror,
        customHeaders: [String: String] = [:], customCookies: [String: String] = [:],
        urlSuffix: String? = nil,
        timeout: Duration = .seconds(30), pageSize: Int? = nil, enableRepeatableRequests: Bool = true,
        repeatabilityHeaders: RepeatabilityHeaders = .both,
        upstreamSupportsRepeatability: RepeatabilitySupport = .auto,
        enableRequestQueueOptimization: Bool = false, enableUndoLocalCreation: Bool = false,
        enableTransactionBuilder: Bool = false, enableIndividualErrorArchiveDeletion: Bool = false,
        storeEncryptionKey: String? = nil, policy: String = "default", bootstrap: ODataBootstrap? = nil
    ) {
        self.name = name
        self.mount = mount ?? "/odata/\(name)/"
        self.upstream = upstream
        self.version = version
        self.routing = routing
        self.definingRequests = definingRequests
        self.uploadCredentials = uploadCredentials
        self.uploadIfMatch = uploadIfMatch
        self.customHeaders = customHeaders
        self.customCookies = customCookies
        self.urlSuffix = urlSuffix
        self.timeout = timeout
        self.pageSize = pageSize
        self.enableRepeatableRequests = enableRepeatableRequests
        self.repeatabilityHeaders = repeatabilityHeaders
        self.upstreamSupportsRepeatability = upstreamSupportsRepeatability
        self.enableRequestQueueOptimization = enableRequestQueueOptimization
        self.enableUndoLocalCreation = enableUndoLocalCreation
        self.enableTransactionBuilder = enableTransactionBuilder
        self.enableIndividualErrorArchiveDeletion = enableIndividualErrorArchiveDeletion
        self.storeEncryptionKey = storeEncryptionKey
        self.policy = policy
        self.bootstrap = bootstrap
    }
}
