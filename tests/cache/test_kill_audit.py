"""A failed or killed command leaves everything as before: ``cache clear`` against commands still running and what
killed builds left in the cache, Ctrl-C and killed workers in the tokenizing pool.

Each test names the defect it pins down; each failed before its fix.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.compare_calls import compare

from rag_eval.eval.compare.runner import System
from rag_eval.eval.datasets.formats import load_dataset
from rag_eval.index.cached import clear_indexes


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


POOL = """
import os, signal, sys, time
import rag_eval.index.tokenize_pool as pool
from rag_eval.errors import RagEvalError
from rag_eval.tokenizers import get_tokenizer
pool.POOL_MIN_CHARS, pool.BATCH = 0, 10
tokenizer = get_tokenizer("bigram")
type(tokenizer).parallel = True  # a pool for a fast strategy: the test takes a second
items = [("", "导出文件保留三十天")] * 40
parent = os.getpid()
if sys.argv[1] == "ctrl-c":
    def progress(done):
        time.sleep(1)  # every batch is done: the workers wait for more
        os.killpg(0, signal.SIGINT)  # Ctrl-C at a terminal reaches every process of its group
        time.sleep(1)
    try:
        pool.tokenize_chunks(tokenizer, items, keep_offsets=False, progress=progress)
    except KeyboardInterrupt:
        print("interrupted")
else:
    terms = tokenizer.terms
    def dying(text):  # the out-of-memory killer, in a worker
        if os.getpid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)
        return terms(text)
    tokenizer.terms = dying
    try:
        pool.tokenize_chunks(tokenizer, items, keep_offsets=False)
    except RagEvalError as exc:
        print(f"error: {exc}")
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forked workers")
def test_ctrl_c_prints_no_traceback_from_pool_workers() -> None:
    """Ctrl-C while pool workers waited for work printed their KeyboardInterrupt tracebacks ("Process
    ForkProcess-3: Traceback ...") under the command's one line."""
    env = {**os.environ, "RAG_EVAL_WORKERS": "2"}
    command = [sys.executable, "-c", POOL, "ctrl-c"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, start_new_session=True)
    assert done.stdout == "interrupted\n" and "Traceback" not in done.stderr, done.stderr


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forked workers")
def test_a_killed_pool_worker_is_one_error_not_a_traceback() -> None:
    """A worker killed (out of memory) ended the build with BrokenProcessPool's traceback."""
    env = {**os.environ, "RAG_EVAL_WORKERS": "2"}
    done = subprocess.run([sys.executable, "-c", POOL, "killed"], env=env, capture_output=True, text=True, timeout=60)
    assert done.stdout.startswith("error: a bigram worker process stopped"), (done.stdout, done.stderr)
