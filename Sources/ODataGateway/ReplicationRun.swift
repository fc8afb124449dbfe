import Foundation
import JSONCore
import Replication

extension ODataService {
    /// One replication run of the service (blocking): push, then pull. The upload sends the queue FIFO
    /// until it is empty, the upstream is unavailable (the run fails and is retried with backoff), or the
    /// run must stop (its next run continues with the next queued request); then the download resumes or
    /// starts (stopping, when it must, after a stored page), also when requests remain in the queue (held
    /// behind an ErrorArchive entry, or waiting for credentials): the entities they touch keep their local
    /// version through it.
    static func replicationRun(
        _ run: RunContext, _ uploader: ODataUploader, _ downloader: ODataDownloader
    ) -> RunOutcome {
        var details = JSONObject()
        if uploader.queue.count > 0 {
            guard let pushed = uploader.push(shouldStop: { run.shouldStop }) else { return .busy }
            var push = pushed.json.objectValue ?? JSONObject()
            push["phase"] = "push"
            run.progress(.object(push))
            push["phase"] = nil
            details["push"] = .object(push)
            if pushed.stopped { return .stopped(.object(details)) }
            if pushed.interrupted {
                return .failed(
                    "upload stopped: the upstream is unavailable (\(pushed.remaining) requests wait)")
            }
        }
        if run.shouldStop { return .stopped(.object(details)) }
        let pulled = downloader.pull(
            shouldStop: { run.shouldStop },
            progress: { request, pages in
                run.progress(["phase": "pull", "request": .string(request), "pages": .int(Int64(pages))])
            })
        switch pulled {
        case nil: return .busy
        case .done(let stats)? where stats.fromBootstrap:
            // The bootstrap files answer locally; the upstream still has to be downloaded: retried with
            // the policy's backoff (and at once when the upstream becomes reachable).
            return .failed("upstream unavailable: the bootstrap data answers until a download succeeds")
        case .done(let stats)?:
            details["pull"] = stats.json
            return .completed(.object(details))
        case .stopped(let pages)?:
            details["pull"] = ["pages": .int(Int64(pages))]
            return .stopped(.object(details))
        case .failed(let error)?:
            return .failed(error.description)
        }
    }

    /// An RFC 3339 timestamp as stored by the mirror (`lastDownloadAt`).
    static func date(_ text: String) -> Date? {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let d = f.date(from: text) { return d }
        f.formatOptions = [.withInternetDateTime]
        return f.date(from: text)
    }
}
