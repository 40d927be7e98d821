"""The ``rag-eval`` command line: thin wrappers that parse options, call the library, format results."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import sys
from typing import Any

import click

from .. import __version__
from ..errors import RagEvalError, Terminated

#: Exit statuses of a command stopped by a signal, as a shell reports them: 128 + the signal's number.
INTERRUPTED_EXIT = 128 + signal.SIGINT
TERMINATED_EXIT = 128 + signal.SIGTERM
BROKEN_PIPE_EXIT = 128 + signal.SIGPIPE


def _terminate(signum: int, frame: Any) -> None:
    raise Terminated()


class _Group(click.Group):
    """Every error is one ``error:`` line on stderr (plus an optional ``hint:``), never a traceback
    (``--debug`` shows it): RagEvalError and unexpected file-system or SQLite errors exit 1, usage errors
    (click's own) exit 2 with the usage line after the error line, Ctrl-C exits 130 and SIGTERM 143
    (``error: interrupted`` or ``error: terminated``, after the command cleaned up). A closed output pipe
    (``| head``) ends the command quietly with 141, as a command killed by SIGPIPE."""

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.ClickException as exc:  # options of the top-level command itself
            _report_click_error(exc)
            sys.exit(exc.exit_code)

    def invoke(self, ctx: click.Context) -> Any:
        debug = ctx.meta.get("rag_eval.debug")
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            # As a command killed by SIGPIPE ends (141 in a shell), not 1: `index verify` exits 1 for "not all ok".
            # What Python still holds for the pipe goes nowhere, so exiting writes no second error.
            quiet = os.open(os.devnull, os.O_WRONLY)
            os.dup2(quiet, sys.stdout.fileno())
            os.close(quiet)
            ctx.exit(BROKEN_PIPE_EXIT)
        except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (Terminated): outputs were cleaned up on the way here
            if debug:
                raise
            terminated = isinstance(exc, Terminated)
            _report("terminated (SIGTERM)" if terminated else "interrupted", None)
            ctx.exit(TERMINATED_EXIT if terminated else INTERRUPTED_EXIT)
        except click.ClickException as exc:
            _report_click_error(exc)
            ctx.exit(exc.exit_code)
        except RagEvalError as exc:
            if debug:
                raise
            _report(str(exc), exc.hint)
            ctx.exit(1)
        except OSError as exc:  # a file system problem rag-eval did not anticipate: still one line
            if debug:
                raise
            if isinstance(exc, shutil.Error) and exc.args and isinstance(exc.args[0], list) and exc.args[0]:
                # copytree gathers every file that failed, (source, destination, why): one line names the first
                failed = exc.args[0]
                first = failed[0]
                why = first[2] if isinstance(first, tuple) and len(first) == 3 else first
                more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
                _report(f"{why}{more}", None)
                ctx.exit(1)
            where = f": {exc.filename}" if exc.filename else ""
            _report(f"{exc.strerror or exc}{where}", None)
            ctx.exit(1)
        except sqlite3.Error as exc:  # a last resort: the library maps the SQLite errors it expects
            if debug:
                raise
            _report(f"SQLite: {exc}", "if this is an index file, check it with: rag-eval index verify")
            ctx.exit(1)


def _report(message: str, hint: str | None) -> None:
    click.echo(f"error: {message}", err=True)
    if hint:
        click.echo(f"hint: {hint}", err=True)


def _report_click_error(exc: click.ClickException) -> None:
    # The error line first, as every other error prints it (click put its "Usage:" line before it), then the usage.
    ctx = getattr(exc, "ctx", None)
    message = exc.format_message()
    click.echo(f"error: {message[:1].lower() + message[1:]}", err=True)
    if isinstance(exc, click.UsageError) and ctx is not None:
        click.echo(ctx.get_usage(), err=True)
    if ctx is not None:
        click.echo(f"hint: see '{ctx.command_path} --help'", err=True)


def _versions() -> str:
    import platform
    import sqlite3

    from ..tokenizers import TOKENIZERS
    from ..tokenizers.base import library_version

    lines = [f"rag-eval {__version__}", f"python {platform.python_version()}", f"sqlite {sqlite3.sqlite_version}"]
    libraries: dict[str, None] = {}
    for name in TOKENIZERS:
        try:
            cls = TOKENIZERS[name]
        except RagEvalError:
            continue
        libraries.update(dict.fromkeys(getattr(cls, "libraries", ())))
    libraries["opencc"] = None
    lines += [f"{lib} {library_version(lib)}" for lib in libraries]
    return "\n".join(lines)


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(_versions())
        ctx.exit()


def _set_debug(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    ctx.meta["rag_eval.debug"] = value


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Print the versions of rag-eval, SQLite and every tokenizer library, then exit.",
)
@click.option(
    "--debug",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_set_debug,
    help="Show the full traceback on errors.",
)
def cli() -> None:
    """Pick a tokenization strategy for Chinese full-text search on SQLite FTS5 from evidence.

    \b
    Start here:
      rag-eval compare handbook -o out/handbook      compare every strategy on a shipped labelled set
      rag-eval compare DOCS --queries FILE -o OUT    the same on your Markdown folder and questions
      rag-eval judge DOCS --queries FILE -o QRELS    grade the pooled results in your browser
      rag-eval tokenizers                            list strategies, their options and specs
      rag-eval tokenize -t jieba 导出文件保留三十天  see how one strategy cuts a text
      rag-eval models install pkuseg                 install pkuseg's real model (offline after that)

    A strategy is named by a spec, NAME[:key=value,...], for example bigram, jieba:mode=precise,
    pkuseg:model=mini or bigram:t2s=true.
    """


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
) -> None:
    click.echo(f"warning: {message}", err=True)


def main() -> None:
    """Console-script entry point."""
    import warnings

    warnings.showwarning = _show_warning
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:  # not when the caller chose to ignore or handle it
        signal.signal(signal.SIGTERM, _terminate)
    cli(prog_name="rag-eval")


# Commands register themselves on the group when their modules are imported.
from . import cache, compare, datasets, evaluate, fuse, index, judge, models, queries, segeval, serve, tokenize, tune  # noqa: E402,F401
