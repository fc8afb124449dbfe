"""A small Northwind-like OData V4 upstream built on odatapy's in-memory processor (loopback only).

The service is mounted at ``/nw.svc/`` (a path deliberately different from the gateway's mount so
the two-way URL map is visible) and always builds its absolute URLs (``@odata.context``,
``@odata.nextLink``, ``Location``, ``OData-EntityId``) from its own canonical origin
``http://127.0.0.1:PORT``, whatever Host header it receives, as a real upstream behind its own name
does. Every request is recorded (method, raw path, query, headers, body).

Run by hand: ``python odata_northwind.py PORT [PAGE_SIZE]`` (env ``NO_ETAGS=1`` turns ETags off).
"""

from __future__ import annotations

import datetime as dt
import sys
import threading
import time
from dataclasses import dataclass
from decimal import Decimal
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from odatapy.data import Entity, ValueType
from odatapy.edm.csdl import (
    CsdlAbstractEdmProvider,
    CsdlEntityContainer,
    CsdlEntitySet,
    CsdlEntityType,
    CsdlNavigationProperty,
    CsdlNavigationPropertyBinding,
    CsdlProperty,
    CsdlPropertyRef,
    CsdlReferentialConstraint,
    CsdlSchema,
)
from odatapy.server import OData
from odatapy.server.adapters import ODataWSGIApp
from odatapy.server.inmemory import InMemoryDataStore, InMemoryProcessor
from odatapy.server.processor import CustomETagSupport

NS = "NorthwindModel"
MOUNT = "/nw.svc"


class Provider(CsdlAbstractEdmProvider):
    def __init__(self, constraints: bool = True, cascade: bool = False):
        super().__init__()
        # Without constraints, Order.Customer declares no ReferentialConstraint (as many real services):
        # the gateway can only learn the relationship from the links an $expand shows.
        self.constraints = constraints
        # With cascade, Customer.Orders declares <OnDelete Action="Cascade"/> (the metadata only: the
        # in-memory store does not delete the orders itself).
        self.cascade = cascade

    def get_schemas(self):
        customer = CsdlEntityType(
            name="Customer",
            key=[CsdlPropertyRef(name="CustomerID")],
            properties=[
                CsdlProperty(name="CustomerID", type="Edm.String", nullable=False, max_length=5),
                CsdlProperty(name="CompanyName", type="Edm.String", nullable=False),
                CsdlProperty(name="City", type="Edm.String"),
                CsdlProperty(name="Country", type="Edm.String"),
            ],
            navigation_properties=[
                CsdlNavigationProperty(
                    name="Orders",
                    type=f"{NS}.Order",
                    collection=True,
                    partner="Customer",
                    on_delete="Cascade" if self.cascade else None,
                ),
            ],
        )
        product = CsdlEntityType(
            name="Product",
            key=[CsdlPropertyRef(name="ProductID")],
            properties=[
                CsdlProperty(name="ProductID", type="Edm.Int32", nullable=False),
                CsdlProperty(name="ProductName", type="Edm.String", nullable=False),
                CsdlProperty(name="UnitPrice", type="Edm.Decimal", precision=19, scale=4),
                CsdlProperty(name="Discontinued", type="Edm.Boolean", nullable=False),
            ],
        )
        order = CsdlEntityType(
            name="Order",
            key=[CsdlPropertyRef(name="OrderID")],
            properties=[
                CsdlProperty(name="OrderID", type="Edm.Int32", nullable=False),
                CsdlProperty(name="CustomerID", type="Edm.String"),
                CsdlProperty(name="OrderDate", type="Edm.DateTimeOffset"),
                CsdlProperty(name="Freight", type="Edm.Decimal", precision=19, scale=4),
            ],
            navigation_properties=[
                CsdlNavigationProperty(
                    name="Customer",
                    type=f"{NS}.Customer",
                    partner="Orders",
                    referential_constraints=[
                        CsdlReferentialConstraint(property="CustomerID", referenced_property="CustomerID")
                    ]
                    if self.constraints
                    else [],
                ),
            ],
        )
        container = CsdlEntityContainer(
            name="NorthwindEntities",
            entity_sets=[
                CsdlEntitySet(
                    name="Customers",
                    type=f"{NS}.Customer",
                    navigation_property_bindings=[CsdlNavigationPropertyBinding(path="Orders", target="Orders")],
                ),
                CsdlEntitySet(name="Products", type=f"{NS}.Product"),
                CsdlEntitySet(
                    name="Orders",
                    type=f"{NS}.Order",
                    navigation_property_bindings=[CsdlNavigationPropertyBinding(path="Customer", target="Customers")],
                ),
            ],
        )
        return [CsdlSchema(namespace=NS, entity_types=[customer, product, order], entity_container=container)]


class ETags(CustomETagSupport):
    def has_etag(self, es):
        return getattr(es, "name", None) in ("Orders", "Products", "Customers")


def _ent(**props) -> Entity:
    e = Entity()
    for k, (v, t) in props.items():
        e.set_property(k, v, ValueType.PRIMITIVE, t)
    return e


CUSTOMERS = [
    ("ALFKI", "Alfreds Futterkiste", "Berlin", "Germany"),
    ("ANATR", "Ana Trujillo Emparedados y helados", "México D.F.", "Mexico"),
    ("BONAP", "Bon app'", "Marseille", "France"),
]
PRODUCTS = [
    (1, "Chai", "18.00", False),
    (2, "Chang", "19.00", False),
    (3, "Aniseed Syrup", "10.00", False),
    (4, "Chef Anton's Cajun Seasoning", "22.00", False),
    (5, "Chef Anton's Gumbo Mix", "21.35", True),
    (6, "Grandma's Boysenberry Spread", "25.00", False),
    (7, "Uncle Bob's Organic Dried Pears", "30.00", False),
]
ORDERS = [(10248, "ALFKI", 4, "32.38"), (10249, "ALFKI", 5, "11.61"), (10250, "BONAP", 8, "65.83")]


