"""Cached builds and new index files against other commands and the files users keep beside them.

Each test names the defect it pins down; each failed (or hung) before its fix.
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers.compare_calls import compare

from rag_eval.builders import get_builder
from rag_eval.cli import cli
from rag_eval.errors import IndexFileError
from rag_eval.eval.compare import runner
from rag_eval.eval.compare.runner import System, cached_build, corpus_source, index_path
from rag_eval.eval.datasets.formats import load_dataset
from rag_eval.index import locks
from rag_eval.index.building_file import remove_stale_builds
from rag_eval.index.cached import clear_indexes
from rag_eval.tokenizers import get_tokenizer

_CACHED_BUILD = textwrap.dedent(
    """
    import json, sys
    from rag_eval.builders import get_builder
    from rag_eval.eval.datasets.formats import load_dataset
    from rag_eval.eval.compare.runner import cached_build, corpus_source
    from rag_eval.tokenizers import get_tokenizer

    source, builder = corpus_source(load_dataset("evidence-mini"))
    progress = lambda phase, done, total: print(phase, flush=True)
    _path, report = cached_build(source, get_builder(builder), get_tokenizer("bigram"), progress=progress)
    print(json.dumps({"cached": report["cached"]}), flush=True)
    """
)


def _evidence_index() -> Path:
    source, builder = corpus_source(load_dataset("evidence-mini"))
    return index_path(source, get_builder(builder), get_tokenizer("bigram").spec)[0]


def _lock_file(index: Path) -> Path:
    return index.with_name(f".{index.stem}.lock")


def test_two_commands_needing_one_new_cached_index_build_it_once(own_cache: Path) -> None:
    """Two compares needing the same new cached index at once: each built its own copy and the second to publish
    failed with "another build created this index while this one ran" (every time, in six of six tries)."""
    index = _evidence_index()
    environment = os.environ | {"RAG_EVAL_CACHE": str(own_cache)}
    with locks.key_lock(_lock_file(index)):  # as a third command building it: both wait for it
        commands = [
            subprocess.Popen(
                [sys.executable, "-c", _CACHED_BUILD],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=environment,
            )
            for _ in range(2)
        ]
        for command in commands:
            assert command.stdout is not None
            assert command.stdout.readline().strip() == "wait for another command building this index"
    results = [command.communicate(timeout=120) for command in commands]
    assert [command.returncode for command in commands] == [0, 0], [err for _out, err in results]
    cached = sorted(json.loads(out.splitlines()[-1])["cached"] for out, _err in results)
    assert cached == [False, True]  # one built it, the other reused it
    assert index.is_file() and index.with_suffix(".build.json").is_file()
    assert not _lock_file(index).exists()  # the lock file goes with the last holder


def test_a_lock_file_a_killed_command_left_neither_blocks_nor_stays(own_cache: Path) -> None:
    index = _evidence_index()
    index.parent.mkdir(parents=True)
    _lock_file(index).touch()  # left unlocked: its holder was killed
    _path, report = cached_build(*_evidence_source(), get_tokenizer("bigram"))
    assert report["cached"] is False and not _lock_file(index).exists()
    _lock_file(index).touch()
    assert clear_indexes().left_behind == 1 and not _lock_file(index).exists()


def test_cache_clear_keeps_a_lock_file_a_command_holds(own_cache: Path) -> None:
    index = _evidence_index()
    with locks.key_lock(_lock_file(index)):
        assert _lock_file(index).is_file()
        assert clear_indexes().left_behind == 0
        assert _lock_file(index).is_file()


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


def _evidence_source() -> tuple[Path, object]:
    source, builder = corpus_source(load_dataset("evidence-mini"))
    return source, get_builder(builder)


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_something_else_at_the_cached_index_path_is_one_error_and_is_left(own_cache: Path, kind: str) -> None:
    """A FIFO there hung compare forever (opened for a lock without O_NONBLOCK)."""
    index = _evidence_index()
    index.parent.mkdir(parents=True)
    if kind == "fifo":
        os.mkfifo(index)
    else:
        index.mkdir()
        (index / "keep.txt").write_text("mine", encoding="utf-8")
    script = _CACHED_BUILD.replace("progress=progress", "progress=None")
    script = "from rag_eval.errors import RagEvalError\ntry:\n" + textwrap.indent(script, "    ")
    script += "\nexcept RagEvalError as exc:\n    print('error:', exc)\n"
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ | {"RAG_EVAL_CACHE": str(own_cache)},
    )
    assert done.stdout.startswith(f"error: {index}: not an index file"), done.stdout + done.stderr
    assert os.path.lexists(index) and (kind == "fifo" or (index / "keep.txt").read_text(encoding="utf-8") == "mine")


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


def test_a_damaged_cached_index_is_built_again(own_cache: Path) -> None:
    source, builder = _evidence_source()
    index, first = cached_build(source, builder, get_tokenizer("bigram"))
    assert first["cached"] is False
    index.write_bytes(b"not a database at all")  # its report is still there
    _path, again = cached_build(source, builder, get_tokenizer("bigram"))
    assert again["cached"] is False
    with sqlite3.connect(index) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_an_index_that_cannot_be_removed_is_one_error_naming_the_cache(
    own_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read-only cache folder gave "error: Permission denied: <index>" with no hint of the cache."""
    source, builder = _evidence_source()
    index, _report = cached_build(source, builder, get_tokenizer("bigram"))
    index.with_suffix(".build.json").unlink()

    def refuse(path: object, *, main: bool = True) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(runner, "remove_database", refuse)
    with pytest.raises(IndexFileError, match="cannot remove this cached index") as caught:
        cached_build(source, builder, get_tokenizer("bigram"))
    assert caught.value.hint is not None and "RAG_EVAL_CACHE" in caught.value.hint


