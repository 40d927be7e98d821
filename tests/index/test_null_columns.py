"""Two inputs a third audit left alone: an index whose rows read back NULL where a build never writes NULL
(a damaged or tampered page) is one error line for `index list`, not a TypeError; and `tokenize -` drops a
leading BOM from standard input as files' readers do, so offsets do not start at 1."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import make_docs

from rag_eval.cli import cli
from rag_eval.index.writer import build

#: Columns a build never leaves NULL that `index list` shows (sections and documents listings).
LISTED = ["key", "path", "anchor", "title", "heading_path", "category"]


def null_column(index: Path, column: str) -> None:
    """Make ``chunks.column`` nullable in the schema and set it NULL in every row, as a damaged page reads."""
    db = sqlite3.connect(index)
    try:
        version = db.execute("PRAGMA schema_version").fetchone()[0]
        db.execute("PRAGMA writable_schema = ON")
        (sql,) = db.execute("SELECT sql FROM sqlite_schema WHERE name = 'chunks'").fetchone()
        loose = sql.replace(f"    {column} TEXT UNIQUE NOT NULL,", f"    {column} TEXT UNIQUE,").replace(
            f"    {column} TEXT NOT NULL,", f"    {column} TEXT,"
        )
        assert loose != sql, column
        db.execute("UPDATE sqlite_schema SET sql = ? WHERE name = 'chunks'", [loose])
        db.execute(f"PRAGMA schema_version = {version + 1}")
        db.execute("PRAGMA writable_schema = OFF")
        db.commit()
    finally:
        db.close()
    db = sqlite3.connect(index)
    try:
        db.execute(f"UPDATE chunks SET {column} = NULL")
        db.commit()
    finally:
        db.close()


@pytest.mark.parametrize("column", LISTED)
@pytest.mark.parametrize("as_json", [False, True])
def test_index_list_of_rows_with_null_columns_is_one_error(tmp_path: Path, column: str, as_json: bool) -> None:
    index = tmp_path / "index.sqlite"
    build(make_docs(tmp_path / "docs"), index, builder="sections", tokenizer="bigram")
    assert CliRunner().invoke(cli, ["index", "list", str(index)]).exit_code == 0
    null_column(index, column)
    result = CliRunner().invoke(cli, ["index", "list", str(index), *(["--json"] if as_json else [])])
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == [f"error: {index}: damaged index: an entry's {column} is missing"], result.stderr


def test_a_listing_with_its_nullable_column_empty_is_fine(tmp_path: Path) -> None:
    """``expires`` is NULL for every section: the check refuses only what a build never leaves NULL."""
    index = tmp_path / "index.sqlite"
    build(make_docs(tmp_path / "docs"), index, builder="sections", tokenizer="bigram")
    with sqlite3.connect(index) as db:
        assert db.execute("SELECT count(*) FROM chunks WHERE expires IS NULL").fetchone()[0] > 0
    result = CliRunner().invoke(cli, ["index", "list", str(index), "--json"])
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)


@pytest.mark.parametrize("text", ["导出文件保留三十天", "ok 导出 data"])
def test_tokenize_stdin_drops_a_leading_bom(text: str) -> None:
    runner = CliRunner()
    plain = runner.invoke(cli, ["tokenize", "-t", "bigram", "--json", "-"], input=text.encode())
    with_bom = runner.invoke(cli, ["tokenize", "-t", "bigram", "--json", "-"], input=b"\xef\xbb\xbf" + text.encode())
    assert plain.exit_code == with_bom.exit_code == 0, (plain.stderr, with_bom.stderr)
    assert with_bom.stdout == plain.stdout


def test_tokenize_stdin_error_after_a_bom_counts_its_bytes() -> None:
    result = CliRunner().invoke(cli, ["tokenize", "-t", "bigram", "-"], input=b"\xef\xbb\xbfok \xff")
    assert result.exit_code == 1
    assert "error: standard input is not valid UTF-8 at byte 6" in result.stderr
