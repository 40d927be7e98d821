"""rag-eval serve: indexes as MCP tools for agents."""

from __future__ import annotations

from pathlib import Path

import click

from . import cli
from .params import TEXT


@cli.command("serve")
@click.argument("index_paths", metavar="INDEX [INDEX ...]", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--transport",
    type=click.Choice(["stdio", "http"]),
    default="stdio",
    show_default=True,
    help="stdio: the client starts this command and speaks MCP on its stdin/stdout; http: streamable HTTP "
    "at http://HOST:PORT/mcp.",
)
# No click defaults: the library refuses --host and --port given with stdio, so it must see whether they were given.
@click.option("--host", type=TEXT, help="With --transport http only: address (default: 127.0.0.1).")
@click.option("--port", type=int, help="With --transport http only: port (default: 8000; 0: a free one, printed).")
@click.option(
    "--as-of",
    type=TEXT,
    default="today",
    show_default=True,
    help="The date searches are made as of (YYYY-MM-DD, or today: today in UTC at each call). Only current "
    "chunks whose expiry date is after it are found; agents cannot change it.",
)
@click.option(
    "--root",
    "roots",
    metavar="[NAME=]DIR",
    type=TEXT,
    multiple=True,
    help="Allow read to return whole source files from under this folder (refused otherwise): only the "
    "files the index was built from, never a dotfile or a file under a dot-folder; verify "
    "checks sources here instead of the folder recorded at build time. With several indexes, NAME=DIR for "
    "each index whose files may be read (NAME: the index file's stem); repeatable.",
)
def serve_cmd(
    index_paths: tuple[Path, ...],
    transport: str,
    host: str | None,
    port: int | None,
    as_of: str,
    roots: tuple[str, ...],
) -> None:
    """Serve indexes to agents over the Model Context Protocol.

    Tools: search (seed 000's evidence result: hits with provenance, action_authority false), read (a
    stored passage by key), verify (ok / stale / missing against the source's sha256), list (documents
    or sections, paged) and list_indexes. With several indexes, tools take an index name: the file stem.
    A rebuild while serving is picked up by the next call. Logs go to stderr.

    \b
    Examples:
      rag-eval serve handbook.sqlite
      rag-eval serve handbook.sqlite --root docs/
      rag-eval serve handbook.sqlite evidence.sqlite --as-of 2026-10-07 --root handbook=docs/ --root evidence=corpus/
      rag-eval serve handbook.sqlite --transport http --port 8000

    \b
    A client configuration (Claude Desktop, Cursor and others take this shape):
      {"mcpServers": {"handbook": {"command": "/path/to/.venv/bin/rag-eval",
                                   "args": ["serve", "/path/to/handbook.sqlite"]}}}
    """
    from ..serve.server import serve

    serve(list(index_paths), transport=transport, host=host, port=port, as_of=as_of, root=list(roots) or None)