def build_app(
    page_size: int | None = 5, etags: bool = True, constraints: bool = True, cascade: bool = False
) -> ODataWSGIApp:
    odata = OData.new_instance()
    handler = odata.create_handler(odata.create_service_metadata(Provider(constraints, cascade)))
    store = InMemoryDataStore()
    custs = [
        _ent(
            CustomerID=(c, "Edm.String"),
            CompanyName=(n, "Edm.String"),
            City=(city, "Edm.String"),
            Country=(k, "Edm.String"),
        )
        for c, n, city, k in CUSTOMERS
    ]
    prods = [
        _ent(
            ProductID=(i, "Edm.Int32"),
            ProductName=(n, "Edm.String"),
            UnitPrice=(Decimal(p), "Edm.Decimal"),
            Discontinued=(d, "Edm.Boolean"),
        )
        for i, n, p, d in PRODUCTS
    ]
    orders = [
        _ent(
            OrderID=(i, "Edm.Int32"),
            CustomerID=(c, "Edm.String"),
            OrderDate=(dt.datetime(1996, 7, d, tzinfo=dt.timezone.utc), "Edm.DateTimeOffset"),
            Freight=(Decimal(f), "Edm.Decimal"),
        )
        for i, c, d, f in ORDERS
    ]
    store.set_entities("Customers", custs)
    store.set_entities("Products", prods)
    store.set_entities("Orders", orders)
    store.declare_key_auto_generating("Orders", "Products")
    for c in custs:
        cid = c.get_value("CustomerID")
        mine = [o for o in orders if o.get_value("CustomerID") == cid]
        store.set_relation("Customers", repr(cid), "Orders", mine)
        for o in mine:
            store.set_relation("Orders", repr(o.get_value("OrderID")), "Customer", [c])
    handler.register(InMemoryProcessor(store, page_size=page_size))
    if etags:
        handler.register(ETags())
    return ODataWSGIApp(handler, mount_path=MOUNT)


@dataclass
class ODataRecord:
    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes
    status: str = ""


class _ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    request_queue_size = 128  # the default 5 drops connections opened together on a busy machine


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, fmt, *args):
        pass


class ODataUpstream:
    """Runs the Northwind app on 127.0.0.1 in a thread; records requests; canonical origin fixed."""

    def __init__(
        self,
        port: int = 0,
        page_size: int | None = 5,
        etags: bool = True,
        constraints: bool = True,
        host: str = "127.0.0.1",
        origin: str | None = None,
        cascade: bool = False,
        app=None,
        mount: str = MOUNT,
    ):
        """host: the address to bind (0.0.0.0 in a container); origin: the canonical origin its absolute
        URLs use (default http://127.0.0.1:PORT; in a compose network, the name the gateway calls it by);
        cascade: Customer.Orders declares OnDelete Cascade; app and mount: another odatapy WSGI app served the
        same way (the Shop upstream)."""
        self.app = app or build_app(page_size=page_size, etags=etags, constraints=constraints, cascade=cascade)
        self.records: list[ODataRecord] = []
        self.lock = threading.Lock()
        self.delay = 0.0  # seconds before answering a GET (a slow upstream)
        self.track_changes = True  # False: `Prefer: odata.track-changes` is ignored (no delta links)
        self.httpd = make_server(host, port, self._wsgi, server_class=_ThreadingWSGIServer, handler_class=_QuietHandler)
        self.port = self.httpd.server_address[1]
        self.origin = origin or f"http://127.0.0.1:{self.port}"
        self.root = f"{self.origin}{mount}/"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def _wsgi(self, environ, start_response):
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length > 0 else b""
        import io

        environ["wsgi.input"] = io.BytesIO(body)
        headers = {k[5:].replace("_", "-").title(): v for k, v in environ.items() if k.startswith("HTTP_")}
        if environ.get("CONTENT_TYPE"):
            headers["Content-Type"] = environ["CONTENT_TYPE"]
        rec = ODataRecord(
            method=environ.get("REQUEST_METHOD", ""),
            path=environ.get("PATH_INFO", ""),
            query=environ.get("QUERY_STRING", ""),
            headers=headers,
            body=body,
        )
        with self.lock:
            self.records.append(rec)
        if self.delay and rec.method == "GET":
            time.sleep(self.delay)
        if not self.track_changes and "HTTP_PREFER" in environ:
            kept = [p for p in environ["HTTP_PREFER"].split(",") if p.strip().lower() != "odata.track-changes"]
            environ["HTTP_PREFER"] = ",".join(kept)
        # A real upstream knows its own name: build absolute URLs from the canonical origin.
        environ["HTTP_HOST"] = self.origin.split("://", 1)[1]

        def _start(status, hdrs, exc_info=None):
            rec.status = status
            return start_response(status, hdrs, exc_info)

        return self.app(environ, _start)

    def requests(self, method: str | None = None) -> list[ODataRecord]:
        with self.lock:
            out = list(self.records)
        return [r for r in out if method is None or r.method == method]

    def start(self) -> "ODataUpstream":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


if __name__ == "__main__":
    import os

    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8801
    page = int(sys.argv[2]) if len(sys.argv) > 2 else None
    up = ODataUpstream(port=port, page_size=page, etags=not os.environ.get("NO_ETAGS")).start()
    print(f"serving on {up.root}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        up.stop()
