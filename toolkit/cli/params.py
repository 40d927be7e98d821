"""Argument types shared by every command (text that must be valid UTF-8, like the query argument), the refusal
of options that do not apply, and the option decorators several commands share."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from ..errors import InvalidTextError


class Utf8Text(click.ParamType):
    """A string argument refused when it holds bytes that are not UTF-8 (the shell passes them through as
    lone surrogates) or a NUL, with a one-line error naming the option, exit status 1."""

    name = "text"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        if isinstance(value, bytes):
            try:
                value = value.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InvalidTextError(f"{_name(param)} is not valid UTF-8 (byte {exc.start})") from None
        text = str(value)
        for position, char in enumerate(text):
            if "\udc80" <= char <= "\udcff":  # how Python passes on a byte of argv that is not UTF-8
                raise InvalidTextError(
                    f"{_name(param)}: not valid UTF-8 (byte 0x{ord(char) - 0xDC00:02x} at character {position})",
                    hint="pass text in UTF-8",
                )
            if "\ud800" <= char <= "\udfff":
                raise InvalidTextError(
                    f"{_name(param)}: text is not valid Unicode: lone surrogate U+{ord(char):04X} "
                    f"at character {position}",
                    hint="pass text in UTF-8",
                )
        return text


def _name(param: click.Parameter | None) -> str:
    if param is None:
        return "an argument"
    if isinstance(param, click.Option) and param.opts:
        return max(param.opts, key=len)
    return (param.human_readable_name or "an argument").upper()


#: The type of every free-text option and argument (queries, categories, prefixes, targets, specs).
TEXT = Utf8Text()


class Utf8Path(click.Path):
    """A path argument whose name must be valid UTF-8, for commands that record the path in a JSON or SQLite
    output (a report, tune.json, an index's meta): refused up front, as :class:`Utf8Text` refuses text, rather
    than after the work when the path cannot be written into that output."""

    def __init__(self) -> None:
        super().__init__(path_type=Path)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        return super().convert(TEXT.convert(value, param, ctx), param, ctx)


#: The type of a path option that a command records in what it writes.
UTF8_PATH = Utf8Path()


def refuse_given(ctx: click.Context, names: Sequence[str], why: str) -> None:
    """A usage error when any option of ``names`` (parameter names) was given, not left at its default: in the
    mode ``why`` describes (e.g. "only with --oracle") it does nothing, and ignoring it silently hides a
    mistake."""
    options = {param.name: max(param.opts, key=len) for param in ctx.command.params if isinstance(param, click.Option)}
    given = [
        options[name]
        for name in names
        if ctx.get_parameter_source(name) not in (None, ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP)
    ]
    if given:
        named = given[0] if len(given) == 1 else f"{', '.join(given[:-1])} and {given[-1]}"
        raise click.UsageError(f"{named} {'applies' if len(given) == 1 else 'apply'} {why}", ctx=ctx)


# -- options several commands share (each command words its own help) ------------------------------------------

#: What an option decorator takes and returns: the command function, its parameters one more.
Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def questions_option(help: str, *, required: bool = False) -> Decorator:
    """``--queries FILE`` as ``questions``: the questions asked of a knowledge base (judge, compare)."""
    return click.option("--queries", "questions", required=required, type=click.Path(path_type=Path), help=help)


def qrels_option(help: str, *, name: str = "judgments") -> Decorator:
    """``--qrels FILE`` as ``name``: judgments of the questions, TREC or BEIR qrels."""
    return click.option("--qrels", name, type=click.Path(path_type=Path), help=help)


def tokenizers_option(help: str, *, name: str = "tokenizers") -> Decorator:
    """``-t/--tokenizer SPEC``, repeatable, as ``name``: the systems a command runs, one per tokenizer spec."""
    return click.option("-t", "--tokenizer", name, multiple=True, metavar="SPEC", type=TEXT, help=help)


def builder_option(help: str = "Builder spec (default: inferred from SOURCE).", *, name: str = "builder") -> Decorator:
    """``-b/--builder SPEC`` as ``name``: how SOURCE is cut into passages."""
    return click.option("-b", "--builder", name, metavar="SPEC", type=TEXT, help=help)
