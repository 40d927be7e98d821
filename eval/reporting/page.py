"""What report.md and report.html show: :func:`page_data` formats a compare report's own numbers once, as
tables and sections both templates render; :func:`labels` and :func:`arrow` name and mark its systems."""

from __future__ import annotations

from typing import Any

from ..metrics.measures import is_quality
from ..synth.wordfind import script_shares


def labels(report: dict[str, Any]) -> tuple[dict[str, str], tuple[str, str] | None]:
    """A display label per system, and the (builder, mode) every system shares, if they share one.

    With one builder and mode for every system the tokenizer (and its query processing, if any) names a row,
    provided the short labels stay distinct; outside runs and fused systems keep their own names.
    """
    rows = report["systems"]
    shared = {(row["builder"], row["mode"]) for row in rows if row.get("mode")}
    if len(shared) == 1:
        short = {
            row["name"]: _without_builder_and_mode(row["name"]) if row.get("mode") else row["name"] for row in rows
        }
        if len(set(short.values())) == len(short):
            return short, next(iter(shared))
    return {row["name"]: row["name"] for row in rows}, None


def _without_builder_and_mode(name: str) -> str:
    """``tokenizer | builder | mode[ | query:...]`` without its builder and mode."""
    tokenizer, *rest = name.split(" | ")
    return " | ".join([tokenizer, *rest[2:]])


