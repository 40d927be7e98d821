"""Side files and hidden build files beside a new index: only SQLite's own are removed, a user's are refused and
kept, a running build's file is never removed."""

from __future__ import annotations

import fcntl
import os
import sqlite3
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from rag_eval.cli import cli
from rag_eval.errors import IndexFileError
from rag_eval.index import locks
from rag_eval.index.building_file import new_building_file, publish, remove_stale_builds

# --- files beside a new index --------------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", locks.SIDE_FILES)
def test_a_users_file_named_as_the_new_indexs_side_file_is_refused_and_kept(tmp_path: Path, suffix: str) -> None:
    """``index build -o new.sqlite`` deleted a user's new.sqlite-wal, -shm and -journal without looking at them."""
    side = tmp_path / f"new.sqlite{suffix}"
    side.write_text("my notes, not SQLite's\n", encoding="utf-8")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# 标题\n\n导出文件\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["index", "build", str(docs), "-o", str(tmp_path / "new.sqlite")])
    assert result.exit_code == 1
    assert result.output.startswith(f"error: {side}: refusing to create the index")
    assert side.read_text(encoding="utf-8") == "my notes, not SQLite's\n"
    assert not (tmp_path / "new.sqlite").exists()


def test_sqlites_own_leftover_log_is_removed_before_a_new_index_appears(tmp_path: Path) -> None:
    old = tmp_path / "old.sqlite"
    db = sqlite3.connect(old)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("CREATE TABLE t (x)")
    db.execute("INSERT INTO t VALUES (1)")
    db.commit()
    for suffix in ("-wal", "-shm"):  # what an index deleted while a reader had it open leaves
        os.link(f"{old}{suffix}", tmp_path / f"new.sqlite{suffix}")
    db.close()
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# 标题\n\n导出文件\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["index", "build", str(docs), "-o", str(tmp_path / "new.sqlite")])
    assert result.exit_code == 0, result.output
    with sqlite3.connect(tmp_path / "new.sqlite") as new:
        assert new.execute("SELECT name FROM sqlite_master WHERE name = 't'").fetchall() == []


def test_only_the_names_a_build_gives_its_hidden_file_are_removed_as_stale(tmp_path: Path) -> None:
    """Any user file matching ``.NAME.*.building`` was removed; a FIFO with a build's name would have blocked."""
    target = tmp_path / "new.sqlite"
    kept = [".new.sqlite.my.building", ".new.sqlite.abcdefghi.building", ".new.sqlite.ABCDEFGH.building"]
    for name in kept:
        (tmp_path / name).write_text("mine", encoding="utf-8")
    os.mkfifo(tmp_path / ".new.sqlite.fifo0000.building")
    (tmp_path / ".new.sqlite.k2j_9x0a.building").write_bytes(b"")  # a killed build's
    (tmp_path / ".new.sqlite.k2j_9x0a.building-wal").write_bytes(b"")
    remove_stale_builds(str(target))
    left = sorted(path.name for path in tmp_path.iterdir())
    assert left == sorted([*kept, ".new.sqlite.fifo0000.building"])


def test_a_running_builds_hidden_file_is_not_removed_as_stale(tmp_path: Path) -> None:
    building = new_building_file(str(tmp_path / "new.sqlite"))
    with open(building, "rb") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        remove_stale_builds(str(tmp_path / "new.sqlite"))
        assert Path(building).exists()


def test_publish_refuses_a_users_file_named_as_the_new_indexs_log_and_keeps_it(tmp_path: Path) -> None:
    building = new_building_file(str(tmp_path / "new.sqlite"))
    side = tmp_path / "new.sqlite-wal"
    side.write_text("appeared while it was built\n", encoding="utf-8")
    with pytest.raises(IndexFileError, match="not SQLite's"):
        publish(building, str(tmp_path / "new.sqlite"))
    assert side.read_text(encoding="utf-8") == "appeared while it was built\n"
    assert not (tmp_path / "new.sqlite").exists()


@pytest.mark.parametrize("kind", ["link", "folder", "fifo"])
def test_something_not_a_file_named_as_a_side_file_is_refused_and_kept(tmp_path: Path, kind: str) -> None:
    side = tmp_path / "new.sqlite-journal"
    target = tmp_path / "target.txt"
    target.write_text("mine", encoding="utf-8")
    if kind == "link":
        side.symlink_to(target)
    elif kind == "folder":
        side.mkdir()
    else:
        os.mkfifo(side)
    with pytest.raises(IndexFileError, match="refusing to create the index"):
        locks.remove_left_side_files(tmp_path / "new.sqlite")
    assert os.path.lexists(side) and target.read_text(encoding="utf-8") == "mine"


def test_an_empty_side_file_is_left_alone(tmp_path: Path) -> None:
    side = tmp_path / "new.sqlite-journal"
    side.write_bytes(b"")
    locks.remove_left_side_files(tmp_path / "new.sqlite")
    assert side.exists()


@pytest.mark.parametrize(
    ("suffix", "start"),
    [
        ("-wal", bytes.fromhex("377f0682")),
        ("-wal", bytes.fromhex("377f0683")),
        ("-journal", bytes.fromhex("d9d505f920a163d7")),
        ("-shm", (3007000).to_bytes(4, sys.byteorder)),
    ],
)
def test_sqlites_side_files_are_known_by_their_first_bytes(tmp_path: Path, suffix: str, start: bytes) -> None:
    side = tmp_path / f"new.sqlite{suffix}"
    side.write_bytes(start + b"\0" * 28)
    locks.remove_left_side_files(tmp_path / "new.sqlite")
    assert not side.exists()
    changed = bytes([start[0] ^ 1]) + start[1:]
    side.write_bytes(changed + b"\0" * 28)
    with pytest.raises(IndexFileError):
        locks.remove_left_side_files(tmp_path / "new.sqlite")
    assert side.read_bytes() == changed + b"\0" * 28
