"""rag-eval compare and evaluate."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..eval.compare.gate import DEFAULT_TOLERANCE
from ..eval.compare.latency import DEFAULT_REPEAT, MAX_REPEAT
from ..files.textio import counted
from ..search.query import MODES
from . import cli
from .params import TEXT
from .progress import Bars

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from ..eval.compare.compare import CompareResult
    from ..eval.compare.systems import OutsideRun
    from ..eval.reporting.model import Comparison


@cli.command("compare")
@click.argument("dataset", metavar="DATASET", type=TEXT)
@click.option(
    "-t",
    "--tokenizer",
    "tokenizers",
    multiple=True,
    metavar="SPEC",
    type=TEXT,
    help="A tokenizer to compare (repeat). Default: every available strategy.",
)
@click.option(
    "-b",
    "--builder",
    "builder_spec",
    metavar="SPEC",
    type=TEXT,
    help="Builder spec (default: the dataset's; BEIR folders use passages). Options only: the builder "
    "must be the one that reads the dataset's layout (with --queries: any builder that reads DATASET).",
)
@click.option(
    "--queries",
    "queries",
    type=click.Path(path_type=Path),
    help="Questions, one per line (or queries.jsonl): DATASET is then a knowledge base (a Markdown folder, a "
    "lines corpus with manifest.json, a corpus.jsonl, or a shipped id), its builder inferred (or -b), and "
    "judgments optional.",
)
@click.option(
    "--qrels",
    "qrels",
    type=click.Path(path_type=Path),
    help="Judgments (TREC or BEIR qrels, e.g. from rag-eval judge) for the questions; unjudged passages count "
    "as not relevant and Judged@10 says how many there were.",
)
@click.option("--mode", type=click.Choice(MODES), help="Query mode (default: the dataset's).")
@click.option(
    "--metric",
    "metrics",
    multiple=True,
    metavar="NAME",
    type=TEXT,
    help="A trec_eval measure in ir-measures notation, e.g. nDCG@10, R@100, RR@10, P@1, MAP@100, "
    "P(rel=2)@5 (repeat; names are case-insensitive, each measure reported once; cutoffs 1 to 10000). "
    "Default: those six.",
)
@click.option(
    "--reference-system",
    "reference",
    metavar="SPEC",
    type=TEXT,
    help="System to test the others against (default: bigram).",
)
@click.option(
    "--systems",
    "systems_file",
    type=click.Path(path_type=Path),
    help="TOML file of [[system]] tables (tokenizer, builder, mode, query, engine) and [[fusion]] tables, e.g. "
    "tune's recommendation.toml (on the data tune chose on, only the queries it held back are evaluated: see "
    "--all-queries); systems named by -t (with -b, --mode, --processing) join them.",
)
@click.option(
    "--all-queries",
    is_flag=True,
    help="With a --systems file tune wrote, on the data tune chose on: evaluate every query, the dev queries it "
    "chose on too (which favour its pick), not only the held-back ones (the default).",
)
@click.option(
    "--run",
    "outside_runs",
    multiple=True,
    metavar="NAME=FILE",
    type=TEXT,
    help="A TREC run file from another engine to put in the same table (repeat).",
)
@click.option(
    "--processing",
    metavar="SPEC",
    type=TEXT,
    help="Query processing for the -t (or default) systems, e.g. stopwords=zh,max_df=0.3,top_terms=24 "
    "(a --systems file sets query = ... per system).",
)
@click.option(
    "--engine",
    "engines",
    multiple=True,
    metavar="SPEC",
    type=TEXT,
    help="The engine that ranks the -t (or default) systems; repeat to run each under several, side by side: "
    "impact (the default: exact impact postings, FTS5's ranking and scores at a fraction of its latency; phrase "
    "queries are answered by FTS5), fts5 (FTS5's bm25 statement, the reference), bm25s "
    "(the bm25s library over the same tokens; bm25s:method=lucene|robertson|atire|bm25l|bm25+,k1=1.2,b=0.75). "
    "A --systems file sets engine = ... per system.",
)
@click.option(
    "--fuse",
    "fuse",
    multiple=True,
    metavar="SPEC",
    type=TEXT,
    help="A fused system of compared systems, METHOD[:key=value](SYSTEM, SYSTEM, ...): rrf (k, default 60), "
    "combsum or combmnz (normalise=minmax|sum|zmuv, default minmax), a member WEIGHT*SYSTEM; e.g. "
    "'rrf(bigram, unigram)' (repeat). A --systems file declares them as [[fusion]] tables.",
)
@click.option(
    "--repeat",
    type=int,
    default=DEFAULT_REPEAT,
    show_default=True,
    metavar="K",
    help=f"Times each question runs per system (1 to {MAX_REPEAT}); its latency is the fastest of them, so a pause "
    "of the machine is not taken for the strategy's. p50 and p95 get 95% intervals over the questions.",
)
@click.option("--no-text", is_flag=True, help="Print and write query ids only, never query text.")
@click.option(
    "--against",
    "against",
    type=click.Path(path_type=Path),
    help="A previous report.json or baseline: print regressions, improvements and stale systems.",
)
@click.option(
    "--fail-on-regression",
    is_flag=True,
    help="With --against: exit 1 when any metric drops by more than the tolerance.",
)
@click.option(
    "--tolerance",
    type=float,
    default=DEFAULT_TOLERANCE,
    show_default=True,
    help="Largest drop that is not a regression (a finite number, at least 0).",
)
# Output paths are checked by the library (one error line): click's exists/file checks would say less.
@click.option(
    "--write-baseline",
    "write_baseline",
    type=click.Path(),  # a str: pathlib would drop a trailing '/', which the library refuses for a file
    help="Also write this run as a baseline file (identities and mean metrics) for later --against; "
    "replaces only a file rag-eval wrote.",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print a JSON summary (systems, metrics, arrows, latency, skipped systems, paths) instead of the table.",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    required=True,
    help="Folder for report.json, report.md, report.html, runs/ and per_query.tsv, outside DATASET's folder; "
    "replaces only a report folder rag-eval wrote.",
)
def compare_cmd(
    as_json: bool, fail_on_regression: bool, outside_runs: tuple[str, ...], builder_spec: str | None, **fields: Any
) -> None:
    """Build one index per system, run every query, and compare quality (when judged), latency and cost.

    DATASET is a shipped id (rag-eval datasets list) or a BEIR folder; with --queries, a knowledge base
    (a Markdown folder, a lines corpus, a corpus.jsonl) whose questions may be unjudged. A system is a
    tokenizer spec with a builder and a query mode; indexes are cached by the content of the source files
    and the system spec, so adding one more system only builds that one. Significance is a paired
    randomization test against the reference system, Holm-corrected.

    \b
    Examples:
      rag-eval compare handbook -o out/handbook
      rag-eval compare handbook -t bigram -t jieba:mode=precise -o out/two
      rag-eval compare handbook --systems out/tune/recommendation.toml -t bigram -o out/check
      rag-eval compare handbook -t unigram --engine fts5 --engine impact --engine bm25s -o out/engines
      rag-eval compare ../my-notes --queries questions.txt -o out/notes
      rag-eval compare ../my-notes --queries questions.txt --qrels judged.qrels -o out/notes
    """
    from ..eval.compare.compare import CompareRequest, run_compare

    if fail_on_regression and fields["against"] is None:
        raise click.UsageError("--fail-on-regression needs --against FILE")
    # Every other option is a field of the request, by the same name.
    request = CompareRequest(outside=_outside_runs(outside_runs), builder=builder_spec, **fields)
    with Bars() as bars:
        result = run_compare(
            request, progress=lambda system, phase, done, total: bars(f"{system[:40]} {phase}", done, total)
        )
    _print_result(result, as_json=as_json, fail_on_regression=fail_on_regression, baseline_file=request.against)


def _outside_runs(items: tuple[str, ...]) -> tuple[OutsideRun, ...]:
    """``--run NAME=FILE`` values as outside runs."""
    from ..eval.compare.systems import OutsideRun

    outside = []
    for item in items:
        name, eq, file = item.partition("=")
        if not eq or not name or not file:
            raise click.BadParameter(f"expected NAME=FILE, got {item!r}", param_hint="--run")
        outside.append(OutsideRun(name, Path(file)))
    return tuple(outside)


def _print_result(
    result: CompareResult, *, as_json: bool, fail_on_regression: bool, baseline_file: str | Path | None
) -> None:
    """The table (or the JSON summary) on stdout; what was written and the gate's findings on stderr; the gate's
    failure raised with --fail-on-regression."""
    from ..eval.reporting.report import summary

    report, gate = result.report, result.gate
    if as_json:
        click.echo(json.dumps(summary(report, result.output, result.baseline_written), ensure_ascii=False, indent=2))
    else:
        print_comparison(report, _console())
    runs = f"{len(result.runs)} run file{'' if len(result.runs) == 1 else 's'}"
    click.echo(
        f"wrote {result.output}/report.json, report.md, report.html, per_query.tsv and {runs}"
        + (" (replacing the report that was there)" if result.replaced else ""),
        err=True,
    )
    if result.baseline_written is not None:
        click.echo(f"wrote baseline {result.baseline_written}", err=True)
    if gate is None:
        return
    for line in gate.lines():
        click.echo(line, err=True)
    click.echo(
        f"gate: {counted(gate.compared, 'system')} compared with {baseline_file}: "
        f"{counted(len(gate.regressions), 'regression')}, {counted(len(gate.improvements), 'improvement')}, "
        f"{len(gate.stale)} stale",
        err=True,
    )
    tolerance = report.gate.tolerance if report.gate is not None else 0.0
    failure = gate.failure(str(baseline_file), tolerance) if fail_on_regression else None
    if failure is not None:
        raise failure


def _console() -> Console:
    from rich.console import Console

    # Logs and pipes get the whole table at 160 columns; a terminal gets its own width.
    return Console(width=None if sys.stdout.isatty() else 160)


def print_comparison(report: Comparison | Mapping[str, Any], console: Console) -> None:
    """The quality table, fitted to the console's width without losing a value or an arrow.

    Columns that do not fit are moved to a further table with the system names repeated, rather than
    cut (rich would end a squeezed ``0.3930↓`` as ``0.39…``); the systems left out follow the table.
    """
    from ..eval.reporting.model import as_comparison
    from ..eval.reporting.page import labels

    report = as_comparison(report)
    # With one builder and mode for every system, the tokenizer alone names a row (fused and outside: their own).
    short, shared = labels(report)
    console.print(_header(report, short, shared), highlight=False, markup=False)  # an id is not rich markup
    tuned = report.tuned_split
    for key, said in (("note", tuned and tuned.note), ("warning", tuned and tuned.warning)):
        if said:  # which queries a tune recommendation is evaluated on, under the header
            console.print(f"{key}: {said}", highlight=False, markup=False)
    for group in _fit([short[row.name] for row in report.systems], _columns(report), console):
        console.print(group)
    for line in _after_table(report, short):
        console.print(line, highlight=False, markup=False)


def _header(report: Comparison, short: dict[str, str], shared: tuple[str, str] | None) -> str:
    """The line above the table: the dataset, judged queries or questions, the shared setting, the reference and
    the legend, the passages with their unit."""
    setting = f"builder {shared[0]}, mode {shared[1]}; " if shared else ""
    dataset = report.dataset
    synthetic = " (synthetic queries)" if dataset.synthetic else ""
    # The passages with their unit: an index of the same folder counts chunks, which split long sections.
    passages = counted((dataset.stats.passages if dataset.stats else None) or 0, "passage")
    passages += f" ({dataset.units})" if dataset.units else ""
    if not report.metrics:
        return (
            f"{dataset.id}{synthetic}: {report.questions or 0} questions, not judged: quality not "
            f"measured; {setting}{passages}"
        )
    # The arrows' legend only when a system was tested against the reference (not with one system).
    tested = any(row.significance for row in report.systems)
    arrows = ", ↑/↓ = significantly better/worse (Holm p < 0.05)" if tested else ""
    reference = short.get(report.reference, report.reference) if report.reference else ""
    return (
        f"{dataset.id}{synthetic}: {report.judged_queries} judged queries; {setting}reference "
        f"{reference}; bold = best{arrows}; {passages}"
    )


def _columns(report: Comparison) -> list[tuple[str, list[str]]]:
    """The table's columns: each metric (best bold, arrows), p50, QPS, zero hits, Judged@10, false hits."""
    from ..eval.metrics.measures import is_quality

    rows = report.systems
    # Only a quality measure has a best value: the most documents retrieved (NumRet) is not the best.
    best = {m: max(row.metrics[m] for row in rows) for m in report.metrics if is_quality(m)}
    columns: list[tuple[str, list[str]]] = []
    for metric in report.metrics:
        cells = []
        for row in rows:
            text = f"{row.metrics[metric]:.4f}{row.arrow(metric)}"
            cells.append(f"[bold green]{text}[/]" if row.metrics[metric] == best.get(metric) else text)
        columns.append((metric, cells))
    optional = (
        ("p50 ms", [None if row.search is None else row.search.median for row in rows], 3),
        ("QPS", [None if row.costs is None else row.costs.qps for row in rows], 0),
        ("zero hits", [row.zero_hit_rate for row in rows], 3),
        ("Judged@10", [row.judged.share if row.judged and row.judged.depth == 10 else None for row in rows], 3),
        ("false hits", [None if row.costs is None else row.costs.no_answer_false_hit_rate for row in rows], 2),
    )
    for header, values, digits in optional:
        if any(value is not None for value in values):
            columns.append((header, ["-" if value is None else f"{value:.{digits}f}" for value in values]))
    return columns


