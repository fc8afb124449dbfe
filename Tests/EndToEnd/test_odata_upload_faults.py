"""Seeded fault injection over the upload paths (issue 19, item 3): single creates, updates and changesets
are queued (localFirst) and uploaded through a proxy that lets the upstream commit every modification and
then, for a seeded share of them, answers with garbage, a header without a colon, a NUL in a header, a
truncated head or body, nothing, or a TCP reset; between bursts the gateway is killed (`kill -9`) at seeded
points of an upload and restarted. The test counts duplicates and losses on the upstream itself.

- With repeatability (`upstreamSupportsRepeatability: true` and a repeatability shim in front of the
  upstream): every acknowledged write is executed exactly once, nothing is left in the ErrorArchive.
- Without it (`false`, no shim; creates and changesets only): no write is executed twice; every
  acknowledged write is executed once or held in doubt (`MG_IN_DOUBT`) for the user, never lost.

Chain: gateway → SeededUploadFaults (upstreams/faults.py) → [RepeatabilityShim] → odatapy Northwind V4.
Bounded: a fixed small set of seeds (`SEEDS`), each run within 150 s. `MG_FAULT_SEED=N[,M…]` runs those
seeds instead (a failing seed is printed and replays with it: the fault choices depend on the seed and the
order of requests, the kill points on the seed); `bench/soak/upload_faults.sh` runs many seeds in a row.
"""

from __future__ import annotations

import os
import random
import re
import time

import pytest
import requests
from odata_helpers import JSON_HEADERS, kill_9, request_upload, status_of
from test_odata_offline import MOUNT, nw_config, wait_downloaded
from upstreams.faults import SeededUploadFaults
from upstreams.repeatability_shim import RepeatabilityShim

SEEDS = [int(x) for x in os.environ.get("MG_FAULT_SEED", "7,1913").split(",") if x.strip()]
NAME = re.compile(rb'"ProductName"\s*:\s*"(FI-[^"]+)"')


def executed(up) -> dict[str, int]:
    """How many times the upstream itself executed a modification naming each `FI-…` product (a `$batch`
    counts for every name in it)."""
    out: dict[str, int] = {}
    for r in up.requests():
        if r.method in ("POST", "PATCH", "PUT", "MERGE") and r.status[:1] == "2":
            for name in NAME.findall(r.body):
                n = name.decode()
                out[n] = out.get(n, 0) + 1
    return out


def drain(gw, seconds: float, seed: int) -> None:
    deadline = time.time() + seconds
    for _ in range(1000):
        st = status_of(gw)
        if st["pendingRequests"] == 0 and not st["uploading"]:
            return
        assert time.time() < deadline, f"seed {seed}: queue not drained: {st}"
        request_upload(gw, timeout=30)
        time.sleep(0.05)


def in_doubt_names(gw) -> set[str]:
    r = requests.get(gw.url("/_mirrorgate/odata/nw/ErrorArchive"), headers={"Accept": "application/json"}, timeout=10)
    assert r.status_code == 200, r.text
    names = set()
    for e in r.json()["value"]:
        assert e["Code"] == "MG_IN_DOUBT", e  # nothing else may fail: the payloads are valid
        names.update(n.decode() for n in NAME.findall((e.get("RequestBody") or "").encode()))
    return names


