"""Reload (issue 18 item 3, SPEC §1 and §5): `SIGHUP` and `POST /_mirrorgate/reload` re-read the
configuration. Valid changes apply while clients keep streaming requests on kept-alive connections (none is
dropped, no local data is lost); an invalid file is reported (400 with the errors; a log line for SIGHUP) and
the running configuration kept; keys that need a restart (the listen address) are reported as such.
"""

from __future__ import annotations

import http.client
import json
import signal
import threading
import time

from conftest import BASE_CONFIG
from harness import ENCRYPTION, deep_merge, free_port, request, to_yaml, with_store_keys

APP = "RELOADAPP"
KEY = "reload-key"
HEADERS = {"X-Algolia-Application-Id": APP, "X-Algolia-API-Key": KEY, "Content-Type": "application/json"}


def write_index(tmp_path, name: str, words: list[str]) -> dict:
    objects = tmp_path / f"{name}.json"
    objects.write_text(json.dumps([{"objectID": f"{name}-{i}", "title": w} for i, w in enumerate(words)]))
    settings = tmp_path / f"{name}.settings.json"
    settings.write_text(json.dumps({"searchableAttributes": ["title"]}))
    return {"bootstrap": {"settings": str(settings), "objects": [str(objects)]}}


def odata_service(root: str, mount: str, **extra) -> dict:
    svc = {"mount": mount, "upstream": root, "timeout": "3s", "definingRequests": [{"name": "c", "query": "Customers"}]}
    svc.update(extra)
    return svc


def rewrite(gw, config: dict) -> None:
    """Writes `config` as the gateway's file, keeping its port and data directory."""
    cfg = deep_merge(BASE_CONFIG, config)
    cfg = deep_merge(cfg, {"server": {"listen": f"127.0.0.1:{gw.port}"}})
    cfg.setdefault("dataDir", str(gw.workdir / "data"))
    # Under MIRRORGATE_TEST_ENCRYPTION the stores keep the key the gateway started with.
    gw.config_path.write_text(to_yaml(with_store_keys(cfg) if ENCRYPTION else cfg))


def reload(gw) -> tuple[int, dict]:
    st, _, body = request("POST", gw.url("/_mirrorgate/reload"), timeout=30)
    return st, json.loads(body)


