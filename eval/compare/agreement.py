"""What can be measured without judgments: how often systems find nothing, how much their top results
overlap, the questions on which they disagree most; and, with a few judgments, how much of each system's
top results was judged and how small a difference so few queries can detect."""

from __future__ import annotations

import functools
import itertools
import json
import math
from collections.abc import Mapping, Sequence
from importlib.resources import files
from typing import Any

from ..metrics.measures import ranked_ids
from ..synth.wordfind import script_counts

#: Depth at which result lists are compared (and Judged@k is counted).
DEPTH = 10
#: Rank-biased overlap's persistence: p = 0.9 puts about 86% of the weight on the first 10 ranks.
RBO_P = 0.9
#: Below this many judged queries a report warns that its conclusions rest on few queries.
FEW_QUERIES = 25
#: The detectable difference is stated for a two-sided test at this level with this power (data/power_table.json
#: was computed for them).
ALPHA = 0.05
POWER = 0.8
# Per-query differences this close, relative to their size, are the same difference up to float noise.
_SAME = 1e-9

Ranked = Mapping[str, Mapping[str, Sequence[str]]]  # system -> query -> doc ids, best first


def jaccard(a: Sequence[str], b: Sequence[str]) -> float:
    """|A ∩ B| / |A ∪ B| of two result sets; two empty lists agree (1.0)."""
    left, right = set(a), set(b)
    union = left | right
    return len(left & right) / len(union) if union else 1.0


def rbo(a: Sequence[str], b: Sequence[str], p: float = RBO_P) -> float:
    """Extrapolated rank-biased overlap of two rankings (Webber, Moffat and Zobel, TOIS 2010, eq. 32),
    for lists of unequal length too; two empty lists agree (1.0), one empty list shares nothing (0.0)."""
    if not 0 < p < 1:
        raise ValueError(f"rbo: p must be in (0, 1), got {p}")
    short, long = (a, b) if len(a) <= len(b) else (b, a)
    s, length = len(short), len(long)
    if length == 0:
        return 1.0
    if s == 0:
        return 0.0
    seen_short: set[str] = set()
    seen_long: set[str] = set()
    overlap = 0  # X_d: items shared by the two prefixes of depth d
    x: list[int] = []
    for d in range(length):
        item_long = long[d]
        item_short = short[d] if d < s else None
        if item_short is not None:
            if item_short in seen_long:
                overlap += 1
            seen_short.add(item_short)
        if item_long in seen_short:
            overlap += 1
        seen_long.add(item_long)
        x.append(overlap)
    x_s, x_l = x[s - 1], x[length - 1]
    total = sum(x[d - 1] / d * p**d for d in range(1, length + 1))
    total += sum(x_s * (d - s) / (s * d) * p**d for d in range(s + 1, length + 1))
    return (1 - p) / p * total + ((x_l - x_s) / length + x_s / s) * p**length


def zero_hit_rate(runs: Ranked, queries: Sequence[str]) -> dict[str, float]:
    """Per system, the share of questions it returns nothing for."""
    if not queries:
        return {system: 0.0 for system in runs}
    return {system: sum(1 for q in queries if not docs.get(q)) / len(queries) for system, docs in runs.items()}


def overlaps(runs: Ranked, queries: Sequence[str], depth: int = DEPTH) -> list[dict[str, Any]]:
    """Every pair of systems: mean Jaccard of their top ``depth`` sets and mean RBO over the questions."""
    pairs = []
    for left, right in itertools.combinations(runs, 2):
        jac = [jaccard(_top(runs[left], q, depth), _top(runs[right], q, depth)) for q in queries]
        rb = [rbo(_top(runs[left], q, depth), _top(runs[right], q, depth)) for q in queries]
        pairs.append(
            {
                "a": left,
                "b": right,
                f"jaccard@{depth}": round(sum(jac) / len(jac), 4) if jac else None,
                f"rbo@{depth}": round(sum(rb) / len(rb), 4) if rb else None,
            }
        )
    return pairs


def disagreements(runs: Ranked, queries: Sequence[str], count: int = 10, depth: int = DEPTH) -> list[dict[str, Any]]:
    """The ``count`` questions whose systems' top ``depth`` results overlap least (mean pairwise Jaccard),
    ties by question id; each with that mean and every system's first three results."""
    systems = list(runs)
    scored = []
    for query in queries:
        values = [
            jaccard(_top(runs[a], query, depth), _top(runs[b], query, depth))
            for a, b in itertools.combinations(systems, 2)
        ]
        scored.append((sum(values) / len(values) if values else 1.0, query))
    scored.sort()
    return [
        {
            "query": query,
            f"mean_jaccard@{depth}": round(mean, 4),
            "top": {system: list(_top(runs[system], query, 3)) for system in systems},
        }
        for mean, query in scored[:count]
    ]


