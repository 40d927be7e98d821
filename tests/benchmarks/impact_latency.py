"""Search latency of the impact engine against FTS5's bm25 statement on a BEIR corpus, plus an equality
check on every query. A script, not a test (timing never goes in a test's assertion); reports/latency.md
records its output and the command:

    nice .venv/bin/python tests/benchmarks/impact_latency.py [--ranking-only] CORPUS_DIR OUT_DIR [SPEC ...] > out.json

CORPUS_DIR holds ``corpus.jsonl`` and ``queries.jsonl`` (BEIR layout). Each strategy's index is built
once into OUT_DIR with ``engine=impact`` (the FTS5 table is the same either way). Then every query is run
as ``compare`` runs it (mode ``or``, 100 deep, no snippets) with both engines, alternating which goes first,
after a warm-up; a query's latency is tokenize + search (``SearchResult``'s two phases). ``--ranking-only``
times the engines alone on the indexes built before (see :func:`ranking_only`).
"""

from __future__ import annotations

import json
import platform
import sqlite3
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from rag_eval.engines import impact
from rag_eval.engines.fts5 import ranking_sql
from rag_eval.engines.impact import read as impact_read
from rag_eval.index.columns import weights_for
from rag_eval.index.store import Index
from rag_eval.index.writer import build
from rag_eval.search.searching import search

WARMUP = 50
#: --ranking-only: each query's best of 3 runs (a 2-core machine shared with others preempts a process for
#: milliseconds at a time, which single runs turn into p95), over the first 1,000 queries after the warm-up.
BEST_OF = 3
RANKING_QUERIES = 1000
DEPTH = 100
STRATEGIES = ["unicode61", "trigram", "unigram", "bigram", "jieba", "pkuseg"]


def percentiles(seconds: list[float]) -> dict[str, float]:
    values = np.array(seconds) * 1000
    return {
        "p50_ms": round(float(np.percentile(values, 50)), 3),
        "p95_ms": round(float(np.percentile(values, 95)), 3),
        "p99_ms": round(float(np.percentile(values, 99)), 3),
        "mean_ms": round(float(values.mean()), 3),
        "max_ms": round(float(values.max()), 3),
        "qps": round(1000.0 / float(values.mean()), 1),
    }


def impacts_cost(path: Path) -> dict[str, Any]:
    """Seconds to write the impacts of the built index again (rolled back), and their bytes."""
    with Index.open(path) as index:
        tokenizer, defaults = index.tokenizer, index.defaults
    db = sqlite3.connect(path, isolation_level=None)
    try:
        size = impact.postings_bytes(db)
        terms = sum(1 for _ in impact.stored_postings(db))
        db.execute("BEGIN IMMEDIATE")
        for table in impact.TABLES:
            db.execute(f"DROP TABLE IF EXISTS {table}")
        started = time.perf_counter()
        impact.write_impacts(db, tokenizer, weights_for(tokenizer, defaults))
        seconds = time.perf_counter() - started
        db.execute("ROLLBACK")
    finally:
        db.close()
    return {"impact_write_seconds": round(seconds, 2), "impact_bytes": size, "impact_terms": terms}


