"""rag-eval index build/info/list/verify, search and read."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable

import click

from . import cli


@cli.group("index")
def index_cmd() -> None:
    """Build, inspect, list and verify FTS5 indexes."""


@index_cmd.command("build")
@click.argument("source", type=click.Path(exists=True, path_type=Path))
@click.option("-o", "--output", "index_path", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Index file to create or update (SQLite).")
@click.option("-b", "--builder", "builder_spec", required=True, metavar="SPEC",
              help="Builder spec: lines (manifest.json + .txt), sections (Markdown folder), passages (BEIR corpus.jsonl); "
              "options as NAME:key=value, e.g. sections:max_chars=1500.")
@click.option("-t", "--tokenizer", "tokenizer_spec", default="bigram", show_default=True, metavar="SPEC",
              help="Tokenizer spec, e.g. jieba, pkuseg:model=mini, unicode61.")
@click.option("--json", "as_json", is_flag=True, help="Print the build report as JSON.")
def index_build_cmd(source: Path, index_path: Path, builder_spec: str, tokenizer_spec: str, as_json: bool) -> None:
    """Build or sync an index from SOURCE in one transaction.

    Everything is validated and read before anything is written; a failed build leaves the previous
    index exactly as it was. Re-running on the same index re-tokenizes only files whose sha256 changed.
    """
    from ..writer import build

    with _progress() as progress:
        report = build(source, index_path, builder=builder_spec, tokenizer=tokenizer_spec, progress=progress)
    if as_json:
        click.echo(json.dumps(report.__dict__))
        return
    click.echo(f"indexed {report.chunks} chunks from {report.files} files into {index_path} "
               f"({report.index_bytes / 1e6:.2f} MB) in {report.seconds:.2f} s; "
               f"tokenized {report.chunks_tokenized} chunks from {report.files_tokenized} changed files "
               f"(tokenizer load {report.tokenizer_load_seconds:.2f} s, tokenize {report.tokenize_seconds:.2f} s, "
               f"write {report.write_seconds:.2f} s)")


class _progress:
    """A rich progress bar for builds over 200 KB of source, a few hundred chunks (stderr, terminals only)."""

    def __enter__(self) -> Callable[[str, int, int], None]:
        self._bar: Any = None
        return self.update

    def update(self, phase: str, done: int, total: int) -> None:
        if total < 200_000 or not sys.stderr.isatty():
            return
        if self._bar is None:
            from rich.progress import Progress

            self._bar = Progress(transient=True)
            self._bar.start()
            self._task = self._bar.add_task(phase, total=total)
        self._bar.update(self._task, completed=done, description=phase)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()


@index_cmd.command("info")
@click.argument("index_path", metavar="INDEX", type=click.Path(exists=True, dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def index_info_cmd(index_path: str, as_json: bool) -> None:
    """Show what an index holds: builder, tokenizer spec, counts, size, build time, corpus checksum."""
    from ..store import Index, index_size

    with Index.open(index_path) as index:
        info = {**index.meta, "index_bytes": index_size(index_path)}
    if as_json:
        click.echo(json.dumps(info, ensure_ascii=False, indent=2))
        return
    for key in sorted(info):
        click.echo(f"{key}: {info[key]}")


@index_cmd.command("list")
@click.argument("index_path", metavar="INDEX", type=click.Path(exists=True, dir_okay=False))
@click.option("--category", help="Only this category (top-level folder).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def index_list_cmd(index_path: str, category: str | None, as_json: bool) -> None:
    """List the documents (lines) or sections (sections, passages) of an index."""
    from ..read import list_entries
    from ..store import Index

    with Index.open(index_path) as index:
        entries = list_entries(index, category=category)
    if as_json:
        click.echo(json.dumps(entries, ensure_ascii=False, indent=2))
        return
    for entry in entries:
        if "anchor" in entry:
            click.echo(f"{entry['path']}#{entry['anchor']}\t{entry['category']}\t{entry['heading_path'] or entry['title']}")
        else:
            click.echo(f"{entry['doc']}@{entry['revision']}\t{entry['status']}\t{entry['expires'] or '-'}\t"
                       f"{entry['path']}\t{entry['lines']} lines")


@index_cmd.command("verify")
@click.argument("index_path", metavar="INDEX", type=click.Path(exists=True, dir_okay=False))
@click.option("--root", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Corpus folder to check against (default: the one recorded at build time).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def index_verify_cmd(index_path: str, root: Path | None, as_json: bool) -> None:
    """Check every source id against the files: ok, stale or missing; exit 1 if any is not ok."""
    from ..read import verify_index
    from ..store import Index

    with Index.open(index_path) as index:
        statuses = verify_index(index, root)
    if as_json:
        click.echo(json.dumps([s.__dict__ for s in statuses], ensure_ascii=False, indent=2))
    else:
        for status in statuses:
            click.echo(f"{status.status}\t{status.key}")
        counts = {state: sum(s.status == state for s in statuses) for state in ("ok", "stale", "missing")}
        click.echo(f"# {counts['ok']} ok, {counts['stale']} stale, {counts['missing']} missing", err=True)
    if any(s.status != "ok" for s in statuses):
        sys.exit(1)


@cli.command("search")
@click.argument("index_path", metavar="INDEX", type=click.Path(exists=True, dir_okay=False))
@click.argument("query")
@click.option("--mode", type=click.Choice(["and", "or", "phrase"]),
              help="and: every term; or: any term, ranked; phrase: the exact text. Default: the builder's.")
@click.option("--limit", type=int, help="Number of hits (default and maximum recorded by the builder).")
@click.option("--as-of", help="Only current chunks whose expiry date is after this YYYY-MM-DD date.")
@click.option("--category", help="Only this category (top-level folder).")
@click.option("--path-prefix", help="Only paths starting with this prefix.")
@click.option("--json", "as_json", is_flag=True, help="Print the agent tool result (JSON with provenance).")
@click.option("--explain", is_flag=True, help="Show the normalised query, its tokens, the MATCH expression and hits per term.")
def search_cmd(index_path: str, query: str, mode: str | None, limit: int | None, as_of: str | None,
               category: str | None, path_prefix: str | None, as_json: bool, explain: bool) -> None:
    """Search INDEX for QUERY, best bm25 first (ties by chunk id), with highlighted snippets."""
    from ..search import search
    from ..store import Index

    with Index.open(index_path) as index:
        result = search(index, query, mode=mode, limit=limit, as_of=as_of, category=category,
                        path_prefix=path_prefix, explain=explain)
    if as_json:
        payload = {"kind": "document_evidence", "query": query, "as_of": as_of,
                   "hits": [hit.as_dict() for hit in result.hits], "action_authority": False}
        if explain:
            payload["explain"] = result.explain
        click.echo(json.dumps(payload, ensure_ascii=False, indent=2))
        return
    if explain:
        for key, value in result.explain.items():
            click.echo(f"# {key}: {json.dumps(value, ensure_ascii=False)}")
    for hit in result.hits:
        chunk = hit.chunk
        where = f"{chunk.path}:{chunk.line}" if chunk.line is not None else (
            f"{chunk.path}#{chunk.anchor}" if chunk.anchor else chunk.key)
        click.echo(f"{hit.rank}\t{hit.score:.4f}\t{where}\t{hit.snippet}")
    if not result.hits:
        click.echo("no hits", err=True)


@cli.command("read")
@click.argument("index_path", metavar="INDEX", type=click.Path(exists=True, dir_okay=False))
@click.argument("target", metavar="PATH[#ANCHOR]")
@click.option("--root", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Corpus folder for whole-file reads (default: the one recorded at build time).")
def read_cmd(index_path: str, target: str, root: Path | None) -> None:
    """Print a stored section (PATH#ANCHOR) or a whole source file (PATH) that stays under the root."""
    from ..read import read
    from ..store import Index

    with Index.open(index_path) as index:
        click.echo(read(index, target, root=root))


