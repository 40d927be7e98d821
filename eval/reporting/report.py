"""Write a comparison: report.json, report.md, a self-contained report.html, TREC runs, per-query TSV.

report.md and report.html are jinja2 templates (``templates/``) over :func:`.page.page_data`, which formats the
comparison's own numbers once; the HTML charts come from :mod:`.charts` (matplotlib). Everything is rendered from the
model (:mod:`.model`), and report.json is the model's ``to_json()``. jinja2 and matplotlib are imported only when a
report is rendered."""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from ...files.outputs import OutputError, checked_target, only_names, publish_folder
from ...files.runs import write_trec_run
from ...files.textio import read_json
from ...records import RankedDoc
from .model import Comparison, SystemResult, as_comparison
from .page import arrow as arrow
from .page import labels as labels
from .page import page_data
from .reader import MAX_REPORT_BYTES

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


def write_outputs(report: Comparison | Mapping[str, Any], runs: dict[str, list[RankedDoc]], output: str | Path) -> Path:
    """Write everything into a staging folder and move it into place at the end, so an interruption
    (Ctrl-C) never leaves a half-written report. An existing ``output`` is replaced only when it is a
    report rag-eval wrote (see :func:`report_owned`); anything else is an OutputError and is left as it was."""
    report = as_comparison(report)
    file_names = run_file_names(list(runs))
    # Recorded so that a later compare into this folder replaces these run files and no other (a user's own
    # run put beside them is refused, not deleted).
    # ``run_file_of`` says which file holds which system's run (names are made safe for files, and two names
    # can become one file name with a suffix): tools need not re-derive it.
    recorded = dataclasses.replace(
        report,
        run_files=tuple(sorted(f"{file_name}.run" for file_name in file_names.values())),
        run_file_of={name: f"runs/{file_name}.run" for name, file_name in file_names.items()},
    )
    with publish_folder(output, owned=report_owned, what=REPORT_WHAT) as staging:
        (staging / "runs").mkdir()
        for name, file_name in file_names.items():
            write_trec_run(runs[name], staging / "runs" / f"{file_name}.run", file_name)
        text = json.dumps(recorded.to_json(), ensure_ascii=False, indent=2)
        (staging / "report.json").write_text(text, encoding="utf-8")
        (staging / "report.md").write_text(render_markdown(report), encoding="utf-8")
        (staging / "report.html").write_text(render_html(report), encoding="utf-8")
        (staging / "per_query.tsv").write_text(render_per_query(report), encoding="utf-8")
    return checked_target(output, what=REPORT_WHAT)


def _written_runs(report: dict[str, Any]) -> set[str] | None:
    """The run files a report folder's report.json says compare wrote in ``runs/``: its ``run_files``, or, in a
    report written before they were recorded, one per system (named as :func:`run_file_names` names them);
    None when report.json lists neither."""
    listed = report.get("run_files")
    if isinstance(listed, list) and all(isinstance(name, str) for name in listed):
        return set(listed)
    systems = report.get("systems")
    if isinstance(systems, list) and all(isinstance(s, dict) and isinstance(s.get("name"), str) for s in systems):
        return {f"{name}.run" for name in run_file_names([s["name"] for s in systems]).values()}
    return None


def report_owned(path: Path) -> str | None:
    """None when folder ``path`` may be replaced: empty, or a report of ``rag-eval compare`` (its report.json
    has rag-eval's compare schema and the folder holds nothing compare does not write: its report files and
    the run files report.json names); else why not."""
    if not any(path.iterdir()):
        return None
    try:
        data = read_json(path / "report.json", OutputError, max_bytes=MAX_REPORT_BYTES, label="report.json")
    except OutputError as exc:
        return f"it is not a rag-eval report ({exc})"
    if not isinstance(data, dict) or not str(data.get("schema", "")).startswith(REPORT_SCHEMA_PREFIX):
        return "its report.json is not a rag-eval compare report"
    runs = _written_runs(data) or set()

    def wrote(relative: Path) -> bool:
        parts = relative.parts
        if len(parts) == 1:
            return parts[0] in REPORT_FILES or parts[0] == "runs"
        return len(parts) == 2 and parts[0] == "runs" and parts[1] in runs

    return only_names(path, wrote, what="compare report folder")


