"""Write a comparison: report.json, report.md, a self-contained report.html, TREC runs, per-query TSV."""

from __future__ import annotations

import html
import json
import os
import re
from pathlib import Path
from typing import Any

from ..outputs import OutputError, checked_target, only_names, publish_folder
from ..textio import read_json
from .gate import MAX_BASELINE_BYTES
from .metrics import RankedDoc
from .runner import write_trec_run

#: What compare writes into its output folder (besides runs/*.run); nothing else may be in a folder it replaces.
REPORT_FILES = ("report.json", "report.md", "report.html", "per_query.tsv")
REPORT_SCHEMA_PREFIX = "rag-eval/compare/"
REPORT_WHAT = "report folder"


def safe_name(name: str) -> str:
    """A file name for a system: its spec with anything unusual replaced by ``_``."""
    return re.sub(r"[^A-Za-z0-9._=-]+", "_", name).strip("_")[:120] or "system"


def run_file_names(names: list[str]) -> dict[str, str]:
    """A distinct file name (without ``.run``) per system: ``safe_name``, numbered when two names collide."""
    out: dict[str, str] = {}
    taken: set[str] = set()
    for name in names:
        base = candidate = safe_name(name)
        number = 2
        while candidate in taken:
            candidate = f"{base}-{number}"
            number += 1
        taken.add(candidate)
        out[name] = candidate
    return out


def write_outputs(report: dict[str, Any], runs: dict[str, list[RankedDoc]], output: str | Path) -> Path:
    """Write everything into a staging folder and move it into place at the end, so an interruption
    (Ctrl-C) never leaves a half-written report. An existing ``output`` is replaced only when it is a
    report rag-eval wrote (see :func:`report_owned`); anything else is an OutputError and is left as it was."""
    with publish_folder(output, owned=report_owned, what=REPORT_WHAT) as staging:
        (staging / "runs").mkdir()
        for name, file_name in run_file_names(list(runs)).items():
            write_trec_run(runs[name], staging / "runs" / f"{file_name}.run", file_name)
        (staging / "report.json").write_text(json.dumps(report, ensure_ascii=False, indent=2), encoding="utf-8")
        (staging / "report.md").write_text(render_markdown(report), encoding="utf-8")
        (staging / "report.html").write_text(render_html(report), encoding="utf-8")
        (staging / "per_query.tsv").write_text(render_per_query(report), encoding="utf-8")
    return checked_target(output, what=REPORT_WHAT)


def _compare_wrote(relative: Path) -> bool:
    parts = relative.parts
    if len(parts) == 1:
        return parts[0] in REPORT_FILES or parts[0] == "runs"
    return len(parts) == 2 and parts[0] == "runs" and parts[1].endswith(".run")


def report_owned(path: Path) -> str | None:
    """None when folder ``path`` may be replaced: empty, or a report of ``rag-eval compare`` (its report.json
    has rag-eval's compare schema and the folder holds nothing compare does not write); else why not."""
    if not any(path.iterdir()):
        return None
    try:
        data = read_json(path / "report.json", OutputError, max_bytes=MAX_BASELINE_BYTES, label="report.json")
    except OutputError as exc:
        return f"it is not a rag-eval report ({exc})"
    if not isinstance(data, dict) or not str(data.get("schema", "")).startswith(REPORT_SCHEMA_PREFIX):
        return "its report.json is not a rag-eval compare report"
    return only_names(path, _compare_wrote)


def check_output(output: str | Path) -> Path:
    """Refuse now, before a comparison that may take minutes, an output folder ``write_outputs`` would refuse."""
    path = checked_target(output, what=REPORT_WHAT)
    if path.is_symlink() or path.exists():
        reason = ("it is a symbolic link" if path.is_symlink() else
                  "it is not a folder" if not path.is_dir() else report_owned(path))
        if reason is not None:
            raise OutputError(f"{path}: refusing to replace it: {reason}; rag-eval only replaces a {REPORT_WHAT} it wrote",
                              hint="choose a new path, or move the existing one away")
    else:
        parent = path.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        if not parent.is_dir():
            raise OutputError(f"{path}: cannot create it: {parent} is not a folder")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise OutputError(f"{path}: cannot create it: {parent} is not writable")
    return path


def render_per_query(report: dict[str, Any]) -> str:
    """``system  query  metric  value`` rows."""
    lines = ["system\tquery\tmetric\tvalue"]
    for system, values in report["per_query"].items():
        for query_id, metrics in values.items():
            for metric in report["metrics"]:
                lines.append(f"{system}\t{query_id}\t{metric}\t{metrics[metric]:.4f}")
    return "\n".join(lines) + "\n"


