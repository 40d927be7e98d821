"""Cached indexes (compare, tune and judge build each system's index once, in rag-eval's cache): built once when
two commands need it at once, built again when damaged, and one error naming the cache when its folder or the
index's path cannot be used."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers.cache import _evidence_index, _evidence_source, _lock_file

from rag_eval.errors import IndexFileError
from rag_eval.eval.compare import runner
from rag_eval.eval.compare.runner import cached_build
from rag_eval.index import locks
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
