"""What bm25's k1 and b are worth: a k1 x b grid of the impact engine per collection and strategy, dev/test split.

    nice -n 10 .venv/bin/python tools/bm25_grid.py COLLECTION [COLLECTION ...] [-t bigram -t unigram]
        [--k1 0.6 0.9 1.2 1.5 2.0] [--b 0.3 0.5 0.75 0.9 1.0] [--json OUT.json]

A COLLECTION is anything ``rag-eval compare`` takes (a shipped id such as ``handbook``, a BEIR folder). Its queries
are split into dev and test exactly as ``rag-eval tune`` splits them (``split_ids`` with the default fraction and
salt); every (k1, b) of the grid runs every query once (``--repeat 1``) as the system ``STRATEGY | BUILDER | MODE |
engine=impact:k1=K,b=B`` through compare's own runner, so each strategy's index is built once (compare's cache) and
ranked at every pair from its stored tf. nDCG@10 is trec_eval's, per query; the pair with the best dev mean is
compared on test with FTS5's (1.2, 0.75) by the project's paired randomization test. Prints Markdown tables (numbers
only) and, with ``--json``, writes every per-pair mean. Kept out of the tests: it runs minutes to hours.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rag_eval.engines.impact import K1, B
from rag_eval.eval.compare.runner import System
from rag_eval.eval.compare.timing import run_system
from rag_eval.eval.datasets.formats import load_dataset
from rag_eval.eval.datasets.split import DEV_FRACTION, SALT, split_ids
from rag_eval.eval.metrics.measures import evaluate
from rag_eval.eval.metrics.significance import randomization_test

METRIC = "nDCG@10"


def spec_of(k1: float, b: float) -> str:
    return f"impact:k1={k1:g},b={b:g}"


def grid_of(collection: str, strategies: list[str], k1s: list[float], bs: list[float]) -> dict[str, Any]:
    """Every strategy's nDCG@10 on dev and test at each (k1, b), the dev-best pair and its test gain."""
    data = load_dataset(collection)
    dev_ids, test_ids = split_ids(list(data.queries), DEV_FRACTION, SALT)
    judged = {query for query, docs in data.qrels.items() if docs}
    dev = [query for query in dev_ids if query in judged]
    test = [query for query in test_ids if query in judged]
    mode = data.meta.get("mode") or "or"
    found: dict[str, Any] = {"collection": collection, "dataset": data.id, "queries": len(data.queries)}
    found |= {"dev_queries": len(dev), "test_queries": len(test), "mode": mode, "strategies": {}}
    pairs = [(k1, b) for k1 in k1s for b in bs]
    if (K1, B) not in pairs:
        pairs.append((K1, B))
    for strategy in strategies:
        cells: dict[str, Any] = {}
        per_query: dict[tuple[float, float], dict[str, dict[str, float]]] = {}
        started = time.perf_counter()
        for k1, b in pairs:
            result = run_system(data, System(strategy, "", mode, engine=spec_of(k1, b)), repeat=1)
            _, values = evaluate(data.qrel_list(), result.run, [METRIC])
            per_query[(k1, b)] = values
            cells[f"{k1:g},{b:g}"] = {
                "k1": k1,
                "b": b,
                "dev": sum(values[q][METRIC] for q in dev) / len(dev),
                "test": sum(values[q][METRIC] for q in test) / len(test),
                "all": sum(values[q][METRIC] for q in judged) / len(judged),
            }
        best = max(cells.values(), key=lambda cell: (cell["dev"], -abs(cell["k1"] - K1) - abs(cell["b"] - B)))
        chosen, default = per_query[(best["k1"], best["b"])], per_query[(K1, B)]
        gain_values = [chosen[q][METRIC] for q in test], [default[q][METRIC] for q in test]
        found["strategies"][strategy] = {
            "cells": cells,
            "dev_best": {"k1": best["k1"], "b": best["b"]},
            "test_gain": best["test"] - cells[f"{K1:g},{B:g}"]["test"],
            "test_p": randomization_test(*gain_values),
            "seconds": round(time.perf_counter() - started, 1),
        }
    return found


def markdown(found: dict[str, Any], k1s: list[float], bs: list[float]) -> str:
    """One collection's tables: per strategy, dev and test nDCG@10 with k1 down and b across."""
    lines = [
        f"### {found['collection']}",
        "",
        f"{found['queries']} queries; dev {found['dev_queries']} and test {found['test_queries']} judged "
        f"(tune's split), mode {found['mode']}.",
        "",
    ]
    for strategy, result in found["strategies"].items():
        for part in ("dev", "test"):
            lines += [f"{strategy}, {part} {METRIC} (k1 down, b across):", ""]
            lines.append("| k1 \\ b | " + " | ".join(f"{b:g}" for b in bs) + " |")
            lines.append("|---|" + "---:|" * len(bs))
            for k1 in k1s:
                row = [f"{result['cells'][f'{k1:g},{b:g}'][part]:.4f}" for b in bs]
                lines.append(f"| {k1:g} | " + " | ".join(row) + " |")
            lines.append("")
        best = result["dev_best"]
        lines += [
            f"{strategy}: dev-best k1 {best['k1']:g}, b {best['b']:g}; on test {result['test_gain']:+.4f} "
            f"{METRIC} over (1.2, 0.75), paired randomization p = {result['test_p']:.4f} "
            f"({result['seconds']:.0f} s for the grid)",
            "",
        ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("collections", nargs="+")
    parser.add_argument("-t", "--tokenizer", action="append", dest="strategies")
    parser.add_argument("--k1", nargs="+", type=float, default=[0.6, 0.9, 1.2, 1.5, 2.0])
    parser.add_argument("--b", nargs="+", type=float, default=[0.3, 0.5, 0.75, 0.9, 1.0])
    parser.add_argument("--json", type=Path, help="Write every collection's figures here (a new file).")
    args = parser.parse_args()
    strategies = args.strategies or ["bigram", "unigram"]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    found = {
        "command": " ".join(["tools/bm25_grid.py", *sys.argv[1:]]),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": commit,
        "machine": f"{platform.machine()}, {platform.python_implementation()} {platform.python_version()}",
        "collections": [],
    }
    for collection in args.collections:
        result = grid_of(collection, strategies, args.k1, args.b)
        found["collections"].append(result)
        print(markdown(result, args.k1, args.b), flush=True)
        if args.json is not None:
            args.json.write_text(json.dumps(found, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
