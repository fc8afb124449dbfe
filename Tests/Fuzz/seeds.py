#!/usr/bin/env python3
"""Seed inputs for the fuzz targets, taken from the test fixtures: string literals of the unit tests (Swift
"..." and \"\"\" blocks, Python strings of the end-to-end tests), fixture files, and a few hand-written heads.
Writes candidates to OUT/<target>/; scripts/fuzz.sh --seed merges them into Tests/Fuzz/corpus/<target>/
(keeping only inputs that add coverage).
    python3 Tests/Fuzz/seeds.py OUT
"""
import glob
import hashlib
import json
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8", errors="replace") as f:
        return f.read()


def unescape_swift(s):
    s = re.sub(r"\\u\{([0-9a-fA-F]+)\}", lambda m: chr(int(m.group(1), 16)), s)
    return (s.replace("\\n", "\n").replace("\\r", "\r").replace("\\t", "\t").replace('\\"', '"')
            .replace("\\0", "\0").replace("\\\\", "\\"))


def swift_strings(pattern):
    """String literals of the Swift files matching `pattern` (without interpolations)."""
    out = []
    for path in sorted(glob.glob(os.path.join(ROOT, pattern))):
        text = read(path)
        for m in re.finditer(r'#"((?:[^"\n]|"(?!#))*)"#', text):  # raw strings
            out.append(m.group(1))
        for m in re.finditer(r'"""\n(.*?)\n\s*"""', text, re.S):  # multi-line strings
            lines = m.group(1).split("\n")
            indent = min((len(l) - len(l.lstrip()) for l in lines if l.strip()), default=0)
            out.append(unescape_swift("\n".join(l[indent:] for l in lines)))
        for m in re.finditer(r'(?<![#"])"((?:[^"\\\n]|\\.)*)"(?!#)', text):
            s = m.group(1)
            if "\\(" not in s:
                out.append(unescape_swift(s))
    return out


def python_strings(pattern):
    out = []
    for path in sorted(glob.glob(os.path.join(ROOT, pattern))):
        for m in re.finditer(r'(?<![\w"\'])[rbf]?(["\'])((?:(?!\1)[^\\\n]|\\.)*)\1', read(path)):
            if "{" not in m.group(2) or m.group(0)[0] != "f":
                try:
                    out.append(bytes(m.group(2), "utf-8").decode("unicode_escape"))
                except Exception:
                    out.append(m.group(2))
    return out


def is_json(s):
    try:
        json.loads(s)
        return True
    except Exception:
        return False