def _fmt(value: Any, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _column(values: list[Any], digits: int, better: str | None = None) -> list[dict[str, Any]]:
    """Formatted cells of one column; ``better`` ("high"/"low") marks the best value(s) bold when they differ.
    Values are compared as shown (rounded to ``digits``): two cells that read the same are both bold or neither."""
    shown = [round(value, digits) if isinstance(value, (int, float)) else None for value in values]
    present = [value for value in shown if value is not None]
    best = None
    if better and len(set(present)) > 1:
        best = max(present) if better == "high" else min(present)
    return [
        {
            "text": value if isinstance(value, str) else _fmt(value, digits),
            "best": rounded is not None and rounded == best,
            "arrow": "",
        }
        for value, rounded in zip(values, shown, strict=True)
    ]


def _table(
    columns: list[str], rows: list[dict[str, Any]], label: dict[str, str], cells: list[list[dict[str, Any]]]
) -> dict[str, Any]:
    """A table with a system column, then ``columns``; ``cells`` holds one list of cells per column."""
    return {
        "columns": columns,
        "rows": [
            {"system": label[row["name"]], "cells": [column[i] for column in cells]} for i, row in enumerate(rows)
        ],
    }


def _workers(build: dict[str, Any]) -> str:
    workers = build.get("workers") or 1
    if workers == 1:
        return "1"
    loads = build.get("worker_load_seconds") or []
    load = f", load {max(loads):.2f} s" if loads else ""
    return f"{workers} ({build.get('tokenize_speedup')}x{load})"


def page_data(report: dict[str, Any]) -> dict[str, Any]:
    """What report.md and report.html show, formatted once from the report's data for both templates."""
    # Keys that reports written by earlier versions lack (a committed report re-rendered) default to empty.
    report = {"skipped": [], **report}
    rows, metrics = report["systems"], report["metrics"]
    label, setting = labels(report)
    # A count (NumRet, NumRel) is not better when higher: only quality measures mark a best value.
    quality = [_column([row["metrics"][m] for row in rows], 4, "high" if is_quality(m) else None) for m in metrics]
    for m, column in zip(metrics, quality, strict=False):
        for cell, row in zip(column, rows, strict=False):
            cell["arrow"] = arrow(row, m)
    page: dict[str, Any] = {
        "title": _title(report),
        "judged": bool(metrics),
        "without_labels": _without_labels(report, rows, label),
        "report": report,
        "label": label,
        "setting": setting,
        "metrics": metrics,
        "reference": label.get(report["reference"], report["reference"]) if report.get("reference") else None,
        "quality": _table(list(metrics), rows, label, quality),
        "cost": None,
        "latency": None,
        "latency_notes": None,
        "kinds": None,
        "against": None,
        "differences": None,
        "gate": None,
        "engines": _engines(report, rows, label),
        "untimed": [label[row["name"]] for row in rows if "latency_ms" not in row],
        "cached": [],
    }
    timed = [row for row in rows if "latency_ms" in row]
    if timed:
        builds = [row["build"] for row in timed]
        # A fused system builds nothing (its members are built): "-", never a best-of-column 0 s.
        own = [None if row.get("fusion") else row["build"] for row in timed]
        fused = {row["name"] for row in timed if row.get("fusion")}
        page["cached"] = [label[row["name"]] for row in timed if not row.get("fusion") and row["build"].get("cached")]
        page["cost"] = _table(
            [
                "build s",
                "tokenizer load s",
                "tokenize chars/s",
                "workers (speed-up)",
                "index MB",
                "tokens/passage",
                "zero-hit queries",
                "no-answer false-hit rate",
                "QPS",
                "engine data MB",
                "engine RSS growth MB",
            ],
            timed,
            {**label, **{name: f"{label[name]} (members' indexes, no build)" for name in fused}},
            [
                _column([None if b is None else b.get("seconds") or 0 for b in own], 2, "low"),
                _column([None if b is None else b.get("tokenizer_load_seconds") or 0 for b in own], 2, "low"),
                _column([row["tokenize_chars_per_second"] for row in timed], 0, "high"),
                _column(["-" if b is None else _workers(b) for b in own], 0),
                _column([(b.get("index_bytes") or 0) / 1e6 for b in builds], 2, "low"),
                _column([row["tokens_per_passage"] for row in timed], 1),
                _column([row["zero_hit_queries"] for row in timed], 0, "low"),
                _column([row["no_answer_false_hit_rate"] for row in timed], 4, "low"),
                _column([row.get("qps") for row in timed], 0, "high"),
                _column([_mb(engine_data_bytes(row)) for row in timed], 2),
                _column([_mb((row.get("engine") or {}).get("rss_growth_bytes")) for row in timed], 1),
            ],
        )
        statistics = ("min", "median", "mean", "p95", "p99", "max")
        # Reports written before latency had intervals (a committed report re-rendered) show none.
        intervals = [s for s in ("median", "p95") if any(_interval(row, s) for row in timed)]
        columns, cells = [], []
        for s in statistics:
            columns.append(f"search {s}")
            # The fastest minimum is not marked: it is the query that matched nothing (0.001 ms), not a strength.
            cells.append(
                _column([row["latency_ms"]["search"].get(s) for row in timed], 3, None if s == "min" else "low")
            )
            if s in intervals:
                columns.append(f"{s} 95% interval")
                cells.append(_column([_interval_text(row, s) for row in timed], 3))
        page["latency"] = _table(
            columns + ["tokenize median", "tokenize p95"],
            timed,
            {**label, **{name: f"{label[name]} (members one after another + fusion)" for name in fused}},
            cells
            + [_column([row["latency_ms"]["tokenize"].get(s) for row in timed], 3, "low") for s in ("median", "p95")],
        )
        page["latency_notes"] = latency_notes(report, label)
    kinds = sorted({kind for row in rows for kind in row.get("by_kind", {})})
    if len(kinds) > 1:
        first = metrics[0]
        counts = {k: next(row["by_kind"][k]["queries"] for row in rows if k in row.get("by_kind", {})) for k in kinds}
        page["kinds"] = {
            **_table(
                kinds,
                rows,
                label,
                [_column([row.get("by_kind", {}).get(k, {}).get(first) for row in rows], 4, "high") for k in kinds],
            ),
            "metric": first,
            "counts_text": ", ".join(f"{k} {n}" for k, n in counts.items()),
        }
    significant = [row for row in rows if row.get("significance")]
    if significant:
        page["against"] = [
            {
                "system": label[row["name"]],
                "metric": m,
                "delta": f"{sig['delta']:+.4f}",
                "p": f"{sig['p']:.4f}",
                "p_holm": f"{sig['p_holm']:.4f}",
                "arrow": arrow(row, m),
                "wtl": f"{sig['wins']} / {sig['ties']} / {sig['losses']}",
            }
            for row in significant
            for m, sig in row["significance"].items()
        ]
    differences = [
        {
            "system": label[row["name"]],
            "direction": direction,
            "query": item["query"],
            "kind": item.get("kind") or "-",
            "delta": f"{item['delta']:+.3f}",
            "text": item.get("text"),
        }
        for row in significant
        for direction, key in (("gain", "largest_gains"), ("loss", "largest_losses"))
        for item in row.get(key) or []
    ]
    if differences:  # no heading over an empty section
        page["differences"] = {
            "metric": metrics[0],
            "rows": differences,
            "has_text": any(item["text"] is not None for item in differences),
        }
    gate = report.get("gate")
    if gate is not None:
        findings = [
            {
                "finding": finding,
                "system": label.get(item["system"], item["system"]),
                "metric": item["metric"],
                "old": f"{item['old']:.4f}",
                "new": f"{item['new']:.4f}",
                "delta": f"{item['new'] - item['old']:+.4f}",
            }
            for finding, key in (("regression", "regressions"), ("improvement", "improvements"))
            for item in gate.get(key, [])
        ]
        stale = [
            {
                "system": label.get(item["system"], item["system"]),
                "differences": "; ".join(f"{k}: {v[0]} -> {v[1]}" for k, v in item["differences"].items()),
            }
            for item in gate.get("stale", [])
        ]
        page["gate"] = {
            "against": gate["against"],
            "tolerance": gate["tolerance"],
            "compared": gate["compared"],
            "regressions": len(gate.get("regressions", [])),
            "improvements": len(gate.get("improvements", [])),
            "findings": findings,
            "stale": stale,
            "unmatched": gate.get("unmatched", []),
        }
    return page


def _interval(row: dict[str, Any], statistic: str) -> list[float] | None:
    return ((row.get("latency_ci95_ms") or {}).get("search") or {}).get(statistic)


def _interval_text(row: dict[str, Any], statistic: str) -> str:
    found = _interval(row, statistic)
    return "-" if not found else f"{found[0]:.3f}-{found[1]:.3f}"


#: What a statistic is called in the latency notes.
_SAID = {"median": "p50", "p95": "p95"}


def latency_notes(report: dict[str, Any], label: dict[str, str]) -> dict[str, Any]:
    """How the latencies were taken (repeats, intervals, the machine's load) and, per statistic, the pairs of
    systems whose latencies cannot be told apart (the 95% interval of their paired difference holds 0)."""
    taken = report.get("latency") or {}
    repeat = taken.get("repeat")
    how = (
        f"Each question ran {repeat} times per system after {taken.get('warmup_questions')} warm-up questions; its "
        f"time is the fastest of the {repeat} (a slower run is the same work plus time the machine spent elsewhere): "
        "a warm figure, the question's data in the caches. Each question's first run alone is in report.json "
        "(latency_ms.search_first_run)."
        if repeat and repeat > 1
        else "Each question was timed once per system."
        if repeat == 1
        else None  # a report written before latency recorded how it was taken
    )
    interval = f"Intervals: {taken['interval']}." if taken.get("interval") else None
    load = (report.get("environment") or {}).get("load_average") or {}
    cpus = ((report.get("environment") or {}).get("machine") or {}).get("cpus")
    machine = None
    if load.get("start") or load.get("end"):
        at = [f"{load[k][0]:.2f} at the {k}" for k in ("start", "end") if load.get(k)]
        machine = f"Load average over 1 minute: {' and '.join(at)}" + (f", on {cpus} CPUs." if cpus else ".")
    pairs: list[dict[str, Any]] = taken.get("pairs") or []
    verdicts = []
    for statistic in ("median", "p95"):
        tied = [
            f"{label.get(p['a'], p['a'])} and {label.get(p['b'], p['b'])}"
            + (f" ({p['ratio']:.2f}x)" if p.get("ratio") is not None else "")
            for p in pairs
            if p["statistic"] == statistic and p["faster"] is None
        ]
        compared = sum(1 for p in pairs if p["statistic"] == statistic)
        if not compared:
            continue
        verdicts.append(
            {
                "statistic": _SAID[statistic],
                "tied": tied,
                "text": (
                    f"cannot be told apart: {'; '.join(tied)}"
                    + ("; every other pair differs, as the table shows." if len(tied) < compared else ".")
                    if tied
                    else "every pair of systems can be told apart, as the table shows."
                ),
            }
        )
    return {"how": how, "interval": interval, "machine": machine, "verdicts": verdicts}


def _mb(value: Any) -> float | None:
    return None if value is None else value / 1e6


def engine_data_bytes(row: dict[str, Any]) -> int | None:
    """What an engine holds besides FTS5's own tables: bm25s's arrays and vocabulary in memory, the impact
    postings (stored in the index file, read into memory as queried); None for FTS5 (its page cache)."""
    engine = row.get("engine") or {}
    if "arrays_bytes" in engine:
        return int(engine["arrays_bytes"]) + int(engine.get("vocabulary_bytes") or 0)
    found = engine.get("postings_bytes")
    return None if found is None else int(found)


def _engines(report: dict[str, Any], rows: list[dict[str, Any]], label: dict[str, str]) -> dict[str, Any] | None:
    """The engines section: which engine ranked each row, exact engines' agreement, and what bm25s measured."""
    ranked = [row for row in rows if isinstance(row.get("engine"), dict)]
    if len({row["engine"].get("name") for row in ranked}) < 2 and all(row["engine"].get("exact") for row in ranked):
        return None  # one exact engine ranked every row (FTS5's ranking): nothing to compare
    agreement = [
        {
            "system": label.get(item["system"]) or label.get(item["names"][0], item["names"][0]),
            "engines": " and ".join(item["engines"]),
            "queries": item["queries_with_hits"],
            "differing": item["queries_differing"],
            "same_metrics": item["same_metrics"],
            "first": ", ".join(item["first_differing"]),
        }
        for item in report.get("engines") or []
    ]
    peers = []
    for row in ranked:
        engine = row["engine"]
        if "arrays_bytes" not in engine:
            continue
        rank = engine.get("rank_ms") or {}
        peers.append(
            {
                "system": label[row["name"]],
                "spec": engine.get("spec", ""),
                "variant": engine.get("variant", ""),
                "terms": engine.get("terms"),
                "tokens": engine.get("tokens"),
                "read": _fmt(engine.get("read_tokens_seconds"), 2),
                "index": _fmt(engine.get("bm25s_index_seconds"), 2),
                "arrays": _fmt(_mb(engine.get("arrays_bytes")), 2),
                "vocabulary": _fmt(_mb(engine.get("vocabulary_bytes")), 2),
                "saved": _fmt(_mb(engine.get("saved_bytes")), 2),
                "rank_p50": _fmt(rank.get("median"), 3),
                "rank_p95": _fmt(rank.get("p95"), 3),
            }
        )
    fallbacks = [
        {"system": label[row["name"]], "count": row["engine"]["fts5_fallbacks"]}
        for row in ranked
        if row["engine"].get("fts5_fallbacks")
    ]
    return {"agreement": agreement, "peers": peers, "fallbacks": fallbacks}


def _title(report: dict[str, Any]) -> str:
    """What the page is about, saying so when its queries are synthetic."""
    synthetic = report["dataset"].get("synthetic")
    return f"rag-eval compare: {report['dataset']['id']}" + (" (synthetic queries)" if synthetic else "")


def _without_labels(report: dict[str, Any], rows: list[dict[str, Any]], label: dict[str, str]) -> dict[str, Any] | None:
    """The label-free section: zero hits (and Judged@10) per system, pairwise overlap, disagreements."""
    section = report.get("without_labels")
    if not section:
        return None
    depth = section["depth"]
    judged_key, unjudged_key = f"judged@{depth}", f"unjudged_in_top{depth}"
    columns = ["zero-hit rate"]
    cells = [_column([row.get("zero_hit_rate") for row in rows], 4, "low")]
    if any(judged_key in row for row in rows):
        columns += [f"Judged@{depth}", f"unjudged in top {depth}"]
        cells += [
            _column([row.get(judged_key) for row in rows], 4, "high"),
            # Not bolded: a system that returns nothing has the fewest unjudged passages.
            _column([row.get(unjudged_key) for row in rows], 0),
        ]
    overlap = [
        {
            "a": label.get(pair["a"], pair["a"]),
            "b": label.get(pair["b"], pair["b"]),
            "jaccard": _fmt(pair[f"jaccard@{depth}"], 3),
            "rbo": _fmt(pair[f"rbo@{depth}"], 3),
        }
        for pair in section["overlap"]
    ]
    hardest = [
        {
            "query": item["query"],
            "text": item.get("text"),
            "mean": _fmt(item[f"mean_jaccard@{depth}"], 3),
            "top": [
                {
                    "system": label.get(system, system),
                    "hits": [{"id": doc, "title": (item.get("titles") or {}).get(doc)} for doc in docs],
                }
                for system, docs in item["top"].items()
            ],
        }
        for item in section["disagreements"]
    ]
    return {
        "depth": depth,
        "rbo_p": section["rbo_p"],
        "questions": section["questions"],
        # Said for synthetic queries, whose script mix comes from the generator rather than from users.
        "scripts": script_shares(section["scripts"])
        if report["dataset"].get("synthetic") and section.get("scripts")
        else None,
        "table": _table(columns, rows, label, cells),
        "overlap": overlap,
        "disagreements": hardest,
        "warning": section.get("warning"),
    }


def arrow(row: dict[str, Any], metric: str) -> str:
    """``↑``/``↓`` when a system is significantly better/worse than the reference on ``metric``, else ``""``."""
    sig = row.get("significance", {}).get(metric)
    if not sig or not sig["significant"]:
        return ""
    return "↑" if sig["delta"] > 0 else "↓"
