"""A source with nothing to index is one error line, whatever the builder (sections already said so)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from rag_eval.cli import cli


@pytest.mark.parametrize(
    ("builder", "layout", "message"),
    [
        ("passages", {"corpus.jsonl": ""}, "no passages"),
        ("passages", {"corpus.jsonl": "\n  \n"}, "no passages"),
        ("lines", {"manifest.json": "[]"}, "lists no documents"),
        ("sections", {"notes.txt": "x"}, "no .md files"),
    ],
)
def test_nothing_to_index_is_an_error_and_writes_nothing(
    tmp_path: Path, builder: str, layout: dict[str, str], message: str
) -> None:
    source = tmp_path / "source"
    source.mkdir()
    for name, text in layout.items():
        (source / name).write_text(text, encoding="utf-8")
    target = source / "corpus.jsonl" if builder == "passages" else source
    result = CliRunner().invoke(cli, ["index", "build", str(target), "-b", builder, "-o", str(tmp_path / "x.sqlite")])
    assert result.exit_code == 1
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and message in errors[0], result.output
    assert not list(tmp_path.glob("x.sqlite*"))


def test_an_empty_tokenizer_spec_is_refused_rather_than_taken_for_bigram(tmp_path: Path) -> None:
    source = tmp_path / "corpus.jsonl"
    source.write_text(json.dumps({"_id": "a", "title": "", "text": "导出"}) + "\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["index", "build", str(source), "-b", "passages", "-t", " ", "-o", "x.sqlite"])
    assert result.exit_code == 2 and "-t is empty" in result.output
