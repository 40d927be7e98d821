"""What pseudo-relevance feedback is worth: each strategy with and without RM3 and Bo1 (defaults), per collection.

    nice -n 10 .venv/bin/python tools/feedback_runs.py COLLECTION [COLLECTION ...]
        [-t bigram -t unigram -t jieba:mode=precise] [--json OUT.json]

A COLLECTION is anything ``rag-eval compare`` takes (a shipped id such as ``handbook``, a BEIR folder). Every
strategy runs as ``STRATEGY | BUILDER | or`` with no query processing, with ``query:prf=rm3`` and with
``query:prf=bo1`` (the impact engine, the default) through compare's own runner, every query once (``--repeat 1``),
100 deep. Quality is trec_eval's nDCG@10 and R@100 on the test part of tune's dev/test split (``split_ids`` with
the default fraction and salt; judged queries only); latency is each test query's tokenize + search time (p50,
p95, in ms) of that one run; p is the project's paired randomization test of nDCG@10 against the same strategy
without feedback. Prints Markdown tables (numbers only) and, with ``--json``, writes them. Kept out of the tests:
it runs minutes.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rag_eval.eval.compare.runner import System
from rag_eval.eval.compare.timing import run_system
from rag_eval.eval.datasets.formats import load_dataset
from rag_eval.eval.datasets.split import DEV_FRACTION, SALT, split_ids
from rag_eval.eval.metrics.measures import evaluate
from rag_eval.eval.metrics.significance import randomization_test
from rag_eval.measure import latency_summary

METRICS = ["nDCG@10", "R@100"]
FEEDBACK = {"none": "", "rm3": "prf=rm3", "bo1": "prf=bo1"}


def feedback_of(collection: str, strategies: list[str]) -> dict[str, Any]:
    """Every strategy's test quality, latency and p against no feedback, with and without each method."""
    data = load_dataset(collection)
    _, test_ids = split_ids(list(data.queries), DEV_FRACTION, SALT)
    judged = {query for query, docs in data.qrels.items() if docs}
    test = [query for query in test_ids if query in judged]
    found: dict[str, Any] = {"collection": collection, "dataset": data.id, "queries": len(data.queries)}
    found |= {"test_queries": len(test), "rows": []}
    for strategy in strategies:
        baseline: dict[str, dict[str, float]] = {}
        for method, query in FEEDBACK.items():
            result = run_system(data, System(strategy, "", "or", query), repeat=1)
            _, values = evaluate(data.qrel_list(), result.run, METRICS)
            positions = {query_id: number for number, query_id in enumerate(data.queries)}
            seconds = [result.tokenize_seconds[positions[q]] + result.search_seconds[positions[q]] for q in test]
            latency = latency_summary(seconds)
            if method == "none":
                baseline = values
            row = {
                "strategy": strategy,
                "feedback": method,
                **{m: sum(values[q][m] for q in test) / len(test) for m in METRICS},
                "p50_ms": latency["median"],
                "p95_ms": latency["p95"],
                "p": None
                if method == "none"
                else randomization_test([values[q]["nDCG@10"] for q in test], [baseline[q]["nDCG@10"] for q in test]),
            }
            found["rows"].append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    return found


def markdown(found: dict[str, Any]) -> str:
    """One collection's table."""
    lines = [
        f"### {found['collection']}",
        "",
        f"{found['queries']} queries; {found['test_queries']} judged test queries (tune's split), mode or.",
        "",
        "| strategy | feedback | nDCG@10 | R@100 | p (nDCG@10 vs none) | p50 ms | p95 ms |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for row in found["rows"]:
        p = "" if row["p"] is None else f"{row['p']:.4f}"
        lines.append(
            f"| {row['strategy']} | {row['feedback']} | {row['nDCG@10']:.4f} | {row['R@100']:.4f} | {p} | "
            f"{row['p50_ms']:.2f} | {row['p95_ms']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("collections", nargs="+")
    parser.add_argument("-t", "--tokenizer", action="append", dest="strategies")
    parser.add_argument("--json", type=Path, help="Write every collection's figures here.")
    args = parser.parse_args()
    strategies = args.strategies or ["bigram", "unigram", "jieba:mode=precise"]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    found = {
        "command": " ".join(["tools/feedback_runs.py", *sys.argv[1:]]),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": commit,
        "machine": f"{platform.machine()}, {platform.python_implementation()} {platform.python_version()}",
        "collections": [],
    }
    for collection in args.collections:
        result = feedback_of(collection, strategies)
        found["collections"].append(result)
        print(markdown(result), flush=True)
        if args.json is not None:
            args.json.write_text(json.dumps(found, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
