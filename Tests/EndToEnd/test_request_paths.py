"""Issue 19 D3: a request never leaves the mount (or API prefix) it came in on.

libcurl and upstream servers resolve dot segments, so `/odata/S/../../private/data` forwarded as it is
reaches the upstream host as `/private/data`, with the service's custom headers and cookies. The gateway
refuses every dot segment before routing — plain, percent-encoded, or hidden behind an encoded slash or
a backslash — with a 400 in the addressed API's format, and forwards nothing. Raw sockets send the paths,
because HTTP client libraries resolve dot segments themselves before sending.
"""

from __future__ import annotations

import json

import pytest
from conftest import API_KEY, APP_ID, algolia_config
from harness import deep_merge, raw_exchange, status_of

ODATA_PATHS = [
    "/odata/nw/../../private/data",
    "/odata/nw/Customers/../../..",
    "/odata/nw/$batch/../..",
    "/odata/nw/%2e%2e/%2E%2E/private",
    "/odata/nw/.%2e/private",
    "/odata/nw/Customers/..%2F..%2F..%2Fprivate",
    "/odata/nw/Customers/..%5c..%5cprivate",
    "/odata/nw/./Customers",
]
ALGOLIA_PATHS = [
    "/1/indexes/../../x",
    "/1/indexes/i/%2e%2e/%2e%2e/%2e%2e/x",
    "/1/indexes/..%2f..%2fx/query",
]


def split(raw: bytes) -> tuple[int, dict]:
    head, _, body = raw.partition(b"\r\n\r\n")
    if b"chunked" in head.lower():
        size, _, rest = body.partition(b"\r\n")
        body = rest[: int(size, 16)]
    return status_of(raw), json.loads(body)


@pytest.fixture
def gateway(gateway_factory, fake_algolia):
    # The OData mount's upstream is the recording fake too: whatever reaches it is visible.
    odata = {
        "odata": {
            "services": {
                "nw": {
                    "mount": "/odata/nw/",
                    "upstream": fake_algolia.url + "/svc/",
                    "version": "v4",
                    "customHeaders": {"X-Service-Secret": "s3cret"},
                    "definingRequests": [],
                }
            }
        }
    }
    return gateway_factory(deep_merge(algolia_config(fake_algolia.url), odata))


@pytest.mark.parametrize("path", ODATA_PATHS)
def test_dot_segments_under_an_odata_mount_are_refused_and_never_forwarded(gateway, fake_algolia, path):
    raw = raw_exchange(gateway.port, f"GET {path} HTTP/1.1\r\nHost: x\r\nAccept: application/json\r\n\r\n".encode())
    st, doc = split(raw)
    assert st == 400, raw[:300]
    assert doc["error"]["code"] == "BadRequest" and "dot segment" in doc["error"]["message"], doc
    escaped = [r.path for r in forwarded(fake_algolia) if "private" in r.path or "svc" not in r.path]
    assert not escaped, escaped


def forwarded(fake):
    """What reached the shared fake upstream on a client's behalf: all but the gateway's own background
    requests — the reachability probe of the Algolia hosts (`GET /1/isalive`) and the OData service's
    replication run (`GET /svc/`, `GET /svc/$metadata`), which may land at any moment of a test."""
    own = {"/1/isalive", "/svc/", "/svc/$metadata"}
    return [r for r in fake.requests() if not (r.method == "GET" and r.path in own)]


@pytest.mark.parametrize("path", ALGOLIA_PATHS)
def test_dot_segments_under_1_are_refused_in_algolias_format(gateway, fake_algolia, path):
    before = len(forwarded(fake_algolia))
    raw = raw_exchange(
        gateway.port,
        f"POST {path} HTTP/1.1\r\nHost: x\r\nX-Algolia-Application-Id: {APP_ID}\r\nX-Algolia-API-Key: {API_KEY}\r\n"
        f"Content-Length: 2\r\n\r\n{{}}".encode(),
    )
    st, doc = split(raw)
    assert st == 400 and doc["status"] == 400 and "dot segment" in doc["message"], raw[:300]
    assert len(forwarded(fake_algolia)) == before


def test_dots_inside_a_segment_are_not_dot_segments(gateway, fake_algolia):
    """`Products('..')`, `a..b` and a query with `../` are ordinary text, routed as usual."""
    raw = raw_exchange(
        gateway.port,
        f"GET /1/indexes/a..b/x?q=../.. HTTP/1.1\r\nHost: x\r\nX-Algolia-Application-Id: {APP_ID}\r\n"
        f"X-Algolia-API-Key: {API_KEY}\r\n\r\n".encode(),
    )
    assert status_of(raw) != 400, raw[:300]
    assert [r for r in fake_algolia.requests() if r.path == "/1/indexes/a..b/x"]
