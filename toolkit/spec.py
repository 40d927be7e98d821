"""System specs: ``NAME[:key=value,...]`` names a tokenizer or builder with its options."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from .errors import SpecError

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
        name, _, rest = text.strip().partition(":")
        name = name.strip()
        if not _NAME.match(name):
            raise SpecError(f"invalid spec {text!r}: expected NAME[:key=value,...] with a lowercase name")
        options: dict[str, str] = {}
        if rest.strip():
            for part in rest.split(","):
                key, eq, value = part.partition("=")
                key = key.strip()
                if not eq or not _KEY.match(key):
                    raise SpecError(f"invalid option {part.strip()!r} in spec {text!r}: expected key=value")
                if key in options:
                    raise SpecError(f"option {key!r} given twice in spec {text!r}")
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
                raise SpecError(f"unknown option {key!r} for {owner}; valid options: {valid}")
            try:
                values[key] = option.convert(raw)
            except ValueError as exc:
                raise SpecError(f"bad value {raw!r} for {owner} option {key!r}: {exc}") from None
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
