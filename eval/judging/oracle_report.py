"""Tables and charts of oracle sampling studies
(``python -m rag_eval.eval.judging.oracle --charts FOLDER STUDY.json...``)."""

from __future__ import annotations

import io
import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import RagEvalError
from ...files.outputs import StagedFile, recorded_name, stage_text
from ...files.textio import read_bytes
from ..reporting.report import _md

if TYPE_CHECKING:
    from matplotlib.figure import Figure

LABELS = {"naive": "naive order, judged-only pick", "decisive": "decisive order, model pick"}
#: Each chart's y-axis label: written into its SVG as text, it marks a file as one of these charts.
Y_LABELS = {"picks": "share of samples whose pick is the winner", "settled": "share of samples"}
#: The most of an existing file read to tell whether it is one of these charts.
_CHART_BYTES = 5_000_000


def render_tables(studies: Mapping[str, Mapping[str, Any]]) -> str:
    """Markdown tables of the studies' summaries, one row per set and method."""
    lines = [
        "| set | method | correct @50 | @100 | @150 | pool-complete winner is the winner |",
        "|---|---|---|---|---|---|",
    ]
    for name, study in studies.items():
        for method, f in study["summary"].items():
            c = f["correct"]
            lines.append(
                f"| {_cell(name)} | {_cell(method)} | {_pct(c.get('50'))} | {_pct(c.get('100'))} | "
                f"{_pct(c.get('150'))} | {_pct(f['pool_winner_is_winner'])} |"
            )
    lines += [
        "",
        "| set | method | settled by 50 / 100 / 150 | median judgments to settle | right at first settle "
        "(claimed) | right over all settled moments (claimed) | first settles that were certain |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, study in studies.items():
        for method, f in study["summary"].items():
            if not f["settled_steps"]:
                continue
            by = " / ".join(_pct(f["settled_by"][k]) for k in ("50", "100", "150"))
            median = f["settled_median_judgments"]
            lines.append(
                f"| {_cell(name)} | {_cell(method)} | {by} | "
                f"{median if median is not None else '> ' + str(study['budget'])} | "
                f"{_pct(f['first_settled_right'])} ({_pct(f['first_settled_claimed'])}) of {f['settled_samples']} | "
                f"{_pct(f['settled_steps_right'])} ({_pct(f['settled_steps_claimed'])}) of {f['settled_steps']} | "
                f"{f['first_settled_certain']} |"
            )
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    """A set or method name (a study file's stem) as one table cell: escaped, on one line, encodable."""
    return _md(recorded_name(text))


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def write_charts(studies: Mapping[str, Mapping[str, Any]], folder: str | Path) -> list[Path]:
    """Two SVG charts per study set: judgments -> correct pick; judgments -> settled share and its accuracy."""
    import matplotlib

    staged: list[StagedFile] = []
    for kind in ("picks", "settled"):
        # stable ids (the same numbers give the same file), text kept as text, a '$' in a file name kept
        with matplotlib.rc_context({"svg.hashsalt": "rag-eval", "svg.fonttype": "none", "text.parse_math": False}):
            figure = chart_figure(kind, studies)
            text = io.StringIO()
            figure.savefig(text, format="svg", metadata={"Date": None})
        try:
            staged.append(stage_text(Path(folder) / f"{kind}.svg", text.getvalue(), owned=_a_chart, what="chart"))
        except BaseException:
            for item in staged:
                item.discard()
            raise
    # both charts drawn and staged before either replaces a file: a failure while drawing leaves the folder as it was
    written = []
    try:
        for item in staged:
            written.append(item.commit())
    finally:
        for item in staged[len(written) :]:
            item.discard()
    return written


def chart_figure(kind: str, studies: Mapping[str, Mapping[str, Any]]) -> Figure:
    """One chart (``picks`` or ``settled``) of the studies, a panel each, its legend under them all."""
    from matplotlib.figure import Figure

    from ..reporting.charts import wrap_name
    from ..reporting.point_labels import text_width

    figure = Figure(figsize=(4 * len(studies), 3.6), layout="constrained")
    axes = figure.subplots(1, len(studies), squeeze=False)
    for axis, (name, study) in zip(axes[0], studies.items(), strict=True):
        summary = study["summary"]
        x = list(range(1, study["budget"] + 1))
        if kind == "picks":
            for method, f in summary.items():
                axis.plot(x, f["curve"], label=LABELS.get(method, method))
                if method != "naive":
                    axis.plot(x, f["curve_judged_pick"], linestyle="--", label=f"{method} order, judged-only pick")
            axis.axhline(0.97, color="grey", linestyle=":", linewidth=1, label="target 97%")
            axis.set_ylabel(Y_LABELS[kind])
            axis.set_ylim(0, 1.02)
        else:
            f = summary.get("decisive") or next(iter(summary.values()))
            right = [v if v is not None else float("nan") for v in f["settled_right_curve"]]
            axis.plot(x, f["settled_share_curve"], label="share of samples saying settled")
            axis.plot(x, right, label="share right among them")
            axis.axhline(study["target"], color="grey", linestyle=":", linewidth=1, label="claimed 95%")
            axis.set_ylabel(Y_LABELS[kind])
            axis.set_ylim(0, 1.02)
        title = f"{recorded_name(name)} ({study['samples']} x {study['sample_queries']} queries)"
        axis.set_title(wrap_name(title, 48), fontsize=9)  # a long set name on further lines, not over the next
        axis.set_xlabel("judgments")
        axis.grid(alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    # As many columns as the figure's width holds, so no entry leaves it.
    widest = max(text_width(label, 8) for label in labels) + 0.7
    columns = max(1, min(3, len(labels), int(figure.get_figwidth() * 0.95 // widest)))
    figure.legend(handles, labels, loc="outside lower center", ncols=columns, fontsize=8, frameon=False)
    # The axes keep room for their y label (3.3 in) whatever height the legend takes under them.
    figure.set_figheight(3.9 + 0.17 * math.ceil(len(labels) / columns))
    return figure


def _a_chart(path: Path) -> str | None:
    """None when ``path`` is one of these charts (a matplotlib SVG carrying one of their y-axis labels), which
    a new drawing may replace; else why not."""
    try:
        head = read_bytes(path, RagEvalError, max_bytes=_CHART_BYTES)
    except RagEvalError as exc:
        return f"it cannot be read as a chart this command drew ({exc})"
    if b"<svg" in head and b"Matplotlib" in head and any(label.encode() in head for label in Y_LABELS.values()):
        return None
    return "it is not a judging-study chart rag-eval drew"
