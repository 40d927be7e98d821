"""What report.md and report.html show: :func:`page_data` formats a comparison's own numbers once, as tables and
sections both templates render; :func:`labels` and :func:`arrow` name and mark its systems. Everything here reads
the model (:mod:`.model`); report.json's content is built into it first."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from ..metrics.measures import is_quality
from ..synth.wordfind import script_shares
from .model import (
    BuildInfo,
    Comparison,
    GateSection,
    LatencyPair,
    SystemResult,
    as_comparison,
    as_rows,
)

Cells = list[dict[str, Any]]
#: A report, as the model or as report.json's content.
Report = Comparison | Mapping[str, Any]


def labels(report: Report) -> tuple[dict[str, str], tuple[str, str] | None]:
    """A display label per system, and the (builder, mode) every system shares, if they share one.

    With one builder and mode for every system the tokenizer (and its query processing, if any) names a row,
    provided the short labels stay distinct; outside runs and fused systems keep their own names.
    """
    rows = as_comparison(report).systems
    shared = {(row.builder, row.mode) for row in rows if row.mode}
    if len(shared) == 1:
        short = {row.name: _without_builder_and_mode(row.name) if row.mode else row.name for row in rows}
        if len(set(short.values())) == len(short):
            return short, next(iter(shared))
    return {row.name: row.name for row in rows}, None


def _without_builder_and_mode(name: str) -> str:
    """``tokenizer | builder | mode[ | query:...]`` without its builder and mode."""
    tokenizer, *rest = name.split(" | ")
    return " | ".join([tokenizer, *rest[2:]])


def _fmt(value: Any, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _column(values: list[Any], digits: int, better: str | None = None) -> Cells:
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


def _table(columns: list[str], rows: Sequence[SystemResult], label: dict[str, str], cells: list[Cells]) -> dict:
    """A table with a system column, then ``columns``; ``cells`` holds one list of cells per column."""
    return {
        "columns": columns,
        "rows": [{"system": label[row.name], "cells": [column[i] for column in cells]} for i, row in enumerate(rows)],
    }


def _workers(build: BuildInfo) -> str:
    workers = build.workers or 1
    if workers == 1:
        return "1"
    loads = build.worker_load_seconds or ()
    load = f", load {max(loads):.2f} s" if loads else ""
    return f"{workers} ({build.tokenize_speedup}x{load})"


def page_data(report: Report) -> dict[str, Any]:
    """What report.md and report.html show, formatted once from the comparison for both templates."""
    report = as_comparison(report)
    # Sections that reports written by earlier versions lack (a committed report re-rendered) are left out.
    if report.skipped is None:
        report = dataclasses.replace(report, skipped=())
    rows, metrics = report.systems, list(report.metrics)
    label, setting = labels(report)
    timed = [row for row in rows if row.timed]
    return {
        "title": _title(report),
        "judged": bool(metrics),
        "without_labels": _without_labels(report, label),
        "report": report,
        "label": label,
        "setting": setting,
        "metrics": metrics,
        "reference": label.get(report.reference, report.reference) if report.reference else None,
        "quality": _quality(rows, metrics, label),
        "cost": _cost(timed, label) if timed else None,
        "latency": _latency(timed, label) if timed else None,
        "latency_notes": latency_notes(report, label) if timed else None,
        "kinds": _kinds(rows, metrics, label),
        "against": _against(rows, label),
        "differences": _differences(rows, metrics, label),
        "gate": None if report.gate is None else _gate(report.gate, label),
        "engines": _engines(report, label),
        "untimed": [label[row.name] for row in rows if not row.timed],
        "cached": [label[row.name] for row in timed if row.fusion is None and row.build and row.build.cached],
    }


def _quality(rows: Sequence[SystemResult], metrics: list[str], label: dict[str, str]) -> dict[str, Any]:
    """The quality table: each metric's mean per system, the best bold, the significance arrows."""
    # A count (NumRet, NumRel) is not better when higher: only quality measures mark a best value.
    quality = [_column([row.metrics[m] for row in rows], 4, "high" if is_quality(m) else None) for m in metrics]
    for m, column in zip(metrics, quality, strict=False):
        for cell, row in zip(column, rows, strict=False):
            cell["arrow"] = row.arrow(m)
    return _table(list(metrics), rows, label, quality)


def _fused_labels(timed: Sequence[SystemResult], label: dict[str, str], said: str) -> dict[str, str]:
    """The labels, a fused system's saying ``said`` of how its costs are counted."""
    return {**label, **{row.name: f"{label[row.name]} {said}" for row in timed if row.fusion is not None}}


