"""Network faults on loopback for the end-to-end tests: a black hole, a refused port, and a proxy that
loses responses after the upstream committed."""

from __future__ import annotations

import http.server
import socket
import struct
import threading
import time


class QuietServer(http.server.ThreadingHTTPServer):
    """Threads are daemons, the port is reusable at once, and a peer that hangs up (a gateway killed on
    purpose, a connection dropped on purpose) is not printed as an error."""

    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        pass


class BlackHole:
    """Accepts TCP connections on 127.0.0.1 and never answers (nor reads, nor closes) until stopped.

    From the client's side the connect succeeds and then the request waits forever: the shape of a
    dropped route or a hung upstream, which only the caller's own deadline can end.
    """

    def __init__(self, port: int = 0):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(128)
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.held: list[socket.socket] = []
        self.accepted = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "BlackHole":
        self.thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            with self._lock:
                self.held.append(conn)
                self.accepted += 1

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(timeout=5)
        with self._lock:
            for c in self.held:
                try:
                    c.close()
                except OSError:
                    pass
            self.held.clear()
        self.sock.close()


def refused_port() -> int:
    """A loopback port that nothing listens on (bound once to reserve a number, then closed)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "proxy-connection", "te", "upgrade"}
MODIFYING = {"POST", "PUT", "PATCH", "MERGE", "DELETE"}


class LoopbackProxy:
    """An HTTP/1.1 server on 127.0.0.1 in front of one origin (`origin`, e.g. `http://127.0.0.1:8000`): every
    request goes to `_handle(h)` (subclasses); `_forward` sends it on over a fresh connection. It presents
    itself as the origin's canonical name (`rewrite` replaces the origin's URL by its own). `stop()` keeps the
    port for a later `start()`."""

    def __init__(self, origin: str, port: int = 0):
        from urllib.parse import urlsplit

        self.origin = origin.rstrip("/")
        self.forwarded: dict[str, int] = {}
        self._count_lock = threading.Lock()
        u = urlsplit(self.origin)
        self._host, self._port = u.hostname, u.port or 80
        self.port = port
        self.httpd: http.server.ThreadingHTTPServer | None = None
        self._bind()

    def _bind(self) -> None:
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _any(self):
                proxy._handle(self)

            do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_MERGE = do_DELETE = _any

        self.httpd = QuietServer(("127.0.0.1", self.port), Handler)
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"

    def start(self):
        if self.httpd is None:
            self._bind()
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        """Stops listening; `start()` listens again on the same port."""
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()
            self.thread.join(timeout=5)
            self.httpd = None

    def _handle(self, h: http.server.BaseHTTPRequestHandler) -> None:
        raise NotImplementedError

    def _forward(self, h: http.server.BaseHTTPRequestHandler, body: bytes):
        """The request of `h` (with `body`) sent to the origin: (status, reason, headers, body), hop-by-hop
        headers left out; raises OSError when the origin cannot be reached."""
        import http.client

        headers = {k: v for k, v in h.headers.items() if k.lower() not in HOP and k.lower() != "host"}
        headers["Host"] = f"{self._host}:{self._port}"
        conn = http.client.HTTPConnection(self._host, self._port, timeout=30)
        try:
            conn.request(h.command, h.path, body=body if body or h.command in MODIFYING else None, headers=headers)
            r = conn.getresponse()
            data = r.read()
            return r.status, r.reason, [(k, v) for k, v in r.getheaders() if k.lower() not in HOP], data
        finally:
            conn.close()

    def rewrite(self, text):
        """`text` (str or bytes) with the origin's URL replaced by the proxy's."""
        if isinstance(text, bytes):
            return text.replace(self.origin.encode(), self.url.encode())
        return text.replace(self.origin, self.url)

    def _read_and_forward(self, h):
        """The request body of `h` read and the request sent to the origin: (status, reason, headers, body),
        or None when the origin cannot be reached (the client's connection is then closed)."""
        n = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(n) if n > 0 else b""
        try:
            answer = self._forward(h, body)
        except OSError:
            h.close_connection = True
            return None
        with self._count_lock:
            self.forwarded[h.command] = self.forwarded.get(h.command, 0) + 1
        return answer

    def _relay(self, h, status: int, reason: str, out: list, data: bytes) -> None:
        """The origin's answer sent to the client of `h`, with the origin's URLs replaced by the proxy's."""
        data = self.rewrite(data)
        try:
            h.send_response_only(status, reason)
            for k, v in out:
                h.send_header(k, self.rewrite(v))
            h.send_header("Content-Length", str(len(data)))
            h.end_headers()
            if h.command != "HEAD":
                h.wfile.write(data)
        except OSError:
            h.close_connection = True


class ResponseDropper(LoopbackProxy):
    """Loopback HTTP proxy in front of one origin that loses responses after the upstream committed.

    Every request is forwarded (a fresh upstream connection each); for the next `drop` requests whose
    method is in `methods`, the upstream's response is read in full and then the client connection is
    closed without a byte of answer: the request took effect, the sender cannot know. With
    `drop_first_of = HEADER`, instead the first response of every distinct value of that request header
    (e.g. `Repeatability-Request-ID`) is lost, so that each request is answered only on its retry. With
    `garble` set (bytes), a lost response is replaced by those bytes before the connection closes. The origin's own
    URLs in answers are replaced by the proxy's (it stands in for the origin's canonical name).
    Counters: `dropped`, `forwarded` (per method). `stop()` keeps the port for a later `start()`.
    """

    def __init__(self, origin: str, port: int = 0, methods: tuple[str, ...] = ("POST", "PATCH", "MERGE", "PUT")):
        self.methods = set(methods)
        self.drop = 0
        self.drop_first_of: str | None = None
        self._seen_keys: set[str] = set()
        self.dropped = 0
        self.garble: bytes | None = None
        self._lock = threading.Lock()
        super().__init__(origin, port)

    def drop_next(self, n: int) -> None:
        with self._lock:
            self.drop = n

    def _handle(self, h) -> None:
        answer = self._read_and_forward(h)
        if answer is None:
            return
        with self._lock:
            key = h.headers.get(self.drop_first_of) if self.drop_first_of else None
            if h.command not in self.methods:
                lose = False
            elif key is not None:
                lose = key not in self._seen_keys
                self._seen_keys.add(key)
            else:
                lose = self.drop > 0
                self.drop -= 1 if lose else 0
            self.dropped += 1 if lose else 0
        if lose:
            h.close_connection = True
            if self.garble is not None:
                # Instead of silence, an answer that is not well-formed HTTP (garbage, a malformed header,
                # a truncated body), then the connection closes.
                try:
                    h.wfile.write(self.garble)
                    h.wfile.flush()
                except OSError:
                    pass
            return
        self._relay(h, *answer)



class FaultInjector(LoopbackProxy):
    """Loopback HTTP proxy in front of one origin that fails on purpose before the origin sees a request:

    - `status_for[method] = status` answers requests of that method with `status` (an OData error body,
      `Retry-After: 1` for 503 and 429) without forwarding them; `body_for[status] = (content_type, bytes)`
      replaces that body (a proxy's HTML page, say);
    - `trickle_for[method] = seconds`: the origin's answer to requests of that method is relayed with its
      head at once and its body in four pieces, `seconds` apart (a slow upstream's body);
    - `fetch_gate` (a threading.Event): a CSRF token fetch (`X-CSRF-Token: Fetch`) waits for it, at most
      `gate_limit` seconds, before it is forwarded (a slow upstream session).

    Everything else is forwarded. Counters: `forwarded` (per method), `injected` (per status), `fetches`.
    """

    def __init__(self, origin: str, port: int = 0):
        self.status_for: dict[str, int] = {}
        self.body_for: dict[int, tuple[str, bytes]] = {}
        self.trickle_for: dict[str, float] = {}
        self.fetch_gate: threading.Event | None = None
        self.gate_limit = 20.0
        self.injected: dict[int, int] = {}
        self.fetches = 0
        self._lock = threading.Lock()
        super().__init__(origin, port)

    def _handle(self, h) -> None:
        n = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(n) if n > 0 else b""
        with self._lock:
            status = self.status_for.get(h.command)
            gate = self.fetch_gate
        if status is not None:
            with self._lock:
                self.injected[status] = self.injected.get(status, 0) + 1
            content_type, data = self.body_for.get(
                status, ("application/json", b'{"error":{"code":"Injected","message":"injected failure"}}')
            )
            h.send_response_only(status)
            h.send_header("Content-Type", content_type)
            h.send_header("Content-Length", str(len(data)))
            if status in (429, 503):
                h.send_header("Retry-After", "1")
            h.end_headers()
            h.wfile.write(data)
            return
        if (h.headers.get("X-CSRF-Token") or "").lower() == "fetch":
            with self._lock:
                self.fetches += 1
            if gate is not None:
                gate.wait(self.gate_limit)
        try:
            answer = self._forward(h, body)
        except OSError:
            h.close_connection = True
            return
        with self._count_lock:
            self.forwarded[h.command] = self.forwarded.get(h.command, 0) + 1
        gap = self.trickle_for.get(h.command)
        if gap is None:
            self._relay(h, *answer)
        else:
            self._trickle(h, answer, gap)

    def _trickle(self, h, answer, gap: float) -> None:
        status, reason, out, data = answer
        data = self.rewrite(data)
        try:
            h.send_response_only(status, reason)
            for k, v in out:
                h.send_header(k, self.rewrite(v))
            h.send_header("Content-Length", str(len(data)))
            h.end_headers()
            h.wfile.flush()
            step = max(1, len(data) // 4 + 1)
            for i in range(0, len(data), step):
                h.wfile.write(data[i : i + step])
                h.wfile.flush()
                time.sleep(gap)
        except OSError:
            h.close_connection = True


UPLOAD_FAULTS = {
    "garbage": b"\x00\xff\xfe not http at all\r\n\r\n",
    "header-without-colon": b"HTTP/1.1 201 Created\r\nContent-Type application/json\r\n\r\n{}",
    "nul-in-header": b"HTTP/1.1 201 Created\r\nX-Bad: a\x00b\r\nContent-Length: 2\r\n\r\n{}",
    "truncated-body": b'HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 400\r\n\r\n{"ProductID":',
    "truncated-head": b"HTTP/1.1 201 Crea",
    "silence": b"",
    "reset": b"",
}


class SeededUploadFaults(LoopbackProxy):
    """Loopback HTTP proxy in front of one origin that lets the origin commit every modifying request and
    then, for a seeded share (`rate`) of them, answers the sender with one of `UPLOAD_FAULTS` instead of
    the origin's answer: bytes that are not well-formed HTTP (garbage, a header without a colon, a NUL in
    a header, a truncated head or body), nothing (silence), or a TCP reset. The choice depends only on the
    seed and the order of requests. Counters: `faults` (per kind), `forwarded` (per method)."""

    def __init__(self, origin: str, seed: str, rate: float = 0.35, port: int = 0):
        import random as _random

        self.rng = _random.Random(seed)
        self.rate = rate
        self.faults: dict[str, int] = {}
        self._lock = threading.Lock()
        super().__init__(origin, port)

    def _handle(self, h) -> None:
        answer = self._read_and_forward(h)
        if answer is None:
            return
        with self._lock:
            fault = None
            if h.command in MODIFYING and self.rng.random() < self.rate:
                fault = self.rng.choice(sorted(UPLOAD_FAULTS))
                self.faults[fault] = self.faults.get(fault, 0) + 1
        if fault is not None:
            h.close_connection = True
            try:
                if fault == "reset":
                    h.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                elif UPLOAD_FAULTS[fault]:
                    h.wfile.write(UPLOAD_FAULTS[fault])
                    h.wfile.flush()
            except OSError:
                pass
            return
        self._relay(h, *answer)