def check_output(output: str | Path) -> Path:
    """Refuse now, before a comparison that may take minutes, an output folder ``write_outputs`` would refuse."""
    path = checked_target(output, what=REPORT_WHAT)
    if path.is_symlink() or path.exists():
        reason = (
            "it is a symbolic link"
            if path.is_symlink()
            else "it is not a folder"
            if not path.is_dir()
            else report_owned(path)
        )
        if reason is not None:
            raise OutputError(
                f"{path}: refusing to replace it: {reason}; rag-eval only replaces a {REPORT_WHAT} it wrote",
                hint="choose a new path, or move the existing one away",
            )
    else:
        parent = path.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        if not parent.is_dir():
            raise OutputError(f"{path}: cannot create it: {parent} is not a folder")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise OutputError(f"{path}: cannot create it: {parent} is not writable")
    return path


def render_per_query(report: Comparison | Mapping[str, Any]) -> str:
    """``system  query  metric  value`` rows."""
    report = as_comparison(report)
    lines = ["system\tquery\tmetric\tvalue"]
    for system, values in (report.per_query or {}).items():
        for query_id, metrics in values.items():
            for metric in report.metrics:
                lines.append(f"{system}\t{query_id}\t{metric}\t{metrics[metric]:.4f}")
    return "\n".join(lines) + "\n"


# '_' inside a word (x86_64, model_dir) is no emphasis in CommonMark, so it is left as it is.
_MARKDOWN_SPECIAL = re.compile(r"([\\`*\[\]<>|#~&]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")
# A list marker ('-', '+', '1.', '1)') and a space: at the start of a list item's text, a list inside the list.
_LIST_MARKER = re.compile(r"^(?:[-+]|\d{1,9}[.)])(?= )")
# Bidi embeddings, overrides and isolates are obeyed where the file is shown: an override reverses the rest of
# its line, a table row's numbers too. They are shown as their escape instead.
_BIDI_CONTROL = re.compile("[\u202a-\u202e\u2066-\u2069]")


def _one_line(text: Any) -> str:
    """``text`` on one line (whitespace runs as one space), bidi controls shown as ``\\u202e``."""
    return _BIDI_CONTROL.sub(lambda found: f"\\u{ord(found.group()):04x}", " ".join(str(text).split()))


def _md(text: Any) -> str:
    """Free text for Markdown: every character Markdown would read as markup is backslash-escaped."""
    escaped = _MARKDOWN_SPECIAL.sub(r"\\\1", _one_line(text))
    return _LIST_MARKER.sub(lambda found: found.group()[:-1] + "\\" + found.group()[-1], escaped)


def _md_code(text: Any, in_table: bool = False) -> str:
    """A code span that shows ``text`` as it is, whatever backticks it holds; ``|`` escaped inside a table."""
    text = _one_line(text)
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    # Empty (or blank), it would be a run of backticks, not a span: padded, it is a span of two spaces.
    padded = f" {text} " if not text or text.startswith("`") or text.endswith("`") else text
    return fence + (padded.replace("|", "\\|") if in_table else padded) + fence


def _md_cell(cell: dict[str, Any]) -> str:
    return (f"**{_md(cell['text'])}**" if cell["best"] else _md(cell["text"])) + cell["arrow"]


@lru_cache(maxsize=1)
def _templates() -> Any:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(Path(__file__).parents[1] / "templates"),
        # report.html is escaped by the engine; report.md is Markdown, escaped by the md filters.
        autoescape=jinja2.select_autoescape(enabled_extensions=("html",), default_for_string=False, default=False),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["md"] = _md
    env.filters["md_code"] = _md_code
    env.filters["md_cell"] = _md_cell
    return env


