"""rag-eval cache info / clear: only cached indexes go, by the names rag-eval gives them."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers.cache import _evidence_index, _lock_file
from helpers.compare_calls import compare

from rag_eval.cli import cli
from rag_eval.eval.compare.runner import System
from rag_eval.eval.datasets.formats import load_dataset
from rag_eval.index import locks
from rag_eval.index.cached import clear_indexes


def test_cache_clear_removes_cached_indexes_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_EVAL_CACHE", str(tmp_path / "cache"))
    runner = CliRunner()
    built = runner.invoke(cli, ["compare", "evidence-mini", "-t", "bigram", "-t", "unigram", "-o", str(tmp_path / "o")])
    assert built.exit_code == 0, built.output
    info = json.loads(runner.invoke(cli, ["cache", "info", "--json"]).output)
    assert info["indexes"] == 2 and info["parts"]["indexes"]["bytes"] > 0
    indexes = sorted((tmp_path / "cache" / "indexes").glob("*/*.sqlite"))
    assert len(indexes) == 2
    # Not rag-eval's names: a user's file put there, and a model, are kept.
    stray = indexes[0].parent / "mine.sqlite"
    stray.write_bytes(b"not ours")
    model = tmp_path / "cache" / "models" / "m.bin"
    model.parent.mkdir(parents=True)
    model.write_bytes(b"model")
    # Recent ones are kept by --older-than; an old one goes.
    old = time.time() - 40 * 86400
    for path in indexes[1].parent.glob(indexes[1].stem + "*"):
        os.utime(path, (old, old))
    result = runner.invoke(cli, ["cache", "clear", "--older-than", "30"])
    assert result.exit_code == 0 and result.output.startswith("removed 1 cached index ("), result.output
    assert indexes[0].exists() and not indexes[1].exists() and not indexes[1].with_suffix(".build.json").exists()
    # One a build holds is kept.
    with open(indexes[0], "rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        result = runner.invoke(cli, ["cache", "clear"])
        assert "removed 0 cached indexes" in result.output and "1 in use by a running command, kept" in result.output
    result = runner.invoke(cli, ["cache", "clear"])
    assert result.output.startswith("removed 1 cached index")
    assert not indexes[0].exists() and stray.exists() and model.exists()
    for bad in ("-1", "nan", "inf"):
        result = runner.invoke(cli, ["cache", "clear", "--older-than", bad])
        assert result.exit_code != 0 and "error:" in result.output and "Traceback" not in result.output


def test_cache_clear_keeps_a_lock_file_a_command_holds(own_cache: Path) -> None:
    index = _evidence_index()
    with locks.key_lock(_lock_file(index)):
        assert _lock_file(index).is_file()
        assert clear_indexes().left_behind == 0
        assert _lock_file(index).is_file()


def test_cache_clear_removes_what_a_killed_cached_build_left_with_its_log(own_cache: Path) -> None:
    index = _evidence_index()
    index.parent.mkdir(parents=True)
    building = index.parent / f".{index.name}.a1b2c3d4.building"
    for path in (building, Path(f"{building}-wal"), Path(f"{building}-shm")):
        path.write_bytes(b"x" * 10)
    cleared = clear_indexes()
    assert cleared.left_behind == 1 and not index.parent.exists()  # its folder, emptied, goes too


KILLED_BUILD = """
import os, signal, sys
from pathlib import Path
from rag_eval.builders import get_builder
from rag_eval.eval.datasets.formats import load_dataset
from rag_eval.engines.base import DEFAULT_ENGINE, get_engine
from rag_eval.eval.compare.runner import corpus_source, index_path
from rag_eval.tokenizers import get_tokenizer
from rag_eval.index.writer import build
source, builder = corpus_source(load_dataset("evidence-mini"))
engine = get_engine(DEFAULT_ENGINE).build_engine  # the index compare builds
tokenizer = get_tokenizer("bigram")
path, _corpus = index_path(source, get_builder(builder), tokenizer.spec, engine)
print(path, flush=True)
kill = lambda rows: os.kill(os.getpid(), signal.SIGKILL)
build(source, path, builder=builder, tokenizer=tokenizer, engine=engine, on_insert=kill)
"""


def test_cache_clear_removes_what_killed_builds_left_and_nothing_else(own_cache: Path, tmp_path: Path) -> None:
    """A cache build killed with SIGKILL left its hidden .building file (an index's size) in the cache; cache clear
    counted only finished indexes, so it stayed until that very index was built again, forever once the corpus
    changed."""
    killed = subprocess.run([sys.executable, "-c", KILLED_BUILD], capture_output=True, text=True, check=False)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    path = Path(killed.stdout.strip())
    corpus = path.parent
    [building] = [p.name for p in corpus.iterdir()]
    assert building.startswith(f".{path.name}.") and building.endswith(".building")
    key = "0" * 32
    (corpus / f".{key}.build.json.abcd_123.partial").write_text("{")  # a build report's write, killed
    (corpus / f"{key}.build.json").write_text("{}")  # a report whose index a killed clear had removed
    held = corpus / f".{key}.sqlite.held_123.building"  # a build still running holds its file
    held.write_bytes(b"building")
    mine = tmp_path / "mine.txt"
    mine.write_text("the user's")
    (corpus / f".{'1' * 32}.sqlite.link_123.building").symlink_to(mine)  # not a regular file: left alone
    (corpus / "notes.txt").write_text("not a name rag-eval gives")
    with open(held, "rb") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        cleared = clear_indexes()
    assert sorted(p.name for p in corpus.iterdir()) == sorted(
        [held.name, f".{'1' * 32}.sqlite.link_123.building", "notes.txt"]
    )
    assert (cleared.removed, cleared.left_behind, cleared.busy) == (0, 3, 0) and cleared.freed > 0
    assert mine.read_text() == "the user's"
    # The next compare builds the index again rather than trusting anything the kill left.
    report, _runs = compare(load_dataset("evidence-mini"), [System("bigram", "", "")])
    assert report["systems"][0]["build"]["cached"] is False and report["systems"][0]["build"]["chunks"] > 0
    assert path.is_file() and path.with_suffix(".build.json").is_file()
