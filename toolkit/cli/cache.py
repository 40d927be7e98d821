"""rag-eval cache: what the cache folder holds, and clearing its cached indexes."""

from __future__ import annotations

import json

import click

from . import cli


@cli.group("cache")
def cache_cmd() -> None:
    """Show or clear rag-eval's cache folder ($RAG_EVAL_CACHE, else the platform's user cache folder)."""


@cache_cmd.command("info")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def cache_info_cmd(as_json: bool) -> None:
    """Show the cache folder and what each part of it takes: indexes (built by compare, judge and tune, one
    per source, builder and tokenizer; rebuilt when needed), models (installed with rag-eval models install),
    and smaller caches.

    \b
    Examples:
      rag-eval cache info
      rag-eval cache info --json
    """
    from ..index.cached import cache_report

    report = cache_report()
    if as_json:
        click.echo(json.dumps({"folder": str(report.folder), "indexes": report.indexes, "parts": report.parts}))
        return
    click.echo(f"cache folder: {report.folder}")
    for name, part in report.parts.items():
        click.echo(
            f"  {name:<12} {part['bytes'] / 1e6:10.1f} MB  {part['files']:>6} file{'' if part['files'] == 1 else 's'}"
        )
    click.echo(f"cached indexes: {report.indexes} (rag-eval cache clear removes them)")


@cache_cmd.command("clear")
@click.option(
    "--older-than",
    "older_than",
    type=float,
    metavar="DAYS",
    help="Only indexes not written or used for this many days.",
)
def cache_clear_cmd(older_than: float | None) -> None:
    """Remove cached indexes; compare, judge and tune build them again when needed. Models and other caches
    are kept, and so is an index a running build holds or a running command reads. Files that killed commands
    left in the cache go too.

    \b
    Examples:
      rag-eval cache clear
      rag-eval cache clear --older-than 30
    """
    from ..index.cached import clear_indexes

    cleared = clear_indexes(older_than)
    removed, left, busy = cleared.removed, cleared.left_behind, cleared.busy
    click.echo(
        f"removed {removed} cached index{'' if removed == 1 else 'es'}"
        + (f" and {left} file{'' if left == 1 else 's'} killed commands left" if left else "")
        + f" ({cleared.freed / 1e6:.1f} MB)"
        + (f"; {busy} in use by a running command, kept" if busy else "")
    )
