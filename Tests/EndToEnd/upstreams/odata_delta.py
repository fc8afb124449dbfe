"""A small OData upstream on loopback with change tracking, for the delta-download tests (issue 16 item 5).

One entity set `Items` (`ID` Int32 key, `Name`, `Qty`), served as V4 (`value`, `@odata.nextLink`,
`Prefer: odata.track-changes` → `@odata.deltaLink …?$deltatoken=N`; removals as 4.01 `@removed` entries, or
4.0 `$deletedEntity` entries with `deleted_entity_style="4.0"`) or as SAP V2 (`d.results`, `__next`,
`__delta …?!deltatoken='N'`; removals as `__metadata.deleted` tombstones, or in `d.__deleted` with
`v2_deleted_list=True`). Every change (made by the test through `update`/`delete`/`create`, or by a client
write) takes the next sequence number; a delta token N answers the entities changed after N (in full) and those
removed after N; tokens in `expired` get `410 Gone`. Writes: POST (201 with the entity), PATCH/MERGE/PUT
(204), DELETE (204), `X-HTTP-Method` tunnelling. Every request is recorded in `requests` as
(method, path with query, Prefer header). Bounded: a thread per connection, stopped by `stop()`.
"""

from __future__ import annotations

import http.server
import json
import re
import threading
import time
from urllib.parse import parse_qs, unquote, urlsplit

V4_METADATA = """<?xml version="1.0" encoding="utf-8"?>
<edmx:Edmx Version="4.0" xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx">
  <edmx:DataServices>
    <Schema Namespace="Delta" xmlns="http://docs.oasis-open.org/odata/ns/edm">
      <EntityType Name="Item">
        <Key><PropertyRef Name="ID"/></Key>
        <Property Name="ID" Type="Edm.Int32" Nullable="false"/>
        <Property Name="Name" Type="Edm.String"/>
        <Property Name="Qty" Type="Edm.Int32"/>
      </EntityType>
      <EntityContainer Name="C"><EntitySet Name="Items" EntityType="Delta.Item"/></EntityContainer>
    </Schema>
  </edmx:DataServices>
</edmx:Edmx>
"""

V2_METADATA = """<?xml version="1.0" encoding="utf-8"?>
<edmx:Edmx Version="1.0" xmlns:edmx="http://schemas.microsoft.com/ado/2007/06/edmx"
  xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata">
  <edmx:DataServices m:DataServiceVersion="2.0">
    <Schema Namespace="DELTA_SRV" xmlns="http://schemas.microsoft.com/ado/2008/09/edm">
      <EntityType Name="Item">
        <Key><PropertyRef Name="ID"/></Key>
        <Property Name="ID" Type="Edm.Int32" Nullable="false"/>
        <Property Name="Name" Type="Edm.String"/>
        <Property Name="Qty" Type="Edm.Int32"/>
      </EntityType>
      <EntityContainer Name="DELTA_SRV_Entities" m:IsDefaultEntityContainer="true">
        <EntitySet Name="Items" EntityType="DELTA_SRV.Item"/>
      </EntityContainer>
    </Schema>
  </edmx:DataServices>
</edmx:Edmx>
"""


