"""Bad input on the offline write path (SPEC §7, issue 6): malformed and mutated single writes and `$batch`
bodies sent to a service whose upstream is down get answers in the OData error format (or a well-formed batch
answer), never a crash, a hang or a 5xx from the gateway itself; what was answered with an error is not
queued. Seeded (the seed is printed; MG_FUZZ_SEED replays it) and bounded in count.
"""

from __future__ import annotations

import json
import os
import random

import requests
from test_odata_offline import MOUNT, nw_config, wait_downloaded
from test_odata_writes import status_of

SEED = int(os.environ.get("MG_FUZZ_SEED", random.SystemRandom().randrange(1 << 30)))
ROUNDS = 150

VALID = [
    ("POST", "Products", {"ProductName": "Fuzz", "UnitPrice": 1.5, "Discontinued": False}),
    ("PATCH", "Products(2)", {"UnitPrice": 3}),
    ("PUT", "Products(4)", {"ProductName": "P", "UnitPrice": 2, "Discontinued": True}),
    ("DELETE", "Products(6)", None),
    ("POST", "Customers('ALFKI')/Orders", {"Freight": 1}),
    ("POST", "Orders", {"Freight": 2, "Customer@odata.bind": "Customers('ALFKI')"}),
]

JUNK = [
    b"",
    b"{",
    b"[]",
    b"null",
    b'{"UnitPrice": "not a number"}',
    b'{"ProductID": {"nested": [1, 2, {"x": null}]}}',
    b'{"Customer@odata.bind": "Nowhere(1)"}',
    b'{"Customer@odata.bind": 17}',
    b'{"Orders": [{"Orders": [{"Orders": []}]}]}',
    b"\xff\xfe\x00garbage",
    b'{"a":' * 200 + b"1" + b"}" * 200,
    b'{"ProductName": "' + b"x" * 70000 + b'"}',
]

PATHS = [
    "Products",
    "Products(",
    "Products(abc)",
    "Products(1)/",
    "Products(1)/ProductName",
    "Nowhere",
    "Customers('ALFKI')/Nowhere",
    "Products(1)/$ref",
    "$metadata",
    "Products(1)/$value",
    "%24batch",
    "Products(99999)",
]


def mutate(rng: random.Random, data: bytes) -> bytes:
    if not data:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40)))
    b = bytearray(data)
    for _ in range(rng.randrange(1, 6)):
        op = rng.randrange(3)
        i = rng.randrange(len(b) + 1)
        if op == 0 and b:
            del b[min(i, len(b) - 1)]
        elif op == 1:
            b.insert(i, rng.randrange(256))
        elif b:
            b[min(i, len(b) - 1)] = rng.choice(b'{}[]",:$\r\n-0123456789')
    return bytes(b)


def batch(rng: random.Random) -> tuple[str, bytes]:
    boundary, cs = "b_" + str(rng.randrange(1000)), "cs_" + str(rng.randrange(1000))
    parts = []
    for n in range(rng.randrange(1, 4)):
        method, url, body = rng.choice(VALID)
        if rng.random() < 0.3:
            url = rng.choice(["$1", "$1/Orders", "$9", "$", rng.choice(PATHS)])
        payload = json.dumps(body).encode() if body is not None else b""
        if rng.random() < 0.3:
            payload = rng.choice(JUNK)
        parts.append(
            f"--{cs}\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\nContent-ID: {n + 1}\r\n\r\n"
            f"{method} {url} HTTP/1.1\r\nContent-Type: application/json\r\n\r\n".encode()
            + payload
            + b"\r\n"
        )
    text = (
        f"--{boundary}\r\nContent-Type: multipart/mixed; boundary={cs}\r\n\r\n".encode()
        + b"".join(parts)
        + f"--{cs}--\r\n--{boundary}--\r\n".encode()
    )
    if rng.random() < 0.5:
        text = mutate(rng, text)
    return f"multipart/mixed; boundary={boundary}", text


def json_batch(rng: random.Random) -> bytes:
    reqs = []
    for n in range(rng.randrange(1, 4)):
        method, url, body = rng.choice(VALID)
        r = {"id": str(n + 1), "method": method, "url": rng.choice([url, "$1", rng.choice(PATHS)])}
        if rng.random() < 0.5:
            r["atomicityGroup"] = rng.choice(["g1", "g2"])
        if rng.random() < 0.3:
            r["dependsOn"] = [rng.choice(["1", "2", "g1", "nope"])]
        if body is not None:
            r["body"] = body
        reqs.append(r)
    data = json.dumps({"requests": reqs}).encode()
    return mutate(rng, data) if rng.random() < 0.5 else data


def test_bad_offline_writes_get_odata_errors_and_nothing_stray_is_queued(gateway_factory, odata_upstream):
    print(f"MG_FUZZ_SEED={SEED}")
    rng = random.Random(SEED)
    up = odata_upstream
    gw = gateway_factory(nw_config(up.root))
    wait_downloaded(gw, "nw")
    up.stop()
    s = requests.Session()
    accepted = 0
    outcomes: dict[int, int] = {}
    for i in range(ROUNDS):
        kind = rng.randrange(4)
        headers = {"Accept": "application/json"}
        if kind == 0:  # a single write with a junk or mutated body
            method, url, body = rng.choice(VALID)
            data = rng.choice(JUNK) if rng.random() < 0.5 else mutate(rng, json.dumps(body or {}).encode())
            headers["Content-Type"] = "application/json"
        elif kind == 1:  # a valid body on a bad path
            method, _, body = rng.choice(VALID)
            url = rng.choice(PATHS)
            data = json.dumps(body or {}).encode()
            headers["Content-Type"] = "application/json"
        elif kind == 2:
            method, url = "POST", "$batch"
            headers["Content-Type"], data = batch(rng)
        else:
            method, url, data = "POST", "$batch", json_batch(rng)
            headers["Content-Type"] = "application/json"
        r = s.request(method, gw.url(MOUNT + url), data=data, headers=headers, timeout=15)
        where = f"round {i} seed {SEED}: {method} {url} -> {r.status_code} {r.text[:300]!r}"
        assert r.status_code < 500 or r.status_code == 503, where  # 503: only what cannot be answered offline
        if r.status_code >= 400:
            # The service's own error format (V4 JSON here).
            assert "error" in r.json(), where
        elif url != "$batch":
            accepted += 1
        outcomes[r.status_code] = outcomes.get(r.status_code, 0) + 1
    print(f"statuses: {sorted(outcomes.items())}")
    assert len(outcomes) > 2  # the inputs reach several outcomes (applied, rejected, not found, …)
    # Still alive and consistent: every acknowledged single write is queued, nothing else beyond batches.
    st = status_of(gw)
    assert st["pendingRequests"] >= accepted, (st, accepted)
    r = s.get(gw.url(MOUNT + "Products/$count"), timeout=10)
    assert r.status_code == 200 and r.text.isdigit(), r.text
