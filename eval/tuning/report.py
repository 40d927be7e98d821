"""What ``rag-eval tune`` reports: the held-back evidence, the recommendation in words and as a systems file,
the few-queries warning, the dev chart and report.md (steps 5 and 6 of :mod:`.tune`)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from ...engines.base import DEFAULT_ENGINE
from ..compare.agreement import ALPHA, FEW_QUERIES, POWER, detectable_difference, test_reach
from ..datasets.records import Dataset
from ..datasets.split_record import TunedSplit, split_block
from ..metrics.significance import holm, randomization_test
from ..reporting.model import BuildInfo, Costs, LatencySummary, RowLatency, SystemResult
from .search import TIE_RULE, Measured, Trial
from .space import Candidate

#: Tied candidates the recommendation names before it says how many more there are.
TIED_NAMED = 3


def dev_chart(trials: list[Trial], metric: str) -> Any:
    """The dev candidates of the last round: quality against p95, marker area by index size, the front drawn."""
    from ..reporting import charts

    rows = [
        SystemResult(
            t.candidate.name,
            metrics={metric: t.quality},
            costs=Costs(
                latency=RowLatency(search=LatencySummary(p95=t.p95_ms)),
                build=BuildInfo(index_bytes=None if t.index_mb is None else t.index_mb * 1e6),
            ),
        )
        for t in trials
        if t.round == 2 and t.p95_ms is not None
    ]
    if not rows:
        return None
    return charts.quality_latency(rows, {row.name: row.name for row in rows}, metric)


def trial_json(trial: Trial) -> dict[str, Any]:
    return {
        "candidate": trial.candidate.name,
        "round": trial.round,
        "queries": trial.queries,
        "quality": round(trial.quality, 4),
        "p95_ms": trial.p95_ms,
        "index_mb": trial.index_mb,
        "feasible": trial.feasible,
    }


def held_out_evidence(
    held: Dataset, rows: dict[str, Measured], on_front: list[Trial], singles: list[Trial], metric: str
) -> dict[str, Any]:
    """Each front member against the best single tokenizer on the held-back queries."""
    judged = sorted(held.judged())

    def values(name: str) -> list[float]:
        per_query = rows[name].per_query
        return [per_query.get(q, {}).get(metric, 0.0) for q in judged]

    def quality(trial: Trial) -> float:
        return rows[trial.candidate.name].row.metrics[metric]

    best_single = max(singles, key=quality)
    base = values(best_single.candidate.name)
    # The pair the detectable difference is measured on: the recommendation and the best single tokenizer, or,
    # when the recommendation is that tokenizer, the next best single one.
    rivals = sorted((t for t in singles if t.candidate.name != on_front[0].candidate.name), key=lambda t: -quality(t))
    pair = (on_front[0].candidate.name, rivals[0].candidate.name) if rivals else None
    detectable = None
    if pair is not None:
        first, second = values(pair[0]), values(pair[1])
        detectable = detectable_difference([a - b for a, b in zip(first, second, strict=True)])
    members = [t for t in on_front if t.candidate.name != best_single.candidate.name]
    p_values = [randomization_test(values(t.candidate.name), base) for t in members]
    out = []
    for trial, p, p_holm in zip(members, p_values, holm(p_values), strict=True):
        row = rows[trial.candidate.name].row
        out.append(
            {
                "candidate": trial.candidate.name,
                metric: row.metrics[metric],
                # From the per-query values, as compare computes it: the difference of two rounded means can be
                # 0.0001 off (+0.0322 where compare, on the same queries, said +0.0323).
                "delta": round(float(np.mean(values(trial.candidate.name)) - np.mean(base)) if judged else 0.0, 4),
                "p": round(p, 5),
                "p_holm": round(p_holm, 5),
                "p95_ms": None if row.search is None else row.search.p95,
                "index_mb": round((row.index_bytes or 0) / 1e6, 3),
            }
        )
    return {
        "queries": len(held.queries),
        "judged_queries": len(judged),
        "best_single": best_single.candidate.name,
        "best_single_quality": quality(best_single),
        "singles": {t.candidate.name: quality(t) for t in singles},
        "front": out,
        "detectable_difference": None
        if detectable is None or pair is None
        else {"between": list(pair), metric: round(detectable, 4), "alpha": ALPHA, "power": POWER},
    }


def few_queries_warning(dev_judged: int, test: dict[str, Any], metric: str, queries: str) -> str | None:
    """A warning when the dev or the held-back judged queries number fewer than ``FEW_QUERIES``, the size below
    which ``compare`` warns too: with the difference the held-back test can detect at this size."""
    test_judged = test["judged_queries"]
    if dev_judged >= FEW_QUERIES and test_judged >= FEW_QUERIES:
        return None
    reach = ""
    found = test.get("detectable_difference")
    if found is not None:
        basis = f"from the spread of the per-query differences between {' and '.join(found['between'])}"
        reach = f"; the randomization test on them {test_reach(test_judged, found[metric], metric, basis)}"
    return (
        f"the recommendation rests on few judged queries: it was picked on {dev_judged} judged dev queries and "
        f"checked on {test_judged} judged {queries}{reach}; judge more questions (at least {FEW_QUERIES} on each "
        f"side) before trusting the choice"
    )


def _paragraph(
    best: Trial,
    test: dict[str, Any],
    metric: str,
    on_front: list[Trial],
    queries: str = "held-back queries",
    tied: list[Trial] | None = None,
    dev: tuple[int, int] | None = None,
) -> str:
    """The recommendation in plain words: what it was chosen on (the dev queries; how a tie was broken), then the
    evidence on the held-back queries (or another set's), which does not change the choice, even where another
    front member did better there."""
    name = best.candidate.name
    found = next((item for item in test["front"] if item["candidate"] == name), None)
    # None: the recommendation is itself the best single tokenizer on the held-back queries
    quality = test["best_single_quality"] if found is None else found[metric]
    beaten = _beaten(name, test, metric, queries, quality, found)
    faster = sorted((t for t in on_front if (t.p95_ms or 0) < (best.p95_ms or 0)), key=lambda t: t.p95_ms or 0)
    alternative = (
        f" If latency matters more: {faster[0].candidate.name} ({faster[0].p95_ms:.2f} ms p95, "
        f"{metric} {faster[0].quality:.4f} on dev)."
        if faster
        else ""
    )
    chosen = _chosen(best, metric, tied, dev)
    return f"{chosen} {_evidence(test, metric, queries, found)}{beaten}{alternative}"


def _chosen(best: Trial, metric: str, tied: list[Trial] | None, dev: tuple[int, int] | None) -> str:
    """What the pick was chosen on: the dev queries, its quality and costs there, and the candidates it tied."""
    chosen = f"Chosen on the {dev[0]} dev queries ({dev[1]} judged)" if dev is not None else "Chosen on the dev queries"
    chosen += f": {best.candidate.name}, the best by {metric} there ({best.quality:.4f})"
    if tied:
        names = [t.candidate.name for t in tied]
        listed = ", ".join(names[:TIED_NAMED]) + (
            f" and {len(names) - TIED_NAMED} more" if len(names) > TIED_NAMED else ""
        )
        chosen += f", tied with {listed} (of tied candidates tune takes {TIE_RULE})"
    return chosen + f", at {best.p95_ms:.2f} ms p95 search latency and {best.index_mb:.1f} MB."


def _evidence(test: dict[str, Any], metric: str, queries: str, found: dict[str, Any] | None) -> str:
    """The evidence on the held-back queries: the pick against the best single strategy, on its own test."""
    where = f"the {test['queries']} {queries} ({test['judged_queries']} judged)"
    if found is None:
        return f"Evidence on {where}: {metric} {test['best_single_quality']:.4f}, the best single strategy there too."
    significant = found["p"] < 0.05
    verdict = (
        "significantly better"
        if significant and found["delta"] > 0
        else "significantly worse"
        if significant
        else "not significantly different"
    )
    # The pick was fixed on dev before these queries were read: its comparison with the best single is one
    # planned test (the p compare gives for the same two systems on the same queries), not one of the front's.
    return (
        f"Evidence on {where}: {metric} {found[metric]:.4f} against {test['best_single_quality']:.4f} for the best "
        f"single strategy {test['best_single']} ({found['delta']:+.4f}), {verdict} (p = {found['p']:.4f})."
    )


def _beaten(
    name: str, test: dict[str, Any], metric: str, queries: str, quality: float, found: dict[str, Any] | None
) -> str:
    """The front member that did better than the pick on the held-back queries, and why the pick stays."""
    better = sorted(
        (item for item in test["front"] if item["candidate"] != name and item[metric] > quality),
        key=lambda item: -item[metric],
    )
    if not better:
        return ""
    top = better[0]
    more = f" (and {len(better) - 1} more front member{'s' if len(better) > 2 else ''})" if len(better) > 1 else ""
    costs = f", at {_ms(top['p95_ms'])} p95 and {top['index_mb']:.1f} MB"
    if found is not None:
        costs += f" (the pick: {_ms(found['p95_ms'])} and {found['index_mb']:.1f} MB)"
    return (
        f" On these queries {top['candidate']}{more} did better than the pick: {metric} {top[metric]:.4f}{costs}. "
        f"The pick stays the dev choice: the {queries} are its evidence, and choosing again on them would leave "
        "none unseen."
    )


def code_cell(name: str) -> str:
    """A candidate's name as a code span in a Markdown table cell: its ``|`` (``bigram | query:...``) escaped, or
    the row splits there."""
    return "`" + name.replace("|", "\\|") + "`"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} ms"


def recommendation_toml(
    candidate: Candidate, paragraph: str, split: TunedSplit | list[TunedSplit] | None = None
) -> str:
    """A --systems file that compare (and, for one system, index build --from) accepts, with the split tune chose on
    (a block of comments that versions before it skip; one block per collection for a tune across collections)."""
    lines = ["# Written by rag-eval tune. " + paragraph, ""]
    for block in [] if split is None else split if isinstance(split, list) else [split]:
        lines += [*split_block(block), ""]
    systems = [candidate.system] if candidate.system is not None else list(candidate.members)
    for system in systems:
        assert system is not None
        lines += ["[[system]]", f"tokenizer = {json.dumps(system.tokenizer, ensure_ascii=False)}"]
        if system.query:
            lines.append(f"query = {json.dumps(system.query)}")
        if system.engine not in ("", DEFAULT_ENGINE):
            lines.append(f"engine = {json.dumps(system.engine)}")
        lines.append("")
    if candidate.fusion is not None:
        lines += [
            "[[fusion]]",
            f"method = {json.dumps(candidate.fusion.method)}",
            "systems = [" + ", ".join(json.dumps(m, ensure_ascii=False) for m in candidate.fusion.members) + "]",
            "",
        ]
    return "\n".join(lines)


def render_tune(report: dict[str, Any]) -> str:
    """report.md: the recommendation, the held-back evidence, the dev front and every trial."""
    metric = report["metric"]
    split = report["split"]
    out = [
        f"# rag-eval tune: {report['dataset']['id']}",
        "",
        report["paragraph"],
        "",
        *([f"Warning: {report['warning']}.", ""] if report.get("warning") else []),
        f"Dev and held-back: {split['dev_queries']} and {split['test_queries']} queries ({split['rule']}, salt "
        f"`{split['salt']}`, dev fraction {split['dev_fraction']}); evaluated on `{report['evaluated_on']}`. "
        f"Space: {report['space_size']} candidates, budget {report['budget']}; {report['seconds']} s.",
        "",
        f"## Held-back evidence ({report['test']['judged_queries']} judged queries)",
        "",
        f"The recommendation was chosen on the dev queries alone, before these were read: they are its evidence, "
        "and they do not change the choice, even where another front member did better on them. "
        f"Best single tokenizer here: `{report['test']['best_single']}` ({metric} "
        f"{report['test']['best_single_quality']:.4f}). p is each member's own paired randomization test against "
        "it; for the recommendation, fixed before these queries were read, it is the one planned test (the p "
        "`compare --systems recommendation.toml` gives on the same queries). Holm corrects the front's tests "
        "together, for reading the other members' rows.",
        "",
        f"| front member | {metric} | Δ vs best single | p | p (Holm over the front) | p95 ms | index MB |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for item in report["test"]["front"]:
        mark = " (the recommendation)" if item["candidate"] == report["recommendation"] else ""
        out.append(
            f"| {code_cell(item['candidate'])}{mark} | {item[metric]:.4f} | {item['delta']:+.4f} | {item['p']:.4f} | "
            f"{item['p_holm']:.4f} | {item['p95_ms'] if item['p95_ms'] is not None else '-'} | {item['index_mb']} |"
        )
    if report.get("chart"):
        out += [
            "",
            "## Dev candidates",
            "",
            f"![{metric} against search p95 on the dev queries]({report['chart']['file']})",
            "",
            report["chart"]["note"] + " The chart's front is of two objectives; the recommendation's also counts "
            "index size.",
        ]
    out += [
        "",
        "## Dev trials",
        "",
        f"| candidate | round | queries | {metric} | p95 ms | index MB | on the front |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    on_front = set(report["front"])
    for trial in sorted(report["trials"], key=lambda t: (-t["round"], -t["quality"])):
        out.append(
            f"| {code_cell(trial['candidate'])} | {trial['round']} | {trial['queries']} | {trial['quality']:.4f} | "
            f"{trial['p95_ms']} | {trial['index_mb']} | "
            f"{'yes' if trial['candidate'] in on_front and trial['round'] == 2 else ''} |"
        )
    return "\n".join(out) + "\n"
