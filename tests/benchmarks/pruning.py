"""What rank-safe pruning is worth, the impact engine alone: every question ranked 100 deep with pruning off,
forced on, and as chosen by default (``impact.PRUNE``), the three back to back per question (order rotating),
each ``--repeat`` times. Reports per strategy p50, p95 and mean of each query's best run, how many queries the
default pruned, and checks the three rankings are identical (ids, order, scores bit for bit). Numbers only:
no text of the set is printed.

    nice python tests/benchmarks/pruning.py DATASET STRATEGY... > pruning.json
    nice python tests/benchmarks/pruning.py --replicate 30 --out /tmp/scale-drcd DATASET STRATEGY... > pruning.json

``--replicate N --out DIR`` measures DATASET's corpus N times over (``impact_scale.py``'s replicas, written to
DIR/xN with the queries and qrels beside them; DIR belongs under /tmp). ``--tuned N``: the default's rule was
chosen on the first N questions; the report gives the questions after them on their own too.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
from impact_scale import replicate  # this script's folder is on sys.path

from rag_eval.builders import get_builder
from rag_eval.engines import impact
from rag_eval.engines.impact import rank as impact_rank
from rag_eval.engines.impact import read as impact_read
from rag_eval.eval.compare.runner import cached_build, corpus_source
from rag_eval.eval.datasets.formats import load_dataset
from rag_eval.files.runs import DEPTH
from rag_eval.index.store import Index
from rag_eval.search.query import compile_query
from rag_eval.tokenizers import get_tokenizer

WARMUP = 50
VARIANTS = {"unpruned": False, "default": None, "forced": True}


def _summary(seconds: list[float]) -> dict[str, float]:
    values = np.array(seconds) * 1000
    return {
        "p50_ms": round(float(np.percentile(values, 50)), 4),
        "p95_ms": round(float(np.percentile(values, 95)), 4),
        "mean_ms": round(float(values.mean()), 4),
    }


def measure(dataset: str, strategy: str, repeat: int, tuned: int) -> dict[str, Any]:
    data = load_dataset(dataset)
    source, builder_name = corpus_source(data)
    path, _report = cached_build(source, get_builder(builder_name), get_tokenizer(strategy), engine="impact")
    with Index.open(path) as index, index.reading():
        compiled = [compile_query(index.tokenizer, query.text, "or") for query in data.queries.values()]
        compiled = [c for c in compiled if c.expression is not None and impact.fallback_reason(index, c) is None]
        for query in compiled[:WARMUP]:
            for prune in VARIANTS.values():
                impact.ranked(index, query, DEPTH, prune=prune)
        best: dict[str, list[float]] = {name: [] for name in VARIANTS}
        names = list(VARIANTS)
        pruned = identical = 0
        for number, query in enumerate(compiled):
            order = names[number % 3 :] + names[: number % 3]
            results = {}
            for name in order:
                times = []
                for _ in range(repeat):
                    started = time.perf_counter()
                    results[name] = impact.ranked(index, query, DEPTH, prune=VARIANTS[name])
                    times.append(time.perf_counter() - started)
                best[name].append(min(times))
            identical += results["unpruned"] == results["default"] == results["forced"]
            keys = dict.fromkeys(impact.query_keys(query))
            present = {key: p for key in keys if (p := impact_read._postings_of(index, key)) is not None}
            pruned += bool(present) and impact_rank._pays(present)
    return {
        "rows": index.chunks,
        "queries": len(compiled),
        "pruned_by_default": pruned,
        "identical": identical,
        "best_of": repeat,
        **{name: _summary(times) for name, times in best.items()},
        "default_mean_over_unpruned": round(statistics.fmean(best["default"]) / statistics.fmean(best["unpruned"]), 3),
        "held_out": {"after": tuned, **{name: _summary(times[tuned:]) for name, times in best.items()}}
        if 0 < tuned < len(compiled)
        else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset")
    parser.add_argument("strategies", nargs="+")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--replicate", type=int, default=1)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--tuned", type=int, default=0)
    args = parser.parse_args()
    dataset = args.dataset
    if args.replicate > 1:
        folder = replicate(Path(dataset), args.out, args.replicate).parent
        shutil.copy(Path(dataset) / "queries.jsonl", folder / "queries.jsonl")
        shutil.copytree(Path(dataset) / "qrels", folder / "qrels", dirs_exist_ok=True)
        dataset = str(folder)
    out: dict[str, Any] = {"dataset": args.dataset, "replicas": args.replicate, "depth": DEPTH, "results": {}}
    out["started_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for strategy in args.strategies:
        load = os.getloadavg()[0]
        out["results"][strategy] = measure(dataset, strategy, args.repeat, args.tuned) | {"load_before": load}
    out["finished_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
