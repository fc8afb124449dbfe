"""A fake Algolia REST API upstream for the end-to-end tests (loopback only, stdlib only).

It implements just enough of Algolia's search API for the official Python client:

    POST /1/indexes/{i}/query            search (naive substring match over string attributes)
    GET  /1/indexes/{i}?query=...        search (GET form)
    POST /1/indexes/*/queries            multi-search
    POST /1/indexes/{i}/batch            writes (addObject, updateObject, partialUpdateObject, deleteObject)
    PUT|DELETE /1/indexes/{i}/{objectID} replace or delete one record
    GET  /1/indexes/{i}/task/{id}        always "published"
    GET  /1/indexes/{i}/settings         settings stored per index
    PUT  /1/indexes/{i}/settings         replace settings
    POST|GET /1/indexes/{i}/browse       cursor paging (page size min(hitsPerPage, browse_page_size))
    POST /1/indexes/{i}/synonyms/search  the synonyms stored per index (`index(name).synonyms`), paged
                                         (`page`, `hitsPerPage`, default 100)
    POST /1/indexes/{i}/rules/search     the query rules stored per index (`index(name).rules`), paged
                                         (`page`, `hitsPerPage`, default 20), filtered by `query`
    GET  /1/indexes/{i}/rules/{objectID} one rule
    GET  /1/indexes/{i}/{objectID}       one record
    GET  /_fake/trickle?chunks=N&size=B&interval=S[&burst=B][&first_delay=S]
                                         a slowly streamed (chunked) response: `burst` bytes at once,
                                         then N chunks of B bytes every S seconds (a longer pause
                                         `first_delay` after the first of them)
    GET  /_fake/bytes?size=B             a large fixed-length response with a deterministic body
    GET  /_fake/ready                    200 {"ready": true}
    (the same special routes answer under /1/indexes/_trickle/..., /1/indexes/_bytes/..., so they can
    be reached through the gateway's Algolia forwarding)

Every request is RECORDED (method, raw path, query string, header list in arrival order and case,
body bytes) together with the exact response bytes, so tests can assert that the gateway passed
requests through unchanged and relayed responses unchanged. Every JSON answer carries the marker
field ``"_upstream": <name>`` so a test can tell which upstream answered.

Fault modes (attributes, changeable at run time): ``delay`` (seconds before answering),
``fail_status`` (answer every /1/ request with that status and an Algolia error body),
``retry_after`` (sent with a 429), ``revoked_keys`` (API keys answered 403, as a key deleted in
Algolia's dashboard would be), and ``raw_fault`` for every /1/indexes request: ``"garbage"`` (bytes
that are not an HTTP response, then close) or ``"reset"`` (the connection reset without an answer).

A replica is an index like any other: seed its settings (with ``primary``) and list it in the primary's
``replicas`` setting (``virtual(name)`` for a virtual one).
"""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Server(ThreadingHTTPServer):
    # The default listen backlog (5) drops connections when the gateway opens several at once on a busy
    # machine; the client then waits for a SYN retransmit and the gateway's connect timeout fires.
    request_queue_size = 128


@dataclass
class Recorded:
    """One request as it arrived at the fake upstream, and what the fake answered."""

    method: str
    path: str  # raw path, still percent-encoded, without the query
    query: str  # raw query string ("" when none)
    headers: list[tuple[str, str]]  # in arrival order, names as sent
    body: bytes
    status: int = 0
    response_body: bytes = b""
    chunked_request: bool = False

    def header(self, name: str) -> str | None:
        """The first value of a header, looked up case-insensitively."""
        low = name.lower()
        for k, v in self.headers:
            if k.lower() == low:
                return v
        return None

    def json(self):
        return json.loads(self.body.decode("utf-8")) if self.body else None


