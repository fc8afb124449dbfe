"""A loopback proxy in front of an OData upstream that checks bearer tokens on modifications, for the
end-to-end tests of credentials at upload (issue 15 item 6)."""

from __future__ import annotations

from upstreams.faults import MODIFYING, ResponseDropper


class BearerGate(ResponseDropper):
    """Every modification (POST, PUT, PATCH, MERGE, DELETE; a `$batch` too) must carry `Authorization: Bearer
    <token>` with a token in `valid` (a set the test changes: a token "expires" when it leaves it), else it
    gets `401` with an OData error and `WWW-Authenticate`; the rest is relayed as by a `ResponseDropper` that
    drops nothing. Every modification is recorded as (method, path, token) in `seen`, whatever the answer.
    `stop()` / `start()` make an outage on the same port."""

    def __init__(self, origin: str, port: int = 0):
        self.valid: set[str] = set()
        self.seen: list[tuple[str, str, str | None]] = []
        super().__init__(origin, port)

    def tokens_seen(self, method: str | None = None) -> list[str | None]:
        with self._lock:
            return [t for m, _, t in self.seen if method is None or m == method]

    def _handle(self, h) -> None:
        auth = h.headers.get("Authorization") or ""
        token = auth[len("Bearer ") :] if auth.startswith("Bearer ") else None
        if h.command in MODIFYING:
            with self._lock:
                self.seen.append((h.command, h.path, token))
                refused = token not in self.valid
            if refused:
                n = int(h.headers.get("Content-Length") or 0)
                if n > 0:
                    h.rfile.read(n)
                data = b'{"error":{"code":"Unauthorized","message":"the token expired or was revoked"}}'
                h.send_response_only(401, "Unauthorized")
                h.send_header("Content-Type", "application/json")
                h.send_header("WWW-Authenticate", 'Bearer error="invalid_token"')
                h.send_header("Content-Length", str(len(data)))
                h.end_headers()
                h.wfile.write(data)
                return
        super()._handle(h)