def _after_table(report: Comparison, short: dict[str, str]) -> list[str]:
    """The lines under the table: the overlap of the tops, the few-queries warning, the systems skipped."""
    lines = []
    section = report.without_labels
    if section is not None and section.overlap:
        pairs = sorted(section.overlap, key=lambda pair: pair.jaccard or 0)
        lines.append(
            "overlap of the top 10 (Jaccard): "
            + ", ".join(f"{short.get(p.a, p.a)} ~ {short.get(p.b, p.b)} {p.jaccard:.2f}" for p in pairs)
        )
    if section is not None and section.warning:
        lines.append(f"warning: {section.warning}")
    if section is not None and section.default_choice:
        choice = section.default_choice
        lines.append(
            f"not judged, so nothing here says which is best; rag-eval's default: {choice['system']} "
            f"(index build SOURCE --from {choice['systems_file']}): {choice['evidence']}; caveat: {choice['caveat']}"
        )
    return lines + [item.line() for item in report.skipped or ()]


def _table(names: list[str], columns: list[tuple[str, list[str]]]) -> Table:
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("system", overflow="fold")
    for header, _cells in columns:
        table.add_column(header, justify="right", no_wrap=True)
    for number, name in enumerate(names):
        table.add_row(escape(name), *(cells[number] for _header, cells in columns))
    return table


def _fit(names: list[str], columns: list[tuple[str, list[str]]], console: Console) -> list[Table]:
    """Tables of the system names plus as many value columns as fit the console's width."""
    from rich.measure import Measurement

    unbounded = console.options.update(max_width=1_000_000)  # the width the table wants, not the one it gets
    tables: list[Table] = []
    group: list[tuple[str, list[str]]] = []
    for column in columns:
        wider = _table(names, [*group, column])
        if group and Measurement.get(console, unbounded, wider).maximum > console.width:
            tables.append(_table(names, group))
            group = []
        group.append(column)
    tables.append(_table(names, group))
    return tables
