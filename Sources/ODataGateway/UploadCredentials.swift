import Foundation
import Logging
import ODataCore
import Upstream

/// Credentials at upload (issue 15 item 6, SPEC §4): with `uploadCredentials: client`, a `401` or `403`
/// (other than a CSRF token to fetch again) means the writer's credentials expired or were revoked during
/// the outage — not that the request is wrong. The request and every later request of that writer wait
/// (``ODataCredentialHolds``), and so do other writers' requests that depend on them, instead of going to
/// the ErrorArchive; newer credentials of the writer (any later request it sends to the service) are tried
/// on its oldest waiting request in its turn, and once the upstream accepts them every waiting request of
/// the writer is sent with them.
extension ODataUploader {
    /// What to do after the upstream answered a unit, as far as credentials go.
    enum CredentialVerdict { case proceed, wait, stop }

    /// The writer's credentials as queued (never logged).
    func writerCredentials(_ request: QueuedRequest) -> WriterCredentials {
        WriterCredentials(authorization: request.authorization, cookie: queue.clientCookie(request.requestID))
    }

    /// The next request to send, and the newer credentials to send it with when it waits for them: the
    /// oldest request that does not wait, or the oldest waiting request of a writer with newer credentials
    /// to try, whichever is older.
    func nextToSend() throws -> (QueuedRequest, WriterCredentials?)? {
        var best = try queue.first()
        var chosen: WriterCredentials?
        for (writer, candidate) in queue.credentials.retryableHolds() {
            guard let waiting = try queue.credentials.firstWaiting(writer: writer) else {
                // Nothing of the writer's waits any more (reverted): its hold ends.
                try queue.credentials.dropHold(writer: writer)
                continue
            }
            if best == nil || waiting.id < best!.id {
                best = waiting
                chosen = candidate
            }
        }
        return best.map { ($0, chosen) }
    }

    /// Before `request` (and the rest of its changeset) is sent: when its writer's requests wait for
    /// credentials, or it changes or names an entity that a waiting request queued before it touches, it
    /// waits too (fsynced). Returns how many requests were set waiting, nil when it may go.
    func waitIfBehindHold(_ request: QueuedRequest) throws -> Int? {
        guard queue.credentials.any else { return nil }
        let rows = try request.changeset.map { try queue.changeset($0) } ?? [request]
        let position = rows.map(\.id).min() ?? request.id
        let touched = entities(of: rows)
        var behind: String?
        if let writer = rows.lazy.compactMap(\.writer).first(where: { queue.credentials.isHeld($0) }) {
            behind = writer
        } else {
            for hold in queue.credentials.all() {
                let held = try queue.credentials.heldEntities(hold.writer) {
                    var first: [String: Int64] = [:]
                    for r in try queue.credentials.waiting(behind: hold.writer) {
                        for e in entities(of: [r]) where first[e] == nil { first[e] = r.id }
                    }
                    return first
                }
                if touched.contains(where: { (held[$0] ?? .max) < position }) {
                    behind = hold.writer
                    break
                }
            }
        }
        guard let behind else { return nil }
        try queue.credentials.wait(
            rows, behind: behind, entities: Dictionary(touched.map { ($0, position) }, uniquingKeysWith: min))
        logger.info(
            "odata upload: request waits behind a writer waiting for credentials",
            metadata: ["service": "\(settings.name)", "requests": "\(rows.count)"])
        return rows.count
    }

    /// After the upstream answered `unit`: a `401`/`403` with `uploadCredentials: client` makes the writer's
    /// requests wait (or, for newer credentials tried, drops them); any other definite answer to newer
    /// credentials releases the writer's waiting requests with them.
    func credentialVerdict(_ unit: UploadUnit, _ response: UpstreamResponse) -> CredentialVerdict {
        guard mirrorSettings.uploadCredentials == .client else { return .proceed }
        if response.status == 401 || response.status == 403 {
            let given = unit.credentials ?? writerCredentials(unit.writer)
            let writer = unit.writer.writer ?? ODataWriterIdentity.of(given)
            // A definite refusal: nothing of the unit took effect.
            for r in unit.rows { try? queue.markSent(r, false) }
            do {
                try queue.credentials.hold(
                    writer: writer, status: response.status, request: unit.writer, credentials: given)
            } catch {
                return .stop
            }
            logger.warning(
                "odata upload: the upstream refused the writer's credentials; its requests wait for newer ones",
                metadata: [
                    "service": "\(settings.name)", "status": "\(response.status)",
                    "tried": "\(unit.credentials == nil ? "queued" : "newer")",
                ])
            return .wait
        }
        if let credentials = unit.credentials, ![502, 503, 504, 429].contains(response.status) {
            let writer = unit.writer.writer ?? ODataWriterIdentity.of(credentials)
            do { try queue.credentials.release(writer: writer, with: credentials) } catch { return .stop }
            logger.info(
                "odata upload: newer credentials accepted; the writer's waiting requests go on",
                metadata: ["service": "\(settings.name)"])
        }
        return .proceed
    }
}

extension ODataServicePart {
    /// The entities requests change or name (canonical), and the local key tokens they hold.
    func entities(of rows: [QueuedRequest]) -> Set<String> {
        var all = Set<String>()
        let m = mirror.model
        let reader = m.map { ODataPlanRowReader(model: $0) }
        for r in rows {
            if let reader {
                all.formUnion(reader.row(r, pinned: false, credentials: nil).touched)
            } else if let e = r.affectedEntity(model: nil) {
                all.insert(e)
            }
            for ref in ODataKeyReferences.extract(url: r.url, body: r.body) {
                all.insert(ref.contains("(") ? ODataKeyText.canonical(ref, model: m) : ref)
            }
            if let key = r.localKey { all.insert(ODataKeyText.canonical(r.entitySet + key, model: m)) }
        }
        return all
    }
}