def render_markdown(report: Comparison | Mapping[str, Any]) -> str:
    """The human page as Markdown: quality, costs, latency, query kinds, significance, gains and losses, gate."""
    return _templates().get_template("report.md").render(page_data(report))


def render_html(report: Comparison | Mapping[str, Any]) -> str:
    """One self-contained page (no script, no external resource): the tables and matplotlib charts as inline SVG."""
    from markupsafe import Markup

    from . import charts

    report = as_comparison(report)
    page = page_data(report)
    rows, label = report.systems, page["label"]
    first = report.metrics[0] if report.metrics else None
    arrows = {m: {row.name: row.arrow(m) for row in rows} for m in report.metrics}

    def inline(chart: charts.Chart | None) -> dict[str, Any] | None:
        # matplotlib's SVG writer escaped every label: the SVG text is markup the engine must not escape again.
        return None if chart is None else {"svg": Markup(chart.svg), "note": chart.note}

    page["charts"] = {
        "which": inline(charts.quality_latency(rows, label, first)) if first else None,
        "bars": [
            (m, inline(charts.metric_bars(rows, label, m, report.judged_queries or 0, arrows[m])))
            for m in report.metrics
        ],
        "recall": inline(charts.recall_curves(rows, label)) if any(row.recall_curve for row in rows) else None,
        "latency": inline(charts.search_latency(rows, label)),
        "kinds": inline(charts.kind_heatmap(rows, label, first)) if first else None,
    }
    return _templates().get_template("report.html").render(page)


def summary(report: Comparison | Mapping[str, Any], output: Path, baseline: Path | None = None) -> dict[str, Any]:
    """What ``compare --json`` prints: per system its identity, metrics, arrows and search latency (with its 95%
    intervals), the systems skipped, the gate's counts and every path written."""
    report = as_comparison(report)
    gate = report.gate
    return {
        "schema": "rag-eval/compare-summary/1",
        "dataset": {
            "id": report.dataset.id,
            "checksum": report.dataset.checksum,
            "judged_queries": report.judged_queries,
        },
        "metrics": list(report.metrics),
        "reference": report.reference,
        "systems": [_summary_row(row, report.metrics) for row in report.systems],
        "skipped": [item.to_json() for item in report.skipped or ()],
        # Which queries a systems file from tune was evaluated on (its held-back ones on its own data), and why.
        "tuned_split": None if report.tuned_split is None else report.tuned_split.to_json(),
        "gate": None
        if gate is None
        else {
            "against": gate.against,
            "tolerance": gate.tolerance,
            "compared": gate.compared,
            "regressions": len(gate.regressions),
            "improvements": len(gate.improvements),
            "stale": len(gate.stale),
        },
        "outputs": {
            "folder": str(output),
            **{name.replace(".", "_"): str(output / name) for name in REPORT_FILES},
            "runs": sorted(str(p) for p in (output / "runs").glob("*.run")),
            "baseline": None if baseline is None else str(baseline),
        },
    }


def _summary_row(row: SystemResult, metrics: tuple[str, ...]) -> dict[str, Any]:
    search = row.search
    interval = row.search_ci95_ms or {}

    def listed(found: tuple[float, float] | None) -> list[float] | None:
        return None if found is None else list(found)

    return {
        "name": row.name,
        "tokenizer": row.tokenizer,
        "builder": row.builder,
        "mode": row.mode,
        "engine": None if row.engine is None else row.engine.spec,
        "metrics": dict(row.metrics),
        "significance": {m: row.arrow(m) for m in metrics},
        "search_ms": {
            "p50": None if search is None else search.median,
            "p95": None if search is None else search.p95,
        },
        "search_ms_ci95": {"p50": listed(interval.get("median")), "p95": listed(interval.get("p95"))},
        "qps": None if row.costs is None else row.costs.qps,
    }