def test_waiting_for_a_report_sleeps_longer_each_attempt(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    monkeypatch.setattr(runner.time, "sleep", slept.append)
    runner._wait_for_report(0)
    runner._wait_for_report(2)
    assert slept == [runner.REPORT_WAIT_SECONDS, 3 * runner.REPORT_WAIT_SECONDS] and slept[0] > 0


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


def test_cache_clear_removes_what_a_killed_cached_build_left_with_its_log(own_cache: Path) -> None:
    index = _evidence_index()
    index.parent.mkdir(parents=True)
    building = index.parent / f".{index.name}.a1b2c3d4.building"
    for path in (building, Path(f"{building}-wal"), Path(f"{building}-shm")):
        path.write_bytes(b"x" * 10)
    cleared = clear_indexes()
    assert cleared.left_behind == 1 and not index.parent.exists()  # its folder, emptied, goes too


# --- the console script -------------------------------------------------------------------------------------------


def test_ctrl_c_while_the_commands_load_is_one_line_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C in the first quarter second printed a traceback from the imports (15 of 16 tries)."""
    from rag_eval import console

    class Interrupting:
        def find_spec(self, name: str, path: object = None, target: object = None) -> None:
            if name == "rag_eval.cli":
                raise KeyboardInterrupt

    monkeypatch.delitem(sys.modules, "rag_eval.cli")
    monkeypatch.setattr(sys, "meta_path", [Interrupting(), *sys.meta_path])
    with pytest.raises(SystemExit) as exited:
        console.main()
    assert exited.value.code == 130
    assert capsys.readouterr().err == "error: interrupted\n"


def test_the_console_script_is_the_interrupt_safe_entry() -> None:
    from importlib.metadata import entry_points

    (script,) = [point for point in entry_points(group="console_scripts") if point.name == "rag-eval"]
    assert script.value == "rag_eval.console:main"


def test_cache_folder_with_uri_characters_keeps_an_index_open_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The open-elsewhere check built a ``file:`` URI without escaping: under such a folder it opened nothing."""
    cache = tmp_path / "c?a#c%20he d"
    monkeypatch.setenv("RAG_EVAL_CACHE", str(cache))
    report, _runs = compare(load_dataset("evidence-mini"), [System("bigram", "", "")])
    assert report["systems"][0]["tokens_per_passage"] > 0
    (index,) = sorted(cache.glob("indexes/*/*.sqlite"))
    reader = sqlite3.connect(index)  # a connection without rag-eval's lock, as another tool's
    try:
        reader.execute("SELECT count(*) FROM chunks").fetchone()
        assert clear_indexes().busy == 1 and index.exists()
    finally:
        reader.close()
    assert clear_indexes().removed == 1 and not index.exists()


@pytest.mark.parametrize("kind", ["file", "dangling-link"])
def test_a_cache_folder_that_cannot_be_one_is_one_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """A cache folder that was a file said "Not a directory: KEY.sqlite"; a link to nowhere said "File exists"."""
    cache = tmp_path / "cache"
    if kind == "file":
        cache.write_text("mine", encoding="utf-8")
    else:
        cache.symlink_to(tmp_path / "nowhere")
    monkeypatch.setenv("RAG_EVAL_CACHE", str(cache))
    with pytest.raises(IndexFileError, match="cannot create the folder for cached indexes") as caught:
        cached_build(*_evidence_source(), get_tokenizer("bigram"))
    assert caught.value.hint is not None and str(cache) in caught.value.hint
    assert kind != "file" or cache.read_text(encoding="utf-8") == "mine"


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