def _name(row: dict[str, Any]) -> str:
    """A system name for a Markdown table cell: its own ``|`` separators escaped."""
    return "`" + row["name"].replace("|", "\\|") + "`"


def _best(report: dict[str, Any], metric: str) -> float:
    return max(row["metrics"][metric] for row in report["systems"])


def _cell(report: dict[str, Any], row: dict[str, Any], metric: str) -> str:
    value = row["metrics"][metric]
    text = f"{value:.4f}"
    if value == _best(report, metric):
        text = f"**{text}**"
    return text + arrow(row, metric)


def _workers(build: dict[str, Any]) -> str:
    workers = build.get("workers") or 1
    if workers == 1:
        return "1"
    loads = build.get("worker_load_seconds") or []
    load = f", load {max(loads):.2f} s" if loads else ""
    return f"{workers} ({build.get('tokenize_speedup')}x{load})"


def render_markdown(report: dict[str, Any]) -> str:
    """The human page: quality, costs, query kinds, no-answer false hits, gains and losses."""
    env, data, metrics = report["environment"], report["dataset"], report["metrics"]
    out = [f"# rag-eval compare: {data['id']}", ""]
    out.append(f"Dataset `{data['id']}` (checksum `{data['checksum'][:16]}`), {data['stats']['passages']} passages, "
               f"{report['judged_queries']} judged queries" + (f", as of {data['as_of']}" if data.get("as_of") else "") + ".")
    out.append(f"Reference system: `{report['reference']}`. Bold = best; ↑/↓ = significantly better/worse than the "
               f"reference (paired randomization test, {report['significance']['permutations']} permutations, seed "
               f"{report['significance']['seed']}, Holm-corrected, α = 0.05).")
    out.append(f"rag-eval {env['rag_eval']}, Python {env['python']}, SQLite {env['sqlite']}, commit `{env['commit'][:12]}`, "
               f"{env['created_utc']}.")
    for item in report.get("skipped", []):
        out.append(f"Not compared: `{item['tokenizer']}`, {item['reason']}" + (f" ({item['hint']})" if item.get("hint") else "") + ".")
    out += ["", "## Quality", "", "| system | " + " | ".join(metrics) + " |", "|---|" + "---:|" * len(metrics)]
    for row in report["systems"]:
        out.append(f"| {_name(row)} | " + " | ".join(_cell(report, row, m) for m in metrics) + " |")
    costs = [row for row in report["systems"] if "latency_ms" in row]
    if costs:
        out += ["", "## Cost", "", "| system | build s | load s | tokenize chars/s | workers (speed-up) | index MB | tokens/passage | "
                "tokenize p50 ms | search min / median / p95 / p99 / max ms | zero-hit queries | no-answer false-hit rate |",
                "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for row in costs:
            build, search = row["build"], row["latency_ms"]["search"]
            out.append(
                f"| {_name(row)} | {build.get('seconds') or 0:.2f} | {build.get('tokenizer_load_seconds') or 0:.2f} | "
                f"{row['tokenize_chars_per_second'] or '-'} | {_workers(build)} | {(build.get('index_bytes') or 0) / 1e6:.2f} | "
                f"{row['tokens_per_passage']} | {row['latency_ms']['tokenize'].get('median', 0):.3f} | "
                f"{search.get('min', 0):.3f} / {search.get('median', 0):.3f} / {search.get('p95', 0):.3f} / "
                f"{search.get('p99', 0):.3f} / {search.get('max', 0):.3f} | {row['zero_hit_queries']} | "
                f"{'-' if row['no_answer_false_hit_rate'] is None else row['no_answer_false_hit_rate']} |")
    kinds = sorted({kind for row in report["systems"] for kind in row.get("by_kind", {})})
    if len(kinds) > 1:
        first = metrics[0]
        out += ["", f"## {first} by query kind", "", "| system | " + " | ".join(kinds) + " |", "|---|" + "---:|" * len(kinds)]
        for row in report["systems"]:
            out.append(f"| {_name(row)} | " + " | ".join(
                f"{row['by_kind'][k][first]:.4f}" if k in row.get("by_kind", {}) else "-" for k in kinds) + " |")
        counts = {k: next((row["by_kind"][k]["queries"] for row in report["systems"] if k in row.get("by_kind", {})), 0) for k in kinds}
        out.append("")
        out.append("Judged queries per kind: " + ", ".join(f"{k} {n}" for k, n in counts.items()) + ".")
    sig_rows = [row for row in report["systems"] if row.get("significance")]
    if sig_rows:
        out += ["", f"## Against `{report['reference']}`", "", "| system | metric | Δ | p | p (Holm) | wins / ties / losses |",
                "|---|---|---:|---:|---:|---:|"]
        for row in sig_rows:
            for metric, sig in row["significance"].items():
                out.append(f"| {_name(row)} | {metric} | {sig['delta']:+.4f} | {sig['p']:.4f} | {sig['p_holm']:.4f} | "
                           f"{sig['wins']} / {sig['ties']} / {sig['losses']} |")
        out += ["", f"## Largest per-query differences ({metrics[0]})", ""]
        for row in sig_rows:
            for label in ("largest_gains", "largest_losses"):
                items = row.get(label) or []
                if items:
                    rendered = "; ".join(f"{i['query']} ({i['kind'] or '-'}) {i['delta']:+.3f}" + (f" {i['text']}" if "text" in i else "")
                                         for i in items)
                    out.append(f"- `{row['name']}` {label.replace('_', ' ')}: {rendered}")
    return "\n".join(out) + "\n"


def _bar_chart(report: dict[str, Any], metric: str) -> str:
    rows = report["systems"]
    width, bar_h, left = 640, 22, 260
    height = bar_h * len(rows) + 30
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
             f'aria-label="{html.escape(metric)} with 95% bootstrap intervals">']
    scale = (width - left - 20)
    for i, row in enumerate(rows):
        y = 10 + i * bar_h
        value = row["metrics"][metric]
        low, high = row.get("ci95", {}).get(metric, [value, value])
        parts.append(f'<text x="{left - 6}" y="{y + 14}" text-anchor="end" font-size="11">{html.escape(row["name"][:40])}</text>')
        parts.append(f'<rect x="{left}" y="{y + 3}" width="{value * scale:.1f}" height="{bar_h - 8}" fill="#4c78a8"/>')
        parts.append(f'<line x1="{left + low * scale:.1f}" x2="{left + high * scale:.1f}" y1="{y + 11}" y2="{y + 11}" '
                     f'stroke="#222" stroke-width="1.5"/>')
        parts.append(f'<text x="{left + value * scale + 4:.1f}" y="{y + 14}" font-size="10">{value:.3f}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _curve_chart(report: dict[str, Any]) -> str:
    rows = report["systems"]
    ks = [int(k.split("@")[1]) for k in rows[0]["recall_curve"]] if rows else []
    width, height, left, bottom = 640, 300, 50, 30
    colours = ["#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#ff9da6", "#9d755d"]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" aria-label="recall at k">',
             f'<line x1="{left}" y1="{height - bottom}" x2="{width - 10}" y2="{height - bottom}" stroke="#888"/>',
             f'<line x1="{left}" y1="10" x2="{left}" y2="{height - bottom}" stroke="#888"/>']
    xs = {k: left + (width - left - 20) * i / max(1, len(ks) - 1) for i, k in enumerate(ks)}
    for k, x in xs.items():
        parts.append(f'<text x="{x:.1f}" y="{height - 12}" font-size="10" text-anchor="middle">R@{k}</text>')
    for n, row in enumerate(rows):
        colour = colours[n % len(colours)]
        points = " ".join(f"{xs[int(m.split('@')[1])]:.1f},{height - bottom - v * (height - bottom - 20):.1f}"
                          for m, v in row["recall_curve"].items())
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{points}"/>')
        parts.append(f'<text x="{left + 10}" y="{20 + 14 * n}" font-size="11" fill="{colour}">{html.escape(row["name"][:30])}</text>')  # top left: empty at small k
    parts.append("</svg>")
    return "".join(parts)