def _cost(timed: Sequence[SystemResult], label: dict[str, str]) -> dict[str, Any]:
    """The cost table: build, tokenizer, index size, tokens per passage, zero hits, false hits, QPS, engine data."""
    costs = [row.costs for row in timed if row.costs is not None]
    builds = [row.build for row in timed]
    # A fused system builds nothing (its members are built): "-", never a best-of-column 0 s.
    own = [None if row.fusion is not None else row.build for row in timed]
    columns = [
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
    ]
    cells = [
        _column([None if b is None else b.seconds or 0 for b in own], 2, "low"),
        _column([None if b is None else b.tokenizer_load_seconds or 0 for b in own], 2, "low"),
        _column([c.tokenize_chars_per_second for c in costs], 0, "high"),
        _column(["-" if b is None else _workers(b) for b in own], 0),
        _column([((b.index_bytes if b else None) or 0) / 1e6 for b in builds], 2, "low"),
        _column([c.tokens_per_passage for c in costs], 1),
        _column([c.zero_hit_queries for c in costs], 0, "low"),
        _column([c.no_answer_false_hit_rate for c in costs], 4, "low"),
        _column([c.qps for c in costs], 0, "high"),
        _column([_mb(engine_data_bytes(row)) for row in timed], 2),
        _column([_mb(row.engine.stat("rss_growth_bytes") if row.engine else None) for row in timed], 1),
    ]
    return _table(columns, timed, _fused_labels(timed, label, "(members' indexes, no build)"), cells)


def _latency(timed: Sequence[SystemResult], label: dict[str, str]) -> dict[str, Any]:
    """The latency table: search min to max with the p50 and p95 intervals, tokenize median and p95."""

    def search(row: SystemResult, statistic: str) -> float | None:
        return None if row.search is None else row.search.statistic(statistic)

    def tokenize(row: SystemResult, statistic: str) -> float | None:
        return None if row.tokenize is None else row.tokenize.statistic(statistic)

    # Reports written before latency had intervals (a committed report re-rendered) show none.
    intervals = [s for s in ("median", "p95") if any(_interval(row, s) for row in timed)]
    columns, cells = [], []
    for s in ("min", "median", "mean", "p95", "p99", "max"):
        columns.append(f"search {s}")
        # The fastest minimum is not marked: it is the query that matched nothing (0.001 ms), not a strength.
        cells.append(_column([search(row, s) for row in timed], 3, None if s == "min" else "low"))
        if s in intervals:
            columns.append(f"{s} 95% interval")
            cells.append(_column([_interval_text(row, s) for row in timed], 3))
    cells += [_column([tokenize(row, s) for row in timed], 3, "low") for s in ("median", "p95")]
    fused = _fused_labels(timed, label, "(members one after another + fusion)")
    return _table(columns + ["tokenize median", "tokenize p95"], timed, fused, cells)


def _kinds(rows: Sequence[SystemResult], metrics: list[str], label: dict[str, str]) -> dict[str, Any] | None:
    """The first metric's mean per query kind and system, with each kind's number of queries."""
    kinds = sorted({kind for row in rows for kind in row.by_kind or {}})
    if len(kinds) < 2:
        return None
    first = metrics[0]
    counts = {k: next((row.by_kind or {})[k].queries for row in rows if k in (row.by_kind or {})) for k in kinds}

    def mean(row: SystemResult, kind: str) -> float | None:
        found = (row.by_kind or {}).get(kind)
        return None if found is None else found.means.get(first)

    cells = [_column([mean(row, k) for row in rows], 4, "high") for k in kinds]
    return {
        **_table(kinds, rows, label, cells),
        "metric": first,
        "counts_text": ", ".join(f"{k} {n}" for k, n in counts.items()),
    }


def _against(rows: Sequence[SystemResult], label: dict[str, str]) -> list[dict[str, Any]] | None:
    """Each system against the reference per metric: difference, p, Holm's p, arrow, wins / ties / losses."""
    significant = [row for row in rows if row.significance]
    if not significant:
        return None
    return [
        {
            "system": label[row.name],
            "metric": m,
            "delta": f"{sig.delta:+.4f}",
            "p": f"{sig.p:.4f}",
            "p_holm": f"{sig.p_holm:.4f}",
            "arrow": row.arrow(m),
            "wtl": f"{sig.wins} / {sig.ties} / {sig.losses}",
        }
        for row in significant
        for m, sig in (row.significance or {}).items()
    ]


def _differences(rows: Sequence[SystemResult], metrics: list[str], label: dict[str, str]) -> dict[str, Any] | None:
    """The queries each system gains or loses most on against the reference (none: no section)."""
    differences = [
        {
            "system": label[row.name],
            "direction": direction,
            "query": item.query,
            "kind": item.kind or "-",
            "delta": f"{item.delta:+.3f}",
            "text": item.text,
        }
        for row in rows
        if row.significance
        for direction, items in (("gain", row.largest_gains), ("loss", row.largest_losses))
        for item in items or ()
    ]
    if not differences:  # no heading over an empty section
        return None
    return {
        "metric": metrics[0],
        "rows": differences,
        "has_text": any(item["text"] is not None for item in differences),
    }