def measure(corpus: Path, out: Path, spec: str) -> dict[str, Any]:
    path = out / f"{spec.replace(':', '_')}.sqlite"
    if not path.exists():
        build(corpus / "corpus.jsonl", path, builder="passages", tokenizer=spec, engine="impact")
    queries = [json.loads(line)["text"] for line in (corpus / "queries.jsonl").read_text(encoding="utf-8").splitlines()]
    times: dict[str, list[float]] = {"fts5": [], "impact": []}
    same = identical = fallbacks = clamped_queries = 0
    postings = clamped_postings = 0
    with Index.open(path) as index:
        rows = index.chunks

        def run(text: str, engine: str) -> Any:
            return search(index, text, mode="or", limit=DEPTH, deep=True, snippets=False, engine=engine)

        for text in queries[:WARMUP]:
            run(text, "fts5")
            run(text, "impact")
        for number, text in enumerate(queries):
            order = ("fts5", "impact") if number % 2 == 0 else ("impact", "fts5")
            results = {}
            for engine in order:
                result = results[engine] = run(text, engine)
                times[engine].append(result.tokenize_seconds + result.search_seconds)
            a, b = results["fts5"].hits, results["impact"].hits
            ids_equal = [h.id for h in a] == [h.id for h in b]
            same += ids_equal and all(abs(x.score - y.score) <= 1e-9 * abs(x.score) for x, y in zip(a, b, strict=True))
            identical += ids_equal and [h.score for h in a] == [h.score for h in b]
            compiled = results["impact"].query
            if compiled.expression is not None and impact.fallback_reason(index, compiled) is not None:
                fallbacks += 1
            with index.reading():
                found = [impact_read._postings_of(index, key) for key in dict.fromkeys(impact.query_keys(compiled))]
                counts = [len(postings.ids) for postings in found if postings is not None]
            postings += sum(counts)
            clamped = [n for n in counts if impact.idf(rows, n) == impact.CLAMPED_IDF]
            clamped_postings += sum(clamped)
            clamped_queries += bool(clamped)
        tokenizer_spec = index.tokenizer.spec
    return {
        "strategy": spec,
        "tokenizer_spec": tokenizer_spec,
        "chunks": rows,
        "queries": len(queries),
        "equal_within_1e-9": same,
        "bit_identical": identical,
        "fallbacks": fallbacks,
        "fts5": percentiles(times["fts5"]),
        "impact": percentiles(times["impact"]),
        "p95_speedup": round(
            statistics.quantiles(times["fts5"], n=20)[18] / statistics.quantiles(times["impact"], n=20)[18], 2
        ),
        "queries_with_clamped_terms": clamped_queries,
        "clamped_share_of_postings": round(clamped_postings / postings, 3) if postings else 0.0,
        **impacts_cost(path),
    }


def ranking_only(corpus: Path, out: Path, spec: str) -> dict[str, Any]:
    """The engines alone, on compiled queries: FTS5's ranking statement cut to 100 (no chunk rows read) against
    ``impact.ranked`` (ids and scores only) without and with pruning, rotating the order, each query's best
    of ``BEST_OF``, in one read transaction."""
    path = out / f"{spec.replace(':', '_')}.sqlite"
    queries = [json.loads(line)["text"] for line in (corpus / "queries.jsonl").read_text(encoding="utf-8").splitlines()]
    times: dict[str, list[float]] = {"fts5": [], "impact": []}
    with Index.open(path) as index:
        compiled = [search(index, text, mode="or", deep=True, snippets=False, limit=1).query for text in queries]
        statement = ranking_sql(index, False, False, False) + " LIMIT ?"
        cursor = index.db.cursor()
        cursor.row_factory = None

        def fts5(query: Any) -> Any:
            return cursor.execute(statement, (query.expression, DEPTH)).fetchall()

        def impacts(query: Any) -> Any:
            return impact.ranked(index, query, DEPTH)

        def pruned(query: Any) -> Any:
            return impact.ranked(index, query, DEPTH, prune=True)

        engines = {"fts5": fts5, "impact": impacts, "impact_pruned": pruned}
        times["impact_pruned"] = []
        with index.reading():
            for number, query in enumerate(compiled[: WARMUP + RANKING_QUERIES]):
                if query.expression is None:
                    continue
                names = ["fts5", "impact", "impact_pruned"]
                best = dict.fromkeys(names, float("inf"))
                for _ in range(BEST_OF):
                    for name in names[number % 3 :] + names[: number % 3]:
                        started = time.perf_counter()
                        engines[name](query)
                        best[name] = min(best[name], time.perf_counter() - started)
                if number >= WARMUP:
                    for name in names:
                        times[name].append(best[name])
    return {
        "strategy": spec,
        **{f"{name}_ranking": percentiles(values) for name, values in times.items()},
    }


def main(argv: list[str]) -> None:
    ranking = argv[:1] == ["--ranking-only"]
    argv = argv[1:] if ranking else argv
    corpus, out = Path(argv[0]), Path(argv[1])
    out.mkdir(parents=True, exist_ok=True)
    run = ranking_only if ranking else measure
    results = [run(corpus, out, spec) for spec in (argv[2:] or STRATEGIES)]
    machine = {"python": platform.python_version(), "sqlite": sqlite3.sqlite_version, "numpy": np.__version__}
    json.dump({"machine": machine, "results": results}, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main(sys.argv[1:])
