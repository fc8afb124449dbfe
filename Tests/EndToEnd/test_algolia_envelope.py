"""The envelope of local answers against real Algolia answers (issue 25): the requests of Algolia's own
API-client end-to-end suite (algolia/api-clients-automation, tests/CTS/requests/search: `search.json`,
`browse.json`), sent by the unmodified official `algoliasearch` 4.x client to offline indices holding the
same records, must give answers that contain every field of the answers that suite expects from the real
service (its comparison: the expected answer is a part of the answer). Among them: `"renderingContent": {}`
on every search result when there is nothing to render, single and multi-query, and `params` echoed as
`application/x-www-form-urlencoded` with spaces as `+`.
"""

from __future__ import annotations

import json

from algoliasearch.http.hosts import Host, HostsCollection
from algoliasearch.search.client import SearchClientSync
from algoliasearch.search.config import SearchConfig

APP = "ENVAPP"
KEY = "envelope-key"

EDITORS = [{"objectID": f"e{i}", "editor": e} for i, e in enumerate(["goland", "neovim", "visual studio", "vscode"])]
VIM = [{"objectID": "v1", "editor": {"name": "vim", "type": "beforeneovim"}, "names": ["vim", ":q"]}]


def part_of(expected, got, path: str = "$") -> None:
    """Every field of `expected` is in `got` with the same value (objects: the keys of `expected`; lists:
    the same length, item by item)."""
    if isinstance(expected, dict):
        assert isinstance(got, dict), f"{path}: {got!r} is not an object"
        for key, value in expected.items():
            assert key in got, f"{path}.{key} missing in {sorted(got)}"
            part_of(value, got[key], f"{path}.{key}")
    elif isinstance(expected, list):
        assert isinstance(got, list) and len(got) == len(expected), f"{path}: {got!r} vs {expected!r}"
        for i, (e, g) in enumerate(zip(expected, got)):
            part_of(e, g, f"{path}[{i}]")
    else:
        assert got == expected, f"{path}: {got!r} != {expected!r}"


def gateway(gateway_factory, tmp_path):
    def index(name: str, objects: list[dict], settings: dict) -> dict:
        (tmp_path / f"{name}.json").write_text(json.dumps(objects))
        (tmp_path / f"{name}.settings.json").write_text(json.dumps(settings))
        return {"bootstrap": {"settings": str(tmp_path / f"{name}.settings.json"), "objects": [str(tmp_path / f"{name}.json")]}}

    return gateway_factory(
        {
            "algolia": {
                "appId": APP,
                "apiKey": KEY,
                "hosts": ["http://127.0.0.1:9"],
                "offlineIndices": {
                    "cts_e2e_search_facet": index(
                        "facet", EDITORS, {"attributesForFaceting": ["searchable(editor)"]}
                    ),
                    "cts_e2e_search_empty_index": index("empty", [], {}),
                    "cts_e2e_highlight_snippet_results": index("vim", VIM, {}),
                },
            }
        }
    )


def client(gw) -> SearchClientSync:
    config = SearchConfig(APP, KEY)
    config.hosts = HostsCollection([Host(url="127.0.0.1", scheme="http", port=gw.port)])
    return SearchClientSync.create_with_config(config=config)


def raw(response) -> dict:
    assert response.status_code == 200, response.raw_data
    return json.loads(response.raw_data)


