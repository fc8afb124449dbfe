"""Issue 24's conformance matrix (reads): for every service mock-sap ships (V2 and V4, discovered from mock-sap's
own service list) and every entity set in it, the gateway downloads the set by a defining request, then each
cell — the collection, a key read, `$top/$skip`, `$orderby` on a property of each sortable type, `$filter` on
a string and a boolean property, `$count`/`$inlinecount` and `/$count`, `$select`, and `$expand` of each
navigation — is asked through the gateway while mock-sap answers (forwarded) and again with mock-sap stopped
(answered from the mirror). A cell passes when both answers are equal JSON, or when the offline answer is a
`501` OData error (a documented refusal: README, "What works"), or when the upstream itself refused and the
gateway answers offline with an OData error. A failing cell prints the request and both answers.

Writes are not in the matrix yet (see the README's test count).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
import requests
from harness import free_port
from mocksap.schema import SERVICES
from odata_helpers import start_mock_sap
from test_odata_fidelity import ask, parsed
from test_odata_offline import wait_downloaded

EDM4 = "{http://docs.oasis-open.org/odata/ns/edm}"
MOUNT = "/odata/m/"
SORTABLE = ["Edm.String", "Edm.Decimal", "Edm.DateTime", "Edm.DateTimeOffset", "Edm.Boolean", "Edm.Int32", "Edm.Byte"]


def schema(xml: bytes) -> dict:
    """Entity sets of a `$metadata` document: set → {key, props (name → type), navs}."""
    root = ET.fromstring(xml)
    types = {}
    for el in root.iter():
        if el.tag.endswith("}EntityType"):
            ns = el.tag[: -len("EntityType")]
            types[el.get("Name")] = {
                "key": [r.get("Name") for r in el.iter(ns + "PropertyRef")],
                "props": {p.get("Name"): p.get("Type") for p in el.findall(ns + "Property")},
                "navs": [n.get("Name") for n in el.findall(ns + "NavigationProperty")],
            }
    sets = {}
    for el in root.iter():
        if el.tag.endswith("}EntitySet"):
            sets[el.get("Name")] = types[el.get("EntityType").split(".")[-1]]
    return sets


def literal(value, edm: str, v4: bool) -> str | None:
    if edm == "Edm.String" and isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if edm == "Edm.Boolean" and isinstance(value, bool):
        return "true" if value else "false"
    return None


def rows(doc, v4: bool) -> list:
    if not isinstance(doc, dict):
        return []
    return doc.get("value", []) if v4 else doc.get("d", {}).get("results", [])


def cells(sets: dict, first: dict, v4: bool) -> list[str]:
    out = []
    for name, t in sets.items():
        key = t["key"]
        out += [name, f"{name}?$top=2&$skip=1", f"{name}/$count"]
        out.append(f"{name}?$count=true&$top=1" if v4 else f"{name}?$inlinecount=allpages&$top=1")
        e = first.get(name)
        if e is not None:
            parts = [(k, literal(e.get(k), t["props"].get(k, ""), v4)) for k in key]
            if all(v is not None for _, v in parts):
                pred = parts[0][1] if len(parts) == 1 else ",".join(f"{k}={v}" for k, v in parts)
                out.append(f"{name}({pred})")
        seen = set()
        for p, edm in t["props"].items():
            if edm in SORTABLE and edm not in seen and p not in key:
                seen.add(edm)
                out.append(f"{name}?$orderby={p} desc,{','.join(key)}&$top=5")
        for p, edm in t["props"].items():
            if p in key or e is None:
                continue
            lit = literal(e.get(p), edm, v4)
            if lit is not None and edm in ("Edm.String", "Edm.Boolean"):
                out.append(f"{name}?$filter={p} eq {lit}&$orderby={','.join(key)}")
                break
        # Primitive properties: mock-sap refuses `$select=SAP__Messages` (400) although its `$metadata`
        # declares the collection on every A2X type; the gateway follows the `$metadata` (a difference of
        # the upstream's, not a cell of the matrix).
        other = [p for p, edm in t["props"].items() if p not in key and edm.startswith("Edm.")][:2]
        out.append(f"{name}?$select={','.join(key + other)}&$top=3")
        for n in t["navs"]:
            out.append(f"{name}?$expand={n}&$orderby={','.join(key)}&$top=3")
    return out


SERVICE_LIST = sorted(SERVICES.values(), key=lambda s: (s.version, s.name))


@pytest.mark.parametrize("service", SERVICE_LIST, ids=[s.name for s in SERVICE_LIST])
def test_offline_reads_equal_online_reads(gateway_factory, service, tmp_path):
    port = free_port()
    proc = start_mock_sap(port, csrf=False)
    v4 = service.version >= 4
    root = f"http://127.0.0.1:{port}{service.path}/"
    try:
        meta = requests.get(root + "$metadata", timeout=10)
        assert meta.status_code == 200, meta.text[:300]
        sets = schema(meta.content)
        assert set(sets) == set(service.sets), (sets.keys(), service.sets)
        config = {
            "dataDir": str(tmp_path / "data"),
            "odata": {
                "services": {
                    "m": {
                        "mount": MOUNT,
                        "upstream": root,
                        "timeout": "5s",
                        "definingRequests": [{"name": s.lower(), "query": s} for s in sets],
                    }
                }
            },
        }
        gw = gateway_factory(config)
        wait_downloaded(gw, "m", timeout=60)
        first = {}
        for name in sets:
            r = ask(gw, name + "?$top=1", mount=MOUNT)
            if r.status_code == 200 and rows(parsed(r), v4):
                first[name] = rows(parsed(r), v4)[0]
        online = {}
        for q in cells(sets, first, v4):
            r = ask(gw, q, mount=MOUNT)
            assert r.headers.get("X-Mirrorgate-Origin") == "remote", q
            online[q] = (r.status_code, parsed(r))
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    failures, refused = [], []
    for q, (status, expected) in online.items():
        r = ask(gw, q, mount=MOUNT)
        got = (r.status_code, parsed(r))
        if v4 and "$expand=" in q and got[0] == status == 200:
            # Documented difference (README): mock-sap's context URL leaves the expanded navigation out
            # (`#Set`), the gateway's names it (`#Set(Nav)`, as odatapy's and OData 4.01's).
            nav = q.split("$expand=")[1].split("&")[0]
            context = expected.get("@odata.context", "")
            if got[1].get("@odata.context") == context + f"({nav})":
                got = (got[0], {**got[1], "@odata.context": context})
        assert r.headers.get("X-Mirrorgate-Origin") == "local", q
        if got == (status, expected):
            continue
        is_error = isinstance(got[1], dict) and "error" in got[1]
        if r.status_code == 501 and is_error:
            refused.append(q)
        elif status != 200 and 400 <= r.status_code < 600 and is_error:
            refused.append(q)
        else:
            failures.append(f"GET {q}\n  online  {status}: {str(expected)[:600]}\n  offline {got[0]}: {str(got[1])[:600]}")
    print(f"{service.name}: {len(online)} cells, {len(refused)} refused offline: {refused}")
    assert not failures, f"{len(failures)} of {len(online)} cells differ:\n" + "\n".join(failures)