def judged_at(
    runs: Ranked, qrels: Mapping[str, Mapping[str, int]], queries: Sequence[str], depth: int = DEPTH
) -> dict[str, dict[str, Any]]:
    """Per system: Judged@depth (the judged passages in its top ``depth`` over ``depth``, averaged over
    ``queries``: a shorter list's missing places count as unjudged, where ir_measures' Judged divides by the
    list's length) and the number of unjudged passages in those tops."""
    out = {}
    for system, docs in runs.items():
        shares, unjudged = [], 0
        for query in queries:
            top = _top(docs, query, depth)
            known = qrels.get(query, {})
            judged = sum(1 for doc in top if doc in known)
            unjudged += len(top) - judged
            shares.append(judged / depth)
        out[system] = {
            f"judged@{depth}": round(sum(shares) / len(shares), 4) if shares else 0.0,
            "unjudged_in_top": unjudged,
        }
    return out


def smallest_p(queries: int) -> float:
    """The smallest two-sided p-value the exact sign-flip test can give on ``queries`` paired queries:
    ``2 ** (1 - n)`` (every difference with the same sign); above alpha, nothing can be significant."""
    return min(1.0, 2.0 ** (1 - queries))


@functools.cache
def power_table() -> dict[str, Any]:
    """``data/power_table.json``: c(n) = delta / sd, the smallest standardized mean difference the paired
    randomization test detects at ``ALPHA`` with ``POWER`` on n normal per-query differences (n = 6 .. 100),
    with the parameters tools/power_table.py computed it with."""
    text = (files("rag_eval.eval") / "data" / "power_table.json").read_text(encoding="utf-8")
    return json.loads(text)


def detectable_difference(differences: Sequence[float]) -> float | None:
    """The smallest mean difference the paired randomization test (metrics/significance.py, two-sided, at ``ALPHA``)
    detects with ``POWER`` when per-query differences are normal with the spread of ``differences``:
    c(n) * sd from :func:`power_table` (simulated on the test itself) up to its largest n; above it, c scaled
    as 1 / sqrt(n) from there, which slightly overstates it (the normal approximation's small-sample penalty,
    about 1% at 100 queries, shrinks further with n). None when the sign-flip test cannot reach ``ALPHA``
    (:func:`smallest_p`: five queries or fewer) or the differences do not vary (two identical systems): there
    is then no spread to size a difference from."""
    n = len(differences)
    if smallest_p(n) > ALPHA:
        return None
    if max(differences) - min(differences) <= _SAME * max(abs(d) for d in differences):
        return None
    mean = sum(differences) / n
    sd = math.sqrt(sum((d - mean) ** 2 for d in differences) / (n - 1))
    effects = power_table()["effect"]
    largest = max(int(size) for size in effects)
    if n <= largest:
        return effects[str(n)] * sd
    return effects[str(largest)] * math.sqrt(largest / n) * sd


def test_reach(queries: int, detectable: float | None, metric: str, basis: str) -> str:
    """What a paired randomization test on ``queries`` queries can be expected to detect, in words, for a
    few-queries warning: nothing at all when the exact test's smallest p-value is over alpha, else the
    ``detectable`` difference in ``metric``, with ``basis`` saying whose per-query differences it comes from
    (None: those differences do not vary, so no size can be given)."""
    if smallest_p(queries) > ALPHA:
        return (
            f"can find no difference significant: with {queries} queries the smallest p-value it can give "
            f"is {smallest_p(queries):.3f}, over alpha {ALPHA}"
        )
    if detectable is None:
        return (
            f"has no smallest detectable difference in {metric} to report: the systems' per-query differences are "
            f"all the same, so there is no spread to size one from"
        )
    stated = (
        f"(paired, alpha {ALPHA} before Holm's correction, power {POWER}, per-query differences taken as normal, "
        f"{basis})"
    )
    if detectable >= 1:
        return f"cannot be expected to detect any difference in {metric} (it would need {detectable:.2f}) {stated}"
    return f"can only be expected to detect a difference in {metric} of about {detectable:.3f} or more {stated}"