@pytest.mark.parametrize("support", ["true", "false"])
@pytest.mark.parametrize("seed", SEEDS)
def test_seeded_upload_faults_and_kills_lose_and_duplicate_nothing(
    gateway_factory, odata_upstream, tmp_path, support, seed
):
    print(f"MG_FAULT_SEED={seed}")
    rng = random.Random(f"{seed}-{support}")
    up = odata_upstream
    shim = RepeatabilityShim(up.origin).start() if support == "true" else None
    faults = SeededUploadFaults(shim.url if shim else up.origin, seed=f"{seed}-{support}-net").start()
    config = nw_config(faults.url + "/nw.svc/", routing="localFirst", upstreamSupportsRepeatability=support)
    config["dataDir"] = str(tmp_path / "data")
    s = requests.Session()
    acked: list[str] = []
    local_keys: list[str] = []
    t_end = time.time() + 150
    try:
        gw = gateway_factory(config, name="gw0")
        wait_downloaded(gw, "nw")
        n = 0
        for burst in range(5):
            for _ in range(rng.randint(6, 14)):
                n += 1
                kind = rng.choice(["create", "create", "changeset"] + (["patch"] if support == "true" else []))
                name = f"FI-{burst}-{n}"
                if kind == "create":
                    body = {"ProductName": name, "UnitPrice": rng.randint(1, 99), "Discontinued": False}
                    r = s.post(gw.url(MOUNT + "Products"), json=body, headers=JSON_HEADERS, timeout=10)
                    assert r.status_code == 201, r.text
                    local_keys.append(str(r.json()["ProductID"]))
                    acked.append(name)
                elif kind == "patch":
                    key = rng.choice(local_keys + ["1", "2", "3", "4"])
                    r = s.patch(gw.url(MOUNT + f"Products({key})"), json={"ProductName": name}, headers=JSON_HEADERS, timeout=10)
                    assert r.status_code == 204, r.text
                    acked.append(name)
                else:
                    names = [name + "a", name + "b"]
                    batch = {
                        "requests": [
                            {"id": str(i + 1), "atomicityGroup": "g", "method": "POST", "url": "Products",
                             "headers": {"content-type": "application/json"},
                             "body": {"ProductName": x, "UnitPrice": 1, "Discontinued": True}}
                            for i, x in enumerate(names)
                        ]
                    }
                    r = s.post(gw.url(MOUNT + "$batch"), json=batch, headers={"Accept": "application/json"}, timeout=10)
                    assert r.status_code == 200 and [x["status"] for x in r.json()["responses"]] == [201, 201], r.text
                    acked.extend(names)
            if rng.random() < 0.6:
                # kill -9 at a seeded moment of an upload, then restart on the same data.
                st = requests.post(
                    gw.url("/_mirrorgate/odata/services/nw/upload"), headers=gw.admin_headers(), timeout=10
                ).status_code
                assert st in (202, 409, 503), st
                time.sleep(rng.uniform(0.0, 0.3))
                kill_9(gw)
                s = requests.Session()
                gw = gateway_factory(config, name=f"gw{burst + 1}")
            else:
                drain(gw, max(5, t_end - time.time()), seed)
            assert time.time() < t_end, f"seed {seed}: out of time"
        drain(gw, max(5, t_end - time.time()), seed)
        st = status_of(gw)
        counts = executed(up)
        duplicates = {k: c for k, c in counts.items() if c > 1}
        doubt = in_doubt_names(gw) if support == "false" else set()
        lost = [k for k in acked if counts.get(k, 0) == 0 and k not in doubt]
        strays = [k for k in counts if k not in acked]
        print(
            f"seed {seed} support={support}: {len(acked)} acknowledged, faults {faults.faults}, "
            f"{len(doubt)} in doubt, {len(duplicates)} duplicated, {len(lost)} lost"
        )
        assert not duplicates, f"seed {seed}: executed more than once: {duplicates}"
        assert not lost, f"seed {seed}: acknowledged and never executed: {lost}"
        assert not strays, f"seed {seed}: executed but never acknowledged: {strays}"
        assert sum(faults.faults.values()) > 0
        if support == "true":
            assert st["errorArchive"] == 0 and st["pendingRequests"] == 0, (seed, st)
            assert all(counts.get(k, 0) == 1 for k in acked)
        else:
            assert st["pendingRequests"] == 0 and st["errorArchive"] == st["inDoubt"], (seed, st)
    finally:
        faults.stop()
        if shim:
            shim.stop()
