import AlgoliaGateway
import Foundation
import GatewayAdmin
import GatewayConfig
import GatewaySupport
import JSONCore
import Logging
import ODataGateway
import Observability
import SearchEngine
import Storage

extension Gateway {
    /// Re-reads the configuration and applies what changed without dropping connections or local data:
    /// log level and format, CORS origins, the admin token, shutdown grace, policies, Algolia keys and
    /// indices (kept mirrors and offline indices keep their data and sync state), OData services added,
    /// removed or changed (a changed one is stopped, its running upload or download awaited, and reopened
    /// with the new settings). Requests already routed finish with the services they started with.
    public func reload() -> ReloadOutcome {
        let claimed = reloading.withLock { r -> Bool in
            defer { r = true }
            return !r
        }
        guard claimed else { return .busy }
        defer { reloading.withLock { $0 = false } }
        let outcome = apply()
        switch outcome {
        case .applied(let plan):
            router.metrics.count("mirrorgate_reloads_total", [("outcome", "applied")])
            logger.notice(
                "configuration reloaded",
                metadata: [
                    "changes": .array(plan.applied.map { .string("\($0.key) \($0.kind)") }),
                    "restartRequired": .array(plan.restartRequired.map { .string($0) }),
                ])
            if !plan.restartRequired.isEmpty {
                logger.warning(
                    "configuration keys changed that need a restart; their running values are kept",
                    metadata: ["keys": .array(plan.restartRequired.map { .string($0) })])
            }
        case .invalid(let errors):
            router.metrics.count("mirrorgate_reloads_total", [("outcome", "invalid")])
            logger.error(
                "configuration reload refused: the file is invalid; the running configuration is kept",
                metadata: ["errors": .array(errors.map { .string($0) })])
        case .failed(let message):
            router.metrics.count("mirrorgate_reloads_total", [("outcome", "failed")])
            logger.error(
                "configuration reload failed; the running configuration is kept",
                metadata: ["error": "\(message)"])
        case .busy:
            break
        }
        return outcome
    }

    private func apply() -> ReloadOutcome {
        guard let source else { return .failed("this gateway has no configuration file to re-read") }
        let loaded: MirrorgateConfiguration
        do {
            loaded = try source()
        } catch {
            return .invalid(error.issues.map(\.description))
        }
        let running = router.services
        let plan = ConfigurationReload(running: running.configuration, loaded: loaded)
        if !plan.issues.isEmpty { return .invalid(plan.issues) }
        let next = plan.effective
        if plan.applied.isEmpty { return .applied(plan) }

        var algolia = running.algolia
        if plan.algoliaChanged {
            do {
                let indexStore = try openStoreIfNeeded(next)
                algolia = try AlgoliaService(
                    configuration: next, loop: loop, client: client, store: indexStore, state: state,
                    replication: replication, events: publish, previous: running.algolia)
            } catch {
                return .failed("\(error)")
            }
        }
        var odata: [ODataService] = []
        var retired: [ODataService] = []
        var added: [ODataService] = []
        // The stores of added and changed services (their keys derived once per reload that needs them).
        let needsLayout = next.odata.services.keys.contains { name in
            !running.odata.contains { $0.settings.name == name }
                || ConfigurationReload.odataServiceChanged(name, running.configuration, next)
        }
        var nextLayout = layout
        if needsLayout {
            do {
                nextLayout = try StoreLayout(configuration: next)
                try nextLayout.verifyKeys()
            } catch {
                return .failed("\(error)")
            }
        }
        for name in next.odata.services.keys.sorted() {
            let old = running.odata.first { $0.settings.name == name }
            if let old, !ConfigurationReload.odataServiceChanged(name, running.configuration, next) {
                odata.append(old)
                continue
            }
            if let old {
                // One uploader per queue: the old service stops and its running work ends first.
                quiesce(old)
                retired.append(old)
            }
            do {
                guard let store = nextLayout.odata[name] else {
                    throw GatewayStartError(description: "no store for the OData service \(name)")
                }
                let made = try ODataAssembly.make(
                    name: name, configuration: next, store: store, loop: loop, client: client,
                    pool: odataPool, replication: replication, register: false, events: publish)
                Self.announce(made, publish)
                odata.append(made)
                added.append(made)
            } catch {
                for s in added {
                    s.stop()
                    s.reachability.stop()
                }
                restoreStopped(retired, running)
                return .failed("\(error)")
            }
        }
        for old in running.odata where next.odata.services[old.settings.name] == nil { retired.append(old) }
        _ = router.replace(ServiceSet(configuration: next, algolia: algolia, odata: odata))
        LogSetup.apply(next.log)
        if algolia !== running.algolia {
            running.algolia.retire()
            let kept = running.algolia.upstream?.reachability
            if let kept, kept !== algolia.upstream?.reachability { kept.stop() }
            algolia.start()
            algolia.upstream?.reachability.probeNow()
        }
        reschedule(ServiceSet(configuration: next, algolia: algolia, odata: odata))
        for old in retired {
            old.stop()
            old.reachability.stop()
        }
        for s in added { s.reachability.probeNow() }
        return .applied(plan)
    }

