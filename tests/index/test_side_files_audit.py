"""Side files and hidden build files beside a new index: only SQLite's own are removed, a user's are refused and
kept, a running build's file is never removed. Each test kills a mutation the audit of these checks found alive."""

from __future__ import annotations

import fcntl
import os
import sys
from pathlib import Path

import pytest

from rag_eval.errors import IndexFileError
from rag_eval.eval.datasets.records import Qrel
from rag_eval.eval.metrics.measures import PLACEHOLDER_DOC, RankedDoc, evaluate
from rag_eval.index import locks
from rag_eval.index.building_file import new_building_file, publish, remove_stale_builds


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


@pytest.mark.parametrize("kind", ["link", "fifo"])
def test_the_lock_file_is_never_a_link_or_a_fifo(tmp_path: Path, kind: str) -> None:
    lock = tmp_path / ".k.lock"
    if kind == "link":
        lock.symlink_to(tmp_path / "elsewhere")
    else:
        os.mkfifo(lock)
    with pytest.raises(IndexFileError), locks.key_lock(lock):
        pass
    assert os.path.lexists(lock) and not (tmp_path / "elsewhere").exists()


def test_qrels_naming_the_placeholder_document_do_not_score_a_missing_query() -> None:
    """A query the run lacks is scored on a stand-in document no judgment of it names, even when the qrels name
    trec_eval's own placeholder id."""
    qrels = [Qrel("q1", "d1", 1), Qrel("q2", PLACEHOLDER_DOC, 1)]
    _means, per_query = evaluate(qrels, [RankedDoc("q1", "d1", 1, 1.0)], ["P@1", "nDCG@10", "NumRel"])
    assert per_query["q2"] == {"P@1": 0.0, "nDCG@10": 0.0, "NumRel": 1.0}
