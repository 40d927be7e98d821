"""A first build writes its hidden file without a log and syncs it once before it gets its name."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import make_docs

from rag_eval.cli import cli
from rag_eval.errors import IndexFileError, RagEvalError
from rag_eval.index import writer
from rag_eval.index.store import Index
from rag_eval.search.searching import search


def side_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(("-wal", "-shm", "-journal", ".building")))


def test_a_new_index_is_synced_before_it_is_published_and_stays_in_wal_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = make_docs(tmp_path / "docs")
    events: list[str] = []
    fsync, publish = os.fsync, writer.publish

    def recorded_fsync(handle: int) -> None:
        events.append("fsync")
        fsync(handle)

    def recorded_publish(building: str, path: str) -> None:
        # What the hidden file holds when it gets its name: no log beside it, the WAL mode every index has.
        db = sqlite3.connect(building)
        events.append(f"publish {db.execute('PRAGMA journal_mode').fetchone()[0]}")
        db.close()
        events.append("log beside it" if Path(f"{building}-journal").exists() else "no log")
        publish(building, path)

    monkeypatch.setattr(os, "fsync", recorded_fsync)
    monkeypatch.setattr(writer, "publish", recorded_publish)  # looked up where build() is
    index = tmp_path / "out" / "new.sqlite"
    writer.build(docs, index, builder="sections", tokenizer="bigram")
    assert events == ["fsync", "publish wal", "no log"]
    assert side_files(index.parent) == []
    with Index.open(index) as opened:
        assert search(opened, "导出", limit=3).hits


def test_a_sync_of_an_existing_index_keeps_the_wal_and_its_syncs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Readers may hold an existing index open: its rebuilds stay logged and durable, never bulk-loaded."""
    docs = make_docs(tmp_path / "docs")
    index = tmp_path / "index.sqlite"
    writer.build(docs, index, builder="sections", tokenizer="bigram")
    modes: list[str] = []
    write = writer._write

    def recorded_write(db: sqlite3.Connection, *args: object, **kwargs: object) -> object:
        modes.append(db.execute("PRAGMA journal_mode").fetchone()[0])
        modes.append(str(db.execute("PRAGMA synchronous").fetchone()[0]))
        return write(db, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(writer, "_write", recorded_write)
    (docs / "extra.md").write_text("# 新的\n\n上海的天气。\n", encoding="utf-8")
    writer.build(docs, index, builder="sections", tokenizer="bigram")
    assert modes[0] == "wal" and modes[1] != "0"  # 0 = OFF


def test_a_first_build_that_cannot_reach_the_disk_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = make_docs(tmp_path / "docs")
    out = tmp_path / "out"
    out.mkdir()

    def failing_fsync(handle: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    result = CliRunner().invoke(cli, ["index", "build", str(docs), "-o", str(out / "new.sqlite"), "-b", "sections"])
    assert result.exit_code != 0
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "cannot write the new index to disk" in lines[0] and "Traceback" not in result.output
    assert sorted(p.name for p in out.iterdir()) == []


def test_a_failed_first_build_removes_the_folders_it_created(tmp_path: Path) -> None:
    """Through the library too (the CLI used to be the only one cleaning up): a source with an undecodable file
    fails after the folders of ``-o`` were made."""
    docs = make_docs(tmp_path / "docs")
    (docs / "broken.md").write_bytes(b"# \xff\xfe\n")
    with pytest.raises(RagEvalError):
        writer.build(docs, tmp_path / "a" / "b" / "new.sqlite", builder="sections", tokenizer="bigram")
    assert not (tmp_path / "a").exists()
    (tmp_path / "kept").mkdir()
    with pytest.raises(RagEvalError):
        writer.build(docs, tmp_path / "kept" / "c" / "new.sqlite", builder="sections", tokenizer="bigram")
    assert sorted(p.name for p in (tmp_path / "kept").iterdir()) == []  # its own folder stays, c is gone


def test_a_source_or_index_path_that_is_not_utf8_is_refused_before_the_work(tmp_path: Path) -> None:
    docs = make_docs(tmp_path / "docs")
    odd = Path(os.fsdecode(bytes(tmp_path / "docs") + b"\xff"))
    docs.rename(odd)
    with pytest.raises(IndexFileError, match="source path is not valid UTF-8") as caught:
        writer.build(odd, tmp_path / "new.sqlite", builder="sections", tokenizer="bigram")
    assert "\\xff" in str(caught.value)
    fine = make_docs(tmp_path / "fine")
    with pytest.raises(IndexFileError, match="index path is not valid UTF-8"):
        writer.build(
            fine, Path(os.fsdecode(bytes(tmp_path) + b"/n\xff.sqlite")), builder="sections", tokenizer="bigram"
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([odd.name, "fine"])