def _gate(gate: GateSection, label: dict[str, str]) -> dict[str, Any]:
    """The gate's findings: regressions and improvements with old and new values, stale systems, unmatched."""
    findings = [
        {
            "finding": finding,
            "system": label.get(item.system, item.system),
            "metric": item.metric,
            "old": f"{item.old:.4f}",
            "new": f"{item.new:.4f}",
            "delta": f"{item.new - item.old:+.4f}",
        }
        for finding, items in (("regression", gate.regressions), ("improvement", gate.improvements))
        for item in items
    ]
    stale = [
        {
            "system": label.get(item.system, item.system),
            "differences": "; ".join(f"{k}: {v[0]} -> {v[1]}" for k, v in item.differences.items()),
        }
        for item in gate.stale
    ]
    return {
        "against": gate.against,
        "tolerance": gate.tolerance,
        "compared": gate.compared,
        "regressions": len(gate.regressions),
        "improvements": len(gate.improvements),
        "findings": findings,
        "stale": stale,
        "unmatched": list(gate.unmatched),
    }


def _interval(row: SystemResult, statistic: str) -> tuple[float, float] | None:
    return (row.search_ci95_ms or {}).get(statistic)


def _interval_text(row: SystemResult, statistic: str) -> str:
    found = _interval(row, statistic)
    return "-" if not found else f"{found[0]:.3f}-{found[1]:.3f}"


#: What a statistic is called in the latency notes.
_SAID = {"median": "p50", "p95": "p95"}


def latency_notes(report: Report, label: dict[str, str]) -> dict[str, Any]:
    """How the latencies were taken (repeats, intervals, the machine's load) and, per statistic, the pairs of
    systems whose latencies cannot be told apart (the 95% interval of their paired difference holds 0)."""
    report = as_comparison(report)
    taken = report.latency
    repeat = None if taken is None else taken.repeat
    how = (
        f"Each question ran {repeat} times per system after {taken.warmup_questions if taken else None} warm-up "
        f"questions; its time is the fastest of the {repeat} (a slower run is the same work plus time the machine "
        "spent elsewhere): a warm figure, the question's data in the caches. Each question's first run alone is in "
        "report.json (latency_ms.search_first_run)."
        if repeat and repeat > 1
        else "Each question was timed once per system."
        if repeat == 1
        else None  # a report written before latency recorded how it was taken
    )
    interval = f"Intervals: {taken.interval}." if taken is not None and taken.interval else None
    pairs = () if taken is None else taken.pairs
    verdicts = [found for s in ("median", "p95") if (found := _verdict(pairs, s, label)) is not None]
    return {"how": how, "interval": interval, "machine": _machine_load(report), "verdicts": verdicts}


def _machine_load(report: Comparison) -> str | None:
    """The load average at the start and the end, and the CPUs, in words (None when not recorded)."""
    load = report.environment.load_average
    machine = report.environment.machine
    cpus = None if machine is None else machine.cpus
    if load is None or not (load.start or load.end):
        return None
    at = [f"{found[0]:.2f} at the {key}" for key, found in (("start", load.start), ("end", load.end)) if found]
    return f"Load average over 1 minute: {' and '.join(at)}" + (f", on {cpus} CPUs." if cpus else ".")


def _verdict(pairs: Sequence[LatencyPair], statistic: str, label: dict[str, str]) -> dict[str, Any] | None:
    """Which pairs of systems cannot be told apart on ``statistic`` (None when no pair was compared)."""
    tied = [
        f"{label.get(p.a, p.a)} and {label.get(p.b, p.b)}" + (f" ({p.ratio:.2f}x)" if p.ratio is not None else "")
        for p in pairs
        if p.statistic == statistic and p.faster is None
    ]
    compared = sum(1 for p in pairs if p.statistic == statistic)
    if not compared:
        return None
    text = (
        f"cannot be told apart: {'; '.join(tied)}"
        + ("; every other pair differs, as the table shows." if len(tied) < compared else ".")
        if tied
        else "every pair of systems can be told apart, as the table shows."
    )
    return {"statistic": _SAID[statistic], "tied": tied, "text": text}


def _mb(value: Any) -> float | None:
    return None if value is None else value / 1e6


def engine_data_bytes(row: SystemResult | Mapping[str, Any]) -> int | None:
    """What an engine holds besides FTS5's own tables: bm25s's arrays and vocabulary in memory, the impact
    postings (stored in the index file, read into memory as queried); None for FTS5 (its page cache)."""
    engine = as_rows([row])[0].engine
    if engine is None:
        return None
    if "arrays_bytes" in engine.stats:
        return int(engine.stat("arrays_bytes")) + int(engine.stat("vocabulary_bytes") or 0)
    found = engine.stat("postings_bytes")
    return None if found is None else int(found)


