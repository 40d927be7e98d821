"""What ``rag-eval compare`` measures across its rows: bootstrap intervals, the reference system, significance
against it, the largest gains and losses, means by query kind, and whether exact engines agree."""

from __future__ import annotations

import dataclasses
import math
from statistics import NormalDist
from typing import Any

import numpy as np

from ...engines.base import DEFAULT_ENGINE, get_engine
from ...errors import RagEvalError
from ..datasets.records import Dataset
from ..metrics.measures import RankedDoc, is_quality
from ..metrics.significance import SEED, holm, randomization_test, student_t_quantile, win_tie_loss
from .runner import System

DEFAULT_REFERENCE = "bigram"
BOOTSTRAP = 1000


def bootstrap_ci(values: list[float], seed: int = SEED) -> list[float]:
    """95% interval of the mean of ``values``: Hesterberg's expanded percentile bootstrap (The American
    Statistician 69(4), 2015), the bootstrap means' quantiles at Phi(-+sqrt(n / (n - 1)) t_{0.975, n-1}) instead
    of 2.5% and 97.5%, which widens them as a t interval is wider than a normal one (the plain percentile
    interval covered about 88% at 10 queries). Seeded; [0, 0] without values, [v, v] when all are v."""
    if not values:
        return [0.0, 0.0]
    data = np.asarray(values, dtype=float)
    n = len(data)
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, n, size=(BOOTSTRAP, n))].mean(axis=1)
    if n == 1:
        return [round(float(means[0]), 4)] * 2
    tail = NormalDist().cdf(-math.sqrt(n / (n - 1)) * student_t_quantile(0.975, n - 1))
    return [round(float(np.quantile(means, tail)), 4), round(float(np.quantile(means, 1 - tail)), 4)]


def engine_agreement(
    systems: list[System], runs: dict[str, list[RankedDoc]], per_query: dict[str, dict[str, dict[str, float]]]
) -> list[dict[str, Any]]:
    """For each system run under several exact engines (fts5 and impact): whether their runs (ids, ranks and
    written scores) and per-query metrics are identical, as an exact engine promises."""
    groups: dict[System, list[System]] = {}
    for system in systems:
        groups.setdefault(dataclasses.replace(system, engine=DEFAULT_ENGINE), []).append(system)
    found = []
    for base, members in groups.items():
        exact = [m for m in members if get_engine(m.engine).exact]
        if len(exact) < 2:
            continue
        first = exact[0]
        by_query: dict[str, list[RankedDoc]] = {}
        for doc in runs[first.name]:
            by_query.setdefault(doc.query_id, []).append(doc)
        for other in exact[1:]:
            theirs: dict[str, list[RankedDoc]] = {}
            for doc in runs[other.name]:
                theirs.setdefault(doc.query_id, []).append(doc)
            differing = sorted(q for q in set(by_query) | set(theirs) if by_query.get(q) != theirs.get(q))
            found.append(
                {
                    "system": base.name,
                    "engines": [first.engine, other.engine],
                    "names": [first.name, other.name],
                    "queries_with_hits": len(set(by_query) | set(theirs)),
                    "queries_differing": len(differing),
                    "first_differing": differing[:5],
                    "same_metrics": per_query.get(first.name) == per_query.get(other.name),
                }
            )
    return found


def reference_system(names: list[str], systems: list[System], reference: str | None) -> str | None:
    wanted = reference or DEFAULT_REFERENCE
    for name in names:
        if name == wanted or name.split(" | ")[0] == wanted or name.split(" | ")[0].split(":")[0] == wanted:
            return name
    if reference:
        raise RagEvalError(f"reference system {reference!r} is not among the systems compared: {', '.join(names)}")
    return names[0] if names else None


def by_query_kind(
    dataset: Dataset, per_query: dict[str, dict[str, dict[str, float]]], metrics: list[str]
) -> dict[str, Any]:
    kinds: dict[str, list[str]] = {}
    for query in dataset.queries.values():
        kinds.setdefault(query.kind or "-", []).append(query.id)
    out: dict[str, Any] = {}
    for name, values in per_query.items():
        table = {}
        for kind, ids in sorted(kinds.items()):
            judged = [q for q in ids if q in values]
            if judged:
                table[kind] = {
                    "queries": len(judged),
                    **{m: round(sum(values[q][m] for q in judged) / len(judged), 4) for m in metrics},
                }
        out[name] = table
    return out


def significance(
    rows: list[dict[str, Any]], per_query: dict[str, Any], judged: list[str], metrics: list[str], reference: str | None
) -> None:
    if reference is None:
        return
    others = [row for row in rows if row["name"] != reference]
    # A count (NumRet, NumRel) is not better when higher: no arrow says a system retrieving more is better.
    for metric in [m for m in metrics if is_quality(m)]:
        base = [per_query[reference][q][metric] for q in judged]
        p_values = [randomization_test([per_query[row["name"]][q][metric] for q in judged], base) for row in others]
        for row, p, adjusted in zip(others, p_values, holm(p_values), strict=False):
            values = [per_query[row["name"]][q][metric] for q in judged]
            wins, ties, losses = win_tie_loss(values, base)
            row.setdefault("significance", {})[metric] = {
                "delta": round(float(np.mean(values) - np.mean(base)) if judged else 0.0, 4),
                "p": round(p, 5),
                "p_holm": round(adjusted, 5),
                "significant": adjusted < 0.05,
                "wins": wins,
                "ties": ties,
                "losses": losses,
            }


def gains_table(
    rows: list[dict[str, Any]],
    per_query: dict[str, Any],
    dataset: Dataset,
    metric: str,
    reference: str | None,
    no_text: bool,
    count: int = 5,
) -> None:
    if reference is None:
        return
    for row in rows:
        if row["name"] == reference:
            continue
        deltas = sorted(
            ((per_query[row["name"]][q][metric] - per_query[reference][q][metric], q) for q in per_query[reference]),
            key=lambda d: (d[0], d[1]),
        )

        def entry(delta: float, query_id: str) -> dict[str, Any]:
            item: dict[str, Any] = {"query": query_id, "delta": round(delta, 4), "kind": dataset.queries[query_id].kind}
            if not no_text:
                item["text"] = dataset.queries[query_id].text
            return item

        row["largest_gains"] = [entry(d, q) for d, q in reversed(deltas[-count:]) if d > 0]
        row["largest_losses"] = [entry(d, q) for d, q in deltas[:count] if d < 0]
