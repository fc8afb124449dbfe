extension ConfigReader {
    func readRoot(_ node: YNode?, baseDirectory: String) -> MirrorgateConfiguration {
        let root = Fields(self, ConfPath(), node)
        let d = MirrorgateConfiguration()
        let server = readServer(Fields(self, ConfPath(segments: ["server"]), root.take("server")))
        let dataDir = string(root, "dataDir", d.dataDir)
        let admin = readAdmin(Fields(self, ConfPath(segments: ["admin"]), root.take("admin")))
        let log = readLog(Fields(self, ConfPath(segments: ["log"]), root.take("log")))
        let policies = readPolicies(Fields(self, ConfPath(segments: ["policies"]), root.take("policies")))
        let algolia = readAlgolia(Fields(self, ConfPath(segments: ["algolia"]), root.take("algolia")))
        let odata = readOData(Fields(self, ConfPath(segments: ["odata"]), root.take("odata")))
        root.finish()
        return MirrorgateConfiguration(
            server: server, dataDir: dataDir, admin: admin, log: log, policies: policies, algolia: algolia,
            odata: odata, baseDirectory: baseDirectory)
    }

    func readServer(_ m: Fields) -> ServerConfig {
        let d = ServerConfig()
        let listen = value(m, "listen", d.listen, expected: "HOST:PORT") {
            (s: String) throws(ValueError) -> ListenAddress in try ListenAddress.parse(s)
        }
        let allowRemote = bool(m, "allowRemote", d.allowRemote)
        let maxBodySize = size(m, "maxBodySize", d.maxBodySize)
        let maxConnections = int(m, "maxConnections", d.maxConnections, range: 1...1_000_000)
        let requestTimeout = duration(m, "requestTimeout", d.requestTimeout)
        let shutdownGrace = duration(m, "shutdownGrace", d.shutdownGrace, positive: false)
        let corsFields = Fields(self, m.path.child("cors"), m.take("cors"))
        var cors = d.cors
        if let node = corsFields.take("allowOrigins"), !node.isNull {
            let path = corsFields.path.child("allowOrigins")
            for (i, origin) in (stringList(path, node) ?? []).enumerated() {
                let valid =
                    origin == "*" || (ConfigReader.isHTTPURL(origin) && !origin.dropFirst(8).contains("/"))
                if valid {
                    cors.allowOrigins.append(origin)
                } else {
                    fail(
                        path.item(i), node,
                        "expected an origin such as https://app.example.com or *, got '\(origin)'")
                }
            }
            gate(path, node, changed: !cors.allowOrigins.isEmpty)
        }
        corsFields.finish()
        m.finish()
        return ServerConfig(
            listen: listen, allowRemote: allowRemote, maxBodySize: maxBodySize,
            maxConnections: maxConnections,
            requestTimeout: requestTimeout, shutdownGrace: shutdownGrace, cors: cors)
    }

    func readAdmin(_ m: Fields) -> AdminConfig {
        let d = AdminConfig()
        let token = optionalString(m, "token", d.token)
        let maxBodySize = size(m, "maxBodySize", d.maxBodySize)
        m.finish()
        return AdminConfig(token: token, maxBodySize: maxBodySize)
    }

    func readLog(_ m: Fields) -> LogConfig {
        let d = LogConfig()
        let level = enumeration(m, "level", d.level)
        let format = enumeration(m, "format", d.format)
        m.finish()
        return LogConfig(level: level, format: format)
    }

    func readPolicies(_ m: Fields) -> [String: PolicyConfig] {
        var out: [String: PolicyConfig] = [:]
        for e in m.all() {
            out[e.key] = readPolicy(Fields(self, m.path.child(e.key), e.value))
        }
        m.finish()
        return out
    }

    func readPolicy(_ m: Fields) -> PolicyConfig {
        let d = PolicyConfig()
        let activeInterval = duration(m, "activeInterval", d.activeInterval)
        let idleInterval = duration(m, "idleInterval", d.idleInterval)
        let activeWindow = duration(m, "activeWindow", d.activeWindow)
        let onlyWhenReachable = bool(m, "onlyWhenReachable", d.onlyWhenReachable)
        let windows = readWindows(m)
        let maxRunDuration = duration(m, "maxRunDuration", d.maxRunDuration, positive: false)
        let condition = readCondition(m)
        let jitter = duration(m, "jitter", d.jitter, positive: false)
        let retryFields = Fields(self, m.path.child("retry"), m.take("retry"))
        let retry = RetryConfig(
            initial: duration(retryFields, "initial", d.retry.initial),
            max: duration(retryFields, "max", d.retry.max))
        if retry.max < retry.initial {
            fail(
                retryFields.path.child("max"), retryFields.take("max") ?? retryFields.take("initial"),
                "must not be less than retry.initial")
        }
        retryFields.finish()
        m.finish()
        return PolicyConfig(
            activeInterval: activeInterval, idleInterval: idleInterval, activeWindow: activeWindow,
            onlyWhenReachable: onlyWhenReachable, windows: windows, maxRunDuration: maxRunDuration,
            condition: condition, jitter: jitter, retry: retry)
    }

    /// `window`: null, one `"HH:MM-HH:MM"` (several may be separated by commas), or a list of them.
    func readWindows(_ m: Fields) -> [TimeWindow] {
        let path = m.path.child("window")
        guard let node = m.take("window"), !node.isNull else { return [] }
        var texts: [(String, YNode)] = []
        switch node.kind {
        case .scalar(let s, _):
            texts = s.split(separator: ",").map { (String($0), node) }
        case .sequence(let items):
            for (i, item) in items.enumerated() {
                guard case .scalar(let s, _) = item.kind, !item.isNull else {
                    fail(path.item(i), item, "expected a window \"HH:MM-HH:MM\", got \(item.typeName)")
                    continue
                }
                texts.append((s, item))
            }
        case .mapping:
            fail(path, node, "expected a window \"HH:MM-HH:MM\" or a list of them, got a mapping")
            return []
        }
        var out: [TimeWindow] = []
        for (text, at) in texts {
            do throws(ValueError) {
                out.append(try TimeWindow.parse(text))
            } catch {
                fail(path, at, error.message)
            }
        }
        gate(path, node, changed: !out.isEmpty)
        return out
    }

    /// `condition`: null or `{command: [ARGV...], timeout: 5s}`.
    func readCondition(_ m: Fields) -> ConditionConfig? {
        let path = m.path.child("condition")
        guard let node = m.take("condition"), !node.isNull else { return nil }
        let fields = Fields(self, path, node)
        let timeout = duration(fields, "timeout", .seconds(5))
        var command: [String] = []
        if let c = fields.take("command"), !c.isNull {
            command = stringList(path.child("command"), c) ?? []
        }
        fields.finish()
        guard case .mapping = node.kind else { return nil }
        if command.isEmpty {
            fail(
                path.child("command"), node,
                "a condition needs a command: a list such as [\"/usr/local/bin/on-wifi\"]")
            return nil
        }
        gate(path, node, changed: true)
        return ConditionConfig(command: command, timeout: timeout)
    }

    // MARK: Algolia

    func readAlgolia(_ m: Fields) -> AlgoliaConfig {
        let d = AlgoliaConfig()
        let appId = optionalString(m, "appId", d.appId)
        let apiKey = optionalString(m, "apiKey", d.apiKey)
        var hosts = d.hosts
        if let node = m.take("hosts"), !node.isNull {
            hosts = readHosts(m.path.child("hosts"), node)
            gate(m.path.child("hosts"), node, changed: true)
        }
        let connectTimeout = duration(m, "connectTimeout", d.connectTimeout)
        let timeout = duration(m, "timeout", d.timeout)
        let writeTimeout = duration(m, "writeTimeout", d.writeTimeout)
        let unavailableStatus = value(m, "unavailableStatus", d.unavailableStatus, expected: "an HTTP status")
        {
            (s: String) throws(ValueError) -> Int in
            guard let i = Int(s.trimmingSpaces()) else {
                throw ValueError("expected an HTTP status, got '\(s)'")
            }
            guard (400...499).contains(i) else {
                throw ValueError(
                    "must be a 4xx status (official clients mark a host down after any 5xx), got \(i)")
            }
            return i
        }
        var indices: [String: AlgoliaIndexConfig] = [:]
        let indexFields = Fields(self, m.path.child("indices"), m.take("indices"))
        for e in indexFields.all() {
            indices[e.key] = readIndex(e.key, Fields(self, indexFields.path.child(e.key), e.value))
        }
        indexFields.finish()
        var offline: [String: OfflineIndexConfig] = [:]
        let offlineFields = Fields(self, m.path.child("offlineIndices"), m.take("offlineIndices"))
        for e in offlineFields.all() {
            offline[e.key] = readOfflineIndex(e.key, Fields(self, offlineFields.path.child(e.key), e.value))
        }
        offlineFields.finish()
        let storeEncryptionKey = secret(m, "storeEncryptionKey")
        m.finish()
        return AlgoliaConfig(
            appId: appId, apiKey: apiKey, hosts: hosts, connectTimeout: connectTimeout, timeout: timeout,
            writeTimeout: writeTimeout, unavailableStatus: unavailableStatus, indices: indices,
            offlineIndices: offline, storeEncryptionKey: storeEncryptionKey)
    }

    func readHosts(_ path: ConfPath, _ node: YNode) -> [AlgoliaHost]? {
        guard case .sequence(let items) = node.kind else {
            fail(path, node, "expected a list of URLs or {url, accept} mappings, got \(node.typeName)")
            return nil
        }
        if items.isEmpty { fail(path, node, "must not be empty (omit it for Algolia's default hosts)") }
        var hosts: [AlgoliaHost] = []
        for (i, item) in items.enumerated() {
            let itemPath = path.item(i)
            var url: String?
            var accept = HostAccept.readWrite
            switch item.kind {
            case .scalar(let s, _) where !item.isNull:
                url = s
            case .mapping:
                let f = Fields(self, itemPath, item)
                url = optionalString(f, "url", nil)
                if url == nil { fail(itemPath.child("url"), item, "required") }
                accept = enumeration(f, "accept", HostAccept.readWrite)
                f.finish()
            default:
                fail(itemPath, item, "expected a URL or {url, accept}, got \(item.typeName)")
            }
            guard var u = url else { continue }
            guard ConfigReader.isHTTPURL(u) else {
                fail(itemPath, item, "expected an http:// or https:// URL, got '\(u)'")
                continue
            }
            while u.hasSuffix("/") { u.removeLast() }
            hosts.append(AlgoliaHost(url: u, accept: accept))
        }
        return hosts
    }

    func readIndex(_ name: String, _ m: Fields) -> AlgoliaIndexConfig {
        let d = AlgoliaIndexConfig(name: name)
        let mirrored = bool(m, "mirrored", d.mirrored)
        let strategy = enumeration(m, "requestStrategy", d.requestStrategy)
        let offlineFallbackTimeout = duration(m, "offlineFallbackTimeout", d.offlineFallbackTimeout)
        let preventiveDelay = duration(
            m, "preventiveOfflineSearchDelay", d.preventiveOfflineSearchDelay, positive: false)
        var queries = d.dataSelectionQueries
        if let node = m.take("dataSelectionQueries"), !node.isNull {
            queries = readDataSelectionQueries(m.path.child("dataSelectionQueries"), node)
            gate(m.path.child("dataSelectionQueries"), node, changed: !queries.isEmpty)
        }
        let delayBetweenSyncs = duration(m, "delayBetweenSyncs", d.delayBetweenSyncs)
        let policy = string(m, "policy", d.policy)
        let bootstrap = readAlgoliaBootstrap(m)
        let offlineWrites = enumeration(m, "offlineWrites", d.offlineWrites)
        m.finish()
        return AlgoliaIndexConfig(
            name: name, mirrored: mirrored, requestStrategy: strategy,
            offlineFallbackTimeout: offlineFallbackTimeout,
            preventiveOfflineSearchDelay: preventiveDelay, dataSelectionQueries: queries,
            delayBetweenSyncs: delayBetweenSyncs, policy: policy, bootstrap: bootstrap,
            offlineWrites: offlineWrites)
    }

    func readDataSelectionQueries(_ path: ConfPath, _ node: YNode) -> [DataSelectionQuery] {
        guard case .sequence(let items) = node.kind else {
            fail(
                path, node, "expected a list of {query: {…}, maxObjects: N} or {params: \"…\", maxObjects: N}"
            )
            return []
        }
        var out: [DataSelectionQuery] = []
        for (i, item) in items.enumerated() {
            let f = Fields(self, path.item(i), item)
            if case .mapping = item.kind {
            } else {
                if !item.isNull { continue }  // type error already reported by Fields
                fail(path.item(i), item, "expected {query: {…}, maxObjects: N}, got null")
                continue
            }
            let queryNode = f.take("query")
            let paramsNode = f.take("params")
            let maxObjects = int(f, "maxObjects", 0)
            var selection: DataSelectionQuery.Selection?
            switch (queryNode.flatMap { $0.isNull ? nil : $0 }, paramsNode.flatMap { $0.isNull ? nil : $0 }) {
            case (nil, nil):
                fail(path.item(i), item, "needs 'query' (a mapping) or 'params' (a URL-encoded string)")
            case (.some, .some):
                fail(path.item(i), item, "give either 'query' or 'params', not both")
            case (.some(let q), nil):
                if case .mapping = q.kind {
                    selection = .query(q.configValue)
                } else {
                    fail(
                        path.item(i).child("query"), q,
                        "expected a mapping of search parameters, got \(q.typeName)")
                }
            case (nil, .some(let p)):
                if case .scalar(let s, _) = p.kind {
                    selection = .params(s)
                } else {
                    fail(path.item(i).child("params"), p, "expected a URL-encoded string, got \(p.typeName)")
                }
            }
            if f.take("maxObjects") == nil {
                fail(
                    path.item(i).child("maxObjects"), item, "required (how many objects this query may bring)"
                )
            } else if maxObjects <= 0 {
                fail(path.item(i).child("maxObjects"), f.take("maxObjects"), "must be greater than 0")
            }
            f.finish()
            if let selection, maxObjects > 0 {
                out.append(DataSelectionQuery(selection: selection, maxObjects: maxObjects))
            }
        }
        return out
    }

    func readAlgoliaBootstrap(_ m: Fields) -> AlgoliaBootstrap? {
        let path = m.path.child("bootstrap")
        guard let node = m.take("bootstrap"), !node.isNull else { return nil }
        let f = Fields(self, path, node)
        let settings = optionalString(f, "settings", nil)
        var objects: [String] = []
        if let o = f.take("objects"), !o.isNull {
            if case .scalar(let s, _) = o.kind {
                objects = [s]
            } else {
                objects = stringList(path.child("objects"), o) ?? []
            }
        }
        let synonyms = optionalString(f, "synonyms", nil)
        let rules = optionalString(f, "rules", nil)
        f.finish()
        if settings == nil && objects.isEmpty && synonyms == nil && rules == nil {
            if case .mapping = node.kind {
                fail(
                    path, node,
                    "needs 'settings', 'synonyms', 'rules' (files) and/or 'objects' (a list of files)")
            }
            return nil
        }
        gate(path, node, changed: true)
        return AlgoliaBootstrap(settings: settings, objects: objects, synonyms: synonyms, rules: rules)
    }

    func readOfflineIndex(_ name: String, _ m: Fields) -> OfflineIndexConfig {
        let d = OfflineIndexConfig(name: name)
        let bootstrap = readAlgoliaBootstrap(m)
        var apiKeys = d.apiKeys
        if let node = m.take("apiKeys"), !node.isNull {
            apiKeys = readAPIKeys(m.path.child("apiKeys"), node)
            gate(m.path.child("apiKeys"), node, changed: true)
        }
        m.finish()
        return OfflineIndexConfig(name: name, bootstrap: bootstrap, apiKeys: apiKeys)
    }

    /// `apiKeys`: a list of keys (each with every ACL) or a mapping of keys to lists of Algolia ACL names.
    func readAPIKeys(_ path: ConfPath, _ node: YNode) -> [String: Set<AlgoliaACL>]? {
        let every = Set(AlgoliaACL.allCases)
        switch node.kind {
        case .sequence:
            guard let keys = stringList(path, node) else { return nil }
            return Dictionary(keys.map { ($0, every) }, uniquingKeysWith: { a, _ in a })
        case .mapping(let entries):
            var out: [String: Set<AlgoliaACL>] = [:]
            let known = AlgoliaACL.allCases.map(\.rawValue).joined(separator: ", ")
            for entry in entries {
                let keyPath = path.child(entry.key)
                locations[keyPath.dotted] = (entry.line, entry.column)
                guard let names = stringList(keyPath, entry.value) else { continue }
                var acls = Set<AlgoliaACL>()
                for (i, name) in names.enumerated() {
                    if let acl = AlgoliaACL(rawValue: name) {
                        acls.insert(acl)
                    } else {
                        fail(keyPath.item(i), entry.value, "unknown ACL '\(name)' (known: \(known))")
                    }
                }
                out[entry.key] = acls
            }
            return out
        case .scalar:
            fail(
                path, node, "expected a list of keys or a mapping of keys to ACL lists, got \(node.typeName)")
            return nil
        }
    }

    // MARK: OData

    func readOData(_ m: Fields) -> ODataConfig {
        var services: [String: ODataServiceConfig] = [:]
        let f = Fields(self, m.path.child("services"), m.take("services"))
        for e in f.all() {
            if let s = readService(e.key, Fields(self, f.path.child(e.key), e.value), node: e.value) {
                services[e.key] = s
            }
        }
        f.finish()
        m.finish()
        return ODataConfig(services: services)
    }

    func readService(_ name: String, _ m: Fields, node: YNode) -> ODataServiceConfig? {
        let d = ODataServiceConfig(name: name, upstream: "")
        let mount = value(m, "mount", d.mount, expected: "a path such as /odata/\(name)/") {
            (s: String) throws(ValueError) -> String in
            guard s.hasPrefix("/") && s.hasSuffix("/") && s.count > 1 else {
                throw ValueError("must start and end with '/', e.g. /odata/\(name)/, got '\(s)'")
            }
            guard !s.contains("//"), !s.contains("?"), !s.contains("#"), !s.contains(" ") else {
                throw ValueError("'\(s)' is not a plain path")
            }
            return s
        }
        let upstream = optionalString(m, "upstream", nil)
        if let upstream, !ConfigReader.isHTTPURL(upstream) {
            fail(
                m.path.child("upstream"), m.take("upstream"),
                "expected an http:// or https:// URL, got '\(upstream)'")
        } else if upstream == nil {
            fail(
                m.path.child("upstream"), m.take("upstream") ?? node,
                "required (the upstream service root URL)")
        }
        let version = enumeration(m, "version", d.version)
        let routing = enumeration(m, "routing", d.routing)
        var definingRequests = d.definingRequests
        if let n = m.take("definingRequests"), !n.isNull {
            definingRequests = readDefiningRequests(m.path.child("definingRequests"), n)
            gate(m.path.child("definingRequests"), n, changed: !definingRequests.isEmpty)
        }
        let uploadCredentials = enumeration(m, "uploadCredentials", d.uploadCredentials)
        let uploadIfMatch = enumeration(m, "uploadIfMatch", d.uploadIfMatch)
        let customHeaders = stringMap(m, "customHeaders")
        let customCookies = stringMap(m, "customCookies")
        let urlSuffix = optionalString(m, "urlSuffix", d.urlSuffix)
        let timeout = duration(m, "timeout", d.timeout)
        let pageSize = optionalInt(m, "pageSize", d.pageSize, minimum: 1)
        let enableRepeatableRequests = bool(m, "enableRepeatableRequests", d.enableRepeatableRequests)
        let repeatabilityHeaders = enumeration(m, "repeatabilityHeaders", d.repeatabilityHeaders)
        let upstreamSupportsRepeatability = enumeration(
            m, "upstreamSupportsRepeatability", d.upstreamSupportsRepeatability)
        let queueOptimization = bool(m, "enableRequestQueueOptimization", d.enableRequestQueueOptimization)
        let undoLocalCreation = bool(m, "enableUndoLocalCreation", d.enableUndoLocalCreation)
        let transactionBuilder = bool(m, "enableTransactionBuilder", d.enableTransactionBuilder)
        let errorArchiveDeletion = bool(
            m, "enableIndividualErrorArchiveDeletion", d.enableIndividualErrorArchiveDeletion)
        let storeEncryptionKey = secret(m, "storeEncryptionKey")
        let policy = string(m, "policy", d.policy)
        let bootstrap = readODataBootstrap(m)
        m.finish()
        guard let upstream else { return nil }
        return ODataServiceConfig(
            name: name, upstream: upstream, mount: mount, version: version, routing: routing,
            definingRequests: definingRequests, uploadCredentials: uploadCredentials,
            uploadIfMatch: uploadIfMatch,
            customHeaders: customHeaders, customCookies: customCookies, urlSuffix: urlSuffix,
            timeout: timeout,
            pageSize: pageSize, enableRepeatableRequests: enableRepeatableRequests,
            repeatabilityHeaders: repeatabilityHeaders,
            upstreamSupportsRepeatability: upstreamSupportsRepeatability,
            enableRequestQueueOptimization: queueOptimization, enableUndoLocalCreation: undoLocalCreation,
            enableTransactionBuilder: transactionBuilder,
            enableIndividualErrorArchiveDeletion: errorArchiveDeletion,
            storeEncryptionKey: storeEncryptionKey, policy: policy, bootstrap: bootstrap)
    }

    func readDefiningRequests(_ path: ConfPath, _ node: YNode) -> [DefiningRequest] {
        guard case .sequence(let items) = node.kind else {
            fail(path, node, "expected a list of {name, query}, got \(node.typeName)")
            return []
        }
        var out: [DefiningRequest] = []
        var names = Set<String>()
        for (i, item) in items.enumerated() {
            let f = Fields(self, path.item(i), item)
            guard case .mapping = item.kind else {
                if item.isNull { fail(path.item(i), item, "expected {name, query}, got null") }
                continue
            }
            let name = optionalString(f, "name", nil)
            let query = optionalString(f, "query", nil)
            if name == nil { fail(path.item(i).child("name"), item, "required") }
            if query == nil { fail(path.item(i).child("query"), item, "required (e.g. \"Customers\")") }
            if let query, query.hasPrefix("/") || query.contains("://") {
                fail(
                    path.item(i).child("query"), f.take("query"),
                    "must be relative to the service root, got '\(query)'")
            }
            f.finish()
            if let name, !names.insert(name).inserted {
                fail(path.item(i).child("name"), f.take("name"), "duplicate defining request name '\(name)'")
            }
            if let name, let query { out.append(DefiningRequest(name: name, query: query)) }
        }
        return out
    }

    func readODataBootstrap(_ m: Fields) -> ODataBootstrap? {
        let path = m.path.child("bootstrap")
        guard let node = m.take("bootstrap"), !node.isNull else { return nil }
        let f = Fields(self, path, node)
        let metadata = optionalString(f, "metadata", nil)
        if metadata == nil, case .mapping = node.kind {
            fail(path.child("metadata"), node, "required (a $metadata XML file)")
        }
        let data = stringMap(f, "data")
        f.finish()
        guard let metadata else { return nil }
        gate(path, node, changed: true)
        return ODataBootstrap(metadata: metadata, data: data)
    }
}