def _latency_chart(report: dict[str, Any]) -> str:
    rows = [row for row in report["systems"] if row.get("latency_samples_ms")]
    if not rows:
        return ""
    top = max(max(row["latency_samples_ms"]["search"] or [0]) for row in rows) or 1
    width, row_h, left = 640, 26, 260
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{row_h * len(rows) + 30}" role="img" '
             f'aria-label="search latency per query">']
    scale = (width - left - 20) / top
    for i, row in enumerate(rows):
        y = 10 + i * row_h
        parts.append(f'<text x="{left - 6}" y="{y + 14}" text-anchor="end" font-size="11">{html.escape(row["name"][:40])}</text>')
        for value in row["latency_samples_ms"]["search"]:
            parts.append(f'<circle cx="{left + value * scale:.1f}" cy="{y + 10}" r="1.5" fill="#4c78a8" fill-opacity="0.35"/>')
        median = row["latency_ms"]["search"].get("median", 0)
        parts.append(f'<line x1="{left + median * scale:.1f}" x2="{left + median * scale:.1f}" y1="{y + 2}" y2="{y + 18}" stroke="#e45756" stroke-width="2"/>')
    parts.append(f'<text x="{width - 20}" y="{row_h * len(rows) + 24}" font-size="10" text-anchor="end">0 to {top:.2f} ms (red: median)</text>')
    parts.append("</svg>")
    return "".join(parts)


