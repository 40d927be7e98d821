"""rag-eval tokenizers and tokenize."""

from __future__ import annotations

import json
import sys

import click

from . import cli
from .params import TEXT
from .progress import Bars


@cli.command("tokenizers")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list instead of a table.")
def tokenizers_cmd(as_json: bool) -> None:
    """List every registered tokenizer: available or why not, its options and spec.

    \b
    Examples:
      rag-eval tokenizers
      rag-eval tokenizers --json
    """
    from ..tokenizers import TOKENIZERS
    from ..tokenizers.listing import describe_all

    rows = describe_all(TOKENIZERS)
    if as_json:
        click.echo(json.dumps([row._asdict() for row in rows], ensure_ascii=False, indent=2))
        return
    for row in rows:
        status = click.style("available", fg="green") if row.available else click.style("unavailable", fg="red")
        click.echo(f"{click.style(row.name, bold=True)}  ({row.kind})  {status}")
        if row.summary:
            click.echo(f"  {row.summary}")
        if not row.available:
            click.echo(f"  why: {row.reason}")
        for option in row.options:
            click.echo(f"  option {option}")
        if row.spec:
            click.echo(f"  spec: {row.spec}")
        if row.hint:
            click.echo(f"  {'install' if not row.available else 'try'}: {row.hint}")
        if row.ignored:
            click.echo(f"  ignored: {row.ignored} also declares {row.name!r}; the built-in keeps the name")
        click.echo()


@cli.command("tokenize")
@click.option(
    "-t",
    "--tokenizer",
    "specs",
    multiple=True,
    metavar="SPEC",
    type=TEXT,
    help="Tokenizer spec, e.g. bigram, jieba:mode=precise, pkuseg:model=mini. Repeat to compare; "
    "omit to compare every available strategy.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON: per spec, a list of {text, start, end}.")
@click.argument("text", type=TEXT)
def tokenize_cmd(specs: tuple[str, ...], as_json: bool, text: str) -> None:
    """Show how strategies cut TEXT (use - to read standard input as UTF-8).

    With one -t, prints one token per line: start, end, text (character offsets into TEXT, end
    exclusive). With several -t, or none, prints each strategy's terms side by side.

    \b
    Examples:
      rag-eval tokenize 导出文件保留三十天
      rag-eval tokenize -t jieba:mode=precise -t pkuseg:model=mini 导出文件保留三十天
      cat notes.txt | rag-eval tokenize -t bigram --json -
    """
    from ..files.textio import counted
    from ..tokenizers import tokenize_many

    if text == "-":
        text = _read_stdin()
    with Bars() as progress:
        results = tokenize_many(list(specs), text, progress=progress)
    if as_json:
        payload = [
            {"spec": r.spec, "tokens": [t._asdict() for t in r.tokens]}
            if r.error is None
            else {"spec": r.system, "error": r.error}
            for r in results
        ]
        click.echo(json.dumps(payload[0] if len(specs) == 1 else payload, ensure_ascii=False))
        return
    if len(specs) == 1:
        only = results[0]
        click.echo(f"# {only.spec}: {counted(len(only.tokens), 'token')}")
        for token in only.tokens:
            click.echo(f"{token.start}\t{token.end}\t{token.text}")
        return
    width = max(len(r.system) for r in results)
    for result in results:
        if result.error is not None:
            click.echo(f"{result.system:<{width}}  " + click.style(f"unavailable: {result.error}", fg="red"))
        else:
            click.echo(f"{result.system:<{width}}  " + " | ".join(t.text for t in result.tokens))


#: Most bytes ``tokenize -`` reads: it holds every token to print them (60 MB of text took 4.9 GB).
MAX_STDIN_BYTES = 10_000_000


def _read_stdin() -> str:
    stream = sys.stdin.buffer if hasattr(sys.stdin, "buffer") else None
    data = stream.read(MAX_STDIN_BYTES + 1) if stream is not None else sys.stdin.read(MAX_STDIN_BYTES + 1).encode()
    if len(data) > MAX_STDIN_BYTES:
        from ..errors import InvalidTextError

        raise InvalidTextError(
            f"standard input is over {MAX_STDIN_BYTES} bytes",
            hint="tokenize a part of it; to index a corpus, use rag-eval index build",
        )
    # One leading BOM is not text (as in files): kept, it would shift every offset by one.
    skip = 3 if data.startswith(b"\xef\xbb\xbf") else 0
    try:
        return data[skip:].decode("utf-8")
    except UnicodeDecodeError as exc:
        from ..errors import InvalidTextError

        raise InvalidTextError(f"standard input is not valid UTF-8 at byte {skip + exc.start}") from None
