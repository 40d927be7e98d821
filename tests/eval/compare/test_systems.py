"""compare --systems FILE: every value of a systems file checked at load, one error line naming the file and the
table, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import invoke, one_error
from helpers.cli import _error_lines

from rag_eval.cli import cli
from rag_eval.errors import RagEvalError
from rag_eval.eval.compare.systems import load_systems_toml


def test_a_systems_file_nested_thousands_deep_is_one_error_line(tmp_path: Path) -> None:
    """Bug: arrays nested 5,000 deep in a --systems file raised RecursionError out of tomllib: a traceback."""
    path = tmp_path / "systems.toml"
    path.write_text("system = " + "[" * 5000 + "]" * 5000 + "\n", encoding="utf-8")
    with pytest.raises(RagEvalError, match="invalid TOML"):
        load_systems_toml(path)
    result = CliRunner().invoke(cli, ["compare", "handbook", "--systems", str(path), "-o", str(tmp_path / "out")])
    assert result.exit_code == 1
    assert len(_error_lines(result)) == 1 and "invalid TOML" in result.output
    assert "Traceback" not in result.output and not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("tokenizer", "bogus", "unknown tokenizer 'bogus'"),
        ("builder", "bogus", "unknown builder 'bogus'"),
        ("mode", "bogus", "unknown query mode 'bogus'"),
        ("query", "bogus=1", "unknown option 'bogus'"),
        ("engine", "bogus", "unknown engine 'bogus'"),
    ],
)
def test_a_systems_file_error_names_the_file_and_the_table(key: str, value: str, says: str, tmp_path: Path) -> None:
    path = tmp_path / "systems.toml"
    table = {"tokenizer": "bigram", key: value}
    path.write_text("[[system]]\n" + "".join(f'{k} = "{v}"\n' for k, v in table.items()), encoding="utf-8")
    with pytest.raises(RagEvalError) as caught:
        load_systems_toml(path)
    assert str(caught.value).startswith(f"{path}: [[system]] number 1: {key}: {says}"), caught.value
    outcome = invoke("compare", "evidence-mini", "--systems", str(path), "-o", str(tmp_path / "x"))
    assert one_error(outcome, alone=True).startswith(f"error: {path}: [[system]] number 1: {key}: {says}")
