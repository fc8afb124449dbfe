import Foundation
import JSONCore

/// What the status and the metrics read of one replication.
public struct ReplicationFacts: Sendable {
    /// `algolia:NAME` or `odata:NAME`.
    public var id: String
    /// The API.
    public var api: ReplicationAPI
    /// The index or service.
    public var name: String
    /// The policy's name.
    public var policy: String
    /// The end of the last completed run.
    public var lastSuccess: Date?
    /// Seconds since then (nil: never completed).
    public var dataAgeSeconds: Double?
}

extension ReplicationScheduler {
    /// The replication part of a mirror's status: `{policy, paused, inUse, lastUsedAt, running, lastRunAt,
    /// lastRunOutcome, lastRunDurationMs, lastSuccessAt, dataAgeSeconds, nextRunAt, waitingFor,
    /// condition, resumePending, failures, lastError, runs}`; nil for an unknown id.
    public func status(_ id: String) -> JSON? {
        guard let s = snapshot(id) else { return nil }
        let r = s.record
        func time(_ d: Date?) -> JSON {
            d.map { .string(Timestamps.rfc3339(secondsSince1970: $0.timeIntervalSince1970)) } ?? .null
        }
        var o = JSONObject()
        o["policy"] = .string(s.policy.name)
        o["paused"] = .bool(s.paused)
        let lastUsed = s.job.usage.lastUsed
        o["inUse"] = .bool(
            lastUsed.map { s.now.timeIntervalSince($0) < s.policy.config.activeWindow.seconds } ?? false)
        o["lastUsedAt"] = time(lastUsed)
        o["running"] = .bool(s.running)
        o["lastRunAt"] = time(r.lastStart)
        o["lastRunOutcome"] = r.lastOutcome.map(JSON.string) ?? .null
        o["lastRunDurationMs"] = r.lastDurationMs.map { .int(Int64($0)) } ?? .null
        o["lastSuccessAt"] = time(r.lastSuccess)
        o["dataAgeSeconds"] =
            r.lastSuccess.map { .double((s.now.timeIntervalSince($0) * 10).rounded() / 10) } ?? .null
        o["nextRunAt"] = s.running ? .null : time(s.plan.nextRunAt)
        o["waitingFor"] = s.running ? .null : (s.plan.waitingFor.map { .string($0.rawValue) } ?? .null)
        o["condition"] = s.condition.map(JSON.string) ?? .null
        o["resumePending"] = .bool(r.resume != .none)
        o["failures"] = .int(Int64(r.failures))
        o["lastError"] = r.lastError.map(JSON.string) ?? .null
        o["runs"] = .int(Int64(r.runs))
        return .object(o)
    }

    /// The next run of `id` (nil when unknown: running, paused, unreachable).
    public func nextRunAt(_ id: String) -> Date? {
        guard let s = snapshot(id), !s.running else { return nil }
        return s.plan.nextRunAt
    }

    /// `{NAME: {paused, pausedSince, mirrors: [id…], activeInterval, idleInterval, window, maxRunDuration,
    /// condition}}` for every policy.
    public func policiesStatus() -> JSON {
        let paused = pausedPolicies()
        var out = JSONObject()
        let all = policies
        for name in all.keys.sorted() {
            let c = all[name]!.config
            var o = JSONObject()
            o["paused"] = .bool(paused[name] != nil)
            o["pausedSince"] =
                paused[name].map { .string(Timestamps.rfc3339(secondsSince1970: $0.timeIntervalSince1970)) }
                ?? .null
            o["mirrors"] = .array(jobs(of: name).map(JSON.string))
            o["activeIntervalSeconds"] = .double(c.activeInterval.seconds)
            o["idleIntervalSeconds"] = .double(c.idleInterval.seconds)
            o["window"] = .array(c.windows.map { .string($0.description) })
            o["maxRunDurationSeconds"] = .double(c.maxRunDuration.seconds)
            o["onlyWhenReachable"] = .bool(c.onlyWhenReachable)
            o["condition"] = c.condition.map { .array($0.command.map(JSON.string)) } ?? .null
            out[name] = .object(o)
        }
        return .object(out)
    }

    /// Facts of every replication (for metrics).
    public func facts() -> [ReplicationFacts] {
        jobIDs.compactMap { id in
            guard let s = snapshot(id) else { return nil }
            return ReplicationFacts(
                id: id, api: s.job.api, name: s.job.name, policy: s.policy.name,
                lastSuccess: s.record.lastSuccess,
                dataAgeSeconds: s.record.lastSuccess.map { s.now.timeIntervalSince($0) })
        }
    }
}
