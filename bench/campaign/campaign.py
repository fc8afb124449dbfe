#!/usr/bin/env python3
"""A black-box campaign against the real release `mirrorgate` binary (issue 23): mutated requests on every
surface for a bounded time, with upstreams going down and coming back, judged for crashes, hangs, 5xx under
`/1/`, error answers in the wrong format, RSS and FD growth, and a control stream of valid writes that must
all be present exactly once at the end. See bench/campaign/README.md.

    python3 bench/campaign/campaign.py --minutes 30 --bin PATH
    python3 bench/campaign/campaign.py --minutes 1 --bin PATH        # the quick mode

Exit status: 0 when nothing failed, 1 on any failure, 2 when the campaign could not run.
Loopback only; every loop is bounded in count and time; every process it starts is stopped at exit.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import multiprocessing
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
E2E = REPO / "Tests" / "EndToEnd"


def _reexec_in_venv() -> None:
    """The upstreams need the end-to-end venv's packages (odatapy, mock-sap): re-run under its Python."""
    try:
        import odatapy  # noqa: F401

        return
    except ImportError:
        pass
    for cand in (
        os.environ.get("PYTHON"),
        str(REPO / ".e2e-venv" / "bin" / "python"),
        str(REPO.parent / "main" / ".e2e-venv" / "bin" / "python"),
        "/work/e2e-venv/bin/python",
    ):
        if cand and Path(cand).is_file() and os.access(cand, os.X_OK) and not os.environ.get("CAMPAIGN_REEXEC"):
            os.environ["CAMPAIGN_REEXEC"] = "1"  # once only
            os.execv(cand, [cand, __file__, *sys.argv[1:]])
    sys.exit("campaign: needs the end-to-end venv (odatapy, mock-sap): run scripts/test.sh once or set PYTHON")


if __name__ == "__main__":
    _reexec_in_venv()

sys.path.insert(0, str(E2E))
from harness import Gateway, free_port  # noqa: E402

APP_ID, API_KEY = "CAMPAIGNAPP", "campaign-api-key-0123456789"
ADMIN_KEY, CTL_KEY = "local-admin-key", "control-key-0123"
TOKEN = "campaign-admin-token"
SAP_ROOT = "/sap/opu/odata/IWBEP/GWSAMPLE_BASIC/"
REQUEST_TIMEOUT = 5.0  # server.requestTimeout (also libmicrohttpd's idle timeout)
HANG_MARGIN = 10.0  # an answer or a close must come within requestTimeout + this
HEALTH_LIMIT = 10.0  # the health probe must answer within this


