"""Damaged, tampered and unwritable index files: every command ends in one error line, never a traceback;
searching needs no write access."""

from __future__ import annotations

import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import make_docs

from rag_eval.cli import cli
from rag_eval.index.writer import build

COMMANDS = [
    ["search", "{index}", "导出"],
    ["search", "{index}", "导出", "--json", "--explain"],
    ["index", "info", "{index}"],
    ["index", "list", "{index}"],
    ["index", "verify", "{index}"],
    ["read", "{index}", "guide/export.md#导出指南"],
]


def run_all(index: Path) -> list[tuple[list[str], int, str]]:
    runner = CliRunner()
    results = []
    for command in COMMANDS:
        args = [a.replace("{index}", str(index)) for a in command]
        result = runner.invoke(cli, args)
        results.append((args, result.exit_code, result.stderr))
        assert result.exit_code in (0, 1), (args, result.exit_code, result.stderr)
        assert "Traceback" not in result.stderr, (args, result.stderr)
        assert result.exception is None or isinstance(result.exception, SystemExit), (args, repr(result.exception))
        if result.exit_code == 1 and command[:2] != ["index", "verify"]:
            assert len([line for line in result.stderr.splitlines() if line.startswith("error:")]) == 1, result.stderr
    return results


@pytest.fixture
def index(tmp_path: Path) -> Path:
    path = tmp_path / "index.sqlite"
    build(make_docs(tmp_path / "docs"), path, builder="sections", tokenizer="bigram")
    return path


