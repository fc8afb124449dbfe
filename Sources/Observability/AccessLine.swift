import HTTPCore
import Logging

/// The fields of the gateway's access log line, from what the server's observer sees of an answered request.
public enum AccessLine {
    /// The structured fields of an access line: `method`, `path` (without the query), `status` and
    /// `duration_ms` (numbers), `route`, `origin`, `request_id`, and `upstream_ms` when an upstream
    /// answered (from the response's `Server-Timing: upstream;dur=…`).
    public static func fields(
        method: String, path: String, status: Int, nanos: UInt64, route: String, origin: String,
        headers: HTTPHeaders
    ) -> Logger.Metadata {
        var md: Logger.Metadata = [
            "method": .string(method), "path": .string(path), "status": .stringConvertible(status),
            "duration_ms": .stringConvertible((Double(nanos) / 1000).rounded() / 1000),
            "route": .string(route), "origin": .string(origin),
        ]
        if let id = headers[MirrorgateHeader.requestID] { md["request_id"] = .string(id) }
        if let ms = upstreamMillis(headers.values("Server-Timing")) {
            md["upstream_ms"] = .stringConvertible(ms)
        }
        return md
    }

    /// The last `upstream;dur=MS` entry of the `Server-Timing` values.
    public static func upstreamMillis(_ values: [String]) -> Double? {
        var found: Double?
        for value in values {
            for entry in value.split(separator: ",") {
                let parts = entry.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
                guard parts.first == "upstream" else { continue }
                for p in parts.dropFirst() where p.hasPrefix("dur=") { found = Double(p.dropFirst(4)) }
            }
        }
        return found
    }
}