# ------------------------------------------------------------------ upstreams (in a child process)
def _upstream_main(conn, workdir: str) -> None:
    """Every upstream behind a loopback proxy that stops and starts listening (`down`/`up`), in a child process
    with its own interpreter lock. Commands over `conn`; each gets one answer."""
    from upstreams.fake_algolia import FakeAlgolia
    from upstreams.faults import LoopbackProxy
    from upstreams.odata_northwind import ODataUpstream

    class Passthrough(LoopbackProxy):
        def _handle(self, h) -> None:
            h.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            answer = self._read_and_forward(h)
            if answer is not None:
                self._relay(h, *answer)

    nw = ODataUpstream(page_size=50, etags=True).start()
    ctl = ODataUpstream(page_size=1000, etags=True).start()
    fake = FakeAlgolia(browse_page_size=100).start()
    fake.seed(
        "products",
        [{"objectID": f"p{i}", "name": f"{b} phone {i}", "brand": b, "price": i} for i, b in
         ((i, ["Apple", "Samsung", "Nokia", "Fairphone"][i % 4]) for i in range(200))],
        {"searchableAttributes": ["name", "brand"], "attributesForFaceting": ["brand", "price"]},
    )
    sap_port = free_port()
    exe = Path(sys.executable).with_name("mock-sap")
    sap = subprocess.Popen(
        [str(exe), "--host", "127.0.0.1", "--port", str(sap_port), "--db", str(Path(workdir) / "sap.db"), "-q",
         "--no-csrf"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    for _ in range(150):
        try:
            c = http.client.HTTPConnection("127.0.0.1", sap_port, timeout=1)
            c.request("GET", SAP_ROOT + "$metadata")
            if c.getresponse().status == 200:
                break
        except OSError:
            time.sleep(0.1)
    proxies = {
        "nw": Passthrough(nw.origin).start(),
        "ctl": Passthrough(ctl.origin).start(),
        "algolia": Passthrough(fake.url).start(),
        "sap": Passthrough(f"http://127.0.0.1:{sap_port}").start(),
    }
    state = {k: True for k in proxies}
    conn.send({k: p.url for k, p in proxies.items()})
    try:
        for _ in range(10_000_000):
            if not conn.poll(3600):
                break
            cmd, arg = conn.recv()
            if cmd == "set":  # arg: {name: up?}
                for name, up in arg.items():
                    if up and not state[name]:
                        proxies[name].start()
                    elif not up and state[name]:
                        proxies[name].stop()
                    state[name] = up
                conn.send(dict(state))
            elif cmd == "ctl_names":  # the control upstream's product names, every one (with repeats)
                c = http.client.HTTPConnection("127.0.0.1", ctl.port, timeout=30)
                names: list[str] = []
                url = ctl.root + "Products?$select=ProductName"
                for _ in range(10_000):
                    c.request("GET", url[len(ctl.origin):], headers={"Accept": "application/json"})
                    doc = json.loads(c.getresponse().read())
                    names += [p["ProductName"] for p in doc.get("value", [])]
                    url = doc.get("@odata.nextLink")
                    if not url:
                        break
                conn.send(names)
            else:
                conn.send(True)
                break
    finally:
        for p in proxies.values():
            p.stop()
        for s in (nw, ctl, fake):
            s.stop()
        sap.terminate()
        try:
            sap.wait(timeout=5)
        except subprocess.TimeoutExpired:
            sap.kill()


class Upstreams:
    def __init__(self, workdir: Path):
        ctx = multiprocessing.get_context("fork")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_upstream_main, args=(child, str(workdir)), daemon=True)
        self.proc.start()
        if not self.conn.poll(90):
            raise RuntimeError("the upstream process did not start")
        self.urls: dict[str, str] = self.conn.recv()
        self.lock = threading.Lock()
        self.state = {k: True for k in self.urls}

    def ask(self, cmd: str, arg=None, timeout: float = 60):
        with self.lock:
            self.conn.send((cmd, arg))
            if not self.conn.poll(timeout):
                raise RuntimeError(f"the upstream process did not answer {cmd!r}")
            return self.conn.recv()

    def set(self, **ups: bool) -> None:
        self.state = self.ask("set", ups)

    def close(self) -> None:
        try:
            self.ask("stop", timeout=30)
        except (OSError, EOFError, RuntimeError):
            pass
        self.proc.join(timeout=15)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(timeout=5)


# ------------------------------------------------------------------ seeds
JSON_H = [("Content-Type", "application/json"), ("Accept", "application/json")]
ALG_H = [("X-Algolia-Application-Id", APP_ID), ("X-Algolia-API-Key", API_KEY), ("Content-Type", "application/json")]
LOC_H = [("X-Algolia-Application-Id", APP_ID), ("X-Algolia-API-Key", ADMIN_KEY), ("Content-Type", "application/json")]
ADM_H = [("Authorization", f"Bearer {TOKEN}")]


def _j(o) -> bytes:
    return json.dumps(o).encode()


def multipart_batch(parts: list[str], changeset: list[str]) -> bytes:
    out = ""
    for p in parts:
        out += f"--batch\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n{p}\r\n"
    if changeset:
        out += "--batch\r\nContent-Type: multipart/mixed; boundary=cs\r\n\r\n"
        for i, p in enumerate(changeset):
            out += (f"--cs\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n"
                    f"Content-ID: {i + 1}\r\n\r\n{p}\r\n")
        out += "--cs--\r\n"
    return (out + "--batch--\r\n").encode()


ATOM_V2 = (
    '<?xml version="1.0" encoding="utf-8"?><entry xmlns="http://www.w3.org/2005/Atom" '
    'xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata" '
    'xmlns:d="http://schemas.microsoft.com/ado/2007/08/dataservices">'
    '<category term="GWSAMPLE_BASIC.SalesOrder" scheme="http://schemas.microsoft.com/ado/2007/08/dataservices/scheme"/>'
    '<content type="application/xml"><m:properties><d:CustomerID>0100000000</d:CustomerID>'
    '<d:CurrencyCode>EUR</d:CurrencyCode><d:Note>fuzz</d:Note></m:properties></content></entry>'
)
ATOM_V4 = (
    '<?xml version="1.0" encoding="utf-8"?><entry xmlns="http://www.w3.org/2005/Atom" '
    'xmlns:m="http://docs.oasis-open.org/odata/ns/metadata" xmlns:d="http://docs.oasis-open.org/odata/ns/data">'
    '<content type="application/xml"><m:properties><d:ProductName>Atom Tea</d:ProductName>'
    '<d:UnitPrice m:type="Edm.Decimal">3.5</d:UnitPrice><d:Discontinued m:type="Edm.Boolean">false</d:Discontinued>'
    '</m:properties></content></entry>'
)


def seeds() -> dict[str, list[tuple[str, str, list, bytes]]]:
    """Valid requests per surface: (method, target, headers, body)."""
    nw, sap = "/odata/nw/", "/odata/sap/"
    v4 = JSON_H + [("OData-Version", "4.0")]
    return {
        "algolia-read": [
            ("POST", "/1/indexes/local/query", LOC_H, _j({"query": "red chair", "hitsPerPage": 5, "filters": "price > 10 AND brand:Acme", "facets": ["brand"]})),
            ("POST", "/1/indexes/local/query", LOC_H, _j({"params": "query=lamp&numericFilters=%5B%22price%3E%3D12%22%5D&facetFilters=%5B%5B%22brand%3AAcme%22%5D%5D&page=1&hitsPerPage=2&attributesToHighlight=%5B%22name%22%5D"})),
            ("GET", "/1/indexes/local?query=blue%20sofa&hitsPerPage=3&getRankingInfo=true", LOC_H, b""),
            ("POST", "/1/indexes/*/queries", LOC_H, _j({"requests": [{"indexName": "local", "params": "query=tabel&typoTolerance=true"}, {"indexName": "local", "query": "green", "facetFilters": ["brand:Acme"], "aroundLatLng": "1,2"}], "strategy": "none"})),
            ("POST", "/1/indexes/local/browse", LOC_H, _j({"hitsPerPage": 4, "filters": "stock=1 OR stock=2"})),
            ("GET", "/1/indexes/local/p3?attributesToRetrieve=name,price", LOC_H, b""),
            ("POST", "/1/indexes/*/objects", LOC_H, _j({"requests": [{"indexName": "local", "objectID": "p1"}, {"indexName": "local", "objectID": "p2", "attributesToRetrieve": ["name"]}]})),
            ("GET", "/1/indexes/local/settings", LOC_H, b""),
            ("POST", "/1/indexes/local/facets/brand/query", LOC_H, _j({"facetQuery": "Ac", "maxFacetHits": 5})),
            ("POST", "/1/indexes/local/synonyms/search", LOC_H, _j({"query": "", "hitsPerPage": 5})),
            ("POST", "/1/indexes/local/rules/search", LOC_H, _j({"query": ""})),
            ("POST", "/1/indexes/products/query", ALG_H, _j({"query": "aple phone", "hitsPerPage": 10, "facets": ["brand"], "numericFilters": ["price<50"]})),
            ("GET", "/1/indexes/products?query=nokia&page=2", ALG_H, b""),
            ("POST", "/1/indexes/products/browse", ALG_H, _j({"hitsPerPage": 20})),
            ("GET", "/1/indexes/products/p7", ALG_H, b""),
            ("GET", "/1/indexes", ALG_H, b""),
            ("GET", "/1/indexes/products/task/1001", ALG_H, b""),
        ],
        "algolia-write": [
            ("POST", "/1/indexes/local/batch", LOC_H, _j({"requests": [{"action": "addObject", "body": {"name": "fuzz lamp", "price": 3}}, {"action": "partialUpdateObject", "body": {"objectID": "p2", "stock": {"_operation": "Increment", "value": 1}}}]})),
            ("PUT", "/1/indexes/local/fz1", LOC_H, _j({"name": "fuzz sofa", "price": 7, "tags": ["a", "b"], "_geoloc": {"lat": 1.5, "lng": 2.5}})),
            ("POST", "/1/indexes/local/fz1/partial?createIfNotExists=true", LOC_H, _j({"price": {"_operation": "Add", "value": 4}})),
            ("DELETE", "/1/indexes/local/fz1", LOC_H, b""),
            ("POST", "/1/indexes/local", LOC_H, _j({"name": "auto id", "nested": {"a": [1, 2, {"b": None}]}})),
            ("PUT", "/1/indexes/local/settings?forwardToReplicas=false", LOC_H, _j({"searchableAttributes": ["name", "unordered(brand)"], "attributesForFaceting": ["brand", "filterOnly(price)"], "customRanking": ["desc(price)"]})),
            ("POST", "/1/indexes/local/synonyms/batch", LOC_H, _j([{"objectID": "s1", "type": "synonym", "synonyms": ["sofa", "couch"]}])),
            ("POST", "/1/indexes/local/rules/batch", LOC_H, _j([{"objectID": "r1", "conditions": [{"pattern": "cheap", "anchoring": "contains"}], "consequence": {"params": {"filters": "price < 12"}}}])),
            ("POST", "/1/indexes/local/deleteByQuery", LOC_H, _j({"filters": "price > 1000000"})),
            ("POST", "/1/indexes/*/batch", LOC_H, _j({"requests": [{"action": "updateObject", "indexName": "local", "body": {"objectID": "fz2", "name": "multi"}}]})),
            ("POST", "/1/indexes/local/operation", LOC_H, _j({"operation": "copy", "destination": "local_copy", "scope": ["settings"]})),
            ("POST", "/1/indexes/products/batch", ALG_H, _j({"requests": [{"action": "addObject", "body": {"objectID": "fq1", "name": "queued phone", "brand": "Q"}}]})),
            ("PUT", "/1/indexes/products/fq2", ALG_H, _j({"name": "queued put", "price": 1})),
            ("POST", "/1/indexes/products/fq2/partial", ALG_H, _j({"price": 9})),
            ("DELETE", "/1/indexes/products/fq3", ALG_H, b""),
        ],
        "odata-read": [
            ("GET", nw + "Products?$filter=UnitPrice%20gt%2010%20and%20startswith(ProductName,'C')&$orderby=UnitPrice%20desc,ProductID&$top=3&$skip=1&$select=ProductName,UnitPrice&$count=true", v4, b""),
            ("GET", nw + "Customers('ALFKI')?$expand=Orders($filter=Freight%20gt%201;$orderby=OrderID;$top=2)", v4, b""),
            ("GET", nw + "Products/$count?$filter=contains(ProductName,'an')%20or%20Discontinued%20eq%20true", v4, b""),
            ("GET", nw + "Orders?$apply=groupby((CustomerID),aggregate(Freight%20with%20sum%20as%20Total))", v4, b""),
            ("GET", nw + "Products?$search=Chef%20OR%20Tea&$top=5", v4, b""),
            ("GET", nw + "Orders(10248)/Customer/CompanyName/$value", v4, b""),
            ("GET", nw + "$metadata", [("Accept", "application/xml")], b""),
            ("GET", nw, v4, b""),
            ("GET", nw + "Orders?$filter=OrderDate%20ge%201996-07-05T00:00:00Z%20and%20CustomerID%20in%20('ALFKI','BONAP')", v4, b""),
            ("GET", sap + "SalesOrderSet?$format=json&$top=2&$skip=1&$inlinecount=allpages&$filter=GrossAmount%20gt%201m", [("Accept", "application/json")], b""),
            ("GET", sap + "SalesOrderSet?$orderby=SalesOrderID%20desc&$select=SalesOrderID,Note&$expand=ToLineItems", [("Accept", "application/atom+xml")], b""),
            ("GET", sap + "ProductSet('HT-1000')?$format=json", [], b""),
            ("GET", sap + "$metadata", [], b""),
        ],
        "odata-write": [
            ("POST", nw + "Products", v4, _j({"ProductName": "Fuzz Tea", "UnitPrice": 12.5, "Discontinued": False})),
            ("PATCH", nw + "Products(2)", v4 + [("If-Match", "*")], _j({"UnitPrice": 20})),
            ("PUT", nw + "Customers('BONAP')", v4, _j({"CustomerID": "BONAP", "CompanyName": "Bon app'", "City": "Marseille", "Country": "France"})),
            ("DELETE", nw + "Products(999)", v4, b""),
            ("POST", nw + "Customers('ALFKI')/Orders", v4, _j({"OrderID": 1, "Freight": 1.25, "OrderDate": "1996-07-04T00:00:00Z"})),
            ("POST", nw + "Orders(10248)/Customer/$ref", v4, _j({"@odata.id": "Customers('ANATR')"})),
            ("POST", sap + "SalesOrderSet", JSON_H, _j({"CustomerID": "0100000000", "CurrencyCode": "EUR", "Note": "fuzz v2"})),
            ("MERGE", sap + "SalesOrderSet('500000001')", JSON_H, _j({"Note": "merged"})),
            ("POST", sap + "SalesOrderSet", [("X-HTTP-Method", "MERGE")] + JSON_H, _j({"Note": "tunnelled"})),
        ],
        "odata-batch": [
            ("POST", nw + "$batch", [("Content-Type", "multipart/mixed; boundary=batch"), ("OData-Version", "4.0")],
             multipart_batch(["GET Products(1) HTTP/1.1\r\nAccept: application/json\r\n"],
                             ["POST Customers HTTP/1.1\r\nContent-Type: application/json\r\n\r\n{\"CustomerID\":\"NEWCO\",\"CompanyName\":\"New\"}",
                              "POST $1/Orders HTTP/1.1\r\nContent-Type: application/json\r\n\r\n{\"OrderID\":2,\"Freight\":7.25}"])),
            ("POST", nw + "$batch", [("Content-Type", "application/json"), ("OData-Version", "4.0"), ("Accept", "application/json")],
             _j({"requests": [
                 {"id": "1", "method": "GET", "url": "Products?$top=2"},
                 {"id": "2", "atomicityGroup": "g", "method": "POST", "url": "Products", "headers": {"content-type": "application/json"}, "body": {"ProductName": "Batch Tea", "Discontinued": False}},
                 {"id": "3", "atomicityGroup": "g", "dependsOn": ["2"], "method": "PATCH", "url": "$2", "headers": {"content-type": "application/json"}, "body": {"UnitPrice": 2}},
             ]})),
            ("POST", sap + "$batch", [("Content-Type", "multipart/mixed; boundary=batch")],
             multipart_batch(["GET SalesOrderSet?$top=1 HTTP/1.1\r\nAccept: application/json\r\n"],
                             ["POST SalesOrderSet HTTP/1.1\r\nContent-Type: application/json\r\n\r\n{\"CustomerID\":\"0100000000\",\"CurrencyCode\":\"EUR\"}"])),
        ],
        "odata-atom": [
            ("POST", sap + "SalesOrderSet", [("Content-Type", "application/atom+xml"), ("Accept", "application/json")], ATOM_V2.encode()),
            ("PUT", sap + "SalesOrderSet('500000002')", [("Content-Type", "application/atom+xml")], ATOM_V2.encode()),
            ("POST", nw + "Products", [("Content-Type", "application/atom+xml"), ("OData-Version", "4.0")], ATOM_V4.encode()),
            ("POST", sap + "$batch", [("Content-Type", "multipart/mixed; boundary=batch")],
             multipart_batch([], [f"POST SalesOrderSet HTTP/1.1\r\nContent-Type: application/atom+xml\r\n\r\n{ATOM_V2}"])),
        ],
        "admin": [
            ("GET", "/_mirrorgate/health", ADM_H, b""),
            ("GET", "/_mirrorgate/status", ADM_H, b""),
            ("GET", "/_mirrorgate/live", [], b""),
            ("GET", "/_mirrorgate/ready", [], b""),
            ("POST", "/_mirrorgate/odata/services/nw/upload?wait=false", ADM_H, b""),
            ("POST", "/_mirrorgate/odata/services/sap/download", ADM_H, b""),
            ("POST", "/_mirrorgate/algolia/indices/products/sync", ADM_H, b""),
            ("GET", "/_mirrorgate/algolia/indices/products/failedWrites", ADM_H, b""),
            ("POST", "/_mirrorgate/algolia/indices/local_build/build", ADM_H + [("Content-Type", "application/json")], _j({"objects": [{"objectID": "b1", "name": "built"}]})),
            ("POST", "/_mirrorgate/policies/nightly/pause", ADM_H, b""),
            ("GET", "/_mirrorgate/events?since=0", ADM_H, b""),
            ("GET", "/metrics", [], b""),
        ],
    }


# ------------------------------------------------------------------ mutators
BOUNDARY = [b"0", b"-1", b"1", b"2147483647", b"2147483648", b"-2147483649", b"9007199254740993",
            b"18446744073709551616", b"1e308", b"-1e309", b"1e-400", b"NaN", b"Infinity", b"-0", b"0x10",
            b"99999999999999999999999999999999", b"1.7976931348623157e309", b"null", b"true", b"\"\"",
            b"[]", b"{}", b"\"\\u0000\"", b"\"\\ud800\"", b"\"\\u00e9\"", b"-9223372036854775809"]
TOKENS = [b"'", b"\"", b"\\", b"%", b"%00", b"%zz", b"%27", b"(", b")", b"[", b"]", b"{", b"}", b",", b";", b"&",
          b"=", b"$", b"/", b"..", b"*", b" and ", b" or ", b" not ", b" eq ", b" AND ", b" OR ", b"NOT ",
          b"any(x:x", b"/$count", b"$1", b"\x00", b"\xff", b"\xc3\x28", b"\r\n", b"\n", b"\t", b" ", b":",
          b"<", b">", b"<![CDATA[", b"<!DOCTYPE x [<!ENTITY a \"aaaa\">]>", b"&a;", b"--batch", b"--",
          b"\xe2\x80\xae", b"\xf0\x9f\x98\x80", b"ID", b"lt", b"geo.distance(", b"$it", b"$root/"]


class Mutator:
    def __init__(self, rng: random.Random):
        self.rng = rng
        self.radamsa = shutil.which("radamsa")

    def huge(self) -> int:
        return self.rng.choice([300, 513, 4096, 65537, 300_000, 2_000_000])

    def nest(self) -> bytes:
        d = self.rng.choice([64, 257, 1000, 10_000, 100_000])
        kind = self.rng.random()
        if kind < 0.4:
            return b"[" * d + b"1" + b"]" * d
        if kind < 0.7:
            return b'{"a":' * d + b"1" + b"}" * d
        if kind < 0.85:
            return b"(" * d + b"1 eq 1" + b")" * d
        return b"<a>" * d + b"x" + b"</a>" * d

    def bytes_(self, data: bytes, n: int | None = None) -> tuple[bytes, str]:
        """Blind byte-level mutations (several stacked)."""
        rng = self.rng
        b = bytearray(data)
        ops = []
        for _ in range(n or rng.choice([1, 1, 2, 3, 5])):
            op = rng.randrange(10)
            pos = rng.randrange(len(b) + 1) if b else 0
            if op == 0 and b:
                i = rng.randrange(len(b))
                b[i] ^= 1 << rng.randrange(8)
                ops.append("flip")
            elif op == 1:
                b[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 9)))
                ops.append("insert-random")
            elif op == 2 and b:
                del b[pos:pos + rng.randrange(1, 33)]
                ops.append("delete")
            elif op == 3:
                b[pos:pos] = rng.choice(TOKENS)
                ops.append("token")
            elif op == 4:
                b[pos:pos] = rng.choice(BOUNDARY)
                ops.append("boundary")
            elif op == 5 and b:
                j = rng.randrange(len(b))
                chunk = bytes(b[j:j + rng.randrange(1, 65)])
                b[pos:pos] = chunk * rng.choice([2, 10, 1000, 20_000])
                ops.append("repeat")
            elif op == 6:
                b[pos:pos] = self.nest()
                ops.append("nest")
            elif op == 7 and b:
                del b[rng.randrange(len(b)):]
                ops.append("truncate")
            elif op == 8:
                b[pos:pos] = b"A" * self.huge()
                ops.append("huge")
            elif b:
                # replace a number by a boundary number
                m = list(re.finditer(rb"-?\d+(\.\d+)?", bytes(b)))
                if m:
                    x = rng.choice(m)
                    b[x.start():x.end()] = rng.choice(BOUNDARY)
                    ops.append("number")
        return bytes(b), "+".join(ops) or "none"

    def json_(self, data: bytes) -> tuple[bytes, str]:
        """Structure-aware mutations of a JSON document (a valid document most of the time)."""
        rng = self.rng
        try:
            doc = json.loads(data)
        except ValueError:
            return self.bytes_(data)
        paths = []

        def walk(o, path):
            paths.append(path)
            if isinstance(o, dict):
                for k, v in o.items():
                    walk(v, path + [k])
            elif isinstance(o, list):
                for i, v in enumerate(o):
                    walk(v, path + [i])

        walk(doc, [])
        path = rng.choice(paths)
        values = [None, True, 0, -1, 2**31, 2**53 + 1, 2**64, -(2**63) - 1, 1e308, -0.0, 1.5e-300, "", "a" * self.huge(),
                  "\u0000", "\ud800x", "é" * 1000, [], {}, [1] * 10_000, {"k" * 10: 1}, "((((", "' or 1=1 --",
                  "<script>", {str(i): i for i in range(5000)}, [[[[[]]]]], "%s%n", "1e999", "NaN"]
        op = rng.randrange(5)
        desc = f"json:{op}@{'/'.join(map(str, path))[:60]}"
        if op == 4:
            # raw splice of a deep nesting at that value
            marker = "__NEST__"
            doc = _set(doc, path, marker)
            out = json.dumps(doc, ensure_ascii=False).encode("utf-8", "surrogatepass").replace(b'"__NEST__"', self.nest(), 1)
            return out, desc
        if op == 3 and isinstance(_get(doc, path), str):
            s = _get(doc, path).encode()
            m, d2 = self.bytes_(s)
            doc = _set(doc, path, m.decode("utf-8", "replace"))
            desc += "/" + d2
        elif op == 2 and isinstance(_get(doc, path), dict):
            o = _get(doc, path)
            if o:
                o.pop(rng.choice(list(o)))
            o[rng.choice(["query", "filters", "params", "hitsPerPage", "page", "facets", "requests", "objectID",
                          "length", "offset", "cursor", "attributesToRetrieve", "@odata.type", "__metadata",
                          "ProductID", "optionalWords", "distinct", "aroundRadius", "_operation"])] = rng.choice(values)
        else:
            doc = _set(doc, path, rng.choice(values))
        try:
            return json.dumps(doc, ensure_ascii=False).encode("utf-8", "surrogatepass"), desc
        except (TypeError, ValueError):
            return data, desc

    def text(self, data: bytes) -> tuple[bytes, str]:
        """A body through radamsa when installed (a third of the time), else the built-in mutations."""
        if self.radamsa and self.rng.random() < 0.33:
            try:
                out = subprocess.run([self.radamsa, "-s", str(self.rng.randrange(1 << 30))], input=data,
                                     capture_output=True, timeout=5).stdout
                return out[: 4 << 20], "radamsa"
            except (OSError, subprocess.TimeoutExpired):
                pass
        if data[:1] in (b"{", b"[") and self.rng.random() < 0.6:
            return self.json_(data)
        return self.bytes_(data)

    def target(self, target: str) -> tuple[str, str]:
        """Mutations of the query string or the path (kept printable-ish, most of the time)."""
        b, desc = self.bytes_(target.encode("latin-1"), self.rng.choice([1, 1, 2]))
        if self.rng.random() < 0.7:
            b = bytes(c if 0x21 <= c < 0x7F else 0x25 for c in b)  # keep a valid request line
        return b.decode("latin-1"), "target:" + desc