def seeds():
    t = {}
    resources = sorted(glob.glob(os.path.join(ROOT, "Sources/MirrorgateTesting/Resources/OData/*.xml")))
    algolia_fixture = json.loads(read("Tests/Fuzz/fixtures/algolia-index.json"))

    # JSON: every JSON literal of the tests, fixture files.
    js = [s for s in swift_strings("Tests/*Tests/*.swift") if s.strip()[:1] in "[{\"0123456789-tfn" and is_json(s)]
    js += [read(p) for p in glob.glob(os.path.join(ROOT, "config/demo/*.json"))]
    js += [json.dumps(r) for r in algolia_fixture["records"]]
    js += ['"\\ud83d\\ude00"', "[1e400,-0,0.5e-3]", '{"a":[{"b":null}]}', "[" * 40 + "]" * 40]
    t["FuzzJSON"] = js

    # Algolia: query bodies and params strings.
    params_names = ("query", "filters", "numericFilters", "facetFilters", "optionalFilters", "tagFilters",
                    "facets", "hitsPerPage", "page", "typoTolerance", "attributesToRetrieve", "aroundLatLng",
                    "insideBoundingBox", "restrictSearchableAttributes", "distinct", "ruleContexts",
                    "highlightPreTag", "attributesToSnippet", "removeWordsIfNoResults", "optionalWords")
    alg = []
    for s in swift_strings("Tests/SearchEngineTests/*.swift") + swift_strings("Tests/AlgoliaGatewayTests/*.swift"):
        if is_json(s) and s.strip().startswith("{"):
            alg.append(s)
        elif "=" in s and any(s.startswith(n + "=") or ("&" + n + "=") in s for n in params_names):
            alg.append(s)
        elif any(op in s for op in (":", " AND ", " OR ", "<", ">", "NOT ", " TO ")) and len(s) < 200:
            alg.append(json.dumps({"filters": s}))
    for s in python_strings("Tests/EndToEnd/test_algolia_search_fuzz.py") + python_strings(
            "Tests/EndToEnd/test_search_fidelity.py"):
        if any(s.startswith(n + "=") for n in params_names):
            alg.append(s)
    alg += [json.dumps({"query": q}) for q in ("musketeer", "dumas", "muskteers", "\"three musketeers\"",
                                                  "-drama", "car", "cheap car", "buy one", "automobile", "")]
    alg += [json.dumps({"facetFilters": [["genre:Drama", "genre:Tech"], "-author:Victor Hugo"]}),
            json.dumps({"numericFilters": ["year>=1845", "price:3 TO 15"], "facets": ["*"]}),
            json.dumps({"query": "one", "aroundLatLng": "48.8,2.3", "aroundRadius": 1000, "getRankingInfo": True}),
            json.dumps({"facetName": "author", "facetQuery": "dum"}),
            json.dumps({"query": "musk", "ruleContexts": ["mobile"], "typoTolerance": "min", "distinct": 1})]
    t["FuzzAlgolia"] = alg

    # OData URLs: paths and query strings of the OData tests.
    od = []
    for s in swift_strings("Tests/ODataCoreTests/*.swift") + swift_strings("Tests/ODataGatewayTests/*.swift"):
        if len(s) > 300 or "\n" in s:
            continue
        if s.startswith("$") or "$filter" in s or "$apply" in s or "$expand" in s or "$orderby" in s:
            od.append(s if "?" in s or not s.startswith("$") else "People?" + s)
        elif re.match(r"^[A-Z][A-Za-z]+(\(.*\))?(/.*)?$", s):
            od.append(s)
        elif re.search(r"\b(eq|ne|gt|lt|and|or|any|all|contains|startswith)\b", s):
            od.append("Products?$filter=" + s)
    for s in python_strings("Tests/EndToEnd/test_odata_read_fuzz.py") + python_strings("Tests/EndToEnd/test_odata_shop_model.py"):
        if "$" in s and len(s) < 300 and "\n" not in s:
            od.append(s)
    od += ["~Customers('ALFKI')/Orders?$inlinecount=allpages&$top=2", "~Orders(1)?$expand=Customer&$format=json",
           "Products?$apply=groupby((Color),aggregate(Price with sum as Total))&$orderby=Total desc",
           "People?$search=\"ann\" OR NOT bob&$count=true", "Products?$compute=Price mul 2 as Double&$select=Double"]
    t["FuzzODataQuery"] = od

    # $batch: the multipart and JSON bodies of the batch tests (Content-Type on the first line).
    ba = []
    for s in swift_strings("Tests/ODataGatewayTests/*.swift"):
        if s.lstrip().startswith("{\"requests\""):
            ba.append("application/json\n" + s)
        m = re.match(r"--([A-Za-z0-9_'()+,./:=?-]+)\r?\n", s)
        if m:
            ba.append("multipart/mixed; boundary=%s\n%s" % (m.group(1), s.replace("\r\n", "\n").replace("\n", "\r\n")))
    t["FuzzODataBatch"] = ba

    # XML: the $metadata fixtures, Atom entries of the tests.
    xml = [read(p) for p in resources]
    xml += [s for s in swift_strings("Tests/ODataGatewayTests/*.swift") + python_strings("Tests/EndToEnd/test_odata_atom*.py")
            if "<entry" in s or "<?xml" in s]
    xml.append('<?xml version="1.0"?><entry xmlns="http://www.w3.org/2005/Atom" '
               'xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata" '
               'xmlns:d="http://schemas.microsoft.com/ado/2007/08/dataservices"><content type="application/xml">'
               '<m:properties><d:CustomerID>ALFKI</d:CustomerID><d:Name m:null="true"/></m:properties></content>'
               '<link rel="http://schemas.microsoft.com/ado/2007/08/dataservices/related/Orders" href="Orders(1)"/>'
               '</entry>')
    t["FuzzODataXML"] = xml

    # Payloads: JSON objects of the OData write tests.
    t["FuzzODataPayload"] = [s for s in swift_strings("Tests/ODataCoreTests/*.swift") + swift_strings("Tests/ODataGatewayTests/*.swift")
                             if s.strip().startswith("{") and is_json(s)] + [
        '{"@odata.type":"#Shop.Employee","ID":1,"Name":"x","Address":{"City":"y"},"Tags":["a"]}',
        '{"__metadata":{"type":"S.Customer"},"CustomerID":"ALFKI","Name":null}']

    # YAML: the shipped configurations and the YAML literals of the configuration tests.
    ya = [read(p) for p in ("config/demo.yaml", "config/mirrorgate.example.yaml")]
    ya += [s for s in swift_strings("Tests/GatewayConfigTests/*.swift") if ":" in s and "\n" in s]
    ya += [s for s in python_strings("Tests/EndToEnd/test_config.py") if ":" in s and "\n" in s]
    t["FuzzConfig"] = ya

    # HTTP heads.
    heads = [
        "GET /1/indexes/books?query=x&page=2 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nX-Algolia-API-Key: k\r\n\r\n",
        "POST /1/indexes/books/query HTTP/1.1\r\nHost: localhost\r\nContent-Length: 15\r\nContent-Length: 15\r\n\r\n",
        "POST /odata/svc/$batch HTTP/1.1\r\nHost: [::1]:80\r\nTransfer-Encoding: chunked\r\n\r\n",
        "POST http://127.0.0.1:8080/1/indexes/x/query HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
        "GET / HTTP/1.0\n\n", "GET /%41%zz?a=b+c&d=%E2%82%AC HTTP/1.1\nHost: a\nX: a\0b\n folded\n\n",
        "PUT /admin/x HTTP/1.1\r\nHost: h\r\nContent-Length: abc\r\nTransfer-Encoding: identity\r\n\r\n",
    ]
    heads += [s for s in python_strings("Tests/EndToEnd/test_http_framing.py") if "HTTP/" in s and "\n" in s]
    t["FuzzHTTP"] = heads
    return t


def main():
    out = sys.argv[1]
    for target, items in seeds().items():
        d = os.path.join(out, target)
        os.makedirs(d, exist_ok=True)
        for s in dict.fromkeys(items):
            data = s.encode("utf-8", "surrogatepass") if isinstance(s, str) else s
            if 0 < len(data) <= 16384:
                with open(os.path.join(d, hashlib.sha1(data).hexdigest()), "wb") as f:
                    f.write(data)
        print(target, len(os.listdir(d)))


if __name__ == "__main__":
    main()
