"""rag-eval compare and evaluate."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable

import click

from . import cli


@cli.command("compare")
@click.argument("dataset", metavar="DATASET")
@click.option("-t", "--tokenizer", "tokenizers", multiple=True, metavar="SPEC",
              help="A tokenizer to compare (repeat). Default: every available strategy.")
@click.option("--builder", "builder_spec", metavar="SPEC", help="Builder spec (default: the dataset's; BEIR folders use passages).")
@click.option("--mode", type=click.Choice(["and", "or", "phrase"]), help="Query mode (default: the dataset's).")
@click.option("--metric", "metrics", multiple=True, metavar="NAME",
              help="ir-measures name, e.g. nDCG@10, R@100, RR@10, P@1, MAP@100 (repeat). Default: those six.")
@click.option("--reference-system", "reference", metavar="SPEC", help="System to test the others against (default: bigram).")
@click.option("--systems", "systems_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="TOML file of [[system]] tables (tokenizer, builder, mode), instead of -t.")
@click.option("--run", "outside_runs", multiple=True, metavar="NAME=FILE",
              help="A TREC run file from another engine to put in the same table (repeat).")
@click.option("--no-text", is_flag=True, help="Print and write query ids only, never query text.")
@click.option("--against", "baseline_file", type=click.Path(dir_okay=False, path_type=Path),
              help="A previous report.json or baseline: print regressions, improvements and stale systems.")
@click.option("--fail-on-regression", is_flag=True, help="With --against: exit 1 when any metric drops by more than the tolerance.")
@click.option("--tolerance", type=float, default=0.005, show_default=True, help="Largest drop that is not a regression.")
@click.option("--write-baseline", "write_baseline", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write this run as a baseline file (identities and mean metrics) for later --against.")
@click.option("-o", "--output", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Folder for report.json, report.md, report.html, runs/ and per_query.tsv.")
def compare_cmd(dataset: str, tokenizers: tuple[str, ...], builder_spec: str | None, mode: str | None,
                metrics: tuple[str, ...], reference: str | None, systems_file: Path | None,
                outside_runs: tuple[str, ...], no_text: bool, baseline_file: Path | None, fail_on_regression: bool,
                tolerance: float, write_baseline: Path | None, output: Path) -> None:
    """Build one index per system, run every labelled query, and compare quality, latency and cost.

    DATASET is a shipped id (rag-eval datasets list) or a BEIR folder. A system is a tokenizer spec with
    a builder and a query mode; indexes are cached by corpus checksum and system spec, so adding one
    more system only builds that one. Significance is a paired randomization test against the
    reference system, Holm-corrected.
    """
    from ..eval.compare import OutsideRun, compare, default_systems, load_systems_file
    from ..eval.formats import load_dataset
    from ..eval.gate import baseline_of, check, load_baseline
    from ..eval.report import write_outputs
    from ..eval.runner import System

    if fail_on_regression and baseline_file is None:
        raise click.UsageError("--fail-on-regression needs --against FILE")
    baseline = load_baseline(baseline_file) if baseline_file is not None else None
    data = load_dataset(dataset)
    if systems_file is not None:
        systems = load_systems_file(systems_file)
    elif tokenizers:
        systems = [System(spec, builder_spec or "", mode or "") for spec in tokenizers]
    else:
        systems = default_systems(data, builder_spec, mode)
    outside = []
    for item in outside_runs:
        name, eq, file = item.partition("=")
        if not eq or not name or not file:
            raise click.BadParameter(f"expected NAME=FILE, got {item!r}", param_hint="--run")
        outside.append(OutsideRun(name, Path(file)))
    with _compare_progress() as progress:
        report, runs = compare(data, systems, metrics=list(metrics) or None, reference=reference, outside=outside,
                               no_text=no_text, progress=progress)
    gate = check(report, baseline, tolerance=tolerance) if baseline is not None else None
    if gate is not None:
        report["gate"] = {"against": str(baseline_file), "tolerance": tolerance, "compared": gate.compared,
                          "regressions": gate.regressions, "improvements": gate.improvements, "stale": gate.stale,
                          "unmatched": gate.unmatched}
    write_outputs(report, runs, output)
    _print_comparison(report)
    click.echo(f"wrote {output}/report.json, report.md, report.html, per_query.tsv and {len(runs)} run files", err=True)
    if write_baseline is not None:
        write_baseline.parent.mkdir(parents=True, exist_ok=True)
        write_baseline.write_text(json.dumps(baseline_of(report), ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
        click.echo(f"wrote baseline {write_baseline}", err=True)
    if gate is not None:
        for line in gate.lines():
            click.echo(line, err=True)
        click.echo(f"gate: {gate.compared} systems compared with {baseline_file}: {len(gate.regressions)} regressions, "
                   f"{len(gate.improvements)} improvements, {len(gate.stale)} stale", err=True)
        if fail_on_regression and gate.regressions:
            from ..errors import RagEvalError

            raise RagEvalError(f"{len(gate.regressions)} metric regressions against {baseline_file} "
                               f"(tolerance {tolerance}); see the REGRESSION lines above")


class _compare_progress:
    """One progress bar per system and phase on a terminal; nothing otherwise."""

    def __enter__(self) -> Callable[[str, str, int, int], None]:
        self._bar: Any = None
        self._tasks: dict[tuple[str, str], Any] = {}
        return self.update

    def update(self, system: str, phase: str, done: int, total: int) -> None:
        if not sys.stderr.isatty():
            return
        if self._bar is None:
            from rich.console import Console
            from rich.progress import Progress

            self._bar = Progress(console=Console(stderr=True), transient=True)
            self._bar.start()
        key = (system, phase)
        if key not in self._tasks:
            self._tasks[key] = self._bar.add_task(f"{system[:40]} {phase}", total=total)
        self._bar.update(self._tasks[key], completed=done)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()


def _print_comparison(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    metrics = report["metrics"]
    rows = report["systems"]
    shared = {(row["builder"], row["mode"]) for row in rows if row.get("mode")}
    # With one builder and mode for every system, the tokenizer alone names a row.
    label = (lambda row: row["name"].split(" | ")[0]) if len(shared) == 1 else (lambda row: row["name"])
    setting = f"builder {next(iter(shared))[0]}, mode {next(iter(shared))[1]}; " if len(shared) == 1 else ""
    table = Table(title=f"{report['dataset']['id']}: {report['judged_queries']} judged queries; {setting}reference "
                        f"{label({'name': report['reference'] or ''})} (↑/↓ significant, Holm p < 0.05)")
    table.add_column("system")
    for metric in metrics:
        table.add_column(metric, justify="right")
    table.add_column("search p50 ms", justify="right")
    table.add_column("no-answer false hits", justify="right")
    best = {m: max(row["metrics"][m] for row in report["systems"]) for m in metrics}
    for row in rows:
        cells = []
        for metric in metrics:
            value = row["metrics"][metric]
            text = f"{value:.4f}"
            sig = row.get("significance", {}).get(metric)
            if sig and sig["significant"]:
                text += "↑" if sig["delta"] > 0 else "↓"
            cells.append(f"[bold green]{text}[/]" if value == best[metric] else text)
        latency = row.get("latency_ms", {}).get("search", {}).get("median")
        false_hits = row.get("no_answer_false_hit_rate")
        table.add_row(label(row), *cells, "-" if latency is None else f"{latency:.3f}",
                      "-" if false_hits is None else f"{false_hits:.2f}")
    # Logs and pipes get the whole table rather than an 80-column squeeze.
    Console(width=None if sys.stdout.isatty() else 160).print(table)


@cli.command("evaluate")
@click.argument("run_file", metavar="RUN", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("qrels_file", metavar="QRELS", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--metric", "metrics", multiple=True, metavar="NAME", help="ir-measures name (repeat). Default: the six headline metrics.")
@click.option("--per-query", is_flag=True, help="Also print each judged query's values.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def evaluate_cmd(run_file: Path, qrels_file: Path, metrics: tuple[str, ...], per_query: bool, as_json: bool) -> None:
    """Score a TREC run file against qrels (TREC four-column or BEIR TSV) with trec_eval's definitions."""
    from ..eval.metrics import DEFAULT_METRICS, evaluate
    from ..eval.records import Qrel
    from ..eval.trec import read_any_qrels, read_run

    qrels = read_any_qrels(qrels_file)
    qrel_list = [Qrel(q, d, r) for q, docs in qrels.items() for d, r in docs.items()]
    means, values = evaluate(qrel_list, read_run(run_file), list(metrics) or list(DEFAULT_METRICS))
    if as_json:
        click.echo(json.dumps({"mean": means, **({"per_query": values} if per_query else {})}, indent=2))
        return
    if per_query:
        for query_id, row in values.items():
            for metric, value in row.items():
                click.echo(f"{metric}\t{query_id}\t{value:.4f}")
    for metric, value in means.items():
        click.echo(f"{metric}\tall\t{value:.4f}")


