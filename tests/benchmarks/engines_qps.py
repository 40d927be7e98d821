"""Queries per second of the impact engine against bm25s on the same tokens, query by query, alternating.

``compare`` runs one system after another, so on a shared machine a load spike lands on one engine's whole
run. This script answers every question with both engines back to back (which goes first alternates), each
through the searcher ``compare`` uses (tokenize, rank, read the hits' chunk rows), and reports per engine the
queries per second of single runs and of each query's best of ``--repeat`` runs (preemption filtered), with
p50/p95. Numbers only: no text of the set is printed.

    nice python tests/benchmarks/engines_qps.py DATASET STRATEGY... > engines_qps.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from typing import Any

from rag_eval.builders import get_builder
from rag_eval.engines.base import get_engine
from rag_eval.eval.compare.runner import cached_build, corpus_source
from rag_eval.eval.datasets.formats import load_dataset
from rag_eval.files.runs import DEPTH
from rag_eval.index.store import Index
from rag_eval.measure import latency_summary
from rag_eval.tokenizers import get_tokenizer

WARMUP = 50


def _qps(seconds: list[float]) -> float:
    return round(len(seconds) / sum(seconds), 1)


def measure(dataset: str, strategy: str, engines: list[str], repeat: int) -> dict[str, Any]:
    """Both engines on every question of ``dataset`` for ``strategy``: single-run and best-of QPS, p50, p95."""
    data = load_dataset(dataset)
    source, builder_name = corpus_source(data)
    builder, tokenizer = get_builder(builder_name), get_tokenizer(strategy)
    path, _report = cached_build(source, builder, tokenizer, engine="impact")  # holds FTS5's tokens as well
    texts = [query.text for query in data.queries.values()]
    indexes = [Index.open(path) for _ in engines]  # one connection (and postings cache) per engine
    try:
        searchers = [
            get_engine(spec).searcher(index, mode="or", depth=DEPTH, as_of=None, processing=None)
            for spec, index in zip(engines, indexes, strict=True)
        ]
        for searcher in searchers:
            for text in texts[:WARMUP]:
                searcher(text)
        single: list[list[float]] = [[] for _ in engines]
        best: list[list[float]] = [[] for _ in engines]
        for number, text in enumerate(texts):
            order = list(range(len(engines)))
            if number % 2:
                order.reverse()
            for which in order:
                times = []
                for _ in range(repeat):
                    result = searchers[which](text)
                    times.append(result.tokenize_seconds + result.search_seconds)
                single[which].append(times[0])
                best[which].append(min(times))
    finally:
        for index in indexes:
            index.close()
    return {
        spec: {
            "qps_single": _qps(single[i]),
            "qps_best": _qps(best[i]),
            "single_ms": {k: latency_summary(single[i])[k] for k in ("median", "p95")},
            "best_ms": {k: latency_summary(best[i])[k] for k in ("median", "p95")},
            "mean_best_ms": round(statistics.fmean(best[i]) * 1000, 4),
        }
        for i, spec in enumerate(engines)
    } | {"queries": len(texts)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset")
    parser.add_argument("strategies", nargs="+")
    parser.add_argument("--engines", default="impact,bm25s")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    engines = args.engines.split(",")
    out: dict[str, Any] = {"dataset": args.dataset, "engines": engines, "repeat": args.repeat, "results": {}}
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for strategy in args.strategies:
        load = os.getloadavg()[0]
        out["results"][strategy] = measure(args.dataset, strategy, engines, args.repeat) | {"load_before": load}
    out["started_utc"] = started
    out["finished_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
