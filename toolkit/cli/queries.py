"""rag-eval queries synth: synthetic known-item queries from a corpus, labelled and seeded."""

from __future__ import annotations

from pathlib import Path

import click

from ..eval.synth.generate import KINDS
from . import cli
from .params import TEXT, builder_option

_KIND_HELP = "\n".join(f"  {kind.name:<12} {kind.summary}" for kind in KINDS.values())


@cli.group("queries")
def queries_cmd() -> None:
    """Make query sets: synthetic known-item queries from a corpus."""


@queries_cmd.command(
    "synth",
    help=f"""Write N synthetic known-item queries generated from SOURCE's own units, as a new BEIR folder.

SOURCE is a shipped id (handbook, evidence-mini) or anything `rag-eval index build` accepts (a Markdown
folder, a lines corpus with manifest.json, corpus.jsonl or a BEIR folder). Each query is judged relevant
(grade 1) to the one unit it came from. Terms are words found by the corpus's own statistics (recurring,
cohesive, free on both sides), sampled by tf x idf, never tokens of a strategy under test, in the script
mix of the unit's prose (code and links left out): a unit whose letters are mostly Han gives queries that
hold Chinese, with Latin words in the share the prose has them; another unit gives queries that hold a
Latin letter. The output says how many queries are Han-only, mixed and Latin-only. N is shared
evenly over the kinds; with --kinds all a kind no unit supports is skipped (an error when named). A small
corpus may support no terms (a Chinese word must recur in it to be found): the error then names the kinds
it does support.

\b
Kinds (queries.jsonl records them as synthetic:KIND):
{_KIND_HELP}

Synthetic queries are not real questions: reports/synthetic.md measures how far a strategy ranking from
each kind agrees with real queries. DIR holds corpus.jsonl, queries.jsonl, qrels/test.tsv and
synthetic.json (generator, seed, counts, source checksum); run `rag-eval compare DIR` on it. The same
SOURCE, -n, --kinds and --seed give byte-identical files. DIR must not exist.

\b
Examples:
  rag-eval queries synth handbook -n 300 -o out/synth-handbook
  rag-eval queries synth docs/ -n 500 --kinds all --seed 7 -o out/synth-all-kinds
  rag-eval compare out/synth-handbook -o out/synth-report
""",
)
@click.argument("source", metavar="SOURCE", type=TEXT)
@click.option("-n", "count", type=int, required=True, help="How many queries to write (shared over the kinds).")
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    required=True,
    help="New folder to write (must not exist), outside SOURCE's folder.",
)
@click.option(
    "--kinds",
    type=TEXT,
    help="Comma-separated kinds, or all (default: terms, the kind that agreed best with real queries): "
    f"{', '.join(KINDS)}.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of every random choice.")
@builder_option()
def synth_cmd(source: str, count: int, output: Path, kinds: str | None, seed: int, builder: str | None) -> None:
    from ..eval.synth.generate import parse_kinds, synthesize, unit_majorities
    from ..eval.synth.wordfind import script_shares

    summary = synthesize(
        source, count, output, kinds=parse_kinds(kinds), seed=seed, builder=builder, kinds_named=kinds is not None
    )
    total = sum(summary.counts.values())
    click.echo(
        f"wrote {summary.target}: {total} synthetic queries over {summary.units} units ({summary.builder}), "
        f"{summary.words} Chinese words found in it (terms queries also draw on Latin words)"
    )
    for name, number in summary.counts.items():
        click.echo(f"  {name:<12} {number}")
    click.echo(f"scripts: {script_shares(summary.scripts)} (units: {unit_majorities(summary.unit_scripts)})")
    if total < count:
        click.echo(f"asked for {count}: the units support only {total} (one query per unit and kind)")
    if summary.skipped:
        click.echo(f"skipped (no unit supports them): {', '.join(summary.skipped)}")
    click.echo(f"compare strategies on them with: rag-eval compare {summary.target} -o REPORT_DIR")