class DeltaUpstream:
    def __init__(self, version: int = 4, items: int = 8, page_size: int = 3, deleted_entity_style: str = "4.01",
                 v2_deleted_list: bool = False):
        self.version = version
        self.page_size = page_size
        self.deleted_entity_style = deleted_entity_style
        self.v2_deleted_list = v2_deleted_list
        self.lock = threading.Lock()
        self.seq = 0
        self.items: dict[int, dict] = {}
        self.changed_at: dict[int, int] = {}
        self.removed_at: dict[int, int] = {}
        self.expired: set[str] = set()
        self.requests: list[tuple[str, str, str]] = []
        for i in range(1, items + 1):
            self._put(i, {"ID": i, "Name": f"item {i}", "Qty": i})
        self.tokens: list[str] = []
        self._keys: list[int] | None = None  # sorted keys, recomputed after a creation or deletion
        self.delta_delay = 0.0  # seconds a delta read waits before it is answered (at most 10)
        self._server = None
        self._thread = None

    # ------------------------------------------------------------------ the test's side

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}/svc/"

    def _sorted_keys(self) -> list[int]:
        if self._keys is None:
            self._keys = sorted(self.items)
        return self._keys

    def _put(self, key: int, entity: dict) -> None:
        self.seq += 1
        if key not in self.items:
            self._keys = None
        self.items[key] = entity
        self.changed_at[key] = self.seq
        self.removed_at.pop(key, None)

    def update(self, key: int, **values) -> None:
        with self.lock:
            self._put(key, {**self.items[key], **values})

    def create(self, key: int, name: str) -> None:
        with self.lock:
            self._put(key, {"ID": key, "Name": name, "Qty": key})

    def delete(self, key: int) -> None:
        with self.lock:
            self.seq += 1
            self.items.pop(key)
            self._keys = None
            self.changed_at.pop(key, None)
            self.removed_at[key] = self.seq

    def state(self) -> dict[int, dict]:
        with self.lock:
            return {k: dict(v) for k, v in self.items.items()}

    def expire_tokens(self) -> None:
        """Every delta token handed out so far answers 410 from now on."""
        with self.lock:
            self.expired.update(self.tokens)

    def seen(self, method: str = "GET") -> list[tuple[str, str]]:
        with self.lock:
            return [(p, prefer) for m, p, prefer in self.requests if m == method]

    # ------------------------------------------------------------------ HTTP

    def _entity_json(self, e: dict) -> dict:
        if self.version == 4:
            return dict(e)
        uri = f"{self.root}Items({e['ID']})"
        return {"__metadata": {"id": uri, "uri": uri, "type": "DELTA_SRV.Item"}, **e}

    def _removed_json(self, key: int) -> dict:
        uri = f"{self.root}Items({key})"
        if self.version == 4:
            if self.deleted_entity_style == "4.0":
                return {"@odata.context": f"{self.root}$metadata#Items/$deletedEntity", "id": uri, "reason": "deleted"}
            return {"@id": uri, "@removed": {"reason": "deleted"}}
        return {"__metadata": {"id": uri, "uri": uri, "type": "DELTA_SRV.Item", "deleted": True}}

    def _delta_link(self) -> str:
        token = str(self.seq)
        self.tokens.append(token)
        return f"{self.root}Items?$deltatoken={token}" if self.version == 4 else f"{self.root}Items?!deltatoken='{token}'"

    def _collection(self, entities: list[dict], next_link: str | None, delta: str | None,
                    removed: list[dict] | None = None) -> dict:
        if self.version == 4:
            body: dict = {"@odata.context": f"{self.root}$metadata#Items", "value": entities + (removed or [])}
            if next_link:
                body["@odata.nextLink"] = next_link
            if delta:
                body["@odata.deltaLink"] = delta
            return body
        d: dict = {"results": entities}
        if removed:
            if self.v2_deleted_list:
                d["__deleted"] = removed
            else:
                d["results"] = entities + removed
        if next_link:
            d["__next"] = next_link
        if delta:
            d["__delta"] = delta
        return {"d": d}

    def handle(self, h: http.server.BaseHTTPRequestHandler) -> tuple[int, dict, bytes]:
        method = h.command
        if method == "POST" and h.headers.get("X-HTTP-Method"):
            method = h.headers["X-HTTP-Method"].upper()
        n = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(n) if n else b""
        split = urlsplit(h.path)
        path = unquote(split.path)
        query = parse_qs(split.query, keep_blank_values=True)
        prefer = h.headers.get("Prefer") or ""
        with self.lock:
            self.requests.append((method, h.path, prefer))
        json_type = {"Content-Type": "application/json", "X-CSRF-Token": "t"}
        if not path.startswith("/svc/"):
            return 404, json_type, b'{"error":{"code":"404","message":"no such service"}}'
        rest = path[len("/svc/"):]
        if rest == "$metadata":
            doc = V4_METADATA if self.version == 4 else V2_METADATA
            return 200, {"Content-Type": "application/xml"}, doc.encode()
        if rest == "":
            return 200, json_type, b'{"value":[{"name":"Items","url":"Items"}]}'
        m = re.fullmatch(r"Items(?:\((\d+)\))?", rest)
        if not m:
            return 404, json_type, b'{"error":{"code":"404","message":"not found"}}'
        key = int(m.group(1)) if m.group(1) else None
        if method == "GET" and ("$deltatoken" in query or "!deltatoken" in query) and self.delta_delay > 0:
            time.sleep(min(self.delta_delay, 10))
        with self.lock:
            if method == "GET" and key is None:
                token = (query.get("$deltatoken") or query.get("!deltatoken") or [None])[0]
                if token is not None:
                    token = token.strip("'")
                    if token in self.expired:
                        return 410, json_type, b'{"error":{"code":"410","message":"the delta token expired"}}'
                    since = int(token)
                    changed = [self._entity_json(self.items[k])
                               for k in sorted(k for k, at in self.changed_at.items() if at > since)]
                    removed = [self._removed_json(k) for k in sorted(k for k, at in self.removed_at.items() if at > since)]
                    body = self._collection(changed, None, self._delta_link(), removed)
                    return 200, {**json_type, "Preference-Applied": "odata.track-changes"}, json.dumps(body).encode()
                skip = int((query.get("$skiptoken") or ["0"])[0])
                keys = self._sorted_keys()
                page = keys[skip:skip + self.page_size]
                more = skip + self.page_size < len(keys)
                next_link = f"{self.root}Items?$skiptoken={skip + self.page_size}" if more else None
                tracking = "odata.track-changes" in prefer
                delta = self._delta_link() if tracking and not more else None
                body = self._collection([self._entity_json(self.items[k]) for k in page], next_link, delta)
                return 200, json_type, json.dumps(body).encode()
            if method == "GET":
                if key not in self.items:
                    return 404, json_type, b'{"error":{"code":"404","message":"not found"}}'
                e = self._entity_json(self.items[key])
                return 200, json_type, json.dumps(e if self.version == 4 else {"d": e}).encode()
            if method == "POST" and key is None:
                doc = json.loads(raw or b"{}")
                doc.pop("__metadata", None)
                new = int(doc.get("ID") or (max(self.items, default=0) + 1))
                self._put(new, {"ID": new, "Name": doc.get("Name"), "Qty": doc.get("Qty")})
                e = self._entity_json(self.items[new])
                headers = {**json_type, "Location": f"{self.root}Items({new})"}
                return 201, headers, json.dumps(e if self.version == 4 else {"d": e}).encode()
            if method in ("PATCH", "MERGE", "PUT") and key is not None:
                if key not in self.items:
                    return 404, json_type, b'{"error":{"code":"404","message":"not found"}}'
                doc = json.loads(raw or b"{}")
                doc.pop("__metadata", None)
                base = {"ID": key} if method == "PUT" else self.items[key]
                self._put(key, {**base, **{k: v for k, v in doc.items() if k in ("Name", "Qty")}})
                return 204, {"X-CSRF-Token": "t"}, b""
            if method == "DELETE" and key is not None:
                if key not in self.items:
                    return 404, json_type, b'{"error":{"code":"404","message":"not found"}}'
                self.seq += 1
                self.items.pop(key)
                self._keys = None
                self.changed_at.pop(key, None)
                self.removed_at[key] = self.seq
                return 204, {"X-CSRF-Token": "t"}, b""
        return 405, json_type, b'{"error":{"code":"405","message":"method not allowed"}}'

    def start(self, port: int = 0) -> "DeltaUpstream":
        upstream = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _any(self):
                status, headers, body = upstream.handle(self)
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = do_MERGE = _any

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 128

        self._server = Server(("127.0.0.1", port), Handler)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
