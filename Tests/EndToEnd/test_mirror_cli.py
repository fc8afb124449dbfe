"""The mirrored-index command line (`mirrorgate status`, `sync`, `build`) against a running gateway, and
the manual build endpoint `POST /_mirrorgate/algolia/indices/{i}/build` behind `mirrorgate build`."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest
from conftest import API_KEY, APP_ID
from harness import request, run_cli
from test_mirrored import PRODUCTS, SETTINGS, deep, mirrored_config, sync, wait_for
from upstreams.fake_algolia import FakeAlgolia
from upstreams.faults import refused_port

BUILT = [{"objectID": f"m{i}", "title": f"manual item {i}", "color": c} for i, c in enumerate(["red", "blue", "red"])]
BUILT_MORE = {"hits": [{"objectID": "m9", "title": "manual extra", "color": "green"}]}
BUILT_SETTINGS = {"searchableAttributes": ["title"], "attributesForFaceting": ["color"]}


@pytest.fixture
def upstream():
    f = FakeAlgolia(browse_page_size=3).start()
    f.seed("products", PRODUCTS, SETTINGS)
    yield f
    if not f.stopping:
        f.stop()


def cli(gw, *args: str, timeout: float = 30, cwd=None):
    return run_cli([args[0], "--config", str(gw.config_path), *args[1:]], timeout=timeout, cwd=cwd)


def offline_search(gw, params: dict):
    h = {
        "X-Algolia-Application-Id": APP_ID,
        "X-Algolia-API-Key": API_KEY,
        "Content-Type": "application/json",
        "X-Mirrorgate-Strategy": "offlineOnly",
    }
    st, headers, body = request(
        "POST", gw.url("/1/indexes/products/query"), body=json.dumps(params).encode(), headers=h, timeout=10
    )
    return st, headers, json.loads(body)


class Events:
    """Collects the event names of `GET /_mirrorgate/events` on a raw socket."""

    def __init__(self, gw, token: str | None = None):
        self.names: list[str] = []
        self.data: list[dict] = []
        self.sock = socket.create_connection(("127.0.0.1", gw.port), timeout=20)
        auth = f"Authorization: Bearer {token}\r\n" if token else ""
        self.sock.sendall(f"GET /_mirrorgate/events HTTP/1.1\r\nHost: x\r\n{auth}\r\n".encode())
        self.buf = b""
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        assert wait_for(lambda: b"mirrorgate events" in self.buf, timeout=5)

    def _run(self):
        for _ in range(100_000):
            try:
                more = self.sock.recv(65536)
            except OSError:
                return
            if not more:
                return
            self.buf += more
            names, data = [], []
            for block in self.buf.split(b"\n\n"):
                lines = block.split(b"\n")
                ev = [l.split(b": ", 1)[1].decode() for l in lines if l.startswith(b"event: ")]
                dl = [json.loads(l.split(b": ", 1)[1]) for l in lines if l.startswith(b"data: ")]
                if ev and dl:
                    names.append(ev[0])
                    data.append(dl[0])
            self.names, self.data = names, data

    def close(self):
        self.sock.close()


def offline_config(tmp_path, **index) -> dict:
    """A mirrored index whose upstream refuses connections (no sync can overwrite a manual build)."""
    return mirrored_config(f"http://127.0.0.1:{refused_port()}", **index)


def post_build(gw, body: dict, attempts: int = 20):
    """POSTs a build; retries while a (failing) scheduled sync holds the index (409)."""
    for _ in range(attempts):
        st, _, raw = request(
            "POST",
            gw.url("/_mirrorgate/algolia/indices/products/build"),
            body=json.dumps(body).encode(),
            headers={"Content-Type": "application/json", **gw.admin_headers()},
            timeout=30,
        )
        if st != 409 or b"sync" not in raw:
            return st, json.loads(raw)
        time.sleep(0.1)
    return st, json.loads(raw)


# -- build endpoint ----------------------------------------------------------------------------


def test_build_from_body_installs_and_stores_a_new_version(gateway_factory, tmp_path):
    data = tmp_path / "data"
    gw = gateway_factory(deep(offline_config(tmp_path), {"dataDir": str(data)}))
    idx = json.loads(request("GET", gw.url("/_mirrorgate/status"))[2])["algolia"]["indices"]["products"]
    assert idx["hasOfflineData"] is False
    events = Events(gw)
    st, doc = post_build(gw, {"settings": BUILT_SETTINGS, "objects": BUILT})
    assert st == 200, doc
    assert doc["objects"] == len(BUILT) and doc["index"] == "products"
    assert wait_for(lambda: "buildDidFinish" in events.names, timeout=5), events.names
    builds = [(n, d) for n, d in zip(events.names, events.data) if n.startswith("build")]
    assert [n for n, _ in builds] == ["buildDidStart", "buildDidFinish"]
    assert builds[1][1]["index"] == "products" and builds[1][1]["objects"] == len(BUILT)
    events.close()
    st, headers, res = offline_search(gw, {"query": "manual", "facets": ["color"]})
    assert st == 200 and headers.get("x-mirrorgate-origin") == "local"
    assert res["nbHits"] == len(BUILT)
    assert res["facets"]["color"] == {"red": 2, "blue": 1}
    idx = json.loads(request("GET", gw.url("/_mirrorgate/status"))[2])["algolia"]["indices"]["products"]
    assert idx["hasOfflineData"] is True and idx["objects"] == len(BUILT)
    # stored: a restart answers from it
    gw.expect_exit = 0
    gw.terminate()
    gw2 = gateway_factory(deep(offline_config(tmp_path), {"dataDir": str(data)}), name="gw2")
    st, _, res = offline_search(gw2, {"query": "item 2"})
    assert st == 200 and [h["objectID"] for h in res["hits"]] == ["m2"]


def test_build_errors(gateway_factory, tmp_path):
    gw = gateway_factory(offline_config(tmp_path))
    st, doc = post_build(gw, {"settingsFile": str(tmp_path / "missing.json"), "objectFiles": [str(tmp_path / "x")]})
    assert st == 400 and "cannot read" in doc["message"]
    st, doc = post_build(gw, {"objects": [1, 2]})
    assert st == 400 and "not a JSON object" in doc["message"]
    st, doc = post_build(gw, {"objects": BUILT, "objectFiles": ["a"]})
    assert st == 400
    st, doc = post_build(gw, {"bogus": 1})
    assert st == 400 and "bogus" in doc["message"]
    st, _, raw = request("POST", gw.url("/_mirrorgate/algolia/indices/products/build"), body=b"{not json")
    assert st == 400 and json.loads(raw)["message"]
    st, _, raw = request("POST", gw.url("/_mirrorgate/algolia/indices/nope/build"), body=b"{}")
    assert st == 404
    # nothing was installed by the failures
    idx = json.loads(request("GET", gw.url("/_mirrorgate/status"))[2])["algolia"]["indices"]["products"]
    assert idx["hasOfflineData"] is False


def test_build_does_not_block_other_requests(gateway_factory, tmp_path):
    """The build runs off the polling thread: health answers while a large build is in progress."""
    gw = gateway_factory(offline_config(tmp_path))
    big = [{"objectID": str(i), "title": f"word{i % 977} thing{i % 113} item {i}", "n": i} for i in range(60000)]
    path = tmp_path / "big.json"
    path.write_text(json.dumps(big))
    result = {}

    def run():
        result["build"] = post_build(gw, {"objectFiles": [str(path)]})

    t = threading.Thread(target=run)
    t0 = time.monotonic()
    t.start()
    slowest = 0.0
    while t.is_alive() and time.monotonic() - t0 < 60:
        s = time.monotonic()
        assert request("GET", gw.url("/_mirrorgate/health"), timeout=5)[0] == 200
        slowest = max(slowest, time.monotonic() - s)
        time.sleep(0.02)
    t.join(timeout=60)
    assert result["build"][0] == 200, result
    assert result["build"][1]["objects"] == len(big)
    assert slowest < 0.5, slowest


# -- mirrorgate status -------------------------------------------------------------------------


def test_status_prints_a_table_and_json(gateway_factory, upstream):
    gw = gateway_factory(mirrored_config(upstream.url))
    sync(gw)
    r = cli(gw, "status")
    assert r.returncode == 0, r.stderr
    assert "UPSTREAM" in r.stdout and "algolia" in r.stdout
    line = next(l for l in r.stdout.splitlines() if l.startswith("products"))
    assert "mirrored" in line and str(len(PRODUCTS)) in line
    r = cli(gw, "status", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["algolia"]["indices"]["products"]["objects"] == len(PRODUCTS)


def test_status_sends_the_admin_token(gateway_factory, upstream):
    gw = gateway_factory(deep(mirrored_config(upstream.url), {"admin": {"token": "s3cret-token"}}))
    r = cli(gw, "status", "--json")
    assert r.returncode == 0, r.stderr
    assert "products" in json.loads(r.stdout)["algolia"]["indices"]
    assert "s3cret-token" not in r.stdout + r.stderr


def test_status_when_the_gateway_is_not_running(gateway_factory, upstream):
    gw = gateway_factory(mirrored_config(upstream.url), start=False)
    gw.port = refused_port()
    from harness import to_yaml

    gw.config_path.write_text(to_yaml(deep(gw.config, {"server": {"listen": f"127.0.0.1:{gw.port}"}})))
    r = cli(gw, "status")
    assert r.returncode == 1
    assert "not running" in r.stderr
    r = cli(gw, "sync")
    assert r.returncode == 1 and "not running" in r.stderr


def test_bad_usage_exits_2(gateway_factory, upstream, tmp_path):
    gw = gateway_factory(mirrored_config(upstream.url))
    r = cli(gw, "sync", "no-such-index")
    assert r.returncode == 2 and "no-such-index" in r.stderr
    r = cli(gw, "build", "products", "--objects", str(tmp_path / "missing.json"))
    assert r.returncode == 2 and "missing.json" in r.stderr
    r = cli(gw, "build", "products")
    assert r.returncode == 2
    r = run_cli(["status", "--config", str(tmp_path / "nope.yaml")])
    assert r.returncode == 2


# -- mirrorgate sync ---------------------------------------------------------------------------


def test_sync_shows_progress_and_succeeds(gateway_factory, upstream):
    gw = gateway_factory(mirrored_config(upstream.url))
    sync(gw)  # the start-up sync
    upstream.seed("products", [{"objectID": "n1", "name": "Nokia phone new", "brand": "Nokia", "price": 1}])
    upstream.delay = 0.05
    r = cli(gw, "sync", "products")
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert "products: syncing" in lines
    done = [l for l in lines if l.startswith("products: done")]
    assert done and f"{len(PRODUCTS) + 1} objects" in done[0], r.stdout
    idx = json.loads(request("GET", gw.url("/_mirrorgate/status"))[2])["algolia"]["indices"]["products"]
    assert idx["objects"] == len(PRODUCTS) + 1
    # all mirrored indices when no name is given
    r = cli(gw, "sync")
    assert r.returncode == 0, r.stdout + r.stderr
    assert any(l.startswith("products: done") for l in r.stdout.splitlines())


def test_sync_failure_exits_1(gateway_factory, upstream):
    gw = gateway_factory(mirrored_config(upstream.url))
    sync(gw)
    upstream.stop()
    r = cli(gw, "sync", "products")
    assert r.returncode == 1, r.stdout
    assert "products: FAILED" in r.stdout
    assert "upstream unavailable" in r.stdout


# -- mirrorgate build --------------------------------------------------------------------------


def test_build_command_with_relative_paths(gateway_factory, tmp_path):
    gw = gateway_factory(offline_config(tmp_path))
    work = tmp_path / "files"
    work.mkdir()
    (work / "settings.json").write_text(json.dumps(BUILT_SETTINGS))
    (work / "a.json").write_text(json.dumps(BUILT))
    (work / "b.json").write_text(json.dumps(BUILT_MORE))
    r = None
    for _ in range(20):  # a failing scheduled sync may hold the index for a moment (409)
        r = cli(gw, "build", "products", "--settings", "settings.json", "--objects", "a.json", "b.json", cwd=work)
        if r.returncode == 0 or "sync" not in r.stderr:
            break
        time.sleep(0.1)
    assert r.returncode == 0, r.stderr
    assert "built 4 objects" in r.stdout
    st, _, res = offline_search(gw, {"query": "manual", "facets": ["color"]})
    assert st == 200 and res["nbHits"] == 4
    assert res["facets"]["color"] == {"red": 2, "blue": 1, "green": 1}


def test_build_command_takes_synonyms_and_rules(gateway_factory, tmp_path):
    gw = gateway_factory(offline_config(tmp_path))
    work = tmp_path / "files"
    work.mkdir()
    (work / "a.json").write_text(json.dumps(BUILT))
    synonym = {"objectID": "s", "type": "synonym", "synonyms": ["crimson", "red"]}
    (work / "synonyms.json").write_text(json.dumps([synonym]))
    rule = {"objectID": "r", "conditions": [{"pattern": "blue", "anchoring": "is"}],
            "consequence": {"promote": [{"objectID": "m0", "position": 0}], "userData": {"promo": 1}}}
    (work / "rules.json").write_text(json.dumps([rule]))
    (work / "bad-rules.json").write_text(json.dumps([{"consequence": {}}]))

    def build(*args: str):
        r = None
        for _ in range(20):  # a failing scheduled sync may hold the index for a moment (409)
            r = cli(gw, "build", "products", "--objects", "a.json", *args, cwd=work)
            if r.returncode == 0 or "sync" not in r.stderr:
                break
            time.sleep(0.1)
        return r

    r = build("--rules", "bad-rules.json")
    assert r.returncode == 1 and "rules[0] must be an object with a string objectID" in r.stderr, r.stderr
    r = build("--synonyms", "synonyms.json", "--rules", "rules.json")
    assert r.returncode == 0, r.stderr
    st, _, res = offline_search(gw, {"query": "crimson"})
    assert st == 200 and {h["objectID"] for h in res["hits"]} == {"m0", "m2"}
    st, _, res = offline_search(gw, {"query": "blue"})
    assert [h["objectID"] for h in res["hits"]] == ["m0", "m1"]
    assert res["appliedRules"] == [{"objectID": "r"}] and res["userData"] == [{"promo": 1}]
    # what local answers did not apply is listed by `mirrorgate status`
    offline_search(gw, {"query": "blue", "clickAnalytics": True})
    r = cli(gw, "status")
    assert r.returncode == 0, r.stderr
    assert "products: parameter clickAnalytics" in r.stdout, r.stdout
