"""System specs: ``NAME[:key=value,...]`` names a tokenizer or builder with its options."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from .errors import SpecError
from .files.textio import shown

_NAME = re.compile(r"[a-z][a-z0-9_-]*\Z")
_KEY = re.compile(r"[a-z][a-z0-9_]*\Z")


@dataclass(frozen=True)
class SystemSpec:
    """A parsed ``NAME[:key=value,...]``; option values stay strings until validated."""

    name: str
    options: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, text: str) -> SystemSpec:
        """Parse ``NAME[:key=value,...]``; whitespace around parts is ignored."""
        name, colon, rest = text.strip().partition(":")
        name = name.strip()
        if not _NAME.match(name):
            raise SpecError(f"invalid spec {shown(text)}: expected NAME[:key=value,...] with a lowercase name")
        if colon and not rest.strip():
            # As a trailing comma is: a ':' promises options, and nothing rag-eval writes ends in one.
            raise SpecError(
                f"invalid spec {shown(text)}: no options after ':'", hint="write the name alone, or NAME:key=value"
            )
        options: dict[str, str] = {}
        if rest.strip():
            for part in rest.split(","):
                key, eq, value = part.partition("=")
                key = key.strip()
                if not eq or not _KEY.match(key):
                    raise SpecError(f"invalid option {shown(part.strip())} in spec {shown(text)}: expected key=value")
                if key in options:
                    raise SpecError(f"option {shown(key)} given twice in spec {shown(text)}")
                options[key] = value.strip()
        return cls(name, tuple(sorted(options.items())))

    def __str__(self) -> str:
        if not self.options:
            return self.name
        return self.name + ":" + ",".join(f"{k}={v}" for k, v in self.options)


def parse_bool(value: str) -> bool:
    """``true/false``, ``yes/no``, ``on/off``, ``1/0`` (case-insensitive)."""
    lowered = value.strip().lower()
    if lowered in ("true", "yes", "on", "1"):
        return True
    if lowered in ("false", "no", "off", "0"):
        return False
    raise ValueError("expected true or false")


_WHOLE = re.compile(r"[+-]?[0-9]+\Z")
# Unambiguous (the digits before and after the point cannot trade places), so a long run of digits that
# fails to match fails in linear time rather than quadratic.
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\Z")


@dataclass(frozen=True)
class Number:
    """A numeric option's parser and the range it accepts, declared with the option: plain ASCII decimals
    only (no ``nan``, ``inf``, ``1_000`` or full-width digits), from ``low`` (above it when ``above``) to
    ``high``; ``why`` says what a value outside the range would break."""

    low: float
    high: float
    whole: bool = False
    above: bool = False
    why: str = ""

    def __call__(self, raw: str) -> int | float:
        text = raw.strip()
        value: int | float | None = None
        if (_WHOLE if self.whole else _DECIMAL).match(text):
            value = int(text) if self.whole else float(text)
        if value is None or not self.admits(value):
            raise ValueError(self.expected())
        return value

    def admits(self, value: float) -> bool:
        """Whether ``value`` lies in the range (never for nan or an infinity)."""
        if isinstance(value, float) and not math.isfinite(value):
            return False
        # Compared as given: a whole number past float's range has no float to compare.
        return (value > self.low if self.above else value >= self.low) and value <= self.high

    def expected(self) -> str:
        """``expected a whole number from 1 to 1000``, with the reason when one is declared."""
        kind = "a whole number" if self.whole else "a finite number"
        low, high = format_number(self.low), format_number(self.high)
        span = f"above {low} and at most {high}" if self.above else f"from {low} to {high}"
        return f"expected {kind} {span}" + (f" ({self.why})" if self.why else "")


def format_number(value: float) -> str:
    """A range bound as people write it: ``1000000000``, ``0.75``, ``0``."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def whole(low: int, high: int, *, why: str = "") -> Number:
    """The parser of a whole-number option accepting ``low`` to ``high``."""
    return Number(low, high, whole=True, why=why)