    /// Gives the one replication scheduler the policies and jobs of `services` (see
    /// ``ReplicationScheduler/reconfigure(policies:jobs:)``): kept mirrors keep their schedules and resume
    /// points (a run going on is not interrupted), removed ones are dropped, added ones registered, and
    /// each job follows the policy its configuration names now.
    func reschedule(_ services: ServiceSet) {
        var jobs = services.algolia.replicationJobs
        for s in services.odata {
            var job = s.replicationJob
            job.policy = services.configuration.odata.services[s.settings.name]?.policy ?? job.policy
            jobs.append(job)
        }
        replication.reconfigure(policies: services.configuration.policies, jobs: jobs)
    }

    /// After a failed reload: reopens, with the running settings, the services it had stopped.
    private func restoreStopped(_ stopped: [ODataService], _ running: ServiceSet) {
        guard !stopped.isEmpty else { return }
        var odata = running.odata
        for old in stopped {
            guard let store = layout.odata[old.settings.name],
                let again = try? ODataAssembly.make(
                    name: old.settings.name, configuration: running.configuration, store: store, loop: loop,
                    client: client, pool: odataPool, replication: replication, register: false,
                    events: publish),
                let i = odata.firstIndex(where: { $0 === old })
            else { continue }
            Self.announce(again, publish)
            odata[i] = again
            old.reachability.stop()
        }
        let restored = ServiceSet(
            configuration: running.configuration, algolia: running.algolia, odata: odata)
        _ = router.replace(restored)
        reschedule(restored)
    }

    /// Stops `forwarder`'s service and waits (at most twice its timeout, at least 10 s) until no upload or
    /// download of it runs.
    private func quiesce(_ service: ODataService) {
        let forwarder = service
        service.stop()
        let limit = max(forwarder.settings.timeout * 2, .seconds(10))
        let deadline = ContinuousClock.now + limit
        let pause = StopSignal()
        for _ in 0..<100_000 {
            let s = service.status()
            let busy = s["uploading"]?.boolValue == true || s["downloading"]?.boolValue == true
            if !busy || ContinuousClock.now >= deadline { break }
            pause.wait(for: .milliseconds(20), until: { false })
        }
        if service.status()["uploading"]?.boolValue == true {
            logger.warning(
                "reload: an upload of the changed OData service still runs; reopening it anyway",
                metadata: ["service": "\(forwarder.settings.name)"])
        }
    }

    /// The index store, opened now (with the encryption the gateway started with) if the new
    /// configuration needs it and none is open.
    private func openStoreIfNeeded(_ configuration: MirrorgateConfiguration) throws -> IndexStore? {
        try store.withLock { s in
            if s == nil, Self.needsStore(configuration) {
                // the key fixed at start (store encryption keys are restart-only)
                s = try IndexStore(directory: configuration.dataDir, encryption: layout.search.encryption)
            }
            return s
        }
    }
}