def _engines(report: Comparison, label: dict[str, str]) -> dict[str, Any] | None:
    """The engines section: which engine ranked each row, exact engines' agreement, and what bm25s measured."""
    ranked = [row for row in report.systems if row.engine is not None]
    engines = [row.engine for row in ranked if row.engine is not None]
    if len({engine.name for engine in engines}) < 2 and all(engine.exact for engine in engines):
        return None  # one exact engine ranked every row (FTS5's ranking): nothing to compare
    agreement = [
        {
            "system": label.get(item.system) or label.get(item.names[0], item.names[0]),
            "engines": " and ".join(item.engines),
            "queries": item.queries_with_hits,
            "differing": item.queries_differing,
            "same_metrics": item.same_metrics,
            "first": ", ".join(item.first_differing),
        }
        for item in report.engines or ()
    ]
    peers = [_peer(row, label) for row in ranked if row.engine is not None and "arrays_bytes" in row.engine.stats]
    fallbacks = [
        {"system": label[row.name], "count": row.engine.stat("fts5_fallbacks")}
        for row in ranked
        if row.engine is not None and row.engine.stat("fts5_fallbacks")
    ]
    return {"agreement": agreement, "peers": peers, "fallbacks": fallbacks}


def _peer(row: SystemResult, label: dict[str, str]) -> dict[str, Any]:
    """What a peer engine (one that holds its own arrays, as bm25s) measured for a row."""
    assert row.engine is not None
    stat = row.engine.stat
    rank = stat("rank_ms") or {}
    return {
        "system": label[row.name],
        "spec": row.engine.spec,
        "variant": row.engine.stats.get("variant", ""),
        "terms": stat("terms"),
        "tokens": stat("tokens"),
        "read": _fmt(stat("read_tokens_seconds"), 2),
        "index": _fmt(stat("bm25s_index_seconds"), 2),
        "arrays": _fmt(_mb(stat("arrays_bytes")), 2),
        "vocabulary": _fmt(_mb(stat("vocabulary_bytes")), 2),
        "saved": _fmt(_mb(stat("saved_bytes")), 2),
        "rank_p50": _fmt(rank.get("median"), 3),
        "rank_p95": _fmt(rank.get("p95"), 3),
    }


def _title(report: Comparison) -> str:
    """What the page is about, saying so when its queries are synthetic."""
    return f"rag-eval compare: {report.dataset.id}" + (" (synthetic queries)" if report.dataset.synthetic else "")


def _without_labels(report: Comparison, label: dict[str, str]) -> dict[str, Any] | None:
    """The label-free section: zero hits (and Judged@10) per system, pairwise overlap, disagreements."""
    section, rows = report.without_labels, report.systems
    if not section:
        return None
    depth = section.depth
    columns = ["zero-hit rate"]
    cells = [_column([row.zero_hit_rate for row in rows], 4, "low")]
    if any(row.judged is not None for row in rows):
        columns += [f"Judged@{depth}", f"unjudged in top {depth}"]
        cells += [
            _column([None if row.judged is None else row.judged.share for row in rows], 4, "high"),
            # Not bolded: a system that returns nothing has the fewest unjudged passages.
            _column([None if row.judged is None else row.judged.unjudged for row in rows], 0),
        ]
    overlap = [
        {
            "a": label.get(pair.a, pair.a),
            "b": label.get(pair.b, pair.b),
            "jaccard": _fmt(pair.jaccard, 3),
            "rbo": _fmt(pair.rbo, 3),
        }
        for pair in section.overlap
    ]
    hardest = [
        {
            "query": item.query,
            "text": item.text,
            "mean": _fmt(item.mean_jaccard, 3),
            "top": [
                {
                    "system": label.get(system, system),
                    "hits": [{"id": doc, "title": (item.titles or {}).get(doc)} for doc in docs],
                }
                for system, docs in item.top.items()
            ],
        }
        for item in section.disagreements
    ]
    return {
        "depth": depth,
        "rbo_p": section.rbo_p,
        "questions": section.questions,
        # Said for synthetic queries, whose script mix comes from the generator rather than from users.
        "scripts": script_shares(section.scripts) if report.dataset.synthetic and section.scripts else None,
        "table": _table(columns, rows, label, cells),
        "overlap": overlap,
        "disagreements": hardest,
        "warning": section.warning,
        "default_choice": None if section.default_choice is None else dict(section.default_choice),
    }


def arrow(row: SystemResult | Mapping[str, Any], metric: str) -> str:
    """``↑``/``↓`` when a system is significantly better/worse than the reference on ``metric``, else ``""``."""
    return as_rows([row])[0].arrow(metric)
