"""rag-eval evaluate: score a TREC run file against qrels."""

from __future__ import annotations

import json
from pathlib import Path

import click

from . import cli
from .params import TEXT


@cli.command("evaluate")
@click.argument("run_file", metavar="RUN", type=click.Path(path_type=Path))
@click.argument("qrels_file", metavar="QRELS", type=click.Path(path_type=Path))
@click.option(
    "--metric",
    "metrics",
    multiple=True,
    metavar="NAME",
    type=TEXT,
    help="A trec_eval measure in ir-measures notation, NAME[(key=value, ...)][@CUTOFF], e.g. nDCG@10, "
    "P(rel=2)@5 (repeat; names are case-insensitive and printed in their canonical spelling, once; cutoffs 1 "
    "to 10000). Default: the six headline metrics.",
)
@click.option("--per-query", is_flag=True, help="Also print each judged query's values.")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print JSON: all (the all row: each metric's mean, the total for NumQ, NumRel and NumRet), num_q, and "
    "with --per-query per_query (query id, then metric).",
)
def evaluate_cmd(run_file: Path, qrels_file: Path, metrics: tuple[str, ...], per_query: bool, as_json: bool) -> None:
    """Score a TREC run file against qrels (TREC four-column or BEIR TSV) with trec_eval's definitions.

    Every judged query is scored as trec_eval -c scores it: one without results as 0, one whose judgments are
    all 0 too (it has no relevant document); num_q is their count. The all row is the mean over them, for the
    counts NumQ, NumRel and NumRet the total, as trec_eval prints it. A run and qrels with no query in common
    are an error.

    \b
    Examples:
      rag-eval evaluate out/handbook/runs/bigram_sections_or.run datasets/handbook/qrels/test.tsv
      rag-eval evaluate my.run qrels.txt --metric nDCG@10 --metric 'P(rel=2)@5' --per-query
      rag-eval evaluate my.run qrels.txt --json
    """
    from ..eval.metrics.run_files import evaluate_files

    means, values = evaluate_files(run_file, qrels_file, metrics)
    if as_json:
        # "all", as trec_eval names the row: not "mean", which NumQ, NumRel and NumRet (totals) are not.
        found = {"all": means, "num_q": len(values), **({"per_query": values} if per_query else {})}
        click.echo(json.dumps(found, indent=2))
        return
    if per_query:
        for query_id, row in values.items():
            for metric, value in row.items():
                click.echo(f"{metric}\t{query_id}\t{value:.4f}")
    click.echo(f"num_q\tall\t{len(values)}")  # the judged queries, each scored (trec_eval -c prints it so)
    for metric, value in means.items():
        click.echo(f"{metric}\tall\t{value:.4f}")