def _get(doc, path):
    for p in path:
        doc = doc[p]
    return doc


def _set(doc, path, value):
    if not path:
        return value
    _get(doc, path[:-1])[path[-1]] = value
    return doc


# ------------------------------------------------------------------ raw HTTP
def build(method: str, target: str, headers: list, body: bytes, *, version="HTTP/1.1", close=True,
          chunked=False, length=None) -> bytes:
    head = [f"{method} {target} {version}".encode("latin-1"), b"Host: 127.0.0.1"]
    for k, v in headers:
        head.append(f"{k}: {v}".encode("latin-1", "replace"))
    if chunked:
        head.append(b"Transfer-Encoding: chunked")
    elif body or method in ("POST", "PUT", "PATCH", "MERGE") or length is not None:
        head.append(b"Content-Length: " + str(len(body) if length is None else length).encode())
    head.append(b"Connection: close" if close else b"Connection: keep-alive")
    return b"\r\n".join(head) + b"\r\n\r\n" + (chunk(body) if chunked else body)


def chunk(body: bytes, rng: random.Random | None = None) -> bytes:
    rng = rng or random.Random(len(body))
    out, i = b"", 0
    for _ in range(100_000):
        if i >= len(body):
            break
        n = min(rng.randrange(1, 4097), len(body) - i)
        out += f"{n:x}\r\n".encode() + body[i:i + n] + b"\r\n"
        i += n
    return out + b"0\r\n\r\n"


class Exchange:
    """What one probe sent and got: `responses` are (status, headers dict, body) parsed from the stream."""

    def __init__(self, surface: str, label: str, sent: bytes, requests: int, complete: bool, path: str,
                 paths: list[str] | None = None):
        self.surface, self.label, self.sent = surface, label, sent
        self.requests, self.complete, self.path = requests, complete, path
        self.paths = paths or [path] * requests
        self.raw = b""
        self.responses: list[tuple[int, dict, bytes]] = []
        self.outcome = ""  # "answered", "closed", "hang", "refused", "reset"
        self.seconds = 0.0