def _top(docs: Mapping[str, Sequence[str]], query: str, depth: int) -> Sequence[str]:
    return docs.get(query, ())[:depth]


def label_free(
    rows: list[dict[str, Any]],
    runs: Mapping[str, Sequence[Any]],
    dataset: Any,
    per_query: Mapping[str, Mapping[str, Mapping[str, float]]],
    metrics: Sequence[str],
    *,
    no_text: bool = False,
) -> dict[str, Any]:
    """The report's section of what needs no judgments (zero hits, overlap, disagreements), plus, when there
    are judgments, Judged@10 and a warning when the judged queries are few. Adds ``zero_hit_rate`` (and
    ``judged@10``) to each row of ``rows``."""
    queries = list(dataset.queries)
    ranked = {name: ranked_ids(run) for name, run in runs.items()}
    zero = zero_hit_rate(ranked, queries)
    judged_queries = sorted(dataset.judged())
    judged = judged_at(ranked, dataset.qrels, judged_queries) if judged_queries else None
    unjudged = judged_at(ranked, dataset.qrels, queries) if judged_queries else None
    for row in rows:
        row["zero_hit_rate"] = round(zero[row["name"]], 4)
        if judged is not None and unjudged is not None:
            row[f"judged@{DEPTH}"] = judged[row["name"]][f"judged@{DEPTH}"]
            row[f"unjudged_in_top{DEPTH}"] = unjudged[row["name"]]["unjudged_in_top"]
    hardest = disagreements(ranked, queries)
    titles = {passage.id: passage.title for passage in dataset.corpus.values()}
    for item in hardest:
        if not no_text:
            item["text"] = dataset.queries[item["query"]].text
            item["titles"] = {doc: titles.get(doc, "") for docs in item["top"].values() for doc in docs}
    section: dict[str, Any] = {
        "depth": DEPTH,
        "rbo_p": RBO_P,
        "questions": len(queries),
        # Han-only, mixed and Latin-only questions: what a synthetic set's script mix was (the report shows it).
        "scripts": script_counts(query.text for query in dataset.queries.values()),
        "judged": bool(metrics),
        "zero_hit_rate": {name: round(value, 4) for name, value in zero.items()},
        "overlap": overlaps(ranked, queries),
        "disagreements": hardest,
        "warning": None,
        "detectable_difference": None,
    }
    section["detectable_difference"], section["warning"] = _few_queries(rows, per_query, metrics)
    if not metrics:  # nothing to choose by here: say what rag-eval measured across judged collections
        from .recommended import default_choice

        choice = default_choice()
        if choice is not None:
            section["default_choice"] = choice
    return section


def _few_queries(
    rows: list[dict[str, Any]], per_query: Mapping[str, Mapping[str, Mapping[str, float]]], metrics: Sequence[str]
) -> tuple[float | None, str | None]:
    """The smallest difference the leader's test against the others can detect, and with fewer than
    ``FEW_QUERIES`` judged queries, a warning saying so (None, None for fewer than two scored systems)."""
    scored = [row for row in rows if row.get("metrics")]
    if not metrics or len(scored) < 2:
        return None, None
    first = metrics[0]
    ordered = sorted(scored, key=lambda row: -row["metrics"][first])
    leader = ordered[0]["name"]
    # The leader against every other system: the widest spread of per-query differences is the one the
    # statement rests on (two near-identical systems would promise a sensitivity the others do not have).
    found = []
    for other in ordered[1:]:
        common = sorted(set(per_query[leader]) & set(per_query[other["name"]]))
        diffs = [per_query[leader][q][first] - per_query[other["name"]][q][first] for q in common]
        found.append((len(common), detectable_difference(diffs)))
    count = min(n for n, _ in found)
    # A pair whose differences do not vary (None once every pair can reach alpha) adds no spread.
    spread = [value for _, value in found if value is not None]
    detectable = max(spread) if spread and smallest_p(count) <= ALPHA else None
    if count >= FEW_QUERIES:
        return None if detectable is None else round(detectable, 4), None
    basis = "from the widest spread of per-query differences between the leading system and another"
    warning = (
        f"conclusions rest on {count} judged queries: at this size the randomization test "
        f"{test_reach(count, detectable, first, basis)}; judge more questions (at least {FEW_QUERIES}) before "
        "trusting a smaller difference"
    )
    return None if detectable is None else round(detectable, 4), warning