class Streamer(threading.Thread):
    """Sends one request after another on a single kept-alive connection (bounded in count and time) and
    records every status and whether the connection was ever replaced."""

    def __init__(self, port: int, method: str, path: str, body: bytes | None, headers: dict):
        super().__init__(daemon=True)
        self.port, self.method, self.path, self.body, self.headers = port, method, path, body, headers
        self.statuses: list[int] = []
        self.errors: list[str] = []
        self.reconnected = False
        self.stop = threading.Event()

    def run(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        conn.connect()
        first = conn.sock
        deadline = time.monotonic() + 60
        for _ in range(20_000):
            if self.stop.is_set() or time.monotonic() > deadline:
                break
            try:
                conn.request(self.method, self.path, body=self.body, headers=self.headers)
                resp = conn.getresponse()
                resp.read()
                self.statuses.append(resp.status)
                if resp.getheader("Connection", "").lower() == "close" or conn.sock is not first:
                    self.reconnected = True
                    break
            except (OSError, http.client.HTTPException) as exc:
                self.errors.append(repr(exc))
                break
            time.sleep(0.005)
        conn.close()

    def wait_for(self, n: int, seconds: float = 20) -> None:
        deadline = time.monotonic() + seconds
        while len(self.statuses) < n and time.monotonic() < deadline and self.is_alive():
            time.sleep(0.02)
        assert len(self.statuses) >= n, (len(self.statuses), self.errors)


def search(gw, index: str) -> tuple[int, dict]:
    st, _, body = request("POST", gw.url(f"/1/indexes/{index}/query"), body=b'{"query":""}', headers=HEADERS)
    return st, json.loads(body)


def test_reload_applies_added_removed_and_changed_while_clients_stream(gateway_factory, odata_upstream, tmp_path):
    root = odata_upstream.root
    alpha = write_index(tmp_path, "alpha", ["apple", "apricot"])
    beta = write_index(tmp_path, "beta", ["banana"])
    first = {
        "log": {"level": "info", "format": "text"},
        "algolia": {"appId": APP, "apiKey": KEY, "hosts": ["http://127.0.0.1:9"], "offlineIndices": {"alpha": alpha}},
        "odata": {"services": {"nw": odata_service(root, "/odata/nw/"), "old": odata_service(root, "/odata/old/")}},
    }
    gw = gateway_factory(first)
    assert search(gw, "alpha")[1]["nbHits"] == 2
    st, _, _ = request("GET", gw.url("/odata/old/Customers"), headers={"Accept": "application/json"})
    assert st == 200
    clients = [
        Streamer(gw.port, "POST", "/1/indexes/alpha/query", b'{"query":"ap"}', HEADERS),
        Streamer(gw.port, "GET", "/odata/nw/Customers?$top=2", None, {"Accept": "application/json"}),
    ]
    for c in clients:
        c.start()
    for c in clients:
        c.wait_for(20)

    second = deep_merge(
        first,
        {
            "log": {"level": "warning"},
            "server": {"cors": {"allowOrigins": ["http://app.example"]}},
            "algolia": {"offlineIndices": {"alpha": alpha, "beta": beta}},
            "odata": {
                "services": {
                    "nw": odata_service(root, "/odata/nw/", timeout="4s"),
                    "new": odata_service(root, "/odata/new/"),
                }
            },
        },
    )
    second["odata"]["services"].pop("old")
    rewrite(gw, second)
    st, doc = reload(gw)
    assert st == 200, doc
    changes = {(c["key"], c["change"]) for c in doc["changes"]}
    assert {
        ("algolia.offlineIndices.beta", "added"),
        ("odata.services.new", "added"),
        ("odata.services.old", "removed"),
        ("odata.services.nw", "changed"),
        ("log.level", "changed"),
        ("server.cors.allowOrigins", "changed"),
    } <= changes, doc
    assert doc["restartRequired"] == []
    counts = [len(c.statuses) for c in clients]
    for c, n in zip(clients, counts):
        c.wait_for(n + 20)

    assert search(gw, "beta")[1]["nbHits"] == 1
    assert search(gw, "alpha")[1]["nbHits"] == 2, "a kept offline index keeps its data"
    st, _, _ = request("GET", gw.url("/odata/new/Customers"), headers={"Accept": "application/json"})
    assert st == 200
    st, _, _ = request("GET", gw.url("/odata/old/Customers"), headers={"Accept": "application/json"})
    assert st == 404
    status = json.loads(request("GET", gw.url("/_mirrorgate/status"))[2])
    assert sorted(status["odata"]["services"]) == ["new", "nw"], status["odata"]
    assert "beta" in status["algolia"]["indices"]
    st, hdrs, _ = request(
        "OPTIONS",
        gw.url("/1/indexes/alpha/query"),
        headers={"Origin": "http://app.example", "Access-Control-Request-Method": "POST"},
    )
    assert st == 204 and hdrs.get("access-control-allow-origin") == "http://app.example"
    # log level warning: no access lines after the reload
    mark = len(gw.stderr())
    search(gw, "alpha")
    time.sleep(0.3)
    assert "mirrorgate.access" not in gw.stderr()[mark:]

    # SIGHUP: the same reload (beta removed); the gateway keeps running (no exit 129)
    third = deep_merge(second, {"log": {"level": "info"}})
    third["algolia"]["offlineIndices"] = {"alpha": alpha}
    rewrite(gw, third)
    gw.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and "beta" in json.loads(request("GET", gw.url("/_mirrorgate/status"))[2])["algolia"]["indices"]:
        time.sleep(0.05)
    assert gw.alive(), "SIGHUP must not stop the gateway"
    assert "beta" not in json.loads(request("GET", gw.url("/_mirrorgate/status"))[2])["algolia"]["indices"]
    assert "configuration reloaded" in gw.stderr()
    counts = [len(c.statuses) for c in clients]
    for c, n in zip(clients, counts):
        c.wait_for(n + 10)
    for c in clients:
        c.stop.set()
        c.join(timeout=15)
        assert not c.errors, c.errors
        assert not c.reconnected, "a kept-alive connection was closed by a reload"
        assert set(c.statuses) == {200}, sorted(set(c.statuses))


def test_reload_refuses_an_invalid_file_and_keeps_running(gateway_factory, tmp_path):
    alpha = write_index(tmp_path, "alpha", ["apple"])
    config = {"algolia": {"appId": APP, "apiKey": KEY, "hosts": ["http://127.0.0.1:9"], "offlineIndices": {"alpha": alpha}}}
    gw = gateway_factory(config)
    text = gw.config_path.read_text()
    gw.config_path.write_text(text + "serverr:\n  listen: nowhere\n")
    st, doc = reload(gw)
    assert st == 400, doc
    assert doc["status"] == 400 and "kept" in doc["message"]
    assert any("serverr" in e and str(gw.config_path) in e for e in doc["errors"]), doc
    assert search(gw, "alpha")[1]["nbHits"] == 1
    # SIGHUP with the same file: a log line, the process stays
    gw.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and "reload refused" not in gw.stderr():
        time.sleep(0.05)
    assert "reload refused" in gw.stderr() and "serverr" in gw.stderr()
    assert gw.alive()
    assert search(gw, "alpha")[1]["nbHits"] == 1
    # a missing bootstrap file is refused too, before anything changes
    broken = deep_merge(config, {"algolia": {"offlineIndices": {"gone": write_index(tmp_path, "gone", ["x"])}}})
    (tmp_path / "gone.json").unlink()
    rewrite(gw, broken)
    st, doc = reload(gw)
    assert st == 400 and any("gone.json" in e for e in doc["errors"]), doc
    assert "gone" not in json.loads(request("GET", gw.url("/_mirrorgate/status"))[2])["algolia"]["indices"]
    assert search(gw, "alpha")[1]["nbHits"] == 1


def test_reload_reports_keys_that_need_a_restart(gateway_factory):
    gw = gateway_factory({"admin": {"token": "reload-token"}})
    other = free_port()
    cfg = {"admin": {"token": "new-token"}, "server": {"maxConnections": 64}}
    rewrite(gw, cfg)
    text = gw.config_path.read_text().replace(f"127.0.0.1:{gw.port}", f"127.0.0.1:{other}")
    gw.config_path.write_text(text)
    st, _, body = request("POST", gw.url("/_mirrorgate/reload"), headers={"Authorization": "Bearer reload-token"})
    doc = json.loads(body)
    assert st == 200, doc
    assert sorted(doc["restartRequired"]) == ["server.listen", "server.maxConnections"], doc
    assert {"key": "admin.token", "change": "changed"} in doc["changes"]
    assert "new-token" not in body.decode() and "reload-token" not in body.decode()
    # still on the old port; the new token applies, the old one no longer
    st, _, _ = request("GET", gw.url("/_mirrorgate/health"), headers={"Authorization": "Bearer new-token"})
    assert st == 200
    st, _, _ = request("GET", gw.url("/_mirrorgate/health"), headers={"Authorization": "Bearer reload-token"})
    assert st == 401
    try:
        request("GET", f"http://127.0.0.1:{other}/_mirrorgate/live", timeout=2)
        raise AssertionError("the new listen address must not be served before a restart")
    except OSError:
        pass
    gw.token = "new-token"


def test_an_index_store_opened_by_a_reload_is_encrypted_with_the_start_key(gateway_factory, tmp_path):
    """No index at start, so no index store is open; a reload that adds an offline index opens it, with the
    `algolia.storeEncryptionKey` the gateway started with (never in the clear)."""
    from store_crypto import is_encrypted

    marker = "QUOKKA93"
    config = {"algolia": {"appId": APP, "apiKey": KEY, "hosts": ["http://127.0.0.1:9"], "storeEncryptionKey": "reload store secret"}}
    gw = gateway_factory(config)
    added = deep_merge(config, {"algolia": {"offlineIndices": {"notes": write_index(tmp_path, "notes", [marker, "other"])}}})
    rewrite(gw, added)
    st, doc = reload(gw)
    assert st == 200, doc
    assert ("algolia.offlineIndices.notes", "added") in {(c["key"], c["change"]) for c in doc["changes"]}, doc
    st, found = search(gw, "notes")
    assert st == 200 and found["nbHits"] == 2, found
    store = gw.workdir / "data" / "search.sqlite"
    assert store.exists(), sorted(p.name for p in store.parent.iterdir())
    assert is_encrypted(store), "the index store opened by a reload must be encrypted"
    for path in store.parent.glob("search.sqlite*"):
        raw = path.read_bytes()
        assert marker.encode() not in raw and b"SQLite format 3" not in raw, path.name


def test_local_writes_survive_a_reload_of_the_algolia_service(gateway_factory, tmp_path):
    """Writes through the Algolia API to offline indices (a configured one, one created under a pattern)
    stay visible after a reload that rebuilds the Algolia service, and the new service takes writes."""
    from test_offline_writes import offline_config, raw

    config = offline_config(tmp_path)
    gw = gateway_factory(config)

    def write(index: str, obj: dict) -> None:
        st, _, body = raw(gw, "POST", f"/1/indexes/{index}/batch", {"requests": [{"action": "addObject", "body": obj}]})
        assert st == 200, body
        deadline = time.monotonic() + 10
        for _ in range(500):
            st, _, task = raw(gw, "GET", f"/1/indexes/{index}/task/{body['taskID']}")
            if (st == 200 and task["status"] == "published") or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        assert st == 200 and task["status"] == "published", task

    def hits(index: str, query: str) -> int:
        st, _, body = raw(gw, "POST", f"/1/indexes/{index}/query", {"query": query})
        assert st == 200, body
        return body["nbHits"]

    write("notes", {"objectID": "n1", "text": "before reload"})
    write("products_tmp_1", {"objectID": "t1", "name": "temporary lamp"})
    changed = deep_merge(config, {"algolia": {"offlineIndices": {"extra": {}}}})
    rewrite(gw, changed)
    st, doc = reload(gw)
    assert st == 200, doc
    assert ("algolia.offlineIndices.extra", "added") in {(c["key"], c["change"]) for c in doc["changes"]}, doc
    assert hits("notes", "before") == 1
    assert hits("products_tmp_1", "lamp") == 1
    write("notes", {"objectID": "n2", "text": "after reload"})
    assert hits("notes", "reload") == 2