def render_html(report: dict[str, Any]) -> str:
    """One self-contained page: no scripts, no CDN; the Markdown tables plus inline SVG charts."""
    body = []
    for line in render_markdown(report).splitlines():
        if line.startswith("# "):
            body.append(f"<h1>{html.escape(line[2:])}</h1>")
        elif line.startswith("## "):
            body.append(f"<h2>{html.escape(line[3:])}</h2>")
        elif line.startswith("|"):
            if set(line.replace("|", "").strip()) <= set("-:"):
                continue
            cells = [html.escape(c.strip().replace("\\|", "|")).replace("**", "").replace("`", "")
                     for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
            tag = "th" if not body or not body[-1].startswith("<tr") else "td"
            body.append("<tr>" + "".join(f"<{tag}>{c}</{tag}>" for c in cells) + "</tr>")
        elif line.startswith("- "):
            body.append(f"<p>{html.escape(line[2:])}</p>")
        elif line:
            body.append(f"<p>{html.escape(line)}</p>")
    charts = [f"<h2>{html.escape(m)} (bars: mean; lines: 95% bootstrap interval)</h2>" + _bar_chart(report, m)
              for m in report["metrics"]]
    charts.append("<h2>Recall at k</h2>" + _curve_chart(report))
    latency = _latency_chart(report)
    if latency:
        charts.append("<h2>Search latency per query (ms)</h2>" + latency)
    page = "\n".join(_wrap_tables(body))
    return ("<!doctype html><html lang=\"zh\"><head><meta charset=\"utf-8\"><title>rag-eval compare</title><style>"
            "body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px}table{border-collapse:collapse;margin:1em 0}"
            "td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px}th{background:#f3f3f3}svg{display:block;margin:.5em 0}"
            "</style></head><body>" + page + "\n".join(charts) + "</body></html>\n")


def _wrap_tables(lines: list[str]) -> list[str]:
    out: list[str] = []
    inside = False
    for line in lines:
        if line.startswith("<tr") and not inside:
            out.append("<table>")
            inside = True
        elif not line.startswith("<tr") and inside:
            out.append("</table>")
            inside = False
        out.append(line)
    if inside:
        out.append("</table>")
    return out


def arrow(row: dict[str, Any], metric: str) -> str:
    """``↑``/``↓`` when a system is significantly better/worse than the reference on ``metric``, else ``""``."""
    sig = row.get("significance", {}).get(metric)
    if not sig or not sig["significant"]:
        return ""
    return "↑" if sig["delta"] > 0 else "↓"


def summary(report: dict[str, Any], output: Path, baseline: Path | None = None) -> dict[str, Any]:
    """What ``compare --json`` prints: per system its identity, metrics, arrows and search latency, the
    systems skipped, the gate's counts and every path written."""
    systems = []
    for row in report["systems"]:
        search = row.get("latency_ms", {}).get("search", {})
        systems.append({
            "name": row["name"], "tokenizer": row["tokenizer"], "builder": row["builder"], "mode": row["mode"],
            "metrics": row["metrics"], "significance": {m: arrow(row, m) for m in report["metrics"]},
            "search_ms": {"p50": search.get("median"), "p95": search.get("p95")},
        })
    gate = report.get("gate")
    return {
        "schema": "rag-eval/compare-summary/1",
        "dataset": {"id": report["dataset"]["id"], "checksum": report["dataset"]["checksum"],
                    "judged_queries": report["judged_queries"]},
        "metrics": report["metrics"],
        "reference": report["reference"],
        "systems": systems,
        "skipped": report.get("skipped", []),
        "gate": None if gate is None else {k: gate[k] if k in ("against", "tolerance", "compared") else len(gate[k])
                                           for k in ("against", "tolerance", "compared", "regressions", "improvements",
                                                     "stale")},
        "outputs": {"folder": str(output), **{name.replace(".", "_"): str(output / name) for name in REPORT_FILES},
                    "runs": sorted(str(p) for p in (output / "runs").glob("*.run")),
                    "baseline": None if baseline is None else str(baseline)},
    }
