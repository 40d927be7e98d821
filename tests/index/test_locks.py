"""An index's lock file: shared while commands read the index, exclusive while a build or ``cache clear`` changes
it; it never blocks on something that is not a regular file, and a lock on a file replaced meanwhile guards
nothing."""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path

import pytest
from helpers.cache import _evidence_index, _evidence_source, _lock_file

from rag_eval.errors import IndexFileError
from rag_eval.eval.compare.runner import cached_build
from rag_eval.index import locks
from rag_eval.index.cached import clear_indexes
from rag_eval.tokenizers import get_tokenizer


def test_a_lock_file_a_killed_command_left_neither_blocks_nor_stays(own_cache: Path) -> None:
    index = _evidence_index()
    index.parent.mkdir(parents=True)
    _lock_file(index).touch()  # left unlocked: its holder was killed
    _path, report = cached_build(*_evidence_source(), get_tokenizer("bigram"))
    assert report["cached"] is False and not _lock_file(index).exists()
    _lock_file(index).touch()
    assert clear_indexes().left_behind == 1 and not _lock_file(index).exists()


def test_a_waiter_locks_the_file_now_at_the_path_not_the_one_removed(tmp_path: Path) -> None:
    """The holder removes the lock file as it lets go: a waiter on the removed file must not think it holds the lock
    while a newcomer holds the new file."""
    lock = tmp_path / ".k.lock"
    inside: list[str] = []
    entered = threading.Event()
    release = threading.Event()

    def waiter() -> None:
        with locks.key_lock(lock, on_wait=entered.set):
            inside.append("waiter")
            release.wait(10)

    with locks.key_lock(lock):
        thread = threading.Thread(target=waiter)
        thread.start()
        assert entered.wait(10)
    thread.join(0.5)
    assert inside == ["waiter"]
    descriptor = os.open(lock, os.O_RDONLY)
    try:  # the file at the path is the one the waiter holds
        with pytest.raises(BlockingIOError):
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(descriptor)
        release.set()
        thread.join(10)


@pytest.mark.parametrize("kind", ["fifo", "folder", "text"])
def test_hold_in_use_never_blocks_and_takes_only_regular_files(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "x.sqlite"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    else:
        path.write_text("x", encoding="utf-8")
    with locks.in_use_scope():
        assert locks.hold_in_use(path) is (kind == "text")


def test_hold_in_use_takes_a_shared_lock_other_commands_can_share(tmp_path: Path) -> None:
    path = tmp_path / "x.sqlite"
    path.write_text("x", encoding="utf-8")
    other = os.open(path, os.O_RDONLY)
    try:
        with locks.in_use_scope():
            assert locks.hold_in_use(path)
            fcntl.flock(other, fcntl.LOCK_SH | fcntl.LOCK_NB)  # another command using it too
            with pytest.raises(BlockingIOError):  # while cache clear cannot take it
                fcntl.flock(os.open(path, os.O_RDONLY), fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(other)


def test_hold_in_use_refuses_a_file_replaced_while_it_was_locked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lock taken on a file replaced between the open and the lock guards nothing: the command must build or check
    the file now at the path, not trust the old one."""
    path, newer = tmp_path / "x.sqlite", tmp_path / "newer"
    path.write_text("old", encoding="utf-8")
    newer.write_text("new", encoding="utf-8")
    real_flock = fcntl.flock

    def replaced_meanwhile(descriptor: int, operation: int) -> None:
        if newer.exists():
            os.replace(newer, path)
        real_flock(descriptor, operation)

    monkeypatch.setattr(locks.fcntl, "flock", replaced_meanwhile)
    with locks.in_use_scope():
        assert locks.hold_in_use(path) is False
        assert str(path) not in locks._IN_USE


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
