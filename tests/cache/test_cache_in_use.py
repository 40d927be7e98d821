"""``cache clear`` against a command between finding its cached index and using it: the index is locked (shared)
before it is checked and kept until the command ends, and one removed as its build ended is built again.

Each test names the defect it pins down; each failed before the lock.
"""

from __future__ import annotations

import fcntl
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from helpers.compare_calls import compare

from rag_eval.errors import IndexFileError
from rag_eval.eval.compare import runner
from rag_eval.eval.compare.runner import System
from rag_eval.eval.datasets.formats import load_dataset
from rag_eval.eval.judging.pool import build_pool, plan
from rag_eval.index import locks
from rag_eval.index.cached import clear_indexes


def _cached_indexes(cache: Path) -> list[Path]:
    return sorted(cache.glob("indexes/*/*.sqlite"))


def _compare_bigram() -> dict[str, Any]:
    report, _runs = compare(load_dataset("evidence-mini"), [System("bigram", "", "")])
    return report


def test_a_clear_after_the_cache_check_leaves_the_index_compare_is_about_to_open(
    own_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A clear between the check that a cached index is current and its opening removed it: compare failed."""
    _compare_bigram()
    checked = runner._cached_report
    cleared = []

    def check_then_clear(*args: Any, **kwargs: Any) -> Any:
        found = checked(*args, **kwargs)
        cleared.append(clear_indexes())
        return found

    monkeypatch.setattr(runner, "_cached_report", check_then_clear)
    report = _compare_bigram()
    assert [(c.removed, c.busy) for c in cleared] == [(0, 1)]
    assert report["systems"][0]["build"]["cached"] is True
    monkeypatch.setattr(runner, "_cached_report", checked)
    assert clear_indexes().removed == 1  # compare is done with it


def test_an_index_cleared_as_its_build_ends_is_built_again(own_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A clear between a cached index's build and its first use removed it: compare failed on the missing file."""
    built = runner.build
    calls: list[int] = []

    def build_then_clear(*args: Any, **kwargs: Any) -> Any:
        report = built(*args, **kwargs)
        if not calls:
            calls.append(clear_indexes().removed)
        return report

    monkeypatch.setattr(runner, "build", build_then_clear)
    report = _compare_bigram()
    assert calls == [1]
    assert report["systems"][0]["build"]["cached"] is False
    assert len(_cached_indexes(own_cache)) == 1


def test_an_index_cleared_after_every_build_is_one_error(own_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    built = runner.build

    def build_then_remove(*args: Any, **kwargs: Any) -> Any:
        report = built(*args, **kwargs)
        Path(args[1]).unlink()
        return report

    monkeypatch.setattr(runner, "build", build_then_remove)
    with pytest.raises(IndexFileError, match=f"removed {runner.BUILD_ATTEMPTS} times as it was built; run again"):
        _compare_bigram()


def test_judge_keeps_its_indexes_while_it_pools_and_releases_them_after(own_cache: Path, tmp_path: Path) -> None:
    """Judge's pooling held nothing: a clear while its second system ran removed the first one's index."""
    questions = tmp_path / "questions.txt"
    questions.write_text("报销需要什么材料\n年假怎么休\n", encoding="utf-8")
    dataset, systems, skipped, identity = plan("handbook", questions, tokenizers=["bigram", "unigram"])
    cleared = []

    def progress(system: str, phase: str, done: int, total: int) -> None:
        if system == "unigram" and phase == "queries" and done == 1:
            cleared.append(clear_indexes())

    pool = build_pool(dataset, systems, identity, skipped=skipped, progress=progress)
    assert set(pool.runs) == {"bigram", "unigram"}
    assert [(c.removed, c.busy) for c in cleared] == [(0, 2)]
    assert clear_indexes().removed == 2


def test_a_forked_worker_does_not_keep_an_index_in_use(own_cache: Path, tmp_path: Path) -> None:
    """Workers forked while a command held its indexes kept the shared lock after the command let it go."""
    path = tmp_path / "index.sqlite"
    path.write_bytes(b"")
    ready_read, ready_write = os.pipe()
    with locks.in_use_scope():
        assert locks.hold_in_use(path)
        child = os.fork()
        if child == 0:  # pragma: no cover - the child
            locks.release_inherited_locks()
            os.write(ready_write, b"x")
            signal.pause()
            os._exit(0)
        assert os.read(ready_read, 1) == b"x"
    try:
        with open(path, "rb") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises BlockingIOError while anyone holds it
    finally:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
        os.close(ready_read)
        os.close(ready_write)


def test_hold_in_use_refuses_a_missing_or_replaced_file(tmp_path: Path) -> None:
    path = tmp_path / "index.sqlite"
    with locks.in_use_scope():
        assert not locks.hold_in_use(path)
        path.write_bytes(b"old")
        assert locks.hold_in_use(path)
        path.unlink()
        path.write_bytes(b"new")  # another inode: the lock held on the old one guards nothing
        assert locks.hold_in_use(path)
        descriptor = locks._IN_USE[str(path)]
        assert os.fstat(descriptor).st_ino == path.stat().st_ino
    assert str(path) not in locks._IN_USE


def test_a_command_waits_for_the_build_report_another_is_writing(
    own_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two commands on one new key: the second found the first's index before its build report and removed it, and
    the first then failed on its own index ("the source files changed while the index was built")."""
    _compare_bigram()
    (index,) = _cached_indexes(own_cache)
    report_file = index.with_suffix(".build.json")
    report = report_file.read_bytes()
    report_file.unlink()  # as between the other command's build and its report
    other = os.open(index, os.O_RDONLY)
    fcntl.flock(other, fcntl.LOCK_SH)  # the other command holds it
    inode = index.stat().st_ino
    waits: list[int] = []

    def other_finishes(attempt: int) -> None:
        waits.append(attempt)
        report_file.write_bytes(report)
        os.close(other)

    monkeypatch.setattr(runner, "_wait_for_report", other_finishes)
    try:
        result = _compare_bigram()
    finally:
        if not waits:
            os.close(other)
    assert waits == [0]
    assert result["systems"][0]["build"]["cached"] is True
    assert index.stat().st_ino == inode


def test_an_index_held_elsewhere_without_its_report_is_one_error(
    own_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _compare_bigram()
    (index,) = _cached_indexes(own_cache)
    index.with_suffix(".build.json").unlink()
    other = os.open(index, os.O_RDONLY)
    fcntl.flock(other, fcntl.LOCK_SH)
    waits: list[int] = []
    monkeypatch.setattr(runner, "_wait_for_report", waits.append)
    try:
        with pytest.raises(IndexFileError, match="another command holds this cached index without its build report"):
            _compare_bigram()
        assert index.exists() and waits == list(range(runner.BUILD_ATTEMPTS))
    finally:
        os.close(other)


def test_cache_clear_keeps_an_index_a_running_compare_reads(own_cache: Path) -> None:
    """A clear while compare ran its queries removed the index under it: compare failed at its end ("SQLite: unable
    to open database file") after all its work."""
    cleared = []

    def progress(_name: str, phase: str, done: int, _total: int) -> None:
        if phase == "queries" and done == 3:  # the index is open, queries are running
            cleared.append(clear_indexes())

    report, _runs = compare(load_dataset("evidence-mini"), [System("bigram", "", "")], progress=progress)
    assert [(c.removed, c.busy) for c in cleared] == [(0, 1)]
    assert report["systems"][0]["tokens_per_passage"] > 0
    assert clear_indexes().removed == 1  # once compare is done with it
    assert list((own_cache / "indexes").iterdir()) == []
