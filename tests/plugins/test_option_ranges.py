"""Numeric options of builders and engines declare their range; a value outside it is one error at parse time.

Regressions: ``bm25s:k1=nan`` (or 1e308, -1, ``b=2``) ran with every metric 0; ``sections:title_weight=-1``
(nan, 0, inf) built an index the impact engine called damaged; ``sections:max_chars=0`` looped forever.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from rag_eval.builders import BUILDERS, get_builder
from rag_eval.cli import cli
from rag_eval.engines.base import ENGINES, engine_names, get_engine
from rag_eval.errors import SpecError
from rag_eval.files.textio import shown
from rag_eval.registry import Registry
from rag_eval.spec import Configurable, Number, Option
from rag_eval.tokenizers import TOKENIZERS

engine_names()  # the engine registry, entry points included, is complete before it is read below


def _options(registry: Registry[Any]) -> list[tuple[str, Option]]:
    owners: dict[str, type[Configurable]] = {name: registry[name] for name in sorted(registry)}
    return [(name, option) for name, owner in owners.items() for option in owner.option_set.options]


DECLARED = {"builder": _options(BUILDERS), "engine": _options(ENGINES), "tokenizer": _options(TOKENIZERS)}
#: Every numeric option of a builder or engine (by its default's type, so one declared without a range is
#: still listed here and tested with the values any range refuses).
NUMERIC = [
    (kind, name, option)
    for kind in ("builder", "engine")
    for name, option in DECLARED[kind]
    if isinstance(option.default, int | float) and not isinstance(option.default, bool) and not option.choices
]
#: Refused by any sensible range of any numeric option.
ALWAYS_BAD = ["nan", "inf", "-inf", "-1", "1e308", "9" * 40, "9" * 400, "1_0", "２", "", "x"]


def _in_range(number: Number, text: str) -> bool:
    """Whether ``text`` is a plain decimal inside the declared range, worked out apart from ``Number``."""
    if "_" in text or not text.isascii():
        return False
    try:
        value = int(text) if number.whole else float(text)
    except ValueError:
        return False
    if isinstance(value, float) and not math.isfinite(value):
        return False
    return (value > number.low if number.above else value >= number.low) and value <= number.high


def _bad_values(number: object) -> list[str]:
    if not isinstance(number, Number):
        return ALWAYS_BAD
    low, high = number.low, number.high
    below = str(int(low) - 1) if number.whole else ("-0.001" if low == 0 else repr(low / 2))
    candidates = [*ALWAYS_BAD, "0", below]
    candidates += [str(int(high) + 1) if number.whole else repr(high * 2), repr(float(low)) if number.above else ""]
    return sorted({value for value in candidates if not _in_range(number, value)})


BAD = [(kind, name, option.name, value) for kind, name, option in NUMERIC for value in _bad_values(option.parse)]
BAD_IDS = [
    f"{name}:{option}={value if len(value) < 12 else f'{value[:4]}..({len(value)})'}" for _, name, option, value in BAD
]


def test_every_numeric_option_declares_its_range() -> None:
    """A bare ``int`` or ``float`` parser takes nan, inf, 0 and -1: every number is a declared ``Number``."""
    assert {(kind, name, option.name) for kind, name, option in NUMERIC} >= {
        ("builder", "sections", "max_chars"),
        ("builder", "sections", "title_weight"),
        ("builder", "passages", "title_weight"),
        ("engine", "bm25s", "k1"),
        ("engine", "bm25s", "b"),
    }
    for kind, name, option in NUMERIC:
        assert isinstance(option.parse, Number), f"{kind} {name} option {option.name} has no declared range"
        assert option.parse.admits(option.default), (name, option.name)
    for kind, options in DECLARED.items():
        for name, option in options:
            assert option.parse not in (int, float) or option.choices, f"{kind} {name}: {option.name} unranged"


def _spec(name: str, option: str, value: str) -> str:
    return f"{name}:{option}={value}"


def _message(name: str, option: str, value: str) -> str:
    return f"bad value {shown(value)} for {name} option {option!r}: expected a "


@pytest.mark.parametrize(("kind", "name", "option", "value"), BAD, ids=BAD_IDS)
def test_out_of_range_value_is_refused_by_the_library(kind: str, name: str, option: str, value: str) -> None:
    make = get_builder if kind == "builder" else get_engine
    with pytest.raises(SpecError) as raised:
        make(_spec(name, option, value))
    assert str(raised.value).startswith(_message(name, option, value))
    assert "from " in str(raised.value) or "above " in str(raised.value)  # the range is named


@pytest.mark.parametrize(("kind", "name", "option", "value"), BAD, ids=BAD_IDS)
def test_out_of_range_value_is_one_error_line_in_the_cli(
    tmp_path: Path, kind: str, name: str, option: str, value: str
) -> None:
    # An empty source: an option that slipped through fails there instead (not a hang, not this message).
    (tmp_path / "src").mkdir()
    spec = _spec(name, option, value)
    if kind == "builder":
        arguments = ["index", "build", str(tmp_path / "src"), "-b", spec, "-t", "bigram", "-o", str(tmp_path / "i")]
    else:
        arguments = ["compare", "handbook", "-t", "bigram", "--engine", spec, "-o", str(tmp_path / "out")]
    result = CliRunner().invoke(cli, arguments)
    assert result.exit_code == 1, (result.exit_code, result.output, result.stderr)
    lines = result.stderr.splitlines()
    assert [line for line in lines if line.startswith("error:")] == [lines[0]], result.stderr
    assert lines[0].startswith("error: " + _message(name, option, value)), result.stderr
    assert "Traceback" not in result.stderr + result.output
    assert not (tmp_path / "i").exists() and not (tmp_path / "out").exists()


def test_engine_option_in_a_systems_file_is_refused(tmp_path: Path) -> None:
    systems = tmp_path / "systems.toml"
    systems.write_text('[[system]]\ntokenizer = "bigram"\nengine = "bm25s:k1=nan"\n', encoding="utf-8")
    result = CliRunner().invoke(cli, ["compare", "handbook", "--systems", str(systems), "-o", str(tmp_path / "out")])
    assert result.exit_code == 1
    first = result.stderr.splitlines()[0]
    assert first.startswith(f"error: {systems}: [[system]] number 1: engine: " + _message("bm25s", "k1", "nan")), first


#: ``(kind, NAME:option, an edge of its range, its neighbour just outside)``, by hand.
EDGES = [
    ("builder", "sections:max_chars", "1", "0"),
    ("builder", "sections:max_chars", "1000000000", "1000000001"),
    ("builder", "sections:max_bytes", "1000000000", "1000000001"),
    ("builder", "sections:title_weight", "0.001", "0.0009"),
    ("builder", "sections:title_weight", "1000", "1000.01"),
    ("builder", "passages:max_bytes", "1000000000000", "1000000000001"),
    ("builder", "passages:title_weight", "0.001", "-0.001"),
    ("builder", "lines:max_bytes", "1", "0"),
    ("engine", "bm25s:k1", "0.001", "0"),
    ("engine", "bm25s:k1", "1000", "1000.5"),
    ("engine", "bm25s:b", "0", "-0.001"),
    ("engine", "bm25s:b", "1", "1.001"),
]


@pytest.mark.parametrize(("kind", "option", "edge", "outside"), EDGES, ids=[f"{o}={e}" for _, o, e, _ in EDGES])
def test_range_edges_are_accepted_and_their_neighbours_refused(kind: str, option: str, edge: str, outside: str) -> None:
    make = get_builder if kind == "builder" else get_engine
    key = option.split(":")[1]
    assert make(f"{option}={edge}").options[key] == float(edge)
    with pytest.raises(SpecError, match=f"bad value '{outside}' for .* option '{key}': expected a "):
        make(f"{option}={outside}")


def test_python_values_are_checked_as_spec_values() -> None:
    """Options given as Python values (``Builder(title_weight=nan)``) pass the same range check."""
    cls = BUILDERS["sections"]
    with pytest.raises(SpecError, match="title_weight"):
        cls(title_weight=math.nan)
    with pytest.raises(SpecError, match="max_chars"):
        cls(max_chars=0)
    assert cls(max_chars=1, title_weight=2).options == {"max_chars": 1, "max_bytes": 5_000_000, "title_weight": 2.0}
