"""rag-eval fuse: fuse TREC run files into one run (reciprocal rank fusion, CombSUM, CombMNZ)."""

from __future__ import annotations

from pathlib import Path

import click

from . import cli
from .params import TEXT


@cli.command("fuse")
@click.argument("run_files", metavar="RUN RUN...", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--method",
    default="rrf",
    show_default=True,
    metavar="NAME",
    type=TEXT,
    help="rrf (reciprocal rank fusion), combsum or combmnz (normalised scores added; combmnz times the number "
    "of runs that returned the document).",
)
@click.option("--k", type=int, help="rrf's k: a document adds 1/(k + rank) per run  [default: 60]")
@click.option(
    "--normalise",
    metavar="NAME",
    type=TEXT,
    help="How combsum and combmnz normalise each run's scores per query: minmax, sum or zmuv  [default: minmax]",
)
@click.option(
    "--weight",
    "weights",
    multiple=True,
    type=float,
    metavar="W",
    help="One weight per run, in order (repeat). Default: 1 each.",
)
@click.option(
    "--depth",
    default=100,
    show_default=True,
    type=int,
    help="Each run counts with its top DEPTH documents per query; the fused run keeps DEPTH.",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(),  # a str: pathlib would drop a trailing '/', which the library refuses for a file
    required=True,
    help="The fused run file to write (a new file).",
)
def fuse_cmd(
    run_files: tuple[Path, ...],
    method: str,
    k: int | None,
    normalise: str | None,
    weights: tuple[float, ...],
    depth: int,
    output: str,
) -> None:
    """Fuse TREC run files (from rag-eval or any other engine) into one run, with ranx's definitions.

    Queries are every query of any run; the fused run has strictly decreasing scores, so trec_eval reads
    exactly its order (equal fused scores are ordered by the runs' ranks, the first run's first). Score it
    with rag-eval evaluate, or put it in a comparison with compare --run NAME=FILE.

    \b
    Examples:
      rag-eval fuse out/handbook/runs/bigram_sections_or.run out/handbook/runs/jieba_sections_or.run -o out/fused.run
      rag-eval fuse a.run b.run --method combsum --normalise zmuv --weight 2 --weight 1 -o out/fused.run
    """
    from ..eval.compare.fusion import fuse_files

    written, fused = fuse_files(
        run_files, output, method=method, k=k, normalise=normalise, weights=weights or None, depth=depth
    )
    click.echo(f"wrote {written}: {len(fused.queries)} queries, {len(fused.run)} lines", err=True)
