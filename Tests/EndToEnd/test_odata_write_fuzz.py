"""Bad input on the offline write path (SPEC §7, issue 6): malformed and mutated single writes and `$batch`
bodies sent to a service whose upstream is down get answers in the OData error format (or a well-formed batch
answer), never a crash, a hang or a 5xx from the gateway itself; what was answered with an error is not
queued. Seeded (the seed is printed; MG_FUZZ_SEED replays it) and bounded in count.
"""

from __future__ import annotations

import json
import os
import random
import time

import requests
from odata_helpers import JSON_HEADERS
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


# ---------------------------------------------------------------- typed payloads against $metadata (issue 19 D2)

TYPED_ROUNDS = 160
EDM = "{http://docs.oasis-open.org/odata/ns/edm}"


class Raw:
    """A JSON value written as these exact bytes (what Python's json cannot emit: 1e309, bad UTF-8)."""

    def __init__(self, data: bytes):
        self.data = data


def encode(value) -> bytes:
    raws: list[bytes] = []

    def swap(v):
        if isinstance(v, Raw):
            raws.append(v.data)
            return f"@@RAW{len(raws) - 1}@@"
        if isinstance(v, dict):
            return {k: swap(x) for k, x in v.items()}
        if isinstance(v, list):
            return [swap(x) for x in v]
        return v

    out = json.dumps(swap(value)).encode()
    for i, data in enumerate(raws):
        out = out.replace(f'"@@RAW{i}@@"'.encode(), data)
    return out


def model_of(gw) -> dict:
    """Entity sets → their type's properties (type, nullable, MaxLength, Scale) and key, from `$metadata`."""
    import xml.etree.ElementTree as ET

    doc = ET.fromstring(requests.get(gw.url(MOUNT + "$metadata"), timeout=10).content)
    types = {}
    for schema in doc.iter(EDM + "Schema"):
        ns = schema.get("Namespace")
        for et in schema.findall(EDM + "EntityType"):
            props = {
                p.get("Name"): {
                    "type": p.get("Type"),
                    "nullable": p.get("Nullable", "true") != "false",
                    "maxLength": int(p.get("MaxLength")) if (p.get("MaxLength") or "").isdigit() else None,
                    "scale": int(p.get("Scale")) if (p.get("Scale") or "").isdigit() else None,
                }
                for p in et.findall(EDM + "Property")
            }
            key = [r.get("Name") for r in et.iter(EDM + "PropertyRef")]
            types[f"{ns}.{et.get('Name')}"] = {"props": props, "key": key}
    return {es.get("Name"): types[es.get("EntityType")] for es in doc.iter(EDM + "EntitySet")}


def valid_value(rng: random.Random, p: dict, n: int):
    t = p["type"]
    if t == "Edm.Int32":
        return rng.randint(-1000, 1000)
    if t == "Edm.Boolean":
        return rng.random() < 0.5
    if t == "Edm.Decimal":
        return rng.choice([rng.randint(0, 999), round(rng.uniform(0, 999), 2), round(0.0001 * rng.randint(1, 9999), 4)])
    if t == "Edm.DateTimeOffset":
        return rng.choice(["2024-05-01T10:00:00Z", "1999-12-31T23:59:59.5+02:00", f"20{rng.randint(10, 30)}-02-28T00:00:00Z"])
    text = rng.choice(["Fuzz", "Café ü", "O'Neil", "a/b?c", "x" * 30]) + str(n)
    return text[: p["maxLength"]] if p["maxLength"] else text


def bad_values(p: dict) -> list:
    """Values of the wrong type, out of range or beyond a facet for property `p` (each a 400 upstream)."""
    t = p["type"]
    out = [Raw(b'"\xff\xfe"'), {"nested": [1]}]
    if t == "Edm.Int32":
        out += ["abc", 2**40, 1.5, True, "12"]
    elif t == "Edm.Boolean":
        out += ["maybe", 1, "true", 0]
    elif t == "Edm.Decimal":
        out += ["not-a-number", Raw(b"1e309"), True, 1.23456 if p["scale"] == 4 else "x"]
    elif t == "Edm.DateTimeOffset":
        out += ["yesterday", "2024-13-40T00:00:00Z", 20240501]
    elif t == "Edm.String":
        out += [17, False, ["a"]]
        if p["maxLength"]:
            out.append("y" * (p["maxLength"] + 1))
    if not p["nullable"]:
        out.append(None)
    return out


def typed_payload(rng: random.Random, entity: dict, n: int, create: bool, skip: set[str]) -> tuple[dict, str | None]:
    """A payload and, when it was spoiled on purpose, what was spoiled (the payload must then get 400)."""
    props = {k: v for k, v in entity["props"].items() if k not in skip}
    body = {}
    for name, p in props.items():
        if create and not p["nullable"] or rng.random() < 0.5:
            body[name] = valid_value(rng, p, n)
    if not create and not body:
        name = rng.choice(sorted(props))
        body[name] = valid_value(rng, props[name], n)
    if rng.random() < 0.5:
        return body, None
    kind = rng.choice(["value", "value", "value", "unknown", "missing"] if create else ["value", "value", "unknown"])
    if kind == "missing":
        required = [k for k, p in props.items() if not p["nullable"]]
        if required:
            body.pop(rng.choice(required), None)
            return body, "missing"
        kind = "unknown"
    if kind == "unknown":
        body["Colour"] = "red"
        return body, "unknown property"
    name = rng.choice(sorted(entity["props"]))
    body[name] = rng.choice(bad_values(entity["props"][name]))
    return body, f"bad {name}"


def utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def test_typed_payload_fuzz_refuses_what_the_upstream_would_and_uploads_the_rest(gateway_factory, odata_upstream):
    """Seeded (MG_FUZZ_SEED): writes built from `$metadata`, half of them spoiled (a wrong type, a value out
    of range or beyond a facet, invalid UTF-8, null in a non-nullable property, a missing required one, an
    unknown property), sent as single creates, creates through a navigation, updates and `$batch`
    changesets while writes are queued (localFirst). Every spoiled one gets a 400 OData error and is not
    queued; every other one is accepted, and the upload brings each of them to the upstream without one 4xx."""
    from odata_helpers import request_upload

    print(f"MG_FUZZ_SEED={SEED}")
    rng = random.Random(f"typed-{SEED}")
    up = odata_upstream
    gw = gateway_factory(nw_config(up.root, routing="localFirst"))
    wait_downloaded(gw, "nw")
    model = model_of(gw)
    s = requests.Session()
    accepted, refused, queued, forwarded_refusals = 0, 0, 0, 0
    for i in range(TYPED_ROUNDS):
        op = rng.choice(["products", "customers", "orders", "via-nav", "patch", "batch"])
        if op == "products":
            body, spoiled = typed_payload(rng, model["Products"], i, True, {"ProductID"})
            method, url, data, parts = "POST", "Products", encode(body), 1
        elif op == "customers":
            body, spoiled = typed_payload(rng, model["Customers"], i, True, {"CustomerID"})
            body.setdefault("CustomerID", f"F{i:04d}")
            method, url, data, parts = "POST", "Customers", encode(body), 1
        elif op == "orders":
            body, spoiled = typed_payload(rng, model["Orders"], i, True, {"OrderID", "CustomerID"})
            body["Customer@odata.bind"] = "Customers('ALFKI')"
            method, url, data, parts = "POST", "Orders", encode(body), 1
        elif op == "via-nav":
            body, spoiled = typed_payload(rng, model["Orders"], i, True, {"OrderID", "CustomerID"})
            method, url, data, parts = "POST", "Customers('BONAP')/Orders", encode(body), 1
        elif op == "patch":
            body, spoiled = typed_payload(rng, model["Products"], i, False, {"ProductID"})
            method, url, data, parts = "PATCH", f"Products({rng.randint(1, 7)})", encode(body), 1
        else:
            spoiled = None
            reqs = []
            for j in range(2):
                b, bad = typed_payload(rng, model["Products"], i * 10 + j, True, {"ProductID"})
                spoiled = spoiled or bad
                reqs.append({"id": str(j + 1), "atomicityGroup": "g", "method": "POST", "url": "Products",
                             "headers": {"content-type": "application/json"}, "body": b})
            method, url, data, parts = "POST", "$batch", encode({"requests": reqs}), 2
        r = s.request(method, gw.url(MOUNT + url), data=data, headers=JSON_HEADERS, timeout=15)
        where = f"round {i} seed {SEED}: {method} {url} {data[:300]!r} ({spoiled}) -> {r.status_code} {r.text[:300]!r}"
        if op == "batch" and not utf8(data):
            # A JSON body that is not UTF-8 is not JSON: the whole batch is refused, as the upstream does.
            # (With nothing queued, localFirst forwards a batch it cannot read; the upstream refuses it.)
            assert spoiled and r.status_code == 400, where
            assert r.json()["error"]["code"], where
            forwarded_refusals += r.headers.get("X-Mirrorgate-Origin") == "remote"
        elif op == "batch":
            assert r.status_code == 200, where
            statuses = [x["status"] for x in r.json()["responses"]]
            if spoiled:
                # The changeset is refused whole. odatapy answers one entry (the failing request's id); the
                # gateway one per request of the group, each with the error (a known difference in shape).
                assert statuses and set(statuses) == {400}, where
                assert all("error" in x["body"] for x in r.json()["responses"]), where
            else:
                assert statuses == [201, 201], where
        elif spoiled:
            assert r.status_code == 400, where
            assert "error" in r.json() and r.json()["error"]["code"], where
        else:
            assert r.status_code in (201, 204), where
        if spoiled:
            refused += 1
        else:
            accepted += 1
            queued += parts
        assert status_of(gw)["pendingRequests"] == queued, where
    print(f"typed fuzz: {accepted} accepted, {refused} refused")
    assert accepted > 20 and refused > 20
    # Upload: nothing the gateway accepted is refused by the upstream.
    deadline = time.time() + 60
    while time.time() < deadline:
        request_upload(gw, timeout=30)
        st = status_of(gw)
        if st["pendingRequests"] == 0 and not st["uploading"]:
            break
        time.sleep(0.1)
    st = status_of(gw)
    refusals = [r for r in up.requests() if r.method in ("POST", "PATCH", "PUT", "MERGE", "DELETE") and r.status[:1] == "4"]
    # Batches that are not UTF-8, forwarded and refused by the upstream to the client itself, were never accepted.
    assert sum(not utf8(r.body) for r in refusals) == forwarded_refusals, (SEED, forwarded_refusals)
    rejected = [(r.method, r.path, r.status, r.body[:200]) for r in refusals if utf8(r.body)]
    assert not rejected, f"seed {SEED}: the upstream refused accepted writes: {rejected}"
    assert st["pendingRequests"] == 0 and st["errorArchive"] == 0, (SEED, st)
