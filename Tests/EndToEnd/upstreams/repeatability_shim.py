"""A repeatability shim: a loopback HTTP proxy that gives an upstream without repeatable-request support
(odatapy, mock-sap: see shared/reference/odata.md §4.5) the OASIS Repeatable Requests behaviour (§1.10),
for both header families:

- OASIS: request `Repeatability-Request-ID` + `Repeatability-First-Sent`, response `Repeatability-Result`;
- SAP: request `RequestID` + `RepeatabilityCreation`, response `RepeatabilityResult`.

A modification carrying an ID seen for the first time is forwarded (executed once), its response stored
under the ID and answered with `…Result: accepted`; a repeat with the same ID gets the stored status,
headers and body with `…Result: replayed`, without being forwarded. A repeat of a request whose first
execution failed (4xx/5xx) is executed again (OASIS: "as if it was never received"). A repeat that
differs in method or URL, or an ID without its First-Sent/Creation partner, gets `400` and
`…Result: rejected`. Concurrent requests with the same ID are serialised (the second waits for the
first, then is replayed). GET and HEAD, and requests without an ID, pass through unchanged.

The shim presents itself as the upstream's canonical origin: the upstream's origin in response
headers and bodies is replaced by the shim's own. The store lives as long as the object (it keeps
its port and its store across `stop()`/`start()`), which is what a durable server-side store looks
like from a gateway that is killed and restarted.

Counters for tests: `executed[id]` (forwarded modifications per ID), `replayed[id]`, `passed` (requests
forwarded without an ID), `log` (every modification with an ID). `hold_next(n)`: the next n first
executions are stored, then their answer waits (bounded) for `release` (`holding` is set meanwhile).
Runnable alone: `python repeatability_shim.py PORT ORIGIN`.
"""

from __future__ import annotations

import http.server
import sys
import threading
from collections import Counter
from dataclasses import dataclass

try:
    from upstreams.faults import MODIFYING, LoopbackProxy
except ImportError:  # run alone from this directory
    from faults import MODIFYING, LoopbackProxy


@dataclass
class Stored:
    method: str
    path: str
    status: int
    reason: str
    headers: list[tuple[str, str]]
    body: bytes


class RepeatabilityShim(LoopbackProxy):
    def __init__(self, origin: str, port: int = 0):
        self.store: dict[str, Stored] = {}
        self.executed: Counter[str] = Counter()
        self.replayed: Counter[str] = Counter()
        self.rejected = 0
        self.passed = 0
        # (method, path, request ID, First-Sent/Creation, header families present) of every modification
        self.log: list[tuple[str, str, str, str | None, frozenset[str]]] = []
        self._lock = threading.Lock()
        self._id_locks: dict[str, threading.Lock] = {}
        # unsupported = True: modifications with an ID are executed every time, nothing is stored, and the
        # answer says `…Result: unsupported` (SAP's value for a request it cannot make repeatable).
        self.unsupported = False
        # hold_next(n): the next n first executions wait (bounded) for `release` before answering.
        self._hold = 0
        self.holding = threading.Event()
        self.release = threading.Event()
        # Lifecycle (LoopbackProxy): `stop()` keeps the store, and `start()` listens again on the same port.
        super().__init__(origin, port)

    # -- the protocol ---------------------------------------------------------------------------
    def _handle(self, h: http.server.BaseHTTPRequestHandler) -> None:
        n = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(n) if n > 0 else b""
        rid = h.headers.get("Repeatability-Request-ID")
        first = h.headers.get("Repeatability-First-Sent")
        family = "oasis"
        if rid is None and h.headers.get("RequestID") is not None:
            rid, first, family = h.headers.get("RequestID"), h.headers.get("RepeatabilityCreation"), "sap"
        sap_too = h.headers.get("RequestID") is not None
        result_names = (["Repeatability-Result"] if family == "oasis" else []) + (
            ["RepeatabilityResult"] if sap_too else []
        )
        if rid is not None:
            fams = frozenset(
                f
                for f, name in (("oasis", "Repeatability-Request-ID"), ("sap", "RequestID"))
                if h.headers.get(name) is not None
            )
            with self._lock:
                self.log.append((h.command, h.path, rid, first, fams))
        if h.command in ("GET", "HEAD") or rid is None:
            with self._lock:
                self.passed += 1
            self._answer(h, self._stored(h, body), [])
            return
        if not first or h.command not in MODIFYING:
            with self._lock:
                self.rejected += 1
            self._reject(h, result_names, "repeatability headers incomplete or on an unsupported method")
            return
        if self.unsupported:
            response = self._stored(h, body)
            with self._lock:
                self.executed[rid] += 1
            self._answer(h, response, [(k, "unsupported") for k in result_names])
            return
        with self._lock:
            lock = self._id_locks.setdefault(rid, threading.Lock())
        with lock:
            with self._lock:
                stored = self.store.get(rid)
            if stored is not None and (stored.method != h.command or stored.path != h.path):
                with self._lock:
                    self.rejected += 1
                self._reject(h, result_names, "the request ID was used for a different request")
                return
            if stored is not None and stored.status < 400:
                with self._lock:
                    self.replayed[rid] += 1
                self._answer(h, stored, [(k, "replayed") for k in result_names])
                return
            response = self._stored(h, body)
            with self._lock:
                self.executed[rid] += 1
                self.store[rid] = response
                hold = self._hold > 0
                self._hold -= 1 if hold else 0
            if hold:  # executed and stored; the answer waits (a gateway killed meanwhile never gets it)
                self.holding.set()
                self.release.wait(timeout=15)
            self._answer(h, response, [(k, "accepted") for k in result_names])

    def _stored(self, h: http.server.BaseHTTPRequestHandler, body: bytes) -> Stored:
        try:
            status, reason, out, data = self._forward(h, body)
        except OSError as exc:
            msg = f"repeatability shim: upstream unreachable: {exc}".encode()
            return Stored(h.command, h.path, 502, "Bad Gateway", [("Content-Type", "text/plain")], msg)
        return Stored(h.command, h.path, status, reason, [(k, self.rewrite(v)) for k, v in out], self.rewrite(data))

    def _answer(self, h, r: Stored, extra: list[tuple[str, str]]) -> None:
        h.send_response_only(r.status, r.reason)
        for k, v in r.headers + extra:
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(r.body)))
        h.end_headers()
        if h.command != "HEAD":
            h.wfile.write(r.body)

    def _reject(self, h, result_names: list[str], message: str) -> None:
        body = ('{"error":{"code":"400","message":"%s"}}' % message).encode()
        h.send_response(400)
        for k in result_names or ["Repeatability-Result"]:
            h.send_header(k, "rejected")
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    # -- for tests ------------------------------------------------------------------------------
    def hold_next(self, n: int = 1) -> None:
        with self._lock:
            self._hold = n
        self.holding.clear()
        self.release.clear()

    def executions(self) -> int:
        with self._lock:
            return sum(self.executed.values())

    def replays(self) -> int:
        with self._lock:
            return sum(self.replayed.values())


if __name__ == "__main__":
    shim = RepeatabilityShim(sys.argv[2], port=int(sys.argv[1])).start()
    print(f"repeatability shim on {shim.url} for {shim.origin}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        shim.stop()
