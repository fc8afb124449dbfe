"""The compose kit's fake upstreams, in a container: the end-to-end tests' fakes (Tests/EndToEnd/upstreams/),
bound to 0.0.0.0 and seeded with fixtures.

    python serve.py algolia [--port 8081] [--fixtures /fixtures]
        An Algolia-like REST API (search, multi-query, browse with cursors, settings, synonyms, getObject(s),
        batch writes). Seeded with one index per /fixtures/NAME.json (an array of records with objectID),
        its settings from NAME.settings.json when present. Application id and keys are not checked.
    python serve.py odata [--port 8082] [--origin http://odata:8082] [--page-size N]
        An OData V4 service at /nw.svc/ (odatapy's in-memory processor): Customers, Orders, Products of a
        small Northwind, readable and writable, with ETags. Its absolute URLs use --origin, the name the
        gateway calls it by on the compose network.

Both answer GET /_fake/ready with 200 (the compose healthcheck) and log one line per start.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "upstreams"))


def _wait_for_term(stop) -> None:
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    done.wait()
    stop()


def algolia(args) -> None:
    from fake_algolia import FakeAlgolia

    fake = FakeAlgolia(name="compose-fake-algolia", port=args.port, host="0.0.0.0", browse_page_size=100)
    seeded = []
    for path in sorted(Path(args.fixtures).glob("*.json")):
        if path.name.endswith(".settings.json"):
            continue
        name = path.stem
        objects = json.loads(path.read_text())
        settings_file = path.with_name(f"{name}.settings.json")
        settings = json.loads(settings_file.read_text()) if settings_file.exists() else None
        fake.seed(name, objects, settings)
        seeded.append(f"{name} ({len(objects)} records)")
    fake.start()
    print(f"fake Algolia on 0.0.0.0:{fake.port}; indices: {', '.join(seeded) or 'none'}", flush=True)
    _wait_for_term(fake.stop)


def odata(args) -> None:
    from odata_northwind import MOUNT, ODataUpstream

    origin = args.origin or f"http://127.0.0.1:{args.port}"
    up = ODataUpstream(port=args.port, page_size=args.page_size, host="0.0.0.0", origin=origin)
    inner = up.app

    def app(environ, start_response):  # the healthcheck's route, outside the service
        if environ.get("PATH_INFO") == "/_fake/ready":
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [b"ready\n"]
        return inner(environ, start_response)

    up.app = app
    up.start()
    print(f"fake OData V4 on 0.0.0.0:{up.port}{MOUNT}/ (absolute URLs: {origin}{MOUNT}/)", flush=True)
    _wait_for_term(up.stop)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="kind", required=True)
    a = sub.add_parser("algolia")
    a.add_argument("--port", type=int, default=8081)
    a.add_argument("--fixtures", default="/fixtures")
    o = sub.add_parser("odata")
    o.add_argument("--port", type=int, default=8082)
    o.add_argument("--origin", default=None)
    o.add_argument("--page-size", type=int, default=None)
    args = parser.parse_args()
    {"algolia": algolia, "odata": odata}[args.kind](args)


if __name__ == "__main__":
    main()
