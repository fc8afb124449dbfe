"""A richer OData V4 upstream on odatapy's in-memory processor (loopback only), for issue 15's model
features: inheritance (`People` holds `Person`, `Employee` and `Customer`; `Employee` adds a
navigation), an abstract type (`Party`, base of `Supplier`), an open type (`Customer`, dynamic properties on `People(3)`), `Edm.Binary` (`Supplier.Logo`), a singleton (`Company`), containment
(`Orders(1)/Lines`, read by odatapy, created by `POST Orders(N)/Lines` in a small WSGI layer of ours,
as odatapy cannot), a set no defining request names (`Suppliers`), enumerations (flags `Color`, `Status`), complex and collection properties,
`Edm.Duration`/`Date`/`TimeOfDay`/`DateTimeOffset`/`Decimal`/`Int64`/`Guid`, ETags (`W/"1"` on every
entity of `People`, `Products` and `Orders` from the start, so that collection reads carry them too).

Mounted at ``/shop.svc/``; absolute URLs from its own origin; every request recorded (as the Northwind
upstream). Run by hand: ``python odata_shop.py PORT [PAGE_SIZE]``.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import sys
import threading
import uuid
from decimal import Decimal

from odatapy.data import ComplexValue, Entity, Property, ValueType
from odatapy.edm.csdl import (
    CsdlAbstractEdmProvider,
    CsdlComplexType,
    CsdlEntityContainer,
    CsdlEntitySet,
    CsdlEntityType,
    CsdlEnumMember,
    CsdlEnumType,
    CsdlNavigationProperty,
    CsdlNavigationPropertyBinding,
    CsdlProperty,
    CsdlPropertyRef,
    CsdlReferentialConstraint,
    CsdlSchema,
    CsdlSingleton,
)
from odatapy.server import OData
from odatapy.server.adapters import ODataWSGIApp
from odatapy.server.inmemory import InMemoryDataStore, InMemoryProcessor
from odatapy.server.processor import CustomETagSupport

try:
    from upstreams.odata_northwind import ODataUpstream
except ImportError:  # run by hand from upstreams/
    from odata_northwind import ODataUpstream

NS = "Shop.Model"
MOUNT = "/shop.svc"


def P(name, type_, **kw):
    return CsdlProperty(name=name, type=type_, **kw)


class Provider(CsdlAbstractEdmProvider):
    def get_schemas(self):
        color = CsdlEnumType(
            name="Color",
            is_flags=True,
            members=[CsdlEnumMember("Red", 1), CsdlEnumMember("Green", 2), CsdlEnumMember("Blue", 4)],
        )
        status = CsdlEnumType(
            name="Status",
            members=[CsdlEnumMember("Open", 0), CsdlEnumMember("Shipped", 1), CsdlEnumMember("Closed", 2)],
        )
        address = CsdlComplexType(name="Address", properties=[P("Street", "Edm.String"), P("City", "Edm.String")])
        person = CsdlEntityType(
            name="Person",
            key=[CsdlPropertyRef(name="ID")],
            properties=[
                P("ID", "Edm.Int32", nullable=False),
                P("Name", "Edm.String"),
                P("Address", f"{NS}.Address"),
                P("Emails", "Collection(Edm.String)"),
            ],
        )
        employee = CsdlEntityType(
            name="Employee",
            base_type=f"{NS}.Person",
            properties=[P("Salary", "Edm.Decimal", precision=12, scale=2), P("HiredOn", "Edm.Date")],
            navigation_properties=[CsdlNavigationProperty(name="Manager", type=f"{NS}.Employee")],
        )
        customer = CsdlEntityType(
            name="Customer",
            base_type=f"{NS}.Person",
            open_type=True,
            properties=[P("Tier", "Edm.Int16")],
        )
        product = CsdlEntityType(
            name="Product",
            key=[CsdlPropertyRef(name="ID")],
            properties=[
                P("ID", "Edm.Int32", nullable=False),
                P("Name", "Edm.String", nullable=False),
                P("Description", "Edm.String"),
                P("Price", "Edm.Decimal", precision=12, scale=2),
                P("ShelfLife", "Edm.Duration"),
                P("ReleaseDate", "Edm.Date"),
                P("AvailableFrom", "Edm.TimeOfDay"),
                P("Created", "Edm.DateTimeOffset"),
                P("Rating", "Edm.Double"),
                P("Stock", "Edm.Int64"),
                P("Code", "Edm.Guid"),
                P("Tags", "Collection(Edm.String)"),
                P("Colors", f"{NS}.Color"),
                P("Status", f"{NS}.Status"),
                P("Discontinued", "Edm.Boolean"),
            ],
        )
        order = CsdlEntityType(
            name="Order",
            key=[CsdlPropertyRef(name="ID")],
            properties=[
                P("ID", "Edm.Int32", nullable=False),
                P("Date", "Edm.DateTimeOffset"),
                P("Status", f"{NS}.Status"),
                P("CustomerID", "Edm.Int32"),
            ],
            navigation_properties=[
                CsdlNavigationProperty(name="Lines", type=f"{NS}.OrderLine", collection=True, contains_target=True),
                CsdlNavigationProperty(
                    name="Customer",
                    type=f"{NS}.Customer",
                    referential_constraints=[CsdlReferentialConstraint(property="CustomerID", referenced_property="ID")],
                ),
            ],
        )
        line = CsdlEntityType(
            name="OrderLine",
            key=[CsdlPropertyRef(name="LineNo")],
            properties=[
                P("LineNo", "Edm.Int32", nullable=False),
                P("ProductID", "Edm.Int32"),
                P("Quantity", "Edm.Int32"),
                P("Amount", "Edm.Decimal", precision=12, scale=2),
            ],
        )
        company = CsdlEntityType(
            name="Company",
            key=[CsdlPropertyRef(name="ID")],
            properties=[P("ID", "Edm.Int32", nullable=False), P("Name", "Edm.String"), P("Headquarters", f"{NS}.Address")],
        )
        party = CsdlEntityType(
            name="Party",
            abstract=True,
            key=[CsdlPropertyRef(name="ID")],
            properties=[P("ID", "Edm.Int32", nullable=False), P("Name", "Edm.String")],
        )
        supplier = CsdlEntityType(
            name="Supplier",
            base_type=f"{NS}.Party",
            properties=[P("City", "Edm.String"), P("Logo", "Edm.Binary")],
        )
        container = CsdlEntityContainer(
            name="Container",
            entity_sets=[
                CsdlEntitySet(
                    name="People",
                    type=f"{NS}.Person",
                    navigation_property_bindings=[
                        CsdlNavigationPropertyBinding(path=f"{NS}.Employee/Manager", target="People")
                    ],
                ),
                CsdlEntitySet(name="Products", type=f"{NS}.Product"),
                CsdlEntitySet(name="Suppliers", type=f"{NS}.Supplier"),
                CsdlEntitySet(
                    name="Orders",
                    type=f"{NS}.Order",
                    navigation_property_bindings=[CsdlNavigationPropertyBinding(path="Customer", target="People")],
                ),
            ],
            singletons=[CsdlSingleton(name="Company", type=f"{NS}.Company")],
        )
        return [
            CsdlSchema(
                namespace=NS,
                enum_types=[color, status],
                complex_types=[address],
                entity_types=[person, employee, customer, product, order, line, company, party, supplier],
                entity_container=container,
            )
        ]


class ETags(CustomETagSupport):
    def has_etag(self, es):
        return getattr(es, "name", None) in ("Products", "People", "Orders")


def _prim(e: Entity, name: str, value, type_: str) -> None:
    e.set_property(name, value, ValueType.PRIMITIVE, type_)


def _address(street: str, city: str) -> ComplexValue:
    return ComplexValue(
        type_name=f"{NS}.Address",
        properties=[
            Property(name="Street", value=street, type="Edm.String"),
            Property(name="City", value=city, type="Edm.String"),
        ],
    )


PRODUCT_NAMES = ["Widget", "Gadget", "Gizmo", "Doohickey", "Sprocket", "Widget Pro", "Thingamajig", "Whatsit"]
COLORS = ["Red", "Green", "Blue", "Red, Blue", "Green, Blue", "Red, Green, Blue"]
STATUSES = ["Open", "Shipped", "Closed"]


def products(n: int = 30) -> list[Entity]:
    out = []
    for i in range(1, n + 1):
        e = Entity(type=f"{NS}.Product")
        _prim(e, "ID", i, "Edm.Int32")
        _prim(e, "Name", f"{PRODUCT_NAMES[i % len(PRODUCT_NAMES)]} {i}", "Edm.String")
        _prim(e, "Description", None if i % 7 == 0 else f"A fine {'blue ' if i % 3 == 0 else ''}thing no. {i}", "Edm.String")
        # Prices whose text order differs from their numeric order (9.5 > 10.25 as text).
        _prim(e, "Price", Decimal(f"{(i * 37) % 200}.{(i * 13) % 100:02d}"), "Edm.Decimal")
        # Durations whose text order differs from their length (P9D > P10D as text).
        _prim(e, "ShelfLife", dt.timedelta(days=i % 25, hours=i % 5), "Edm.Duration")
        _prim(e, "ReleaseDate", dt.date(2020 + i % 5, 1 + i % 12, 1 + i % 28), "Edm.Date")
        _prim(e, "AvailableFrom", dt.time(7 + i % 12, (i * 7) % 60, 0), "Edm.TimeOfDay")
        _prim(
            e,
            "Created",
            dt.datetime(2024, 1 + i % 12, 1 + i % 28, i % 24, 0, tzinfo=dt.timezone(dt.timedelta(hours=(i % 5) - 2))),
            "Edm.DateTimeOffset",
        )
        _prim(e, "Rating", round(1 + (i * 0.37) % 4, 2), "Edm.Double")
        _prim(e, "Stock", 9007199254740990 + i if i % 10 == 0 else i * 100, "Edm.Int64")
        _prim(e, "Code", uuid.UUID(int=i * 7919), "Edm.Guid")
        e.set_property("Tags", [t for t in ("new", "sale", "eco", "x") if (i + len(t)) % 3 == 0], ValueType.COLLECTION_PRIMITIVE, "Collection(Edm.String)")
        e.set_property("Colors", COLORS[i % len(COLORS)], ValueType.ENUM, f"{NS}.Color")
        e.set_property("Status", STATUSES[i % 3], ValueType.ENUM, f"{NS}.Status")
        _prim(e, "Discontinued", i % 4 == 0, "Edm.Boolean")
        out.append(e)
    return out


def people() -> list[Entity]:
    out = []
    rows = [
        (1, "Ann", "Person", None),
        (2, "Bob", "Employee", ("1200.50", dt.date(2019, 3, 1))),
        (3, "Cid", "Customer", 2),
        (4, "Dee", "Employee", ("980.00", dt.date(2021, 7, 15))),
        (5, "Eve", "Customer", 1),
        (6, "Fay", "Person", None),
    ]
    for pid, name, kind, extra in rows:
        e = Entity(type=f"{NS}.{kind}")
        _prim(e, "ID", pid, "Edm.Int32")
        _prim(e, "Name", name, "Edm.String")
        e.set_property("Address", _address(f"{pid} Main St", ["Bern", "Basel", "Zug"][pid % 3]), ValueType.COMPLEX, f"{NS}.Address")
        e.set_property("Emails", [f"{name.lower()}@example.org"] * (pid % 3), ValueType.COLLECTION_PRIMITIVE, "Collection(Edm.String)")
        if kind == "Employee":
            _prim(e, "Salary", Decimal(extra[0]), "Edm.Decimal")
            _prim(e, "HiredOn", extra[1], "Edm.Date")
        if kind == "Customer":
            _prim(e, "Tier", extra, "Edm.Int16")
            if pid == 3:  # dynamic properties of the open type
                _prim(e, "Nickname", "Ciddy", "Edm.String")
                _prim(e, "Visits", 7, "Edm.Int32")
        out.append(e)
    return out


def build_app(page_size: int | None = None) -> tuple[ODataWSGIApp, InMemoryDataStore]:
    odata = OData.new_instance()
    handler = odata.create_handler(odata.create_service_metadata(Provider()))
    store = InMemoryDataStore()
    ppl = people()
    store.set_entities("People", ppl)
    store.set_entities("Products", products())
    orders, all_lines = [], {}
    for oid in range(1, 7):
        o = Entity(type=f"{NS}.Order")
        _prim(o, "ID", oid, "Edm.Int32")
        _prim(o, "Date", dt.datetime(2025, 1, oid, 9, 30, tzinfo=dt.timezone.utc), "Edm.DateTimeOffset")
        o.set_property("Status", STATUSES[oid % 3], ValueType.ENUM, f"{NS}.Status")
        _prim(o, "CustomerID", 3 if oid % 2 else 5, "Edm.Int32")
        lines = []
        for n in range(1, 1 + oid % 4):
            ln = Entity(type=f"{NS}.OrderLine")
            _prim(ln, "LineNo", n, "Edm.Int32")
            _prim(ln, "ProductID", (oid * n) % 30 + 1, "Edm.Int32")
            _prim(ln, "Quantity", n * 2 + oid, "Edm.Int32")
            _prim(ln, "Amount", Decimal(f"{oid * n * 3}.{n * 5:02d}"), "Edm.Decimal")
            lines.append(ln)
        orders.append(o)
        all_lines[oid] = lines
    store.set_entities("Orders", orders)
    for oid, lines in all_lines.items():
        store.set_relation("Orders", repr(oid), "Lines", lines)
    for o in orders:
        cid = o.get_value("CustomerID")
        store.set_relation("Orders", repr(o.get_value("ID")), "Customer", [p for p in ppl if p.get_value("ID") == cid])
    boss = [p for p in ppl if p.get_value("ID") == 2]
    store.set_relation("People", "4", "Manager", boss)
    company = Entity(type=f"{NS}.Company")
    _prim(company, "ID", 1, "Edm.Int32")
    _prim(company, "Name", "Shop AG", "Edm.String")
    company.set_property("Headquarters", _address("1 Bahnhofstrasse", "Zurich"), ValueType.COMPLEX, f"{NS}.Address")
    store.set_entities("Company", [company])
    suppliers = []
    for sid, name, city, logo in ((1, "Acme", "Bern", b"\x89PNG\r\n\x1a\n\x00\xff"), (2, "Bolt", "Basel", None)):
        supplier = Entity(type=f"{NS}.Supplier")
        _prim(supplier, "ID", sid, "Edm.Int32")
        _prim(supplier, "Name", name, "Edm.String")
        _prim(supplier, "City", city, "Edm.String")
        _prim(supplier, "Logo", logo, "Edm.Binary")
        suppliers.append(supplier)
    store.set_entities("Suppliers", suppliers)
    for e in ppl + store.entities("Products") + orders:
        e.etag = 'W/"1"'
    store.declare_key_auto_generating("Products", "Orders", "Suppliers")
    handler.register(InMemoryProcessor(store, page_size=page_size))
    handler.register(ETags())
    return ODataWSGIApp(handler, mount_path=MOUNT), store


_CONTAINED_POST = re.compile(re.escape(MOUNT) + r"/Orders\((\d+)\)/Lines/?$")


def _with_contained_creates(app, store: InMemoryDataStore):
    """`app`, except that `POST Orders(N)/Lines` (JSON) adds an `OrderLine` to order N's contained lines:
    odatapy's processor answers 400 to a POST into a containment navigation (it needs a bound set)."""

    def wsgi(environ, start_response):
        m = _CONTAINED_POST.match(environ.get("PATH_INFO", ""))
        if environ.get("REQUEST_METHOD") != "POST" or not m:
            return app(environ, start_response)
        length = int(environ.get("CONTENT_LENGTH") or 0)
        oid = int(m.group(1))

        def answer(status: str, doc: dict, extra=()):
            body = json.dumps(doc).encode()
            hdrs = [("Content-Type", "application/json;odata.metadata=minimal"), ("OData-Version", "4.0"), *extra]
            start_response(status, hdrs + [("Content-Length", str(len(body)))])
            return [body]

        try:
            doc = json.loads(environ["wsgi.input"].read(length) or b"{}")
            line_no = int(doc["LineNo"])
        except (ValueError, KeyError, TypeError):
            return answer("400 Bad Request", {"error": {"code": "400", "message": "LineNo is required"}})
        if not any(o.get_value("ID") == oid for o in store.entities("Orders")):
            return answer("404 Not Found", {"error": {"code": "404", "message": "Entity not found."}})
        ln = Entity(type=f"{NS}.OrderLine")
        _prim(ln, "LineNo", line_no, "Edm.Int32")
        for name in ("ProductID", "Quantity"):
            _prim(ln, name, doc.get(name), "Edm.Int32")
        amount = doc.get("Amount")
        _prim(ln, "Amount", None if amount is None else Decimal(str(amount)), "Edm.Decimal")
        store.add_relation("Orders", repr(oid), "Lines", ln)
        origin = f"http://{environ['HTTP_HOST']}"
        location = f"{origin}{MOUNT}/Orders({oid})/Lines({line_no})"
        out = {"@odata.context": f"{origin}{MOUNT}/$metadata#Orders({oid})/Lines/$entity"}
        out.update({k: doc.get(k) for k in ("LineNo", "ProductID", "Quantity", "Amount")})
        return answer("201 Created", out, [("Location", location)])

    return wsgi


class ShopUpstream(ODataUpstream):
    """Runs the Shop app on 127.0.0.1 in a thread, recording requests, as the Northwind upstream does."""

    def __init__(self, port: int = 0, page_size: int | None = None, data_of: "ShopUpstream | None" = None):
        """data_of: serve that (stopped) upstream's app and data again (a restart that keeps state)."""
        if data_of is not None:
            app, self.store = data_of.app, data_of.store
        else:
            app, self.store = build_app(page_size=page_size)
            app = _with_contained_creates(app, self.store)
        super().__init__(port=port, app=app, mount=MOUNT)


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8802
    page = int(sys.argv[2]) if len(sys.argv) > 2 else None
    up = ShopUpstream(port=port, page_size=page).start()
    print(f"serving on {up.root}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        up.stop()
