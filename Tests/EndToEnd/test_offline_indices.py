"""Offline indices served by the gateway's local engine (issue 3, Done means): the unmodified official
`algoliasearch` 4.x client searches, browses, gets objects and settings from an offline index built from
the 63,666 Debian package records and from the TED talks data with its real settings file. No upstream
exists in these tests: every answer is local (`X-Mirrorgate-Origin: local`).
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path

import pytest
from algoliasearch.http.exceptions import RequestException
from algoliasearch.http.hosts import Host, HostsCollection
from algoliasearch.search.client import SearchClientSync
from algoliasearch.search.config import SearchConfig
from harness import request

# The project's shared corpora live beside the checkout (`../shared/data`), never in the repository (its
# README): MIRRORGATE_SHARED_DATA points elsewhere. Without them these tests fail, they do not skip.
DATA = Path(os.environ.get("MIRRORGATE_SHARED_DATA") or Path(__file__).resolve().parents[3] / "shared" / "data")
APP = "LOCALAPP"
KEY = "local-search-key"


def client_for(gw, key: str = KEY) -> SearchClientSync:
    config = SearchConfig(APP, key)
    config.hosts = HostsCollection([Host(url="127.0.0.1", scheme="http", port=gw.port)])
    return SearchClientSync.create_with_config(config=config)


@pytest.fixture(scope="module")
def corpora(tmp_path_factory) -> Path:
    needed = [DATA / "debian-packages.json.gz", DATA / "algolia" / "tedtalks" / "talks.json"]
    missing = [str(p) for p in needed if not p.is_file()]
    if missing:
        pytest.fail(
            f"the shared corpora are missing: {', '.join(missing)}. These tests need the project's shared data "
            "(../shared/data beside the checkout, or MIRRORGATE_SHARED_DATA=DIR)",
            pytrace=False,
        )
    d = tmp_path_factory.mktemp("corpora")
    with gzip.open(DATA / "debian-packages.json.gz", "rb") as src, open(d / "debian.json", "wb") as dst:
        shutil.copyfileobj(src, dst)
    (d / "debian.settings.json").write_text(
        json.dumps(
            {
                "searchableAttributes": ["name", "description", "maintainer", "_tags"],
                "attributesForFaceting": ["section", "priority", "searchable(maintainer)"],
                "customRanking": ["asc(installedSize)"],
            }
        )
    )
    shutil.copy(DATA / "algolia" / "tedtalks" / "talks.json", d / "talks.json")
    shutil.copy(DATA / "algolia" / "tedtalks" / "talks_settings.json", d / "talks_settings.json")
    return d


@pytest.fixture
def offline_gateway(gateway_factory, corpora):
    return gateway_factory(
        {
            "algolia": {
                "appId": APP,
                "apiKey": KEY,
                "hosts": ["http://127.0.0.1:9"],
                "offlineIndices": {
                    "debian": {
                        "bootstrap": {
                            "settings": str(corpora / "debian.settings.json"),
                            "objects": [str(corpora / "debian.json")],
                        }
                    },
                    "talks": {
                        "bootstrap": {
                            "settings": str(corpora / "talks_settings.json"),
                            "objects": [str(corpora / "talks.json")],
                        },
                        "apiKeys": [KEY],
                    },
                },
            },
            "server": {"requestTimeout": "20s"},
        }
    )


def test_search_with_typos_facets_and_filters(offline_gateway):
    c = client_for(offline_gateway)
    res = c.search_single_index(
        "debian", {"query": "pyhton", "hitsPerPage": 5, "facets": ["section", "priority"], "filters": "section:python"}
    ).to_dict()
    assert res["nbHits"] > 0, "a one-typo query finds the python packages"
    assert all(h["section"] == "python" for h in res["hits"])
    assert set(res["facets"]["section"]) == {"python"}
    assert "_highlightResult" in res["hits"][0]
    # Numeric filter on installedSize, and the counts agree with the data.
    res2 = c.search_single_index("debian", {"query": "", "filters": "installedSize > 100000", "hitsPerPage": 0}).to_dict()
    assert 0 < res2["nbHits"] < 63666


def test_counts_match_the_corpus(offline_gateway, corpora):
    records = json.loads((corpora / "debian.json").read_text())
    expected_python = sum(1 for r in records if r.get("section") == "python")
    big = sum(1 for r in records if (r.get("installedSize") or 0) > 100000)
    c = client_for(offline_gateway)
    res = c.search_single_index("debian", {"query": "", "facets": ["section"], "hitsPerPage": 0}).to_dict()
    assert res["nbHits"] == len(records)
    assert res["facets"]["section"]["python"] == expected_python
    res2 = c.search_single_index("debian", {"filters": "installedSize > 100000", "hitsPerPage": 0}).to_dict()
    assert res2["nbHits"] == big


def test_browse_objects_returns_every_record(offline_gateway, corpora):
    records = json.loads((corpora / "talks.json").read_text())
    c = client_for(offline_gateway)
    seen: list[str] = []
    c.browse_objects("talks", aggregator=lambda page: seen.extend(h.object_id for h in page.hits))
    assert len(seen) == len(records)
    assert len(set(seen)) == len(records)


def test_get_object_get_objects_and_settings(offline_gateway, corpora):
    c = client_for(offline_gateway)
    obj = c.get_object("debian", "0ad")
    assert obj["name"] == "0ad"
    many = c.get_objects({"requests": [{"indexName": "debian", "objectID": "0ad"}, {"indexName": "debian", "objectID": "no-such-package"}]}).to_dict()
    assert many["results"][0]["objectID"] == "0ad"
    assert many["results"][1] is None
    settings = c.get_settings("talks").to_dict()
    given = json.loads((corpora / "talks_settings.json").read_text())
    assert settings.get("attributesForFaceting") == given["attributesForFaceting"]
    status, headers, body = request(
        "GET", offline_gateway.url("/1/indexes/talks/settings"),
        headers={"X-Algolia-Application-Id": APP, "X-Algolia-API-Key": KEY},
    )
    assert status == 200
    assert headers.get("x-mirrorgate-origin") == "local"
    # Settings are returned as given: same keys, same order.
    assert list(json.loads(body).keys())[: len(given)] == list(given.keys())


def test_ted_talks_with_real_settings(offline_gateway):
    c = client_for(offline_gateway)
    res = c.search_single_index("talks", {"query": "education", "hitsPerPage": 5, "facets": ["tags"]}).to_dict()
    assert res["nbHits"] > 0
    assert res["facets"]["tags"]
    fv = c.search_for_facet_values("talks", "speakers", {"facetQuery": "ken"}).to_dict()
    assert any("Ken" in h["value"] for h in fv["facetHits"])


def test_unknown_key_is_refused_and_bad_filter_is_400(offline_gateway):
    bad = client_for(offline_gateway, key="not-a-key")
    with pytest.raises(RequestException) as e:
        bad.search_single_index("talks", {"query": "x"})
    assert e.value.status_code == 403
    c = client_for(offline_gateway)
    with pytest.raises(RequestException) as e2:
        c.search_single_index("debian", {"query": "x", "filters": "section:(python"})
    assert e2.value.status_code == 400


def test_get_form_and_params_string(offline_gateway):
    hdrs = {"X-Algolia-Application-Id": APP, "X-Algolia-API-Key": KEY}
    status, headers, body = request("GET", offline_gateway.url("/1/indexes/debian?query=nginx&hitsPerPage=3"), headers=hdrs)
    assert status == 200
    assert json.loads(body)["hits"][0]["objectID"].startswith("nginx")
    status, _, body = request(
        "POST", offline_gateway.url("/1/indexes/debian/query"),
        body=json.dumps({"params": "query=nginx&hitsPerPage=2"}).encode(), headers=hdrs,
    )
    assert status == 200
    assert len(json.loads(body)["hits"]) == 2
