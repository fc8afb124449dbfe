"""Encryption at rest (issue 19, item 2; README "Encryption at rest"): `algolia.storeEncryptionKey` and
`odata.services.*.storeEncryptionKey`.

- While the gateway serves (mirror sync, local search, offline OData writes, their upload) and after it
  stops, the `sqlite3` shell reads no file of the data directory and no file holds the data in the clear;
  an independent reader of the documented format (store_crypto.py) decrypts the stores with the key and
  finds the data.
- A wrong key is refused at start with a message that names the key and not the secret.
- `mirrorgate rekey` rotates keys, encrypts plaintext stores, refuses to run under a gateway, and survives
  `kill -9` at any point (seeded: MG_REKEY_SEED replays a run).
- A flipped byte in a store is an error, never data.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
from conftest import API_KEY, APP_ID
from harness import binary, deep_merge, request, run_cli, to_yaml
from odata_helpers import JSON_HEADERS, request_upload, status_of, upload_and_wait
from store_crypto import StoreFormatError, decrypt_store, is_encrypted, keys
from test_mirrored import SETTINGS, mirrored_config, search, sync
from test_odata_offline import MOUNT, nw_config, wait_downloaded

ALGOLIA_KEY = "algolia store secret 1"
ODATA_KEY = "odata store secret 22"
MARKER = "ZEBRAFISH7"  # in Algolia records, offline records and an OData entity: never on disk in the clear
RECORDS = [
    {"objectID": f"m{i}", "name": f"{MARKER} phone {i}", "brand": "Apple" if i % 2 else "Nokia", "price": i}
    for i in range(40)
]


def stop(gw) -> None:
    gw.expect_exit = 0
    code, _ = gw.terminate()
    assert code == 0, gw.stderr()[-2000:]


def sqlite_shell() -> str:
    exe = shutil.which("sqlite3")
    assert exe, "the sqlite3 shell is missing: bash scripts/setup.sh installs it"
    return exe


def assert_unreadable(data_dir: Path) -> list[str]:
    """Every file of the data directory: the sqlite3 shell cannot read it (an empty file excepted: it holds
    nothing), and it holds no marker."""
    names = sorted(p.name for p in data_dir.iterdir())
    assert any(n.endswith(".sqlite") for n in names), names
    for name in names:
        path = data_dir / name
        if path.stat().st_size == 0:  # an emptied WAL (checkpointed at shutdown): nothing to read
            assert name.endswith("-wal"), name
            continue
        r = subprocess.run(
            [sqlite_shell(), "-readonly", str(path), "SELECT count(*) FROM sqlite_master"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert r.returncode != 0, f"sqlite3 read {name}: {r.stdout}"
        assert "not a database" in r.stderr, f"{name}: {r.stderr}"
        raw = path.read_bytes()
        for needle in (MARKER.encode(), b"SQLite format 3", b"CREATE TABLE", API_KEY.encode()):
            assert needle not in raw, f"{needle!r} in {name}"
    return names


def config_for(tmp_path, algolia_url: str, odata_root: str, algolia_key, odata_key) -> dict:
    (tmp_path / "offline.json").write_text(json.dumps([{"objectID": "o1", "title": f"{MARKER} offline note"}]))
    base = mirrored_config(algolia_url)
    base["algolia"]["storeEncryptionKey"] = algolia_key
    base["algolia"]["offlineIndices"] = {"notes": {"bootstrap": {"objects": [str(tmp_path / "offline.json")]}}}
    base = deep_merge(base, nw_config(odata_root, storeEncryptionKey=odata_key))
    base["dataDir"] = str(tmp_path / "data")
    return base


def algolia_query(gw, index: str, query: str):
    h = {"X-Algolia-Application-Id": APP_ID, "X-Algolia-API-Key": API_KEY, "Content-Type": "application/json"}
    st, _, body = request(
        "POST", gw.url(f"/1/indexes/{index}/query"), body=json.dumps({"query": query}).encode(), headers=h
    )
    assert st == 200, body
    return json.loads(body)


def test_no_store_is_readable_while_the_gateway_serves_and_uploads(gateway_factory, fake_algolia, odata_upstream, tmp_path):
    from upstreams.odata_northwind import ODataUpstream

    fake_algolia.seed("products", RECORDS, SETTINGS)
    config = config_for(tmp_path, fake_algolia.url, odata_upstream.root, ALGOLIA_KEY, ODATA_KEY)
    gw = gateway_factory(config)
    assert sync(gw)["objects"] == len(RECORDS)
    wait_downloaded(gw, "nw")
    st, _, body = search(gw, {"query": MARKER.lower(), "hitsPerPage": 50})  # remembers the key
    assert st == 200 and json.loads(body)["nbHits"] == len(RECORDS), body
    assert algolia_query(gw, "notes", "zebrafish")["nbHits"] == 1

    # The upstreams go away: local answers from the encrypted mirror, an offline write queued.
    odata_upstream.stop()
    fake_algolia.stop()
    answer = algolia_query(gw, "products", MARKER.lower())
    assert answer["origin"] == "local" and answer["nbHits"] == len(RECORDS)
    r = requests.post(
        gw.url(MOUNT + "Products"),
        json={"ProductName": f"{MARKER} tea", "UnitPrice": 3.5, "Discontinued": False},
        headers=JSON_HEADERS,
        timeout=10,
    )
    assert r.status_code == 201 and r.headers["X-Mirrorgate-Origin"] == "local", r.text
    assert status_of(gw)["pendingRequests"] == 1

    data = tmp_path / "data"
    names = assert_unreadable(data)
    assert {"state.sqlite", "search.sqlite", "odata-nw.sqlite", "odata-nw.sqlite-wal"} <= set(names), names

    # The upstream comes back: the queued write is uploaded from the encrypted queue.
    up2 = ODataUpstream(port=odata_upstream.port, page_size=5, etags=True).start()
    try:
        upload_and_wait(gw)
        assert [rec for rec in up2.records if rec.method == "POST" and MARKER.encode() in rec.body]
    finally:
        up2.stop()
    assert_unreadable(data)

    stop(gw)
    assert_unreadable(data)
    # The documented format, read by an independent implementation, holds the data.
    out = tmp_path / "decrypted"
    out.mkdir()
    decrypt_store(data / "search.sqlite", ALGOLIA_KEY, out / "search.sqlite")
    decrypt_store(data / "odata-nw.sqlite", ODATA_KEY, out / "odata-nw.sqlite")
    r = subprocess.run(
        [sqlite_shell(), str(out / "search.sqlite"), "SELECT count(*) FROM se_versions"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 0 and int(r.stdout) >= 2, r.stderr
    assert MARKER.encode() in (out / "search.sqlite").read_bytes()
    r = subprocess.run(
        [sqlite_shell(), str(out / "odata-nw.sqlite"), 'SELECT count(*) FROM "Products" WHERE "ProductName" LIKE \'%ZEBRAFISH7%\''],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 0 and r.stdout.strip() == "1", r.stdout + r.stderr
    with pytest.raises(StoreFormatError):
        keys(data / "odata-nw.sqlite", ALGOLIA_KEY)


def test_a_wrong_key_is_refused_at_start(gateway_factory, tmp_path):
    config = nw_config("http://127.0.0.1:9/odata/", storeEncryptionKey=ODATA_KEY, routing="localFirst")
    config["dataDir"] = str(tmp_path / "data")
    config["algolia"] = {"storeEncryptionKey": ALGOLIA_KEY}
    stop(gateway_factory(config))
    wrong = deep_merge(config, {"algolia": {"storeEncryptionKey": "not the right secret"}})
    wrong["odata"]["services"]["nw"]["storeEncryptionKey"] = "not the right one either"
    path = tmp_path / "wrong.yaml"
    path.write_text(to_yaml(deep_merge(wrong, {"server": {"listen": "127.0.0.1:0"}})))
    r = run_cli(["serve", "--config", str(path)], timeout=60)
    assert r.returncode == 1, r.stderr
    assert "algolia.storeEncryptionKey does not open" in r.stderr, r.stderr
    assert "odata.services.nw.storeEncryptionKey does not open" in r.stderr, r.stderr
    assert "not the right" not in r.stderr + r.stdout
    # Without any key: the encrypted stores are named, not opened as garbage.
    none = deep_merge(config, {"algolia": {"storeEncryptionKey": None}})
    none["odata"]["services"]["nw"]["storeEncryptionKey"] = None
    path.write_text(to_yaml(deep_merge(none, {"server": {"listen": "127.0.0.1:0"}})))
    r = run_cli(["serve", "--config", str(path)], timeout=60)
    assert r.returncode == 1 and "is encrypted, but algolia.storeEncryptionKey is not set" in r.stderr, r.stderr


def write_config(path: Path, config: dict) -> Path:
    path.write_text(to_yaml(config))
    return path


def test_rekey_rotates_encrypts_and_refuses_a_running_gateway(gateway_factory, odata_upstream, tmp_path):
    plain = config_for(tmp_path, "http://127.0.0.1:9", odata_upstream.root, None, None)
    plain["algolia"]["indices"] = {}
    gw = gateway_factory(plain)
    wait_downloaded(gw, "nw")
    odata_upstream.stop()
    r = requests.post(gw.url(MOUNT + "Products"), json={"ProductName": f"{MARKER} kept", "Discontinued": False}, headers=JSON_HEADERS, timeout=10)
    assert r.status_code == 201, r.text
    # Not while the gateway runs.
    first = write_config(tmp_path / "first.yaml", deep_merge(plain, {"algolia": {"storeEncryptionKey": ALGOLIA_KEY}}))
    r = run_cli(["rekey", "--config", str(first)])
    assert r.returncode == 1 and "in use by a running gateway" in r.stderr, r.stderr
    stop(gw)
    data = tmp_path / "data"
    assert not is_encrypted(data / "odata-nw.sqlite")

    # Plaintext → encrypted (the key set in the configuration; the start refuses until rekey has run).
    enc = deep_merge(plain, {"algolia": {"storeEncryptionKey": ALGOLIA_KEY}})
    enc["odata"]["services"]["nw"]["storeEncryptionKey"] = ODATA_KEY
    enc_path = write_config(tmp_path / "enc.yaml", deep_merge(enc, {"server": {"listen": "127.0.0.1:0"}}))
    r = run_cli(["serve", "--config", str(enc_path)], timeout=60)
    assert r.returncode == 1 and "is not encrypted" in r.stderr and "mirrorgate rekey" in r.stderr, r.stderr
    r = run_cli(["rekey", "--config", str(enc_path)], timeout=120)
    assert r.returncode == 0, r.stderr
    assert "odata-nw.sqlite: encrypted with odata.services.nw.storeEncryptionKey" in r.stdout, r.stdout
    assert "state.sqlite: encrypted with algolia.storeEncryptionKey" in r.stdout, r.stdout
    assert_unreadable(data)

    # Rotation: the new key in the configuration, the old one from the environment.
    rotated = deep_merge(enc, {"algolia": {"storeEncryptionKey": "algolia store secret 2"}})
    rotated["odata"]["services"]["nw"]["storeEncryptionKey"] = "odata store secret 3"
    rot_path = write_config(tmp_path / "rot.yaml", deep_merge(rotated, {"server": {"listen": "127.0.0.1:0"}}))
    r = run_cli(["rekey", "--config", str(rot_path)], timeout=120)
    assert r.returncode == 1 and "--old-key-env" in r.stderr, r.stderr  # nothing opens them yet
    # One old key per run: the Algolia stores first, then the OData one (each run skips what is done).
    r = run_cli(["rekey", "--config", str(rot_path), "--old-key-env", "MG_OLD"], env={"MG_OLD": ALGOLIA_KEY}, timeout=120)
    assert r.returncode == 1, r.stderr
    assert "state.sqlite: re-encrypted with algolia.storeEncryptionKey" in r.stdout, r.stdout
    old_file = tmp_path / "old.key"
    old_file.write_text(ODATA_KEY + "\n")
    r = run_cli(["rekey", "--config", str(rot_path), "--old-key-file", str(old_file)], timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "state.sqlite: already encrypted with algolia.storeEncryptionKey" in r.stdout, r.stdout
    assert "odata-nw.sqlite: re-encrypted with odata.services.nw.storeEncryptionKey" in r.stdout, r.stdout
    for secret in (ALGOLIA_KEY, ODATA_KEY, "algolia store secret 2", "odata store secret 3"):
        assert secret not in r.stdout + r.stderr
    with pytest.raises(StoreFormatError):
        keys(data / "odata-nw.sqlite", ODATA_KEY)

    # The rotated stores serve the data, queued write included.
    gw2 = gateway_factory(deep_merge(rotated, {}), name="rotated")
    assert status_of(gw2)["pendingRequests"] == 1
    r = requests.get(gw2.url(MOUNT + "Products(-1)"), headers={"Accept": "application/json"}, timeout=10)
    assert r.status_code == 200 and r.json()["ProductName"] == f"{MARKER} kept", r.text


def big_offline_index(tmp_path, count: int, pad: int) -> tuple[list[dict], dict]:
    """`count` records of about `pad` bytes in the offline index `big`, and an encrypted gateway config."""
    records = [{"objectID": f"r{i}", "title": f"{MARKER} {i} " + "x" * pad} for i in range(count)]
    (tmp_path / "records.json").write_text(json.dumps(records))
    config = {
        "dataDir": str(tmp_path / "data"),
        "algolia": {
            "storeEncryptionKey": ALGOLIA_KEY,
            "offlineIndices": {"big": {"bootstrap": {"objects": [str(tmp_path / "records.json")]}}},
        },
    }
    return records, config


def test_rekey_survives_kill_9_at_any_point(gateway_factory, tmp_path):
    seed = int(os.environ.get("MG_REKEY_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    print(f"MG_REKEY_SEED={seed}", file=sys.stderr)
    records, config = big_offline_index(tmp_path, 1500, 400)
    stop(gateway_factory(config))
    search_db = tmp_path / "data" / "search.sqlite"
    keys_now = [ALGOLIA_KEY, "algolia store secret B", "algolia store secret C"]

    def key_of(path: Path) -> str:
        found = []
        for k in keys_now:
            try:
                keys(path, k)
                found.append(k)
            except StoreFormatError:
                pass
        assert len(found) == 1, found
        return found[0]

    current = ALGOLIA_KEY
    for round_ in range(6):
        target = keys_now[(keys_now.index(current) + 1) % len(keys_now)]
        cfg = write_config(
            tmp_path / "target.yaml", deep_merge(config, {"algolia": {"storeEncryptionKey": target}})
        )
        env = dict(os.environ, MG_OLD=current)
        proc = subprocess.Popen(
            [str(binary()), "rekey", "--config", str(cfg), "--old-key-env", "MG_OLD"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(rng.uniform(0.0, 0.8))
        killed = proc.poll() is None
        if killed:
            proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        # Whole, with exactly one of the two keys; the data readable with it.
        current = key_of(search_db)
        assert current in (target, keys_now[(keys_now.index(target) - 1) % len(keys_now)])
        out = tmp_path / f"check-{round_}.sqlite"
        decrypt_store(search_db, current, out)
        r = subprocess.run(
            [sqlite_shell(), str(out), "PRAGMA integrity_check"], capture_output=True, text=True, timeout=60
        )
        assert r.stdout.strip() == "ok", (seed, round_, r.stdout, r.stderr)
    # Finish with a clean run (state.sqlite, rekeyed before search.sqlite, may be one key ahead), then serve.
    last = keys_now[(keys_now.index(current) + 1) % len(keys_now)]
    final = write_config(tmp_path / "final.yaml", deep_merge(config, {"algolia": {"storeEncryptionKey": last}}))
    r = run_cli(["rekey", "--config", str(final), "--old-key-env", "MG_OLD"], env={"MG_OLD": current}, timeout=120)
    assert r.returncode == 0, (seed, r.stdout, r.stderr)
    assert not [p.name for p in (tmp_path / "data").iterdir() if ".rekey" in p.name]
    gw2 = gateway_factory(deep_merge(config, {"algolia": {"storeEncryptionKey": last}}), name="after")
    h = {"X-Algolia-Application-Id": "any", "X-Algolia-API-Key": "any", "Content-Type": "application/json"}
    st, _, body = request("POST", gw2.url("/1/indexes/big/query"), body=b'{"query":"zebrafish7"}', headers=h)
    assert st == 200 and json.loads(body)["nbHits"] == len(records), body


def test_a_flipped_byte_in_a_store_is_an_error_not_data(gateway_factory, tmp_path):
    _, config = big_offline_index(tmp_path, 300, 300)
    stop(gateway_factory(config))  # checkpoints: every page is in search.sqlite
    path = tmp_path / "data" / "search.sqlite"
    raw = bytearray(path.read_bytes())
    assert len(raw) > 4096 * 20
    for page in range(1, 11):  # one byte in each of the last ten pages (the records' table)
        raw[len(raw) - 4096 * page + 1000] ^= 0x01
    path.write_bytes(bytes(raw))
    cfg = write_config(tmp_path / "again.yaml", deep_merge(config, {"server": {"listen": "127.0.0.1:0"}}))
    r = run_cli(["serve", "--config", str(cfg)], timeout=60)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "failed authentication" in r.stderr, r.stderr
