"""What ``rag-eval tune`` reports: the held-back evidence, the recommendation in words and as a systems file,
the few-queries warning, the dev chart and report.md (steps 5 and 6 of :mod:`.tune`)."""

from __future__ import annotations

import json
from typing import Any

from .agreement import ALPHA, FEW_QUERIES, POWER, detectable_difference, test_reach
from .engines import DEFAULT_ENGINE
from .records import Dataset
from .stats import holm, randomization_test
from .tune_search import TIE_RULE, Trial
from .tune_space import Candidate

#: Tied candidates the recommendation names before it says how many more there are.
TIED_NAMED = 3


def dev_chart(trials: list[Trial], metric: str) -> Any:
    """The dev candidates of the last round: quality against p95, marker area by index size, the front drawn."""
    from . import charts

    rows: list[dict[str, Any]] = [
        {
            "name": t.candidate.name,
            "metrics": {metric: t.quality},
            "latency_ms": {"search": {"p95": t.p95_ms}},
            "build": {"index_bytes": None if t.index_mb is None else t.index_mb * 1e6},
        }
        for t in trials
        if t.round == 2 and t.p95_ms is not None
    ]
    if not rows:
        return None
    labels = {str(row["name"]): str(row["name"]) for row in rows}
    return charts.quality_latency(rows, labels, metric)


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
    held: Dataset, rows: dict[str, dict[str, Any]], on_front: list[Trial], singles: list[Trial], metric: str
) -> dict[str, Any]:
    """Each front member against the best single tokenizer on the held-back queries."""
    judged = sorted(held.judged())

    def values(name: str) -> list[float]:
        per_query = rows[name].get("_per_query") or {}
        return [per_query.get(q, {}).get(metric, 0.0) for q in judged]

    best_single = max(singles, key=lambda t: rows[t.candidate.name]["metrics"][metric])
    base = values(best_single.candidate.name)
    # The pair the detectable difference is measured on: the recommendation and the best single tokenizer, or,
    # when the recommendation is that tokenizer, the next best single one.
    rivals = sorted(
        (t for t in singles if t.candidate.name != on_front[0].candidate.name),
        key=lambda t: -rows[t.candidate.name]["metrics"][metric],
    )
    pair = (on_front[0].candidate.name, rivals[0].candidate.name) if rivals else None
    detectable = None
    if pair is not None:
        first, second = values(pair[0]), values(pair[1])
        detectable = detectable_difference([a - b for a, b in zip(first, second, strict=True)])
    members = [t for t in on_front if t.candidate.name != best_single.candidate.name]
    p_values = [randomization_test(values(t.candidate.name), base) for t in members]
    adjusted = holm(p_values)
    out = []
    for trial, p, p_holm in zip(members, p_values, adjusted, strict=True):
        row = rows[trial.candidate.name]
        out.append(
            {
                "candidate": trial.candidate.name,
                metric: row["metrics"][metric],
                "delta": round(row["metrics"][metric] - rows[best_single.candidate.name]["metrics"][metric], 4),
                "p": round(p, 5),
                "p_holm": round(p_holm, 5),
                "p95_ms": (row.get("latency_ms") or {}).get("search", {}).get("p95"),
                "index_mb": round(((row.get("build") or {}).get("index_bytes") or 0) / 1e6, 3),
            }
        )
    single_rows = {t.candidate.name: rows[t.candidate.name]["metrics"][metric] for t in singles}
    return {
        "judged_queries": len(judged),
        "best_single": best_single.candidate.name,
        "best_single_quality": rows[best_single.candidate.name]["metrics"][metric],
        "singles": single_rows,
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
) -> str:
    """The recommendation in plain words: chosen on dev (how a tie was broken), judged on the held-back queries
    (or another set's)."""
    name = best.candidate.name
    chosen = "the best on dev"
    if tied:
        names = [t.candidate.name for t in tied]
        listed = ", ".join(names[:TIED_NAMED]) + (
            f" and {len(names) - TIED_NAMED} more" if len(names) > TIED_NAMED else ""
        )
        chosen += f" (tied with {listed} at {metric} {best.quality:.4f}; of tied candidates tune takes {TIE_RULE})"
    single = test["best_single"]
    found = next((item for item in test["front"] if item["candidate"] == name), None)
    cost = f"{best.p95_ms:.2f} ms p95 search latency and {best.index_mb:.1f} MB (dev)"
    if found is None:  # the recommendation is itself the best single tokenizer on the held-back queries
        evidence = (
            f"{chosen}, and the best single strategy on the {test['judged_queries']} {queries} "
            f"too ({metric} {test['best_single_quality']:.4f}), at {cost}"
        )
    else:
        significant = found["p_holm"] < 0.05
        verdict = (
            "significantly better than"
            if significant and found["delta"] > 0
            else "significantly worse than"
            if significant
            else "not significantly different from"
        )
        # Holm's correction runs over the tested front, whose size follows measured latency: say over how many, and
        # give the recommendation's own p, which does not move with it.
        tested = len(test["front"])
        corrected = (
            f"p = {found['p']:.4f}; {found['p_holm']:.4f} Holm-corrected over the {tested} front members tested"
            if tested > 1
            else f"p = {found['p_holm']:.4f}"
        )
        evidence = (
            f"{chosen}; on {test['judged_queries']} {queries} it is {verdict} the best single "
            f"strategy {single} ({found['delta']:+.4f} {metric}, {corrected}), at {cost}"
        )
    faster = sorted((t for t in on_front if (t.p95_ms or 0) < (best.p95_ms or 0)), key=lambda t: t.p95_ms or 0)
    alternative = (
        f"; if latency matters more, {faster[0].candidate.name} ({faster[0].p95_ms:.2f} ms p95, "
        f"{metric} {faster[0].quality:.4f} on dev)"
        if faster
        else ""
    )
    return f"Use {name}: {evidence}{alternative}."


def recommendation_toml(candidate: Candidate, paragraph: str) -> str:
    """A --systems file that compare (and, for one system, index build --from) accepts."""
    lines = ["# Written by rag-eval tune. " + paragraph, ""]
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
        f"Dev and test: {split['dev_queries']} and {split['test_queries']} queries ({split['rule']}, salt "
        f"`{split['salt']}`, dev fraction {split['dev_fraction']}); evaluated on `{report['evaluated_on']}`. "
        f"Space: {report['space_size']} candidates, budget {report['budget']}; {report['seconds']} s.",
        "",
        f"## Held-back evidence ({report['test']['judged_queries']} judged queries)",
        "",
        f"Best single tokenizer: `{report['test']['best_single']}` ({metric} "
        f"{report['test']['best_single_quality']:.4f}).",
        "",
        f"| front member | {metric} | Δ vs best single | p (Holm) | p95 ms | index MB |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for item in report["test"]["front"]:
        out.append(
            f"| `{item['candidate']}` | {item[metric]:.4f} | {item['delta']:+.4f} | {item['p_holm']:.4f} | "
            f"{item['p95_ms'] if item['p95_ms'] is not None else '-'} | {item['index_mb']} |"
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
            f"| `{trial['candidate']}` | {trial['round']} | {trial['queries']} | {trial['quality']:.4f} | "
            f"{trial['p95_ms']} | {trial['index_mb']} | "
            f"{'yes' if trial['candidate'] in on_front and trial['round'] == 2 else ''} |"
        )
    return "\n".join(out) + "\n"
