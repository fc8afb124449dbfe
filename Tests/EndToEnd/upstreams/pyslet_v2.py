"""A small OData V2 upstream that answers in Atom/XML, built on pyslet's in-memory server (loopback only).

pyslet (https://pypi.org/project/pyslet/) implements OData V2 with Atom as its default format and
verbose JSON on request, independently of this repository, so the gateway's offline Atom answers can
be compared with a real V2 server's. Two entity sets: ``Products`` (String, Int32, Decimal, DateTime,
Boolean and a nullable String left null, with navigation ``Category``) and ``Categories`` (navigation
``Products``), mounted at ``/shop.svc/``. Server-driven paging is off (pyslet would otherwise add a
``next`` link to every unbounded feed, even a complete one).

Run by hand: ``python pyslet_v2.py PORT``.
"""

from __future__ import annotations

import sys
import threading
from decimal import Decimal
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import pyslet.iso8601 as iso
import pyslet.odata2.memds as memds
import pyslet.odata2.metadata as edmx
import pyslet.odata2.server as server

METADATA = b"""<?xml version="1.0" encoding="utf-8" standalone="yes"?>
<edmx:Edmx Version="1.0" xmlns:edmx="http://schemas.microsoft.com/ado/2007/06/edmx"
  xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata">
 <edmx:DataServices m:DataServiceVersion="2.0">
  <Schema Namespace="ShopModel" xmlns="http://schemas.microsoft.com/ado/2006/04/edm">
   <EntityType Name="Product">
    <Key><PropertyRef Name="ID"/></Key>
    <Property Name="ID" Type="Edm.Int32" Nullable="false"/>
    <Property Name="Name" Type="Edm.String" Nullable="true" MaxLength="40"/>
    <Property Name="Price" Type="Edm.Decimal" Nullable="true" Precision="10" Scale="2"/>
    <Property Name="Released" Type="Edm.DateTime" Nullable="true"/>
    <Property Name="Active" Type="Edm.Boolean" Nullable="true"/>
    <Property Name="Note" Type="Edm.String" Nullable="true"/>
    <NavigationProperty Name="Category" Relationship="ShopModel.ProductCategory"
      FromRole="Product" ToRole="Category"/>
   </EntityType>
   <EntityType Name="Category">
    <Key><PropertyRef Name="ID"/></Key>
    <Property Name="ID" Type="Edm.Int32" Nullable="false"/>
    <Property Name="Name" Type="Edm.String" Nullable="true"/>
    <NavigationProperty Name="Products" Relationship="ShopModel.ProductCategory"
      FromRole="Category" ToRole="Product"/>
   </EntityType>
   <Association Name="ProductCategory">
    <End Role="Product" Type="ShopModel.Product" Multiplicity="*"/>
    <End Role="Category" Type="ShopModel.Category" Multiplicity="0..1"/>
   </Association>
   <EntityContainer Name="ShopEntities" m:IsDefaultEntityContainer="true">
    <EntitySet Name="Products" EntityType="ShopModel.Product"/>
    <EntitySet Name="Categories" EntityType="ShopModel.Category"/>
    <AssociationSet Name="ProductCategories" Association="ShopModel.ProductCategory">
     <End Role="Product" EntitySet="Products"/>
     <End Role="Category" EntitySet="Categories"/>
    </AssociationSet>
   </EntityContainer>
  </Schema>
 </edmx:DataServices>
</edmx:Edmx>"""

ROOT = "/shop.svc/"
CATEGORIES = [(1, "Tools"), (2, "Toys & <Games>")]
# ID, Name, Price, Released, Active, category ID
PRODUCTS = [
    (1, "Hammer", "12.50", "2024-01-15T10:30:00", True, 1),
    (2, "Saw \u00e9", "7.05", "2023-12-31T23:59:59", False, 1),
    (3, "Kite & <string>", "100.00", "2025-06-01T00:00:00", True, 2),
    (4, "Yo-yo", "0.99", "2020-02-29T12:00:00", False, 2),
    (5, "Drill", "149.90", "2022-07-04T08:15:00", True, 1),
]


def build_app(port: int) -> server.Server:
    doc = edmx.Document()
    doc.read(METADATA)
    container = doc.root.DataServices["ShopModel.ShopEntities"]
    memds.InMemoryEntityContainer(container)
    categories = {}
    with container["Categories"].open() as coll:
        for key, name in CATEGORIES:
            e = coll.new_entity()
            e["ID"].set_from_value(key)
            e["Name"].set_from_value(name)
            coll.insert_entity(e)
            categories[key] = e
    with container["Products"].open() as coll:
        for key, name, price, released, active, category in PRODUCTS:
            e = coll.new_entity()
            e["ID"].set_from_value(key)
            e["Name"].set_from_value(name)
            e["Price"].set_from_value(Decimal(price))
            e["Released"].set_from_value(iso.TimePoint.from_str(released))
            e["Active"].set_from_value(active)
            e["Category"].bind_entity(categories[category])
            coll.insert_entity(e)
    app = server.Server(serviceRoot=f"http://127.0.0.1:{port}{ROOT}")
    app.set_model(doc)
    app.topmax = 0  # no server-driven paging
    return app


class _Quiet(WSGIRequestHandler):
    def log_message(self, *args) -> None:
        pass


class _Threading(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class PysletUpstream:
    """Runs the pyslet V2 service on 127.0.0.1 in a background thread."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.origin = f"http://127.0.0.1:{port}"
        self.root = self.origin + ROOT
        self._httpd = make_server("127.0.0.1", port, build_app(port), server_class=_Threading, handler_class=_Quiet)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def start(self) -> PysletUpstream:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=10)


if __name__ == "__main__":
    PysletUpstream(int(sys.argv[1])).start()._thread.join()
