"""rag-eval tokenizers, tokenize and models."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from . import cli
from .params import TEXT
from .progress import Bars


@cli.command("tokenizers")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list instead of a table.")
def tokenizers_cmd(as_json: bool) -> None:
    """List every registered tokenizer: available or why not, its options and spec."""
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
        click.echo()


@cli.command("tokenize")
@click.option("-t", "--tokenizer", "specs", multiple=True, metavar="SPEC", type=TEXT,
              help="Tokenizer spec, e.g. bigram, jieba:mode=precise, pkuseg:model=mini. Repeat to compare; "
              "omit to compare every available strategy.")
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
    from ..tokenizers import tokenize_many

    if text == "-":
        text = _read_stdin()
    with Bars() as progress:
        results = tokenize_many(list(specs), text, progress=progress)
    if as_json:
        payload = [
            {"spec": r.spec, "tokens": [t._asdict() for t in r.tokens]} if r.error is None
            else {"spec": r.system, "error": r.error}
            for r in results
        ]
        click.echo(json.dumps(payload[0] if len(specs) == 1 else payload, ensure_ascii=False))
        return
    if len(specs) == 1:
        only = results[0]
        click.echo(f"# {only.spec}: {len(only.tokens)} tokens")
        for token in only.tokens:
            click.echo(f"{token.start}\t{token.end}\t{token.text}")
        return
    width = max(len(r.system) for r in results)
    for result in results:
        if result.error is not None:
            click.echo(f"{result.system:<{width}}  " + click.style(f"unavailable: {result.error}", fg="red"))
        else:
            click.echo(f"{result.system:<{width}}  " + " | ".join(t.text for t in result.tokens))


def _read_stdin() -> str:
    data = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read().encode()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        from ..errors import InvalidTextError

        raise InvalidTextError(f"standard input is not valid UTF-8 at byte {exc.start}") from None


@cli.group("models")
def models_cmd() -> None:
    """Install and list the models that strategies load (pkuseg)."""


@models_cmd.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def models_list_cmd(as_json: bool) -> None:
    """List pkuseg models: the shipped small one and the installed default one."""
    import os

    from ..models import PKUSEG_MODEL_ENV, list_models

    models = list_models()
    chosen = os.environ.get(PKUSEG_MODEL_ENV)
    if as_json:
        click.echo(json.dumps({"models": [{"spec": f"pkuseg:model={m.name}", "name": m.name, "installed": m.installed,
                                           "path": str(m.path), "bytes": m.size_bytes if m.installed else None,
                                           "note": m.note} for m in models],
                               "env": {PKUSEG_MODEL_ENV: chosen}}, ensure_ascii=False, indent=2))
        return
    for model in models:
        state = f"installed, {model.size_bytes / 1e6:.1f} MB" if model.installed else "not installed"
        click.echo(f"pkuseg:model={model.name}\t{state}\t{model.path}\n    {model.note}")
    click.echo(f"${PKUSEG_MODEL_ENV} = {chosen!r}" if chosen else f"${PKUSEG_MODEL_ENV} is not set (pkuseg uses default)")


@models_cmd.command("install")
@click.argument("model", type=click.Choice(["pkuseg"]))
@click.option("--sdist", type=click.Path(path_type=Path),
              help="Use an already downloaded pkuseg-0.0.25.tar.gz instead of asking pip.")
def models_install_cmd(model: str, sdist: Path | None) -> None:
    """Install pkuseg's real default model from the pkuseg 0.0.25 sdist on PyPI (no GitHub).

    pip downloads the sdist, rag-eval checks its pinned sha256, extracts pkuseg/models/default into
    the cache dir and converts it to the format spacy-pkuseg loads (49 MB download, 167 MB installed).
    """
    from ..models import install_pkuseg_model

    install_pkuseg_model(sdist, progress=lambda message: click.echo(f"… {message}", err=True))


@models_cmd.command("train-pkuseg")
@click.argument("training_text", type=click.Path(path_type=Path), required=False)
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True,
              help="Folder to write features.msgpack and weights.npz into.")
@click.option("--iterations", default=20, show_default=True, help="Training iterations.")
def models_train_cmd(training_text: Path | None, output: Path, iterations: int) -> None:
    """Train a small pkuseg model from segmented text (default: the text the shipped mini model came from).

    Training shuffles without a seed, so the result differs slightly run to run; rag-eval ships one
    trained model so tests are reproducible.
    """
    from ..models import mini_training_text, train_pkuseg_model

    train_pkuseg_model(training_text or mini_training_text(), output, iterations=iterations)
    click.echo(f"wrote {output}")

