"""rag-eval datasets list/show/export/convert."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ..files.textio import counted
from . import cli
from .params import TEXT


@cli.group("datasets")
def datasets_cmd() -> None:
    """List, inspect, export and convert labelled datasets."""


@datasets_cmd.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def datasets_list_cmd(as_json: bool) -> None:
    """List the datasets shipped with rag-eval, with their counts.

    \b
    Examples:
      rag-eval datasets list
    """
    from ..eval.datasets.shipped import shipped_listing

    rows = shipped_listing()
    if as_json:
        click.echo(json.dumps(rows, ensure_ascii=False, indent=2))
        return
    for row in rows:
        click.echo(
            f"{row['id']}\t{row['builder']}\t{row['passages']} passages\t{row['queries']} queries "
            f"({row['judged_queries']} judged)\t{row['qrels']} qrels\n    {row['description']}"
        )


@datasets_cmd.command("show")
@click.argument("reference", metavar="ID|DIR", type=TEXT)
@click.option("--json", "as_json", is_flag=True, help="Print the statistics as JSON (no datasheet).")
def datasets_show_cmd(reference: str, as_json: bool) -> None:
    """Print a dataset's datasheet and statistics: passages, queries, qrels per query, kinds, lengths.

    \b
    Examples:
      rag-eval datasets show handbook
      rag-eval datasets show path/to/beir-folder --json
    """
    from ..eval.datasets.formats import describe_dataset

    stats, sheet = describe_dataset(reference)
    if as_json:
        click.echo(json.dumps(stats, ensure_ascii=False, indent=2))
        return
    if sheet is not None:
        click.echo(sheet.rstrip() + "\n")
    click.echo("# statistics")
    for key, value in stats.items():
        click.echo(f"{key}: {json.dumps(value, ensure_ascii=False) if isinstance(value, dict) else value}")


@datasets_cmd.command("export")
@click.argument("dataset_id", metavar="ID", type=TEXT)
@click.argument("target", metavar="DIR", type=click.Path(path_type=Path))
def datasets_export_cmd(dataset_id: str, target: Path) -> None:
    """Write a shipped set to a new folder: corpus/ in its builder's layout plus BEIR files.

    Use DIR/corpus with `rag-eval index build` and `rag-eval index verify --root`, and DIR itself as a
    BEIR folder with other tools. An existing DIR is never overwritten; DIR appears complete or not at all.

    \b
    Examples:
      rag-eval datasets export handbook out/handbook-set
      rag-eval index build out/handbook-set/corpus -t jieba -o handbook.sqlite
    """
    from ..eval.datasets.shipped import entry, export_shipped

    export_shipped(dataset_id, target)
    info = entry(dataset_id)
    click.echo(
        f"wrote {target}: corpus/ ({info['builder']} layout), corpus.jsonl, queries.jsonl, qrels/test.tsv, README.md"
    )
    click.echo(
        f"build it with: rag-eval index build {target / 'corpus'} -b {info['builder']} -t bigram -o {dataset_id}.sqlite"
    )


@datasets_cmd.command("convert")
@click.argument("source_format", metavar="FORMAT", type=click.Choice(["squad"]))
@click.argument("inputs", metavar="FILE...", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--output", required=True, type=click.Path(path_type=Path), help="New BEIR folder to write.")
@click.option("--json", "as_json", is_flag=True, help="Print the counts as JSON.")
def datasets_convert_cmd(source_format: str, inputs: tuple[Path, ...], output: Path, as_json: bool) -> None:
    """Convert reading-comprehension JSON (SQuAD, CMRC 2018, DRCD, DuReader-robust) to a BEIR retrieval set.

    FORMAT is `squad`: the SQuAD JSON layout (data > paragraphs > qas) the four sets share; FILE... are
    merged into one set. Passages are the distinct paragraphs, queries the distinct questions, and each
    question's relevant passages the paragraphs it was asked on. Duplicates are merged and counted. The
    output folder must not exist; it appears complete or not at all.

    \b
    Examples:
      rag-eval datasets convert squad cmrc2018_dev.json -o out/cmrc-beir
      rag-eval datasets convert squad part1.json part2.json -o out/merged
    """
    from ..eval.datasets.squad import export_squad

    summary = export_squad(list(inputs), output)
    if as_json:
        click.echo(json.dumps(summary.__dict__))
        return
    click.echo(
        f"wrote {output}: {counted(summary.passages, 'passage')} ({summary.duplicate_paragraphs:,} repeated "
        f"paragraphs merged), {counted(summary.queries, 'query', 'queries')} ({summary.duplicate_questions:,} "
        f"repeated questions merged), {counted(summary.qrels, 'qrel')}; from {counted(summary.files, 'file')}, "
        f"{counted(summary.articles, 'article')}"
    )