def real(low: float, high: float, *, above: bool = False, why: str = "") -> Number:
    """The parser of a finite-number option accepting ``low`` (or above it) to ``high``."""
    return Number(low, high, above=above, why=why)


def format_value(value: Any) -> str:
    """The canonical string form of an option value, as it appears in specs."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    return str(value)


@dataclass(frozen=True)
class Option:
    """One option a strategy accepts: its parser, default and help text."""

    name: str
    help: str
    default: Any = None
    parse: Callable[[str], Any] = str
    choices: tuple[str, ...] = ()

    def convert(self, raw: str) -> Any:
        """Parse a raw string value, raising ValueError with a readable reason."""
        if self.choices and raw not in self.choices:
            raise ValueError(f"expected one of: {', '.join(self.choices)}")
        return self.parse(raw)

    def describe(self) -> str:
        """``name=default`` plus choices, for listings."""
        shown = "|".join(self.choices) if self.choices else format_value(self.default) or "''"
        return f"{self.name}={shown}" if not self.choices else f"{self.name}={{{shown}}}"


@dataclass(frozen=True)
class OptionSet:
    """The options a strategy declares, used to validate a spec's values."""

    options: tuple[Option, ...] = field(default_factory=tuple)

    def resolve(self, owner: str, given: Mapping[str, str]) -> dict[str, Any]:
        """Defaults overlaid with the parsed given values; unknown keys name the valid ones."""
        known = {option.name: option for option in self.options}
        values = {name: option.default for name, option in known.items()}
        for key, raw in given.items():
            option = known.get(key)
            if option is None:
                valid = ", ".join(sorted(known)) or "none"
                raise SpecError(f"unknown option {shown(key)} for {owner}; valid options: {valid}")
            try:
                values[key] = option.convert(raw)
            except ValueError as exc:
                raise SpecError(f"bad value {shown(raw)} for {owner} option {key!r}: {exc}") from None
            except OSError as exc:  # a parser that looks a path up, which the system refuses (too long, ...)
                raise SpecError(f"bad value {shown(raw)} for {owner} option {key!r}: {exc.strerror or exc}") from None
        return values


class Configurable:
    """Base of everything named by a spec (tokenizers, builders): a ``name``, declared options, and the
    canonical ``NAME:key=value,...`` with every option that has a value (defaults included, sorted)."""

    name: ClassVar[str]
    option_set: ClassVar[OptionSet] = OptionSet()

    def __init__(self, **options: Any) -> None:
        given = {key: value if isinstance(value, str) else format_value(value) for key, value in options.items()}
        self._check_options(given)
        self.options: dict[str, Any] = self.option_set.resolve(self.name, given)
        self._check_writable()

    def _check_writable(self) -> None:
        """Refuse a value the canonical spec cannot hold: read back, a comma would start another option and
        whitespace around the value would be dropped, so the name would be another system's or none at all
        (a user dictionary reached through a link to ``/tmp/a,b.txt`` resolves to that path)."""
        for key, value in self.options.items():
            text = format_value(value)
            if "," in text or text != text.strip():
                raise SpecError(
                    f"{self.name} option {key!r} is {shown(text)}, which a spec cannot hold "
                    "(no comma, no whitespace at either end)"
                )

    def _check_options(self, given: dict[str, str]) -> None:
        """Subclasses refuse option combinations here, before the values are parsed."""

    @classmethod
    def from_spec(cls, spec: SystemSpec) -> Self:
        """Instantiate from a parsed spec with this class's name."""
        return cls(**dict(spec.options))

    @property
    def system(self) -> str:
        """The canonical ``NAME:key=value,...``."""
        parts = [f"{key}={format_value(value)}" for key, value in sorted(self.options.items()) if format_value(value)]
        return self.name + (":" + ",".join(parts) if parts else "")
