"""How far a judging order could go if it knew where the relevant passages are: reference points for
`rag-eval judge`'s pick rate (reports/judging.md, "What an order that knew the qrels would reach").

    .venv/bin/python tools/judging_bounds.py QRELS RUN... > OUT.json

Uses the sampling study's samples (seed 0, 200 samples of 50 judged queries, the same draws as
``rag_eval.eval.judging.oracle``) and the runs' top 10. A query is *contended* when a relevant pooled passage has
different nDCG discounts in different systems (otherwise its grades cannot change any difference between
systems). Within a query, passages are judged best-first by their mean discount over the systems, the
order `rag-eval judge` uses inside a query; a query costs the judgments up to its last relevant pooled
passage. Two clairvoyant orders judge only contended queries, each up to exactly its last relevant
passage, and pick the best system on the judged passages (unjudged = not relevant):

- ``cheapest``: knows each contended query's cost, takes the cheapest first;
- ``by_effect``: also knows the full-qrels nDCG@10 of each system, and takes first the queries whose
  largest difference between the full-qrels leader and the next three systems is largest per judgment.

Neither is a method (both read the qrels); they show how many judgments resolving the races takes.
"""

from __future__ import annotations

import json
import math
import random
import statistics
import sys
from collections.abc import Mapping, Sequence

from rag_eval.eval.datasets.trec import read_any_qrels
from rag_eval.eval.judging.oracle import CHECKPOINTS, per_query_ndcg, read_runs, winners
from rag_eval.eval.metrics.measures import judged_queries

CUT = 10
SAMPLES = 200
SAMPLE_QUERIES = 50


def _discount(rank: int) -> float:
    return 1.0 / math.log2(rank + 2)


def _pool(runs: Mapping[str, Mapping[str, Sequence[str]]], systems: list[str], query: str) -> list[str]:
    """The query's pooled passages, best-first by mean discount over the systems (stable on first seen)."""
    discounts: dict[str, float] = {}
    for system in systems:
        for rank, doc in enumerate(list(runs[system].get(query, []))[:CUT]):
            discounts[doc] = discounts.get(doc, 0.0) + _discount(rank)
    return sorted(discounts, key=lambda d: -discounts[d])


def _contended(runs: Mapping[str, Mapping[str, Sequence[str]]], systems: list[str], query: str, doc: str) -> bool:
    seen = set()
    for system in systems:
        docs = list(runs[system].get(query, []))[:CUT]
        seen.add(_discount(docs.index(doc)) if doc in docs else 0.0)
    return len(seen) > 1


def _judged_pick(
    runs: Mapping[str, Mapping[str, Sequence[str]]], systems: list[str], judged: dict[str, dict[str, int]]
) -> str:
    answered = [q for q, grades in judged.items() if any(g > 0 for g in grades.values())]
    per_query = per_query_ndcg({s: {q: runs[s].get(q, []) for q in answered} for s in systems}, judged)
    totals = {s: sum(per_query[s].values()) for s in systems}
    return max(systems, key=lambda s: (totals[s], -systems.index(s)))


def study(runs: Mapping[str, Mapping[str, Sequence[str]]], qrels: Mapping[str, Mapping[str, int]]) -> dict[str, object]:
    systems = sorted(runs)
    judged = judged_queries(qrels)
    rng = random.Random(0)
    draws = [sorted(rng.sample(judged, SAMPLE_QUERIES)) for _ in range(SAMPLES)]
    contended_counts: list[int] = []
    costs: list[int] = []
    right: dict[str, dict[int, list[bool]]] = {name: {k: [] for k in CHECKPOINTS} for name in ("cheapest", "by_effect")}
    for queries in draws:
        sample_runs = {s: {q: list(runs[s].get(q, [])) for q in queries} for s in systems}
        full = per_query_ndcg(sample_runs, qrels)
        means = {s: sum(full[s].get(q, 0.0) for q in queries) / len(queries) for s in systems}
        ranked = sorted(systems, key=lambda s: -means[s])
        best = winners(full, queries)
        plans: dict[str, list[tuple[float, str, list[str]]]] = {"cheapest": [], "by_effect": []}
        for query in queries:
            grades = qrels.get(query, {})
            pool = _pool(sample_runs, systems, query)
            relevant = [d for d in pool if grades.get(d, 0) > 0]
            if not any(_contended(sample_runs, systems, query, d) for d in relevant):
                continue
            cost = max(pool.index(d) for d in relevant) + 1
            effect = max(abs(full[ranked[0]].get(query, 0.0) - full[s].get(query, 0.0)) for s in ranked[1:4])
            plans["cheapest"].append((cost, query, pool[:cost]))
            plans["by_effect"].append((-effect / cost, query, pool[:cost]))
        contended_counts.append(len(plans["cheapest"]))
        costs.append(sum(len(p[2]) for p in plans["cheapest"]))
        for name, plan in plans.items():
            order = [(q, d) for _, q, docs in sorted(plan) for d in docs]
            for k in CHECKPOINTS:
                grades_so_far: dict[str, dict[str, int]] = {}
                for query, doc in order[:k]:
                    grades_so_far.setdefault(query, {})[doc] = int(qrels.get(query, {}).get(doc, 0))
                right[name][k].append(_judged_pick(sample_runs, systems, grades_so_far) in best)
    return {
        "samples": SAMPLES,
        "sample_queries": SAMPLE_QUERIES,
        "contended_queries_mean": statistics.mean(contended_counts),
        "judgments_to_resolve_median": statistics.median(costs),
        "resolvable_within": {str(k): sum(c <= k for c in costs) / len(costs) for k in CHECKPOINTS},
        "correct": {name: {str(k): sum(v) / len(v) for k, v in by_k.items()} for name, by_k in right.items()},
    }


def main(argv: Sequence[str]) -> None:
    if len(argv) < 2:
        sys.exit("usage: judging_bounds.py QRELS RUN...")
    result = study(read_runs(argv[1:]), read_any_qrels(argv[0]))
    result["command"] = "tools/judging_bounds.py " + " ".join(argv)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
