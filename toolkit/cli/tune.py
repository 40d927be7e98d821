"""rag-eval tune: search a space of systems on dev queries and recommend one, with held-back evidence."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..eval.compare.latency import DEFAULT_REPEAT
from ..eval.datasets.split import DEFAULT_BUDGET, DEFAULT_METRIC, DEV_FRACTION
from . import cli
from .params import TEXT
from .progress import Bars

if TYPE_CHECKING:
    from ..eval.tuning.tune import TuneResult


@cli.command("tune")
@click.argument("datasets", metavar="DATASET...", nargs=-1, required=True, type=TEXT)
@click.option(
    "--space",
    "space_file",
    type=click.Path(path_type=Path),
    help="A TOML search space (keys: tokenizers, hybrid_sizes, weights, processing, fusion, engines), or 'wide': "
    "the shipped default plus bm25 k1/b pairs and Bo1 feedback. Default: the shipped default space.",
)
@click.option(
    "--budget",
    type=int,
    default=DEFAULT_BUDGET,
    show_default=True,
    help="Candidates run on every dev query (successive halving runs up to 3x as many on a quarter).",
)
@click.option("--max-p95-ms", type=float, help="Only recommend systems whose dev search p95 is at most this.")
@click.option("--max-index-mb", type=float, help="Only recommend systems whose index is at most this size.")
@click.option(
    "--split",
    "dev_fraction",
    type=float,
    default=DEV_FRACTION,
    show_default=True,
    help="Share of the queries in the dev part (by a hash of each query id).",
)
@click.option(
    "--eval-on",
    metavar="DATASET",
    type=TEXT,
    help=(
        "Evaluate the recommendation on another dataset's queries instead of the held-back test part "
        "(less those that ask a dev question again)."
    ),
)
@click.option(
    "--metric",
    default=DEFAULT_METRIC,
    show_default=True,
    type=TEXT,
    help="What quality means: a measure from 0 to 1 where higher is better (not a count such as NumRet).",
)
@click.option(
    "--objective",
    type=click.Choice(["mean", "worst"]),
    help="With several datasets: what one system must do well on, from each collection's dev gain over its best "
    "single tokenizer: the mean over collections (the default) or the worst collection's.",
)
@click.option(
    "--leave-one-out/--no-leave-one-out",
    default=True,
    show_default=True,
    help="With several datasets: also choose without each collection in turn and test that choice on the left-out "
    "one's held-back queries (what a collection tune never saw would get).",
)
@click.option(
    "--repeat",
    type=int,
    default=DEFAULT_REPEAT,
    show_default=True,
    help="Times each question runs for its latency (the fastest counts), as in compare.",
)
@click.option("--json", "as_json", is_flag=True, help="Print tune.json's summary instead of the paragraph.")
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    required=True,
    help="Folder for tune.json, report.md, recommendation.toml and pareto.svg, outside the datasets' folders; "
    "replaces only a folder tune wrote.",
)
def tune_cmd(
    datasets: tuple[str, ...],
    space_file: Path | None,
    budget: int,
    max_p95_ms: float | None,
    max_index_mb: float | None,
    dev_fraction: float,
    eval_on: str | None,
    metric: str,
    objective: str | None,
    leave_one_out: bool,
    repeat: int,
    as_json: bool,
    output: Path,
) -> None:
    """Search a space of systems on dev queries; evaluate the dev Pareto front once on held-back queries.

    The judged queries split into dev and test by a hash of each query id. Candidates (single
    tokenizers, hybrids, query processing, fusions) run on dev only; the front of quality against p95
    latency and index size is evaluated once on test and tested against the best single tokenizer
    there. Writes tune.json, report.md and recommendation.toml (a --systems file for compare; with one
    system, also for index build --from). recommendation.toml records the split, so that compare --systems
    on the same data evaluates the held-back queries and shows the figures tune printed.

    The recommendation is the best on dev; the held-back queries are its evidence, which does not change it
    (tune says so when another front member did better there). Of candidates that tie on dev quality it
    takes the smallest index, then the first name, leaving out only those clearly slower than the fastest
    (by a p95 margin well beyond timing noise, stated in tune.json), so identical runs recommend the same
    system. When the dev or test part has few judged queries, tune warns that the choice rests on them, as
    compare does.

    \b
    Examples:
      rag-eval tune handbook -o out/tune
      rag-eval compare handbook --systems out/tune/recommendation.toml -t bigram -o out/check
      rag-eval tune my-beir-set/ --max-p95-ms 20 -o out/tune-mine       # a BEIR folder with qrels
      rag-eval tune my-beir-set/ --eval-on other-beir-set/ -o out/transfer
      rag-eval tune handbook set-a/ set-b/ -o out/across            # one system for all, leave-one-out table
      rag-eval tune my-beir-set/ --space wide --budget 24 -o out/wide     # also bm25 k1/b and feedback
    """
    from ..eval.tuning.tune import run_tune

    with Bars() as progress:
        result = run_tune(
            list(datasets),
            output=output,
            space_file=space_file,
            budget=budget,
            max_p95_ms=max_p95_ms,
            max_index_mb=max_index_mb,
            dev_fraction=dev_fraction,
            eval_on=eval_on,
            metric=metric,
            objective=objective,
            leave_one_out=leave_one_out,
            repeat=repeat,
            progress=progress,
        )
    _print_tune(result, as_json=as_json)


def _print_tune(result: TuneResult, *, as_json: bool) -> None:
    """The paragraph and the warning (or tune.json's summary) on stdout, what was written on stderr."""
    if as_json:
        report = result.report
        # One dataset's keys, then a tune across collections' (each report holds the keys of its kind).
        keys = ["recommendation", "front", "tied_on_dev", "test", "paragraph", "warning", "split", "seconds"]
        keys += ["objective", "held_back", "leave_one_out"]
        summary = {key: report[key] for key in keys if key in report}
        click.echo(json.dumps(summary, ensure_ascii=False, indent=2))
    else:
        click.echo(result.paragraph)
        if result.report.get("warning"):
            click.echo(f"warning: {result.report['warning']}")
    chart = ", pareto.svg" if result.report.get("chart") else ""
    click.echo(f"wrote {result.output}/tune.json, report.md, recommendation.toml{chart}", err=True)