@dataclass
class _Index:
    objects: dict[str, dict] = field(default_factory=dict)
    synonyms: list[dict] = field(default_factory=list)
    rules: list[dict] = field(default_factory=list)
    settings: dict = field(
        default_factory=lambda: {
            "minWordSizefor1Typo": 4,
            "minWordSizefor2Typos": 8,
            "hitsPerPage": 20,
            "searchableAttributes": None,
            "attributesForFaceting": None,
            "ranking": ["typo", "geo", "words", "filters", "proximity", "attribute", "exact", "custom"],
        }
    )


class FakeAlgolia:
    """A threaded fake Algolia server on 127.0.0.1 with request recording and fault modes."""

    def __init__(self, name: str = "fake-algolia", port: int = 0, browse_page_size: int = 2, host: str = "127.0.0.1"):
        self.name = name
        self.browse_page_size = browse_page_size
        self.delay = 0.0
        self.fail_status: int | None = None
        self.retry_after: str | None = None
        self.revoked_keys: set[str] = set()
        self.raw_fault: str | None = None
        self.lock = threading.Lock()
        self.records: list[Recorded] = []
        self.indices: dict[str, _Index] = {}
        self.next_task = 1000
        self._stop = threading.Event()
        fake = self

        class Handler(_Handler):
            server_fake = fake

        # host: 127.0.0.1 for the tests; 0.0.0.0 in a container (docker/fakes/serve.py)
        self.httpd = _Server((host, port), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    # -- lifecycle ----------------------------------------------------------
    def start(self) -> "FakeAlgolia":
        self.thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    # -- data helpers -------------------------------------------------------
    def index(self, name: str) -> _Index:
        with self.lock:
            return self.indices.setdefault(name, _Index())

    def seed(self, name: str, objects: list[dict], settings: dict | None = None) -> None:
        idx = self.index(name)
        with self.lock:
            for o in objects:
                idx.objects[str(o["objectID"])] = dict(o)
            if settings is not None:
                idx.settings = dict(settings)

    def requests(self, path_prefix: str | None = None, method: str | None = None) -> list[Recorded]:
        """Recorded requests, optionally filtered by raw path prefix and method."""
        with self.lock:
            out = list(self.records)
        if path_prefix is not None:
            out = [r for r in out if r.path.startswith(path_prefix)]
        if method is not None:
            out = [r for r in out if r.method == method]
        return out

    def clear(self) -> None:
        with self.lock:
            self.records.clear()

    def new_task(self) -> int:
        with self.lock:
            self.next_task += 1
            return self.next_task


def _matches(obj: dict, query: str) -> bool:
    if not query:
        return True
    q = query.lower()
    for k, v in obj.items():
        if k == "objectID":
            continue
        if isinstance(v, str) and q in v.lower():
            return True
    return False


def _params_of(body: dict) -> dict:
    """Merge an Algolia body's `params` query string into its other fields."""
    out = {k: v for k, v in body.items() if k != "params"}
    p = body.get("params")
    if isinstance(p, str) and p:
        for k, v in urllib.parse.parse_qsl(p, keep_blank_values=True):
            out.setdefault(k, v)
    return out


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_fake: FakeAlgolia  # set by the subclass in FakeAlgolia.__init__

    def log_message(self, fmt, *args):  # keep test output quiet
        pass

    # -- request plumbing -----------------------------------------------------
    def _read_body(self) -> tuple[bytes, bool]:
        te = (self.headers.get("Transfer-Encoding") or "").lower()
        if "chunked" in te:
            chunks = []
            for _ in range(1_000_000):
                line = self.rfile.readline(65537)
                if not line:
                    break
                size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    # trailers until the empty line
                    for _ in range(1000):
                        t = self.rfile.readline(65537)
                        if t in (b"\r\n", b"\n", b""):
                            break
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline(3)
            return b"".join(chunks), True
        n = int(self.headers.get("Content-Length") or 0)
        return (self.rfile.read(n) if n > 0 else b""), False

    def _handle(self) -> None:
        fake = self.server_fake
        if fake.stopping:
            # A stopped fake is gone for kept-alive connections too: close without answering.
            self.close_connection = True
            return
        raw = self.path
        path, _, query = raw.partition("?")
        body, chunked = self._read_body()
        rec = Recorded(
            method=self.command,
            path=path,
            query=query,
            headers=list(self.headers.items()),
            body=body,
            chunked_request=chunked,
        )
        with fake.lock:
            fake.records.append(rec)
        if fake.delay:
            # bounded sleep that ends early when the fake stops
            fake._stop.wait(fake.delay)
        if path.startswith("/_fake/"):
            self._fake_route(rec, path, query)
            return
        for special in ("trickle", "bytes", "echo"):
            if path.startswith(f"/1/indexes/_{special}"):
                self._fake_route(rec, f"/_fake/{special}", query)
                return
        if fake.raw_fault is not None and path.startswith("/1/indexes"):
            rec.status = -1
            if fake.raw_fault == "reset":
                import socket
                import struct

                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            else:
                self.wfile.write(b"\x00\x01 this is not HTTP\r\n\r\n")
                self.wfile.flush()
            self.close_connection = True
            return
        if fake.fail_status is not None and path.startswith("/1/"):
            st = fake.fail_status
            extra = {}
            if st == 429 and fake.retry_after is not None:
                extra["Retry-After"] = fake.retry_after
            self._json(rec, st, {"message": f"fake failure {st}", "status": st}, extra)
            return
        if path.startswith("/1/") and rec.header("X-Algolia-API-Key") in fake.revoked_keys:
            self._json(rec, 403, {"message": "Invalid Application-ID or API key", "status": 403})
            return
        try:
            status, payload = self._algolia(rec, path, query)
        except Exception as exc:  # a bug in the fake: answer 400 so the test sees it
            status, payload = 400, {"message": f"fake error: {exc!r}", "status": 400}
        self._json(rec, status, payload)

    def _json(self, rec: Recorded, status: int, payload: dict, extra: dict | None = None) -> None:
        if isinstance(payload, dict):
            payload = dict(payload)
            payload["_upstream"] = self.server_fake.name
        data = json.dumps(payload, separators=(",", ":")).encode()
        rec.status = status
        rec.response_body = data
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-Fake-Upstream", self.server_fake.name)
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_HEAD = _handle

    # -- special routes -------------------------------------------------------
    def _fake_route(self, rec: Recorded, path: str, query: str) -> None:
        q = dict(urllib.parse.parse_qsl(query))
        fake = self.server_fake
        if path == "/_fake/trickle":
            chunks = min(int(q.get("chunks", "100")), 10_000)
            size = min(int(q.get("size", "100")), 1 << 20)
            interval = min(float(q.get("interval", "0.1")), 10.0)
            first_delay = min(float(q.get("first_delay", "0")), 30.0)
            burst = min(int(q.get("burst", "0")), 64 << 20)
            rec.status = 200
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                # an optional burst first (to get past any buffering threshold), then the trickle
                left = burst
                while left > 0:
                    piece = b"b" * min(left, 65536)
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                    left -= len(piece)
                self.wfile.flush()
                for i in range(chunks):
                    if fake.stopping:
                        break
                    if i == 1 and first_delay:
                        fake._stop.wait(first_delay)
                    elif i > 0:
                        fake._stop.wait(interval)
                    piece = (b"%08d" % i) + b"x" * max(0, size - 8)
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError, OSError):
                self.close_connection = True
            return
        if path == "/_fake/bytes":
            size = min(int(q.get("size", "1000")), 64 << 20)
            block = bytes(range(256)) * 4096  # 1 MiB deterministic pattern
            rec.status = 200
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(size))
            self.end_headers()
            left = size
            try:
                while left > 0:
                    n = min(left, len(block))
                    self.wfile.write(block[:n])
                    left -= n
            except (BrokenPipeError, ConnectionResetError, OSError):
                self.close_connection = True
            return
        if path == "/_fake/ready":  # the compose kit's healthcheck (docker/compose.yaml)
            self._json(rec, 200, {"ready": True})
            return
        if path == "/_fake/echo":
            data = json.dumps(
                {"method": rec.method, "path": rec.path, "query": rec.query, "length": len(rec.body)}
            ).encode()
            rec.status = 200
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self._json(rec, 404, {"message": "no such fake route", "status": 404})

    # -- the Algolia API ------------------------------------------------------
    def _algolia(self, rec: Recorded, path: str, query: str) -> tuple[int, dict]:
        fake = self.server_fake
        parts = [urllib.parse.unquote(p) for p in path.split("/")[1:]]
        if len(parts) < 2 or parts[0] != "1" or parts[1] != "indexes":
            return 404, {"message": "Not Found", "status": 404}
        m = rec.method
        body = rec.json() if rec.body else {}
        qs = dict(urllib.parse.parse_qsl(query, keep_blank_values=True))
        if len(parts) == 2 and m == "GET":
            with fake.lock:
                names = list(fake.indices)
            return 200, {
                "items": [
                    {
                        "name": n,
                        "createdAt": "2026-01-01T00:00:00.000Z",
                        "updatedAt": "2026-01-01T00:00:00.000Z",
                        "entries": len(fake.index(n).objects),
                        "dataSize": 0,
                        "fileSize": 0,
                        "lastBuildTimeS": 0,
                        "numberOfPendingTasks": 0,
                        "pendingTask": False,
                    }
                    for n in names
                ],
                "nbPages": 1,
            }
        name = parts[2]
        rest = parts[3:]
        if name == "*" and rest == ["queries"] and m == "POST":
            results = []
            for r in body.get("requests", []):
                params = _params_of(r)
                results.append(self._search(r.get("indexName", ""), params))
            return 200, {"results": results}
        if name == "*" and rest == ["objects"] and m == "POST":
            out = []
            for r in body.get("requests", []):
                obj = fake.index(r.get("indexName", "")).objects.get(str(r.get("objectID")))
                out.append(obj)
            return 200, {"results": out}
        idx = fake.index(name)
        if not rest and m == "GET":
            return 200, self._search(name, qs)
        if rest == ["query"] and m == "POST":
            return 200, self._search(name, _params_of(body or {}))
        if rest == ["batch"] and m == "POST":
            ids = []
            with fake.lock:
                for op in body.get("requests", []):
                    action = op.get("action")
                    obj = op.get("body") or {}
                    oid = str(obj.get("objectID") or f"auto-{len(idx.objects) + 1}")
                    if action in ("addObject", "updateObject"):
                        idx.objects[oid] = dict(obj, objectID=oid)
                    elif action == "partialUpdateObject" or action == "partialUpdateObjectNoCreate":
                        idx.objects.setdefault(oid, {"objectID": oid}).update(obj)
                    elif action == "deleteObject":
                        idx.objects.pop(oid, None)
                    ids.append(oid)
            return 200, {"taskID": fake.new_task(), "objectIDs": ids}
        if len(rest) == 2 and rest[0] == "task" and m == "GET":
            return 200, {"status": "published", "pendingTask": False}
        if rest == ["settings"] and m == "GET":
            return 200, dict(idx.settings)
        if rest == ["settings"] and m == "PUT":
            with fake.lock:
                idx.settings.update(body)
            return 200, {"taskID": fake.new_task(), "updatedAt": "2026-01-01T00:00:00.000Z"}
        if rest == ["synonyms", "search"] and m == "POST":
            params = _params_of(body or {})
            with fake.lock:
                hits = [dict(x) for x in idx.synonyms]
            hpp = int(params.get("hitsPerPage", 100))
            page = int(params.get("page", 0))
            return 200, {"hits": hits[page * hpp : (page + 1) * hpp], "nbHits": len(hits)}
        if rest == ["rules", "search"] and m == "POST":
            params = _params_of(body or {})
            q = str(params.get("query", "")).lower()
            with fake.lock:
                hits = [dict(x) for x in idx.rules if not q or q in json.dumps(x).lower()]
            hpp = int(params.get("hitsPerPage", 20))
            page = int(params.get("page", 0))
            return 200, {
                "hits": hits[page * hpp : (page + 1) * hpp],
                "nbHits": len(hits),
                "page": page,
                "nbPages": (len(hits) + hpp - 1) // hpp,
            }
        if len(rest) == 2 and rest[0] == "rules" and m == "GET":
            with fake.lock:
                rule = next((dict(x) for x in idx.rules if x.get("objectID") == rest[1]), None)
            if rule is None:
                return 404, {"message": "ObjectID does not exist", "status": 404}
            return 200, rule
        if rest == ["browse"] and m in ("POST", "GET"):
            params = _params_of(body or {}) if m == "POST" else qs
            return 200, self._browse(name, params)
        if len(rest) == 1 and m == "PUT" and rest[0] != "settings":
            with fake.lock:
                idx.objects[rest[0]] = dict(body, objectID=rest[0])
            return 200, {"taskID": fake.new_task(), "updatedAt": "2026-01-01T00:00:00.000Z", "objectID": rest[0]}
        if len(rest) == 1 and m == "DELETE":
            with fake.lock:
                idx.objects.pop(rest[0], None)
            return 200, {"taskID": fake.new_task(), "deletedAt": "2026-01-01T00:00:00.000Z"}
        if len(rest) == 1 and m == "GET":
            obj = idx.objects.get(rest[0])
            if obj is None:
                return 404, {"message": "ObjectID does not exist", "status": 404}
            return 200, dict(obj)
        return 404, {"message": "Method not allowed with this API key", "status": 404}

    def _search(self, name: str, params: dict) -> dict:
        fake = self.server_fake
        idx = fake.index(name)
        q = str(params.get("query", ""))
        with fake.lock:
            hits = [dict(o) for o in idx.objects.values() if _matches(o, q)]
        hpp = int(params.get("hitsPerPage", 20))
        page = int(params.get("page", 0))
        nb = len(hits)
        return {
            "hits": hits[page * hpp : (page + 1) * hpp],
            "nbHits": nb,
            "page": page,
            "nbPages": (nb + hpp - 1) // hpp if hpp else 0,
            "hitsPerPage": hpp,
            "exhaustiveNbHits": True,
            "processingTimeMS": 1,
            "query": q,
            "params": urllib.parse.urlencode({"query": q}),
            "index": name,
        }

    def _browse(self, name: str, params: dict) -> dict:
        fake = self.server_fake
        idx = fake.index(name)
        with fake.lock:
            all_ids = sorted(idx.objects)
        start = 0
        cur = params.get("cursor")
        if cur:
            start = int(str(cur).removeprefix("c"))
        n = min(int(params.get("hitsPerPage", 1000)), fake.browse_page_size)
        page_ids = all_ids[start : start + n]
        with fake.lock:
            hits = [dict(idx.objects[i]) for i in page_ids if i in idx.objects]
        out = {
            "hits": hits,
            "nbHits": len(all_ids),
            "page": 0,
            "nbPages": 1,
            "hitsPerPage": n,
            "processingTimeMS": 1,
            "query": "",
            "params": "",
        }
        if start + n < len(all_ids):
            out["cursor"] = f"c{start + n}"
        return out


if __name__ == "__main__":  # manual use: python fake_algolia.py PORT
    import sys

    f = FakeAlgolia(port=int(sys.argv[1]) if len(sys.argv) > 1 else 0).start()
    print(f"fake Algolia on {f.url}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        f.stop()
