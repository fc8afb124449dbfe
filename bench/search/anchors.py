"""Anchors for bench/search: the same query set on SQLite FTS5 (prefix MATCH, bm25) and tantivy 0.27
(fuzzy term query on every word, 1 edit from 4 letters, 2 from 8, prefix on the last word; BM25).
Facet counts: FTS5 GROUP BY over the matches; tantivy terms aggregation. Numeric filter: installedSize
range (FTS5 join on a rowid table; tantivy range query on a fast field).

usage: python anchors.py fts5|tantivy <records.json> <queries.json> <repetitions> <workdir>
prints one JSON object like SearchBench's."""
import json, os, re, resource, shutil, sqlite3, sys, time

engine, records_path, queries_path, reps, workdir = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
records = json.load(open(records_path))
queries = json.load(open(queries_path))
WORD = re.compile(r"\w+", re.UNICODE)


def words(q):
    return [w.lower() for w in WORD.findall(q)]


def pct(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p * (len(s) - 1))))] if s else 0


def peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run(search):
    out, zero = {}, []
    for cls, entries in queries.items():
        lat = []
        for e in entries:
            n = search(e)
            if "typo" in cls and n == 0:
                zero.append(e["q"])
            for _ in range(reps):
                t0 = time.perf_counter()
                search(e)
                lat.append((time.perf_counter() - t0) * 1000)
        out[cls] = {"p50": pct(lat, 0.5), "p99": pct(lat, 0.99), "n": len(lat)}
    return out, zero


result = {"engine": engine, "records": len(records)}
if engine == "fts5":
    path = os.path.join(workdir, "fts5.sqlite")
    if os.path.exists(path):
        os.remove(path)
    db = sqlite3.connect(path)
    t0 = time.perf_counter()
    db.execute("CREATE TABLE pkg (id INTEGER PRIMARY KEY, objectID TEXT, section TEXT, priority TEXT, installedSize INTEGER)")
    db.execute("CREATE VIRTUAL TABLE fts USING fts5(name, description, maintainer, tags, prefix='2 3 4')")
    with db:
        for i, r in enumerate(records):
            db.execute("INSERT INTO pkg VALUES (?,?,?,?,?)", (i, r.get("objectID"), r.get("section"), r.get("priority"), r.get("installedSize")))
            db.execute("INSERT INTO fts (rowid, name, description, maintainer, tags) VALUES (?,?,?,?,?)",
                       (i, r.get("name", ""), r.get("description", ""), r.get("maintainer", ""), " ".join(r.get("_tags", []))))
    build = time.perf_counter() - t0

    def search(e):
        ws = words(e["q"])
        match = " ".join('"%s"' % w for w in ws[:-1]) + (' "%s"*' % ws[-1] if ws else "")
        where, args = "fts MATCH ?", [match]
        if "installedSize" in e:
            where += " AND pkg.installedSize BETWEEN ? AND ?"
            args += e["installedSize"]
        rows = db.execute(f"SELECT pkg.objectID, fts.name FROM fts JOIN pkg ON pkg.id = fts.rowid WHERE {where} ORDER BY bm25(fts) LIMIT 20", args).fetchall()
        n = db.execute(f"SELECT count(*) FROM fts JOIN pkg ON pkg.id = fts.rowid WHERE {where}", args).fetchone()[0]
        if e.get("facets"):
            for col in ("section", "priority"):
                db.execute(f"SELECT pkg.{col}, count(*) FROM fts JOIN pkg ON pkg.id = fts.rowid WHERE {where} GROUP BY 1 ORDER BY 2 DESC LIMIT 100", args).fetchall()
        return n
else:
    import tantivy
    path = os.path.join(workdir, "tantivy")
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    sb = tantivy.SchemaBuilder()
    for f in ("name", "description", "maintainer", "tags"):
        sb.add_text_field(f, stored=(f == "name"))
    sb.add_text_field("objectID", stored=True, tokenizer_name="raw")
    sb.add_text_field("section", tokenizer_name="raw", fast=True)
    sb.add_text_field("priority", tokenizer_name="raw", fast=True)
    sb.add_integer_field("installedSize", fast=True, indexed=True)
    schema = sb.build()
    index = tantivy.Index(schema, path=path)
    t0 = time.perf_counter()
    writer = index.writer(heap_size=100_000_000, num_threads=1)
    for r in records:
        writer.add_document(tantivy.Document(
            objectID=r.get("objectID", ""), name=r.get("name", ""), description=r.get("description", ""),
            maintainer=r.get("maintainer", ""), tags=" ".join(r.get("_tags", [])), section=r.get("section") or "",
            priority=r.get("priority") or "", installedSize=int(r.get("installedSize") or 0)))
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    build = time.perf_counter() - t0
    searcher = index.searcher()
    fields = ["name", "description", "maintainer", "tags"]

    def word_query(w, last):
        n = 2 if len(w) >= 8 else (1 if len(w) >= 4 else 0)
        return Query.boolean_query([(tantivy.Occur.Should, tantivy.Query.fuzzy_term_query(schema, f, w, distance=n, transposition_cost_one=True, prefix=last)) for f in fields])

    Query = tantivy.Query

    def search(e):
        ws = words(e["q"])
        subs = [(tantivy.Occur.Must, word_query(w, i == len(ws) - 1)) for i, w in enumerate(ws)]
        if "installedSize" in e:
            lo, hi = e["installedSize"]
            subs.append((tantivy.Occur.Must, Query.range_query(schema, "installedSize", tantivy.FieldType.Integer, lo, hi)))
        q = Query.boolean_query(subs)
        res = searcher.search(q, 20, count=True)
        for _, addr in res.hits:
            searcher.doc(addr)
        if e.get("facets"):
            searcher.aggregate(q, {"section": {"terms": {"field": "section", "size": 100}}, "priority": {"terms": {"field": "priority", "size": 100}}})
        return res.count

result["buildMs"] = build * 1000
result["buildRecordsPerSecond"] = len(records) / build
classes, zero = run(search)
result["classes"] = classes
result["zeroHitTypoQueries"] = zero
result["peakRSSMiB"] = peak_rss_mib()
print(json.dumps(result))