@pytest.mark.parametrize("seed", range(6))
def test_random_bytes_in_the_middle_of_an_index(index: Path, seed: int) -> None:
    data = bytearray(index.read_bytes())
    rng = random.Random(seed)
    start = rng.randrange(len(data) // 4, 3 * len(data) // 4)
    data[start : start + 2048] = rng.randbytes(2048)
    index.write_bytes(bytes(data))
    run_all(index)


@pytest.mark.parametrize("statement", range(4))
def test_bytes_that_are_not_utf8_in_the_schema_are_one_error(index: Path, statement: int) -> None:
    """Regression: SQLite's error quoted the damaged schema text, and Python's failure to decode that message
    escaped as a UnicodeDecodeError traceback from every command that opens the index."""
    data = bytearray(index.read_bytes())
    page_size = int.from_bytes(data[16:18], "big")
    starts = [i for i in range(100, page_size) if data.startswith(b"CREATE ", i)]
    at = starts[statement % len(starts)] + len("CREATE ")
    data[at : at + 4] = b"\x87\x8e\xf1\xff"
    index.write_bytes(bytes(data))
    results = run_all(index)
    assert all(code == 1 for _, code, _ in results), results
    assert all("damaged" in stderr or "malformed" in stderr for _, _, stderr in results), results


def test_a_truncated_index(index: Path) -> None:
    data = index.read_bytes()
    index.write_bytes(data[: len(data) // 2])
    results = run_all(index)
    assert any(code == 1 for _, code, _ in results)


def tamper(path: Path, *statements: str) -> None:
    db = sqlite3.connect(path)
    for statement in statements:
        db.execute(statement)
    db.commit()
    db.close()


TAMPERED = {
    "meta key removed": ["DELETE FROM meta WHERE key = 'query_defaults'"],
    "query defaults not JSON": ["UPDATE meta SET value = 'not json' WHERE key = 'query_defaults'"],
    "query defaults of the wrong type": ["UPDATE meta SET value = '{\"mode\": 5}' WHERE key = 'query_defaults'"],
    "query defaults nested deep": [f"UPDATE meta SET value = '{'[' * 100_000}' WHERE key = 'query_defaults'"],
    "query defaults with an unknown field": [
        "UPDATE meta SET value = json_set(value, '$.surprise', 1) WHERE key = 'query_defaults'"
    ],
    "malformed tokenizer spec": ["UPDATE meta SET value = 'Bad Spec!!' WHERE key = 'tokenizer'"],
    "unknown tokenizer": ["UPDATE meta SET value = 'nosuchtokenizer' WHERE key = 'tokenizer'"],
    "fingerprint of numbers": ["UPDATE meta SET value = '{\"unicode\": 1}' WHERE key = 'tokenizer_fingerprint'"],
    "schema version not a number": ["UPDATE meta SET value = 'x' WHERE key = 'schema_version'"],
    "meta value a blob": ["UPDATE meta SET value = x'00ff' WHERE key = 'builder'"],
    "unknown builder": ["UPDATE meta SET value = 'nosuchbuilder' WHERE key = 'builder'"],
    "key not UTF-8": ["UPDATE chunks SET key = CAST(x'ff61' AS TEXT) WHERE id = 1"],
    "text not UTF-8": ["UPDATE chunks SET text = CAST(x'e5af' AS TEXT) WHERE id = 2"],
    "chunks table dropped": ["DROP TABLE chunks"],
    "search table dropped": ["DROP TABLE search"],
    "meta table dropped": ["DROP TABLE meta"],
}


@pytest.mark.parametrize("case", sorted(TAMPERED))
def test_tampered_index(index: Path, case: str) -> None:
    tamper(index, *TAMPERED[case])
    results = run_all(index)
    if case not in ("key not UTF-8", "text not UTF-8"):  # a read of other rows may still succeed
        assert all(code == 1 for _, code, _ in results), results


def test_foreign_files_are_not_indexes(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("just text\n", encoding="utf-8")
    db = sqlite3.connect(tmp_path / "app.db")
    db.execute("CREATE TABLE users (name TEXT)")
    db.commit()
    db.close()
    for path in (tmp_path / "notes.txt", tmp_path / "app.db"):
        results = run_all(path)
        assert all(code == 1 for _, code, _ in results)
        assert all("not a rag-eval index" in stderr for _, _, stderr in results), results


@pytest.fixture
def shared_folder() -> Iterator[Path]:
    """A folder outside pytest's private tmp (which other users cannot enter)."""
    folder = Path(tempfile.mkdtemp(prefix="rag-eval-ro-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def as_reader(args: list[str], cache: Path) -> subprocess.CompletedProcess:
    """Run the CLI as a user who cannot write the folder: 'nobody' when the tests run as root."""
    command = [sys.executable, "-m", "rag_eval", *args]
    env = {**os.environ, "RAG_EVAL_CACHE": str(cache)}
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv: cannot drop to an unprivileged user")
        command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *command]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd="/")


def test_searching_needs_no_write_access(shared_folder: Path) -> None:
    docs = make_docs(shared_folder / "docs")
    folder = shared_folder / "indexes"
    folder.mkdir()
    build(docs, folder / "index.sqlite", builder="sections", tokenizer="bigram")
    build(docs, folder / "jieba.sqlite", builder="sections", tokenizer="jieba")
    cache = shared_folder / "cache"
    cache.mkdir()
    os.chown(cache, 65534, 65534) if os.geteuid() == 0 else None
    for path in [folder, *folder.iterdir()]:
        path.chmod(0o755 if path.is_dir() else 0o444)
    if os.geteuid() != 0:
        folder.chmod(0o555)
    try:
        result = as_reader(["search", str(folder / "index.sqlite"), "导出", "--json"], cache)
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["hits"]
        listed = as_reader(["index", "list", str(folder / "index.sqlite")], cache)
        assert listed.returncode == 0 and "guide/export.md#导出指南" in listed.stdout, listed.stderr
        rebuild = as_reader(["index", "build", str(docs), "-b", "sections", "-o", str(folder / "index.sqlite")], cache)
        assert rebuild.returncode == 1 and rebuild.stderr.startswith("error: "), rebuild.stderr
        assert "Traceback" not in rebuild.stderr
        new = as_reader(["index", "build", str(docs), "-b", "sections", "-o", str(folder / "new.sqlite")], cache)
        assert new.returncode == 1 and "cannot create the index file" in new.stderr, new.stderr
        assert sorted(p.name for p in folder.iterdir()) == ["index.sqlite", "jieba.sqlite"]
    finally:
        folder.chmod(0o755)


LOST_CHUNKS = {
    "a matching chunk row deleted": (
        "DELETE FROM chunks WHERE id = (SELECT min(id) FROM chunks WHERE text LIKE '%导出%')"
    ),
    "every chunk row deleted": "DELETE FROM chunks",
    "chunk ids renumbered": "UPDATE chunks SET id = id + 100000",
}


SEARCHES = {
    "search": ["search", "{index}", "导出"],
    "search --json": ["search", "{index}", "导出", "--json"],
    "search --explain --mode and": ["search", "{index}", "导出", "--explain", "--mode", "and"],
    "search --engine impact --mode or": ["search", "{index}", "导出", "--engine", "impact", "--mode", "or"],
    "batch search": ["search", "{index}", "--queries", "{queries}", "--run", "{run}"],
}


@pytest.fixture(scope="module")
def impact_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("impact")
    path = folder / "docs.sqlite"
    build(make_docs(folder / "docs"), path, builder="sections", tokenizer="bigram", engine="impact")
    return path


@pytest.mark.parametrize("search", sorted(SEARCHES))
@pytest.mark.parametrize("damage", sorted(LOST_CHUNKS))
def test_postings_naming_a_lost_chunk_are_a_damaged_index(
    impact_index: Path, tmp_path: Path, damage: str, search: str
) -> None:
    """Bug: impact postings naming a chunk the chunks table lost (a damaged page, tampering) raised KeyError."""
    index = tmp_path / "docs.sqlite"
    index.write_bytes(impact_index.read_bytes())
    db = sqlite3.connect(index)
    db.execute(LOST_CHUNKS[damage])
    db.commit()
    db.close()
    queries = tmp_path / "questions.txt"
    queries.write_text("导出\n备份\n", encoding="utf-8")
    run = tmp_path / "out.run"
    args = [a.format(index=index, queries=queries, run=run) for a in SEARCHES[search]]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1, (result.output, repr(result.exception))
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "damaged index" in errors[0], result.stderr
    assert "Traceback" not in result.stderr
    assert not run.exists()