def test_multi_query_answers_hold_what_algolia_answers(gateway_factory, tmp_path):
    c = client(gateway(gateway_factory, tmp_path))
    # search.json: "search for a single hits request with minimal parameters"
    got = raw(c.search_with_http_info({"requests": [{"indexName": "cts_e2e_search_empty_index"}]}))
    part_of(
        {
            "results": [
                {
                    "hits": [], "page": 0, "nbHits": 0, "nbPages": 0, "hitsPerPage": 20, "exhaustiveNbHits": True,
                    "exhaustiveTypo": True, "exhaustive": {"nbHits": True, "typo": True}, "query": "", "params": "",
                    "index": "cts_e2e_search_empty_index", "renderingContent": {},
                }
            ]
        },
        got,
    )
    assert got["results"][0]["exhaustive"] == {"nbHits": True, "typo": True}  # no facetsCount without facets
    # "search with highlight and snippet results"
    got = raw(
        c.search_with_http_info(
            {
                "requests": [
                    {
                        "indexName": "cts_e2e_highlight_snippet_results", "query": "vim",
                        "attributesToSnippet": ["*:20"], "attributesToHighlight": ["*"], "attributesToRetrieve": ["*"],
                    }
                ]
            }
        )
    )
    part_of(
        {
            "results": [
                {
                    "hits": [
                        {
                            "editor": {"name": "vim", "type": "beforeneovim"},
                            "names": ["vim", ":q"],
                            "_snippetResult": {
                                "editor": {
                                    "name": {"value": "<em>vim</em>", "matchLevel": "full"},
                                    "type": {"value": "beforeneovim", "matchLevel": "none"},
                                },
                                "names": [
                                    {"value": "<em>vim</em>", "matchLevel": "full"},
                                    {"value": ":q", "matchLevel": "none"},
                                ],
                            },
                            "_highlightResult": {
                                "editor": {
                                    "name": {"value": "<em>vim</em>", "matchLevel": "full", "fullyHighlighted": True,
                                             "matchedWords": ["vim"]},
                                    "type": {"value": "beforeneovim", "matchLevel": "none", "matchedWords": []},
                                },
                                "names": [
                                    {"value": "<em>vim</em>", "matchLevel": "full", "fullyHighlighted": True,
                                     "matchedWords": ["vim"]},
                                    {"value": ":q", "matchLevel": "none", "matchedWords": []},
                                ],
                            },
                        }
                    ],
                    "nbHits": 1, "page": 0, "nbPages": 1, "hitsPerPage": 20, "exhaustiveNbHits": True,
                    "exhaustiveTypo": True, "exhaustive": {"nbHits": True, "typo": True}, "query": "vim",
                    "index": "cts_e2e_highlight_snippet_results", "renderingContent": {},
                }
            ]
        },
        got,
    )
    # "search for a single facet request with minimal parameters"
    got = raw(
        c.search_with_http_info(
            {"requests": [{"indexName": "cts_e2e_search_facet", "type": "facet", "facet": "editor"}],
             "strategy": "stopIfEnoughMatches"}
        )
    )
    part_of(
        {
            "results": [
                {
                    "exhaustiveFacetsCount": True,
                    "facetHits": [
                        {"count": 1, "highlighted": "goland", "value": "goland"},
                        {"count": 1, "highlighted": "neovim", "value": "neovim"},
                        {"count": 1, "highlighted": "visual studio", "value": "visual studio"},
                        {"count": 1, "highlighted": "vscode", "value": "vscode"},
                    ],
                }
            ]
        },
        got,
    )
    # "search filters end to end": the `params` echo, form-encoded with `+` for spaces.
    got = raw(
        c.search_with_http_info(
            {
                "requests": [
                    {"indexName": "cts_e2e_search_facet", "filters": "editor:'visual studio' OR editor:neovim"},
                    {"indexName": "cts_e2e_search_facet", "facetFilters": ["editor:'visual studio'", "editor:neovim"]},
                    {"indexName": "cts_e2e_search_facet", "facetFilters": ["editor:'visual studio'", ["editor:neovim"]]},
                    {"indexName": "cts_e2e_search_facet",
                     "facetFilters": ["editor:'visual studio'", ["editor:neovim", ["editor:goland"]]]},
                ]
            }
        )
    )

    def empty(params: str) -> dict:
        return {"hitsPerPage": 20, "index": "cts_e2e_search_facet", "nbHits": 0, "nbPages": 0, "page": 0, "hits": [],
                "query": "", "params": params}

    part_of(
        {
            "results": [
                {
                    "hitsPerPage": 20, "index": "cts_e2e_search_facet", "nbHits": 2, "nbPages": 1, "page": 0,
                    "hits": [
                        {"editor": "visual studio",
                         "_highlightResult": {"editor": {"value": "visual studio", "matchLevel": "none"}}},
                        {"editor": "neovim", "_highlightResult": {"editor": {"value": "neovim", "matchLevel": "none"}}},
                    ],
                    "query": "",
                    "params": "filters=editor%3A%27visual+studio%27+OR+editor%3Aneovim",
                },
                empty("facetFilters=%5B%22editor%3A%27visual+studio%27%22%2C%22editor%3Aneovim%22%5D"),
                empty("facetFilters=%5B%22editor%3A%27visual+studio%27%22%2C%5B%22editor%3Aneovim%22%5D%5D"),
                empty(
                    "facetFilters=%5B%22editor%3A%27visual+studio%27%22%2C%5B%22editor%3Aneovim%22%2C%5B%22editor"
                    "%3Agoland%22%5D%5D%5D"
                ),
            ]
        },
        got,
    )
    assert all(r["renderingContent"] == {} for r in got["results"])


def test_single_index_search_and_browse_hold_what_algolia_answers(gateway_factory, tmp_path):
    c = client(gateway(gateway_factory, tmp_path))
    got = raw(
        c.search_single_index_with_http_info(
            "cts_e2e_search_facet", {"filters": "editor:'visual studio' OR editor:neovim"}
        )
    )
    assert got["renderingContent"] == {}
    assert got["params"] == "filters=editor%3A%27visual+studio%27+OR+editor%3Aneovim"
    assert got["nbHits"] == 2 and got["exhaustive"] == {"nbHits": True, "typo": True}
    # A `params` string is echoed as it was sent.
    sent = "query=&hitsPerPage=2&filters=editor:neovim OR editor:vscode"
    got = raw(c.search_single_index_with_http_info("cts_e2e_search_facet", {"params": sent}))
    assert got["params"] == sent and got["nbHits"] == 2 and got["renderingContent"] == {}
    # With facets, the facet counts are said exhaustive too.
    got = raw(c.search_single_index_with_http_info("cts_e2e_search_facet", {"facets": ["editor"]}))
    assert got["exhaustive"] == {"nbHits": True, "typo": True, "facetsCount": True}
    # browse.json: "browse with minimal parameters"
    got = raw(c.browse_with_http_info("cts_e2e_search_facet"))
    part_of({"page": 0, "nbHits": 4, "nbPages": 1, "hitsPerPage": 1000, "query": "", "params": ""}, got)