def parse_responses(raw: bytes, head_only_first: bool = False) -> tuple[list, bool]:
    """Responses in `raw`; the flag says whether the stream ended on a complete response (well-formed HTTP
    throughout, the last body complete; a body delimited by the close is never complete before it)."""
    out, i = [], 0
    for _ in range(64):
        if i >= len(raw):
            return out, True
        end = raw.find(b"\r\n\r\n", i)
        if end < 0 or not raw.startswith(b"HTTP/1.", i):
            return out, False
        lines = raw[i:end].split(b"\r\n")
        parts = lines[0].split(b" ", 2)
        try:
            status = int(parts[1])
        except (IndexError, ValueError):
            return out, False
        hdrs: dict[str, str] = {}
        for line in lines[1:]:
            k, _, v = line.partition(b":")
            hdrs[k.strip().lower().decode("latin-1")] = v.strip().decode("latin-1")
        j = end + 4
        if status in (204, 304) or 100 <= status < 200 or (head_only_first and not out):
            body = b""
        elif "transfer-encoding" in hdrs and "chunked" in hdrs["transfer-encoding"].lower():
            body, k = b"", j
            for _ in range(1_000_000):
                le = raw.find(b"\r\n", k)
                if le < 0:
                    return out + [(status, hdrs, body)], False
                try:
                    n = int(raw[k:le].split(b";")[0], 16)
                except ValueError:
                    return out + [(status, hdrs, body)], False
                if n == 0:
                    te = raw.find(b"\r\n\r\n", le)
                    j = (te + 4) if te >= 0 else len(raw)
                    break
                body += raw[le + 2:le + 2 + n]
                k = le + 2 + n + 2
            else:
                return out, False
        elif "content-length" in hdrs:
            try:
                n = int(hdrs["content-length"])
            except ValueError:
                return out, False
            body = raw[j:j + n]
            j += n
            if len(body) < n:
                return out + [(status, hdrs, body)], False
        else:
            return out + [(status, hdrs, raw[j:])], False
        if not 100 <= status < 200:  # an interim answer (100 Continue) is not a response of its own
            out.append((status, hdrs, body))
        i = j
    return out, True


def exchange(port: int, ex: Exchange, *, slow: bool = False, half_close: bool = False,
             rng: random.Random | None = None, limit: float = REQUEST_TIMEOUT + HANG_MARGIN) -> Exchange:
    t0 = time.monotonic()
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
    except OSError:
        ex.outcome = "refused"
        return ex
    try:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            if slow and rng:
                data, k = ex.sent, 0
                for _ in range(40):
                    if k >= len(data):
                        break
                    n = rng.randrange(1, 40)
                    s.sendall(data[k:k + n])
                    k += n
                    time.sleep(rng.choice([0.01, 0.05, 0.1]))
                s.sendall(data[k:])
            else:
                s.sendall(ex.sent)
            if half_close:
                s.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the server may answer and close before reading all of a large body
        chunks, total = [], 0
        grace_end = None
        deadline = time.monotonic() + limit + REQUEST_TIMEOUT * max(0, ex.requests - 1)
        ex.outcome = "hang"
        for _ in range(100_000):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            s.settimeout(min(left, 1.0))
            try:
                c = s.recv(262144)
            except socket.timeout:
                if grace_end is not None and time.monotonic() >= grace_end:
                    break
                continue
            except ConnectionResetError:
                ex.outcome = "reset"
                break
            except OSError:
                ex.outcome = "reset"
                break
            if not c:
                ex.outcome = "closed"
                break
            chunks.append(c)
            total += len(c)
            if total > 64 << 20:
                ex.outcome = "closed"
                break
            if grace_end is None and b"text/event-stream" in b"".join(chunks)[:2000].lower():
                ex.outcome = "answered"  # a stream (`/_mirrorgate/events`): its head is the answer
                break
            if grace_end is None:
                got, complete = parse_responses(b"".join(chunks), head_only_first=ex.sent.startswith(b"HEAD "))
                if complete and len(got) >= ex.requests:
                    # every answer is in: a short wait for anything more (a second head), then done
                    grace_end = time.monotonic() + 0.3
                    deadline = min(deadline, grace_end)
                    ex.outcome = "answered"
        ex.raw = b"".join(chunks)
        if ex.raw:
            ex.responses, _ = parse_responses(ex.raw, head_only_first=ex.sent.startswith(b"HEAD "))
            if ex.outcome in ("closed", "reset"):
                ex.outcome = "answered"
    finally:
        s.close()
        ex.seconds = time.monotonic() - t0
    return ex


# ------------------------------------------------------------------ judging
class Findings:
    def __init__(self, out: Path):
        self.out = out
        self.out.mkdir(parents=True, exist_ok=True)
        self.lock = threading.Lock()
        self.by_key: dict[tuple, dict] = {}
        self.counts: dict[str, int] = {}
        self.n = 0

    def add(self, kind: str, surface: str, detail: str, sent: bytes, got: bytes = b"", key_extra: str = "") -> None:
        key = (kind, surface, key_extra or detail[:80])
        with self.lock:
            self.counts[kind] = self.counts.get(kind, 0) + 1
            entry = self.by_key.get(key)
            if entry is None:
                self.n += 1
                name = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{self.n:03d}-{kind}-{surface}")
                (self.out / f"{name}.bin").write_bytes(sent)
                (self.out / f"{name}.response").write_bytes(got[:65536])
                entry = {"kind": kind, "surface": surface, "detail": detail, "file": f"{name}.bin", "count": 0}
                self.by_key[key] = entry
                print(f"[FAIL] {kind} {surface}: {detail} -> {self.out / name}.bin", flush=True)
            entry["count"] += 1

    def total(self) -> int:
        return sum(self.counts.values())


ODATA_MOUNTS = ("/odata/nw/", "/odata/sap/", "/odata/ctl/")


def crash_signature(stderr: str) -> str:
    """`*** Program crashed: …` (or `Fatal error: …`) and the first frame of the crashed thread in mirrorgate."""
    lines = stderr.splitlines()
    head = next((ln.strip() for ln in lines if "Program crashed" in ln or "Fatal error" in ln), "")
    frame = ""
    for i, ln in enumerate(lines):
        if ln.rstrip().endswith("crashed:"):
            for fr in lines[i + 1:i + 60]:
                if " in mirrorgate at " in fr and "<compiler-generated>" not in fr:
                    frame = re.sub(r"^\s*\d+\s+(\[[^]]*\]\s*)*0x[0-9a-f]+\s+", "", fr.strip())
                    frame = re.sub(r" \+ \d+ in mirrorgate at /\S*?/Sources/", " @ Sources/", frame)
                    break
            break
    return f"{head} {frame}".strip()[:300]


def mount_of(path: str) -> str:
    if path.startswith("/1/") or path == "/1":
        return "algolia"
    if path.startswith(ODATA_MOUNTS) or path + "/" in ODATA_MOUNTS:
        return "odata"
    if path.startswith("/_mirrorgate"):
        return "admin"
    return "other"


def sent_path(sent: bytes) -> str:
    line = sent.split(b"\r\n", 1)[0].split(b" ")
    if len(line) < 2:
        return ""
    t = line[1].decode("latin-1")
    if t.startswith("http://") or t.startswith("https://"):
        t = "/" + t.split("://", 1)[1].partition("/")[2]
    return t.split("?", 1)[0]


def format_problem(where: str, status: int, hdrs: dict, body: bytes) -> str | None:
    ctype = hdrs.get("content-type", "").lower()
    if "html" in ctype or body.lstrip()[:14].lower().startswith((b"<html", b"<!doctype html")):
        return f"HTML answer ({status})"
    if status < 400:
        return None
    if where == "algolia":
        try:
            doc = json.loads(body)
            if isinstance(doc, dict) and isinstance(doc.get("message"), str) and doc.get("status") == status:
                return None
        except ValueError:
            pass
        return f"{status} not Algolia JSON ({ctype or 'no type'})"
    if where == "odata":
        if body.lstrip()[:1] == b"{":
            try:
                doc = json.loads(body)
                if isinstance(doc, dict) and isinstance(doc.get("error"), dict) and "message" in doc["error"]:
                    return None
            except ValueError:
                pass
        if b"<error" in body[:400] or b":error" in body[:400]:
            return None
        return f"{status} not an OData error ({ctype or 'no type'})"
    if where == "admin":
        try:
            if isinstance(json.loads(body), dict):
                return None
        except ValueError:
            pass
        return f"{status} not admin JSON ({ctype or 'no type'})"
    if not body:
        return None
    try:
        json.loads(body)
        return None
    except ValueError:
        return f"{status} neither JSON nor empty on an unknown path ({ctype or 'no type'})"


def judge(ex: Exchange, f: Findings, stats: dict) -> None:
    surface = ex.surface
    if ex.outcome == "refused":
        return
    if ex.outcome == "hang":
        f.add("hang", surface, f"{ex.label}: no answer and no close within {REQUEST_TIMEOUT + HANG_MARGIN:.0f}s "
              f"(got {len(ex.raw)} bytes)", ex.sent, ex.raw, key_extra=ex.label.split(":")[0])
        return
    if not ex.responses:
        if ex.complete and ex.outcome in ("closed", "reset"):
            f.add("no-answer", surface, f"{ex.label}: complete request, connection {ex.outcome} without an answer",
                  ex.sent, ex.raw, key_extra=ex.label.split(":")[0])
        elif ex.raw:
            f.add("malformed-response", surface, f"{ex.label}: not HTTP: {ex.raw[:60]!r}", ex.sent, ex.raw)
        return
    # More answers than requests is judged only when the framing was left intact: mutated bytes can make a
    # second request of the rest of the stream (a mutated `Connection: close`, a body past Content-Length).
    if len(ex.responses) > ex.requests and ex.complete:
        heads = ", ".join(str(r[0]) for r in ex.responses)
        f.add("extra-response", surface, f"{ex.label}: {len(ex.responses)} responses ({heads}) for {ex.requests} request(s)",
              ex.sent, ex.raw, key_extra=f"{ex.label.split(':')[0]}|{heads}")
    for k, (status, hdrs, body) in enumerate(ex.responses):
        where = mount_of(ex.paths[k]) if k < len(ex.paths) else mount_of(ex.path)
        stats["status"][status // 100] = stats["status"].get(status // 100, 0) + 1
        if body.startswith(b"HTTP/1."):
            f.add("extra-response", surface, f"{ex.label}: a second response head inside the body of a {status}: "
                  f"{body[:40]!r}", ex.sent, ex.raw, key_extra=f"{ex.label.split(':')[0]}|inner|{status}")
            continue
        if where == "algolia" and status >= 500:
            f.add("5xx-under-/1/", surface, f"{ex.label}: {status} {body[:100]!r}", ex.sent, ex.raw,
                  key_extra=f"{status}|{ex.label.split(':')[0]}|{body[:40]!r}")
        elif status == 500 and hdrs.get("x-mirrorgate-origin") != "remote":
            f.add("internal-500", surface, f"{ex.label}: {ex.path[:60]} {body[:100]!r}", ex.sent, ex.raw,
                  key_extra=f"{where}|{body[:40]!r}")
        head_request = ex.sent.split(b" ", 1)[0] == b"HEAD"
        problem = format_problem(where, status, hdrs, body) if not head_request or "html" in hdrs.get(
            "content-type", "").lower() else None
        if problem:
            f.add("wrong-format", surface, f"{ex.label}: {where} {problem}: {body[:80]!r}", ex.sent, ex.raw,
                  key_extra=f"{where}|{problem}|{ex.label.split(':')[0]}")


# ------------------------------------------------------------------ the campaign
class Campaign:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.stop = threading.Event()
        self.work = Path(tempfile.mkdtemp(prefix="mg-campaign-"))
        stamp = time.strftime("%Y%m%d-%H%M%S")
        self.findings = Findings(Path(args.out) if args.out else HERE / "out" / stamp)
        self.all_seeds = seeds()
        keep = set(args.surfaces.split(",")) if args.surfaces else set(self.all_seeds) | {"framing"}
        self.framing = "framing" in keep
        # the event stream never ends: not in pipelines and framing probes
        self.framing_seeds = [s for v in self.all_seeds.values() for s in v if "/events" not in s[1]]
        self.seeds = {k: v for k, v in self.all_seeds.items() if k in keep}
        self.stats = {"sent": {}, "status": {}, "health": [0, 0, 0.0], "restarts": 0}
        self.stats_lock = threading.Lock()
        self.inflight: dict[int, tuple[float, bytes, str]] = {}
        self.recent: list[tuple[bytes, str]] = []
        self.gw: Gateway | None = None
        self.gw_lock = threading.Lock()
        self.gen = 0  # one more at every (re)start of the gateway
        self.gen_started = 0.0
        self.samples: list[tuple[float, int, int]] = []  # (t, rss kB, fds)
        self.crashes: list[dict] = []
        self.control = {"odata": {"acked": set(), "unknown": set(), "refused": 0},
                        "algolia": {"acked": set(), "unknown": set(), "refused": 0}}

    # -- gateway ---------------------------------------------------------
    def config(self) -> dict:
        up = self.up.urls
        products = self.work / "local.json"
        products.write_text(json.dumps([
            {"objectID": f"p{i}", "name": f"{c} {k}", "brand": "Acme", "price": 10 + i, "stock": i % 4,
             "_geoloc": {"lat": 48.0 + i / 10, "lng": 2.0}}
            for i, (c, k) in enumerate((c, k) for c in ("red", "green", "blue") for k in ("chair", "table", "lamp", "sofa"))
        ]))
        acl = ["search", "browse", "addObject", "deleteObject", "deleteIndex", "settings", "editSettings", "listIndexes"]
        return {
            "server": {"requestTimeout": f"{int(REQUEST_TIMEOUT)}s", "shutdownGrace": "5s", "maxConnections": 128},
            "admin": {"token": TOKEN},
            "log": {"level": "warning", "format": "text"},
            "dataDir": str(self.work / "gw" / "data"),
            "algolia": {
                "appId": APP_ID, "apiKey": API_KEY, "hosts": [up["algolia"]], "connectTimeout": "300ms",
                "timeout": "1500ms", "writeTimeout": "3s",
                "indices": {"products": {"mirrored": True, "offlineWrites": "queue",
                                         "dataSelectionQueries": [{"query": {"query": ""}, "maxObjects": 1000}]}},
                "offlineIndices": {
                    "local": {"bootstrap": {"objects": [str(products)]}, "apiKeys": {ADMIN_KEY: acl}},
                    "local_*": {"apiKeys": {ADMIN_KEY: acl}},
                    "ctl": {"apiKeys": {CTL_KEY: ["search", "browse", "addObject"]}},
                },
            },
            "odata": {"services": {
                "nw": {"mount": "/odata/nw/", "upstream": up["nw"] + "/nw.svc/", "timeout": "2s",
                       "definingRequests": [{"name": "customers", "query": "Customers"},
                                            {"name": "products", "query": "Products"},
                                            {"name": "orders", "query": "Orders"}]},
                "ctl": {"mount": "/odata/ctl/", "upstream": up["ctl"] + "/nw.svc/", "timeout": "2s",
                        "definingRequests": [{"name": "products", "query": "Products"}]},
                "sap": {"mount": "/odata/sap/", "upstream": up["sap"] + SAP_ROOT, "timeout": "2s",
                        "definingRequests": [{"name": "orders", "query": "SalesOrderSet"},
                                             {"name": "products", "query": "ProductSet"}]},
            }},
        }

    def start_gateway(self) -> None:
        gw = Gateway(self.work / "gw", self.cfg, name="campaign")
        self.stderr_at = len(gw.stderr())
        gw.start()
        with self.gw_lock:
            self.gw = gw
            self.gen += 1
            self.gen_started = time.monotonic() - getattr(self, "t0", time.monotonic())

    @property
    def port(self) -> int:
        return self.gw.port if self.gw else 0

    # -- workers ---------------------------------------------------------
    def make_probe(self, rng: random.Random) -> tuple[Exchange, dict]:
        m = Mutator(rng)
        surfaces = list(self.seeds) + (["framing"] if self.framing else [])
        surface = rng.choice(surfaces)
        if surface == "framing":
            return self.framing_probe(rng, m)
        method, target, headers, body = rng.choice(self.seeds[surface])
        r = rng.random()
        label = "valid"
        if r < 0.1:
            pass  # the seed itself (keeps the valid paths exercised)
        elif r < 0.55 and (body or method in ("POST", "PUT", "PATCH", "MERGE")):
            body, label = m.text(body)
        elif r < 0.85:
            target, label = m.target(target)
        else:
            # a header mutated: a value of one of the headers, or one more header
            headers = list(headers)
            if headers and rng.random() < 0.6:
                i = rng.randrange(len(headers))
                v, d = m.bytes_(headers[i][1].encode("latin-1", "replace"), 1)
                headers[i] = (headers[i][0], v.replace(b"\r", b"").replace(b"\n", b"").decode("latin-1"))
                label = f"header:{headers[i][0]}:{d}"
            else:
                extra = rng.choice([("Accept", "application/xml"), ("Accept", "*/*;q=0"), ("Prefer", "return=minimal"),
                                    ("Prefer", "odata.maxpagesize=-1"), ("OData-MaxVersion", "2.0"),
                                    ("Accept-Encoding", "gzip"), ("X-HTTP-Method", "DELETE"),
                                    ("Content-Type", "application/json; charset=utf-16"),
                                    ("X-Algolia-API-Key", "x" * 5000), ("If-Match", 'W/"' + "9" * 500 + '"'),
                                    ("Content-Type", "multipart/mixed"), ("Range", "bytes=0-1"),
                                    ("X-Mirrorgate-Strategy", "offlineOnly"), ("Expect", "100-continue"),
                                    ("Authorization", "Basic " + "A" * 3000)])
                headers = headers + [extra]
                label = f"header+{extra[0]}"
        sent = build(method, target, headers, body)
        return Exchange(surface, f"{surface}/{label}", sent, 1, True, target.split("?", 1)[0]), {}

    def framing_probe(self, rng: random.Random, m: Mutator) -> tuple[Exchange, dict]:
        pick = rng.choice(self.framing_seeds)
        method, target, headers, body = pick
        path = target.split("?", 1)[0]
        kind = rng.randrange(12)
        opts: dict = {}
        complete = True
        count = 1
        if kind == 0:  # the whole request, bytes mutated (head included)
            sent, d = m.bytes_(build(method, target, headers, body))
            label, complete = f"bytes:{d}", False
        elif kind == 1:  # the request line
            version = rng.choice(["HTTP/1.1", "HTTP/1.0", "HTTP/2.0", "HTTP/1.2", "HTTP/0.9", "HTTP/1.10", "http/1.1",
                                  "HTTP/1.1 x", "HTTP/9.9", ""])
            meth = rng.choice([method, method.lower(), "FOO", "M" * 300, "GET\t", "PRI", "CONNECT", "TRACE", "OPTIONS", "HEAD"])
            tgt = rng.choice([target, "http://127.0.0.1:1" + target, "*", target + "#frag", "//" + target,
                              target + "?" + "a=1&" * 5000, "/" + "x" * 70_000, target.replace("/", "%2F"),
                              target + "%", target.replace("/", "\\")])
            sent = build(meth, tgt, headers, body, version=version)
            label, complete = f"request-line:{meth[:10]} {version}", meth not in ("CONNECT", "PRI") and version.startswith("HTTP/1.")
            if meth == "HEAD":
                opts["head"] = True
        elif kind == 2:  # headers: duplicates, bad Content-Length, obs-fold, many, huge
            variant = rng.randrange(9)
            if variant == 0:
                extra = [("Content-Length", str(len(body))), ("Content-Length", str(len(body) + 1))]
                sent = build(method, target, headers + extra, body, length=None)
                sent = sent.replace(b"Content-Length: %d\r\n" % len(body), b"", 1) if body else sent
            elif variant == 1:
                cl = rng.choice(["abc", "-1", "+5", "0x10", "99999999999999999999", "1 2", str(2**63), " 5", "5,5"])
                sent = build(method, target, headers, body, length=None).replace(
                    b"Content-Length: %d" % len(body), b"Content-Length: " + cl.encode()) if body else \
                    build(method, target, headers + [("Content-Length", cl)], body)
            elif variant == 2:
                sent = build(method, target, headers + [("X-Folded", "a\r\n  b")], body)
            elif variant == 3:
                sent = build(method, target, headers + [(f"X-H{i}", "v") for i in range(rng.choice([100, 1000, 5000]))], body)
            elif variant == 4:
                sent = build(method, target, headers + [("X-Big", "v" * rng.choice([8000, 70_000, 1_000_000]))], body)
            elif variant == 5:
                sent = build(method, target, headers + [("Bad Header", "x"), ("NoColon", "")], body).replace(b"NoColon: ", b"NoColon")
            elif variant == 6:
                sent = build(method, target, [("Host", "evil.example")] + headers, body)
            elif variant == 7:
                sent = build(method, target, headers + [("Content-Type", "x" * 100 + "; boundary=" + "b" * 5000)], body)
            else:
                sent = build(method, target, headers + [("\x00\xff", "\x01\x7f")], body)
            label, complete = f"headers:{variant}", False
        elif kind == 3:  # chunked bodies, valid and not
            variant = rng.randrange(8)
            body = body or b"{}"
            if variant == 0:
                sent = build(method, target, headers, body, chunked=True)
                complete = True
            else:
                head = build(method, target, headers, b"", chunked=True)
                head = head[: head.rfind(b"0\r\n\r\n")] if head.endswith(b"0\r\n\r\n") else head
                bad = {1: b"zz\r\n" + body + b"\r\n0\r\n\r\n",
                       2: b"%x;ext=\"v\";a=b\r\n" % len(body) + body + b"\r\n0\r\nX-Trailer: 1\r\n\r\n",
                       3: b"FFFFFFFFFFFFFFFFFF\r\n" + body + b"\r\n0\r\n\r\n",
                       4: b"%x\r\n" % len(body) + body,  # no last chunk
                       5: b"%x\r\n" % (len(body) + 10) + body + b"\r\n0\r\n\r\n",
                       6: b"-1\r\n" + body + b"\r\n0\r\n\r\n",
                       7: b"1\r\na\r\n" * 50_000 + b"0\r\n\r\n"}[variant]
                sent = head + bad
                complete = variant in (2, 7)
            if rng.random() < 0.3:
                te = rng.choice([b"gzip, chunked", b"chunked, identity", b"xchunked", b"Chunked", b"chunked\r\nTransfer-Encoding: identity"])
                sent = sent.replace(b"Transfer-Encoding: chunked", b"Transfer-Encoding: " + te, 1)
                if rng.random() < 0.5:
                    sent = sent.replace(b"\r\n\r\n", b"\r\nContent-Length: 3\r\n\r\n", 1)
                complete = False
            label = f"chunked:{variant}"
        elif kind == 4:  # half-close after a complete request
            sent = build(method, target, headers, body)
            opts["half_close"] = True
            label = "half-close"
        elif kind == 5:  # pipelining
            n = rng.choice([2, 3, 8])
            reqs = []
            for i in range(n):
                mm, tt, hh, bb = rng.choice(self.framing_seeds)
                if mm == "HEAD":
                    mm = "GET"
                reqs.append(build(mm, tt, hh, bb, close=(i == n - 1)))
            sent, count = b"".join(reqs), n
            paths = [sent_path(r) for r in reqs]
            label = f"pipeline:{n}"
        elif kind == 6:  # a slow head (and body)
            sent = build(method, target, headers, body)
            opts["slow"] = True
            label = "slow"
        elif kind == 7:  # truncated
            full = build(method, target, headers, body)
            sent = full[: rng.randrange(1, len(full))]
            label, complete = "truncated", False
        elif kind == 8:  # a body larger than the Content-Length says, or a huge declared length
            if rng.random() < 0.5:
                sent = build(method, target, headers, body + b"GARBAGE" * 100, length=len(body))
                label, complete = "body-longer", False
            else:
                sent = build(method, target, headers, body, length=rng.choice([10**7, 10**9, 2**40, 2**63 - 1]))
                label, complete = "huge-declared", False
        elif kind == 9:  # a huge real body
            big = rng.choice([b'{"query":"' + b"a" * (12 << 20) + b'"}', b"[" * 5_000_000, b"x" * (11 << 20)])
            sent = build(method if method != "GET" else "POST", target, headers, big)
            label = f"huge-body:{len(big)}"
        elif kind == 10:  # Expect: 100-continue then the body
            sent = build(method if method != "GET" else "POST", target, headers + [("Expect", "100-continue")], body or b"{}")
            label = "expect-continue"
        else:  # bare LF line ends, or garbage before the request
            full = build(method, target, headers, body)
            if rng.random() < 0.5:
                sent, label = full.replace(b"\r\n", b"\n"), "bare-lf"
            else:
                sent, label = b"\r\n" * rng.choice([1, 3, 100]) + full, "leading-crlf"
            complete = False
        path = sent_path(sent)  # what the gateway saw (the bytes may have been mutated)
        if kind != 5:
            paths = None
        return Exchange("framing", f"framing/{label}", sent, count, complete, path, paths), opts

    def worker(self, wid: int) -> None:
        rng = random.Random(self.args.seed * 1000 + wid)
        for _ in range(100_000_000):
            if self.stop.is_set():
                break
            if not self.gw or not self.gw.alive():
                time.sleep(0.2)
                continue
            try:
                ex, opts = self.make_probe(rng)
            except Exception as exc:  # a bug in the campaign itself must not end the run silently
                print(f"[campaign] probe builder error: {exc!r}", flush=True)
                continue
            started = time.monotonic()
            self.inflight[wid] = (started, ex.sent, ex.label)
            gen = self.gen
            exchange(self.port, ex, slow=opts.get("slow", False), half_close=opts.get("half_close", False), rng=rng)
            self.inflight.pop(wid, None)
            with self.stats_lock:
                self.stats["sent"][ex.surface] = self.stats["sent"].get(ex.surface, 0) + ex.requests
                if ex.outcome != "refused":
                    self.recent.append((ex.sent, ex.label, time.monotonic(), started))
                    del self.recent[:-200]
            if ex.outcome in ("refused",) or (ex.outcome in ("closed", "reset") and not ex.raw and not self.gw.alive()):
                continue
            if not self.gw.alive() or gen != self.gen:
                continue  # the crash is recorded by the monitor with its in-flight requests
            if ex.outcome in ("closed", "reset") and not ex.responses:
                time.sleep(0.5)  # a connection reset by a process that is exiting is the crash's, not a finding
                if not self.gw.alive() or gen != self.gen:
                    continue
            try:
                judge(ex, self.findings, self.stats)
            except Exception as exc:
                print(f"[campaign] judge error: {exc!r}", flush=True)

    # -- control stream --------------------------------------------------
    def control_loop(self) -> None:
        rng = random.Random(self.args.seed + 7)
        n = 0
        for _ in range(10_000_000):
            if self.stop.wait(self.args.control_interval):
                break
            if not self.gw or not self.gw.alive():
                continue
            n += 1
            name = f"ctl-{self.args.seed}-{n}"
            if n % 2:
                target, headers = "/odata/ctl/Products", JSON_H + [("OData-Version", "4.0")]
                body = _j({"ProductName": name, "UnitPrice": rng.randrange(1, 100), "Discontinued": False})
                kind, ok = "odata", (201,)
            else:
                target, headers = "/1/indexes/ctl", [("X-Algolia-Application-Id", APP_ID), ("X-Algolia-API-Key", CTL_KEY),
                                                    ("Content-Type", "application/json")]
                body = _j({"ctl": name})
                kind, ok = "algolia", (200, 201)
            gen = self.gen
            ex = exchange(self.port, Exchange("control", "control", build("POST", target, headers, body), 1, True, target))
            if gen != self.gen or not self.gw.alive():
                self.control[kind]["unknown"].add(name)
                continue
            st = ex.responses[0][0] if ex.responses else 0
            with self.stats_lock:
                self.stats["sent"]["control"] = self.stats["sent"].get("control", 0) + 1
            if st in ok:
                self.control[kind]["acked"].add(name)
            elif st and st < 500:
                self.control[kind]["refused"] += 1
                if kind == "algolia" or st not in (409, 412, 424):
                    self.findings.add("control-refused", "control", f"{kind} valid write answered {st}: {ex.responses[0][2][:120]!r}",
                                      ex.sent, ex.raw, key_extra=f"{kind}|{st}")
                self.control[kind]["unknown"].add(name)
            else:
                self.control[kind]["unknown"].add(name)
            if ex.responses:
                judge(ex, self.findings, self.stats)

    # -- monitors --------------------------------------------------------
    def health_loop(self) -> None:
        for _ in range(10_000_000):
            if self.stop.wait(1.0):
                break
            gw = self.gw
            if not gw or not gw.alive():
                continue
            t0 = time.monotonic()
            try:
                c = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=HEALTH_LIMIT)
                c.request("GET", "/_mirrorgate/health", headers={"Authorization": f"Bearer {TOKEN}"})
                st = c.getresponse().status
                c.close()
                ok = st == 200
            except OSError as exc:
                st, ok = repr(exc), False
            dt = time.monotonic() - t0
            with self.stats_lock:
                h = self.stats["health"]
                h[0] += 1
                h[2] = max(h[2], dt)
                if not ok and gw.alive():
                    h[1] += 1
            if not ok and gw.alive() and not self.stop.is_set():
                self.findings.add("health", "admin", f"health probe failed after {dt:.1f}s: {st}",
                                  b"GET /_mirrorgate/health HTTP/1.1\r\n\r\n", key_extra=str(st)[:40])

    def sample_loop(self) -> None:
        for _ in range(10_000_000):
            if self.stop.wait(2.0):
                break
            before = self.samples[-1][1] if self.samples else 0
            got = self.sample()
            if got and before and got[0] - before > 512 * 1024:
                # more than 512 MB in one sample interval: keep the requests that may have caused it
                jump = self.save_suspects(f"rss-jump-{int(time.monotonic() - self.t0)}s")
                self.findings.add("rss-jump", "gateway", f"RSS {before} -> {got[0]} kB within 2 s; suspects in {jump}",
                                  b"", key_extra=str(len(self.findings.counts)))
            if got and got[0] > self.args.max_rss_mb * 1024:
                # the machine is shared: a runaway gateway ends the campaign (a failure of its own)
                self.findings.add("rss-limit", "gateway", f"RSS {got[0]} kB above --max-rss-mb {self.args.max_rss_mb}: "
                                  "the campaign stops", b"")
                self.stop.set()
                break

    def sample(self) -> tuple[int, int] | None:
        gw = self.gw
        if not gw or not gw.alive():
            return None
        try:
            rss = 0
            for line in Path(f"/proc/{gw.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
            fds = len(os.listdir(f"/proc/{gw.proc.pid}/fd"))
        except OSError:
            return None
        self.samples.append((time.monotonic() - self.t0, rss, fds))
        return rss, fds

    def fd_kinds(self) -> dict:
        """The gateway's open FDs by what they point at (sockets by state, files by name)."""
        out: dict[str, int] = {}
        try:
            pid = self.gw.proc.pid
            inodes: dict[str, str] = {}
            names = {int(u.rsplit(":", 1)[1]): n for n, u in self.up.urls.items()}
            names[self.gw.port] = "client"
            for table in ("tcp", "tcp6"):
                for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
                    f = line.split()
                    state = {"01": "ESTABLISHED", "0A": "LISTEN", "08": "CLOSE_WAIT", "06": "TIME_WAIT",
                             "04": "FIN_WAIT1", "05": "FIN_WAIT2"}.get(f[3], f[3])
                    remote = int(f[2].rsplit(":", 1)[1], 16)
                    local = int(f[1].rsplit(":", 1)[1], 16)
                    peer = names.get(remote) or ("from client" if local == self.gw.port else "")
                    inodes[f[9]] = f"{state} {peer}".strip()
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    t = os.readlink(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    continue
                if t.startswith("socket:["):
                    k = "socket " + inodes.get(t[8:-1], "other")
                elif t.startswith("/"):
                    k = "file " + Path(t).name
                else:
                    k = t.split(":")[0] + (":" + t.split("[")[0].split(":")[1] if t.startswith("anon_inode") else "")
                out[k] = out.get(k, 0) + 1
        except OSError as exc:
            out["error"] = repr(exc)
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))

    def save_suspects(self, name: str) -> Path:
        """The requests in flight and those started within the last 20 s, saved as `name/suspect-N.bin`."""
        now = time.monotonic()
        out = self.findings.out / name
        out.mkdir(parents=True, exist_ok=True)
        picked = [(sent, label) for _, sent, label in list(self.inflight.values())]
        picked += [(sent, label) for sent, label, end, begun in list(self.recent) if now - begun < 20.0]
        for i, (sent, label) in enumerate(picked[-60:]):
            (out / f"suspect-{i}.bin").write_bytes(sent)
            (out / f"suspect-{i}.label").write_text(label)
        return out

    def crash_loop(self) -> None:
        for _ in range(10_000_000):
            if self.stop.wait(0.2):
                break
            gw = self.gw
            if gw is None or gw.alive():
                continue
            code = gw.proc.returncode
            now = time.monotonic()
            text = gw.stderr()
            tail = text[self.stderr_at:] if len(text) >= self.stderr_at else text
            sig = crash_signature(tail)
            inflight = list(self.inflight.values())
            # the requests still in flight, and those that ended within 3 s of the exit (reset by it) or started
            # at most 20 s before it (the runtime prints a backtrace for seconds before the process exits)
            recent = [(sent, label) for sent, label, end, begun in self.recent if now - end < 3.0 or now - begun < 20.0]
            n = len(self.crashes) + 1
            crash_dir = self.findings.out / f"crash-{n:02d}"
            crash_dir.mkdir(parents=True, exist_ok=True)
            for i, (_, sent, label) in enumerate(inflight):
                (crash_dir / f"inflight-{i}.bin").write_bytes(sent)
                (crash_dir / f"inflight-{i}.label").write_text(label)
            for i, (sent, label) in enumerate(recent[-60:]):
                (crash_dir / f"recent-{i}.bin").write_bytes(sent)
                (crash_dir / f"recent-{i}.label").write_text(label)
            (crash_dir / "stderr.txt").write_text(tail[-200_000:])
            self.crashes.append({"code": code, "signature": sig or f"exit {code}", "dir": str(crash_dir),
                                 "inflight": [lbl for _, _, lbl in inflight] + [lbl for _, lbl in recent],
                                 "at": time.monotonic() - self.t0})
            print(f"[FAIL] crash: exit {code} {sig!r}; in flight: {[lbl for _, _, lbl in inflight]} -> {crash_dir}", flush=True)
            self.findings.counts["crash"] = self.findings.counts.get("crash", 0) + 1
            if self.stop.is_set() or len(self.crashes) > self.args.max_restarts:
                print("[campaign] too many crashes: stopping", flush=True)
                self.stop.set()
                break
            try:
                self.start_gateway()
                self.stats["restarts"] += 1
            except Exception as exc:
                print(f"[campaign] restart failed: {exc}", flush=True)
                self.stop.set()
                break

    def flap_loop(self) -> None:
        phases = [dict(nw=True, ctl=True, algolia=True, sap=True), dict(nw=False, ctl=False, algolia=False, sap=False),
                  dict(nw=True, ctl=False, algolia=True, sap=False), dict(nw=False, ctl=True, algolia=False, sap=True),
                  dict(nw=False, ctl=False, algolia=True, sap=False), dict(nw=True, ctl=True, algolia=True, sap=True)]
        i = 0
        for _ in range(10_000_000):
            if self.stop.wait(self.args.flap):
                break
            i += 1
            try:
                self.up.set(**phases[i % len(phases)])
                self.stats["flaps"] = self.stats.get("flaps", 0) + 1
            except RuntimeError as exc:
                print(f"[campaign] upstream control: {exc}", flush=True)

    # -- the end checks --------------------------------------------------
    def admin(self, method: str, path: str, timeout: float = 30) -> tuple[int, dict]:
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            c.request(method, path, headers={"Authorization": f"Bearer {TOKEN}"})
            r = c.getresponse()
            data = r.read()
            try:
                return r.status, json.loads(data)
            except ValueError:
                return r.status, {}
        finally:
            c.close()

    def drain_and_check(self) -> dict:
        out: dict = {}
        self.up.set(nw=True, ctl=True, algolia=True, sap=True)
        deadline = time.monotonic() + self.args.drain
        pending = None
        for _ in range(10_000):
            if time.monotonic() > deadline or not self.gw.alive():
                break
            try:
                self.admin("POST", "/_mirrorgate/odata/services/ctl/upload?wait=true", timeout=60)
                st, doc = self.admin("GET", "/_mirrorgate/status")
                svc = doc["odata"]["services"]["ctl"]
                pending = svc.get("pendingRequests")
                out["ctl_error_archive"] = svc.get("errorArchive")
                if pending == 0 and not svc.get("uploading"):
                    break
            except (OSError, KeyError, ValueError) as exc:
                pending = repr(exc)
            time.sleep(1)
        out["ctl_pending_after_drain"] = pending
        try:
            st, doc = self.admin("GET", "/_mirrorgate/status")
            out["status_after_drain"] = {
                "odata": {k: {kk: v.get(kk) for kk in ("pendingRequests", "errorArchive", "reachable")}
                          for k, v in doc.get("odata", {}).get("services", {}).items()},
            }
            alg = doc.get("algolia", {})
            out["status_after_drain"]["algolia"] = json.dumps(alg)[:600]
        except (OSError, ValueError) as exc:
            out["status_after_drain"] = repr(exc)
        # OData control: the upstream itself.
        names = self.up.ask("ctl_names", timeout=120)
        counts: dict[str, int] = {}
        for nm in names:
            counts[nm] = counts.get(nm, 0) + 1
        c = self.control["odata"]
        lost = sorted(n for n in c["acked"] if counts.get(n, 0) == 0)
        dup = sorted(n for n in counts if n.startswith("ctl-") and counts[n] > 1)
        out["odata_control"] = {"acked": len(c["acked"]), "unknown": len(c["unknown"]), "lost": lost[:20],
                                "lost_count": len(lost), "duplicated": dup[:20], "duplicated_count": len(dup),
                                "unknown_present": sum(1 for n in c["unknown"] if counts.get(n))}
        for n in lost[:3]:
            self.findings.add("lost-write", "control", f"OData write {n} acknowledged, not at the upstream", n.encode())
        for n in dup[:3]:
            self.findings.add("duplicated-write", "control", f"OData write {n} at the upstream {counts[n]} times", n.encode())
        if lost:
            self.findings.counts["lost-write"] = self.findings.counts.get("lost-write", 0) + len(lost) - min(3, len(lost))
        if dup:
            self.findings.counts["duplicated-write"] = self.findings.counts.get("duplicated-write", 0) + len(dup) - min(3, len(dup))
        # Algolia control: the local index.
        seen: dict[str, int] = {}
        cursor = None
        hdr = {"X-Algolia-Application-Id": APP_ID, "X-Algolia-API-Key": CTL_KEY, "Content-Type": "application/json"}
        for _ in range(10_000):
            body = {"hitsPerPage": 1000}
            if cursor:
                body = {"cursor": cursor}
            c2 = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
            c2.request("POST", "/1/indexes/ctl/browse", body=_j(body), headers=hdr)
            r = c2.getresponse()
            doc = json.loads(r.read())
            c2.close()
            if r.status != 200:
                out["algolia_browse_error"] = doc
                break
            for h in doc.get("hits", []):
                v = h.get("ctl")
                if isinstance(v, str):
                    seen[v] = seen.get(v, 0) + 1
            cursor = doc.get("cursor")
            if not cursor:
                break
        a = self.control["algolia"]
        lost = sorted(n for n in a["acked"] if seen.get(n, 0) == 0)
        dup = sorted(n for n, k in seen.items() if k > 1)
        out["algolia_control"] = {"acked": len(a["acked"]), "unknown": len(a["unknown"]), "lost": lost[:20],
                                  "lost_count": len(lost), "duplicated": dup[:20], "duplicated_count": len(dup)}
        for n in lost[:3]:
            self.findings.add("lost-write", "control", f"Algolia write {n} acknowledged, not in the offline index", n.encode())
        for n in dup[:3]:
            self.findings.add("duplicated-write", "control", f"Algolia write {n} in the index {seen[n]} times", n.encode())
        return out

    # -- run -------------------------------------------------------------
    def run(self) -> int:
        args = self.args
        duration = args.minutes * 60
        warmup = min(120.0, max(10.0, duration * 0.2))
        print(f"[campaign] binary {args.bin}, {args.minutes} min, seed {args.seed}, {args.workers} workers, "
              f"radamsa: {shutil.which('radamsa') or 'not installed (built-in mutator only)'}, "
              f"reproducers in {self.findings.out}", flush=True)
        os.environ["MIRRORGATE_BIN"] = str(Path(args.bin).resolve())
        self.up = Upstreams(self.work)
        report: dict = {}
        try:
            self.cfg = self.config()
            self.start_gateway()
            self.await_downloads()
            self.t0 = time.monotonic()
            start = self.sample()
            threads = [threading.Thread(target=self.worker, args=(i,), daemon=True) for i in range(args.workers)]
            threads += [threading.Thread(target=t, daemon=True) for t in
                        (self.control_loop, self.health_loop, self.sample_loop, self.crash_loop, self.flap_loop)]
            for t in threads:
                t.start()
            warm = None
            last_print = 0.0
            for _ in range(int(duration * 10) + 10):
                el = time.monotonic() - self.t0
                if el >= duration or self.stop.is_set():
                    break
                if warm is None and el >= warmup and self.samples:
                    warm = self.samples[-1][1:]
                    print(f"[campaign] after warm-up ({warmup:.0f}s): RSS {warm[0]} kB, {warm[1]} FDs", flush=True)
                if el - last_print >= 30:
                    last_print = el
                    s = self.samples[-1] if self.samples else (0, 0, 0)
                    print(f"[campaign] {el:5.0f}s sent {sum(self.stats['sent'].values())} {self.stats['sent']} "
                          f"RSS {s[1]} kB FDs {s[2]} failures {self.findings.counts} crashes {len(self.crashes)}", flush=True)
                time.sleep(0.1)
            self.stop.set()
            for t in threads:
                t.join(timeout=REQUEST_TIMEOUT + HANG_MARGIN + 10)
            end_load = self.sample()
            peak = max((s[1] for s in self.samples), default=0)
            peak_fds = max((s[2] for s in self.samples), default=0)
            time.sleep(5)
            settled = self.sample()
            report["fds_idle_by_kind"] = self.fd_kinds()
            report["drain"] = self.drain_and_check() if self.gw and self.gw.alive() else {"skipped": "gateway down"}
            after = self.sample()
            code, secs = self.gw.terminate(timeout=20)
            if code != 0:
                self.findings.add("shutdown", "admin", f"SIGTERM: exit {code} after {secs:.1f}s", b"SIGTERM",
                                  self.gw.stderr()[-2000:].encode())
            # RSS and FDs are judged on the process that ran last, from its warm-up on (after a crash the
            # restarted process warms up again); not judged when it ran less than two warm-ups.
            base = None
            if duration - self.gen_started >= 2 * warmup:
                base = next((smp[1:] for smp in self.samples if smp[0] >= self.gen_started + warmup), None)
            report.update(start=start, warm=warm, end_load=end_load, settled=settled, after_drain=after, peak=peak,
                          peak_fds=peak_fds, baseline=base, last_process_since=round(self.gen_started))
            if base and end_load:
                if end_load[0] > base[0] * 1.2:
                    self.findings.add("rss-growth", "gateway", f"RSS {base[0]} kB after warm-up -> {end_load[0]} kB at the end "
                                      f"(+{100 * (end_load[0] / base[0] - 1):.0f} %)", b"")
                if settled and settled[1] > base[1] + 32:
                    self.findings.add("fd-growth", "gateway", f"FDs {base[1]} after warm-up -> {settled[1]} when idle", b"")
            elif not base:
                print("[campaign] RSS/FD growth not judged: the last process ran less than two warm-ups", flush=True)
        finally:
            self.stop.set()
            if self.gw and self.gw.alive():
                self.gw.terminate(timeout=20)
            self.up.close()
        return self.summary(report)

    def await_downloads(self) -> None:
        """The first download of every OData service (bounded: 60 s)."""
        for _ in range(300):
            try:
                st, doc = self.admin("GET", "/_mirrorgate/status", timeout=5)
                svcs = doc.get("odata", {}).get("services", {})
                if all(s.get("lastDownloadAt") for s in svcs.values()) and svcs:
                    break
            except (OSError, ValueError):
                pass
            time.sleep(0.2)

    def replay(self, files: list[Path]) -> int:
        """Each file alone against a fresh gateway: exit status 1 when any of them crashed it or hung."""
        os.environ["MIRRORGATE_BIN"] = str(Path(self.args.bin).resolve())
        self.up = Upstreams(self.work)
        bad = 0
        try:
            self.cfg = self.config()
            for i, path in enumerate(files[:200]):
                sent = path.read_bytes()
                self.work = self.work / f"r{i}"  # a fresh data directory each
                self.cfg["dataDir"] = str(self.work / "gw" / "data")
                self.up.set(nw=True, ctl=True, algolia=True, sap=True)
                self.start_gateway()
                if self.args.offline:  # the mirrors downloaded first, then every upstream stops
                    self.await_downloads()
                    self.up.set(nw=False, ctl=False, algolia=False, sap=False)
                head = sent.split(b"\r\n", 1)[0]
                n = max(1, len(re.findall(rb"(?:^|\r\n\r\n|})(?:GET|POST|PUT|PATCH|DELETE|MERGE|HEAD) [^ ]+ HTTP/1\.1\r\nHost: 127", sent)))
                ex = exchange(self.port, Exchange("replay", path.name, sent, n, False, sent_path(sent)))
                time.sleep(1.0)
                died = not self.gw.alive()
                verdict = "CRASHED" if died else ex.outcome
                statuses = [r[0] for r in ex.responses]
                print(f"{path}: {verdict} {statuses} {head[:100]!r} ({ex.seconds:.1f}s)", flush=True)
                for st_, h_, b_ in ex.responses[:3]:
                    print(f"   {st_} origin={h_.get('x-mirrorgate-origin')} {h_.get('content-type')} {b_[:160]!r}", flush=True)
                if died:
                    print("   stderr: " + " | ".join(self.gw.stderr().strip().splitlines()[-3:])[:400], flush=True)
                bad += died or ex.outcome == "hang"
                self.gw.terminate(timeout=15)
        finally:
            if self.gw and self.gw.alive():
                self.gw.terminate(timeout=15)
            self.up.close()
        return 1 if bad else 0

    def summary(self, report: dict) -> int:
        f = self.findings
        s = self.stats
        print("\n==================== black-box campaign summary ====================")
        print(f"binary: {self.args.bin}  minutes: {self.args.minutes}  seed: {self.args.seed}")
        print(f"requests sent per surface: {json.dumps(s['sent'], sort_keys=True)} (total {sum(s['sent'].values())})")
        print(f"answers by class: {json.dumps({f'{k}xx': v for k, v in sorted(s['status'].items())})}")
        print(f"health probes: {s['health'][0]}, failed {s['health'][1]}, slowest {s['health'][2]:.2f}s; "
              f"upstream flaps: {s.get('flaps', 0)}; gateway restarts after a crash: {s['restarts']}")
        print(f"RSS kB / FDs judged from {report.get('baseline')} (the process started at {report.get('last_process_since')}s "
              f"after warm-up); start {report.get('start')}, after warm-up {report.get('warm')}, end of load {report.get('end_load')}, "
              f"idle {report.get('settled')}, after drain {report.get('after_drain')}; peak RSS {report.get('peak')} kB, "
              f"peak FDs {report.get('peak_fds')}")
        print(f"FDs when idle, by kind: {json.dumps(report.get('fds_idle_by_kind'))}")
        print(f"control: {json.dumps(report.get('drain', {}), sort_keys=True, default=str)[:1500]}")
        print(f"failures by kind: {json.dumps(f.counts, sort_keys=True)}")
        by_sig: dict[str, list] = {}
        for c in self.crashes:
            by_sig.setdefault(c["signature"], []).append(c)
        for sig_, cs in by_sig.items():
            print(f"  crash x{len(cs)}: {sig_}")
            for c in cs[:3]:
                print(f"      at {c['at']:.0f}s, in flight: {c['inflight'][:6]} -> {c['dir']}")
        for e in sorted(f.by_key.values(), key=lambda e: (e["kind"], e["surface"])):
            print(f"  {e['kind']:<18} x{e['count']:<5} {e['surface']:<14} {e['detail'][:150]}  [{e['file']}]")
        (f.out / "summary.json").write_text(json.dumps({
            "stats": s, "report": report, "samples": self.samples, "counts": f.counts, "crashes": self.crashes,
            "findings": list(f.by_key.values())}, indent=1, default=str))
        failed = f.total() > 0 or bool(self.crashes)
        print(f"reproducers: {f.out}")
        print("RESULT:", "FAIL" if failed else "PASS")
        return 1 if failed else 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=1.0, help="length of the mutation phase (1 = the quick mode)")
    p.add_argument("--bin", default=str(REPO / ".build" / "release" / "mirrorgate"), help="the mirrorgate binary")
    p.add_argument("--seed", type=int, default=int(time.time()) % 100_000)
    p.add_argument("--workers", type=int, default=4, help="concurrent mutated-request clients")
    p.add_argument("--flap", type=float, default=20.0, help="seconds per upstream phase (up, down, partly)")
    p.add_argument("--control-interval", type=float, default=0.5, help="seconds between two control writes")
    p.add_argument("--drain", type=float, default=180.0, help="bound in seconds of the queue drain at the end")
    p.add_argument("--max-restarts", type=int, default=1000, help="stop after this many crashes")
    p.add_argument("--max-rss-mb", type=int, default=6144, help="stop (a failure) when the gateway's RSS passes this")
    p.add_argument("--surfaces", help="comma-separated subset: algolia-read,algolia-write,odata-read,odata-write,"
                   "odata-batch,odata-atom,admin,framing")
    p.add_argument("--out", help="directory for reproducers (default bench/campaign/out/TIMESTAMP)")
    p.add_argument("--replay", nargs="+", metavar="FILE",
                   help="instead of a campaign: send each reproducer file alone to a freshly started gateway "
                        "(upstreams up) and say whether it crashed, hung or was answered")
    p.add_argument("--offline", action="store_true", help="with --replay: every upstream down")
    args = p.parse_args()
    if not Path(args.bin).is_file():
        print(f"campaign: no binary at {args.bin}", file=sys.stderr)
        return 2
    if args.replay:
        return Campaign(args).replay([Path(x) for x in args.replay])
    return Campaign(args).run()


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.exit(main())
