"""The tokenization pool: its plan, a pool only where it is predicted to win and one process otherwise; and its
workers, which a Ctrl-C or a killed worker ends with one error line, never a traceback.

The plan is a pure function of the work (characters, chunks), the machine (cores, load) and the measured
costs (characters per second alone, seconds before a worker starts), so its decisions are tested here with
numbers, never with timings. Figures behind the constants: reports/builds.md.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.signals import default_sigint

import rag_eval.index.tokenize_pool as pool
from rag_eval.index.store import Index
from rag_eval.index.tokenize_pool import FORK_START_SECONDS, SPAWN_START_SECONDS, plan_pool, tokenize_chunks
from rag_eval.index.writer import build
from rag_eval.tokenizers import get_tokenizer

# Measured speeds in one process on an idle core (reports/builds.md): jieba and pkuseg's default model.
JIEBA = 300_000
PKUSEG = 100_000


def plan(characters: int, rate: float, *, busy: float = 0.0, start: float = FORK_START_SECONDS, items: int = 1400):
    return plan_pool(characters=characters, items=items, cores=2, busy=busy, chars_per_second=rate, start_seconds=start)


def test_a_large_corpus_on_an_idle_machine_uses_every_core() -> None:
    chosen = plan(640_000, PKUSEG, items=1100)
    assert chosen.workers == 2
    assert chosen.batch == 138  # 1,100 chunks in 4 batches per worker: no worker idles at the end
    assert chosen.describe().startswith("2 workers, batches of 138: 6.4 s alone")


def test_a_small_corpus_stays_in_one_process() -> None:
    """Regression: the pool was slower than one process on small corpora (it paid its start for little work)."""
    assert plan(50_000, JIEBA).workers == 1
    assert "would not pay" in plan(50_000, JIEBA).reason


def test_spawned_workers_pay_the_model_load() -> None:
    """pkuseg's model takes ~4 s to load in a fresh worker: 400k characters (4 s alone) do not repay it."""
    assert plan(400_000, PKUSEG, start=FORK_START_SECONDS).workers == 2
    assert plan(400_000, PKUSEG, start=SPAWN_START_SECONDS).workers == 1
    assert plan(4_000_000, PKUSEG, start=SPAWN_START_SECONDS).workers == 2


def test_a_busy_machine_gets_no_pool() -> None:
    """Regression: under load a pool measured 0.53x one process (pkuseg, 400k characters): no free core, no pool."""
    assert plan(4_000_000, PKUSEG, busy=1.0).workers == 1
    assert plan(4_000_000, PKUSEG, busy=6.0).reason.startswith("no free core")
    assert plan(4_000_000, PKUSEG, busy=0.5).workers == 2  # half a core free still repays a long job


@pytest.mark.parametrize("characters", [1, 10**5, 10**6, 10**8])
@pytest.mark.parametrize("busy", [0.0, 0.7, 3.0])
@pytest.mark.parametrize("start", [FORK_START_SECONDS, SPAWN_START_SECONDS])
def test_a_pool_is_only_chosen_when_predicted_faster(characters: int, busy: float, start: float) -> None:
    chosen = plan(characters, PKUSEG, busy=busy, start=start)
    alone = characters / PKUSEG
    free = max(1.0, 2 - busy)
    if chosen.workers > 1:
        assert alone >= pool.MIN_GAIN * (start + alone / (free * pool.EFFICIENCY))
        assert 1 <= chosen.batch <= 1400
    else:
        assert chosen.batch >= 1


def test_never_more_workers_than_chunks() -> None:
    assert plan(10**8, PKUSEG, items=1).workers == 1


def test_the_build_records_its_plan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(pool.WORKERS_ENV, raising=False)
    (tmp_path / "corpus.jsonl").write_text('{"_id": "d1", "title": "", "text": "导出文件"}\n', encoding="utf-8")
    report = build(tmp_path, tmp_path / "index.sqlite", builder="passages", tokenizer="jieba")
    assert report.extra["tokenize_plan"] == "1 process: 4 characters: too few for a pool"
    with Index.open(tmp_path / "index.sqlite") as index:
        meta = dict(index.db.execute("SELECT key, value FROM meta").fetchall())
    assert meta["tokenize_plan"] == report.extra["tokenize_plan"]
    bigram = build(tmp_path, tmp_path / "bigram.sqlite", builder="passages", tokenizer="bigram")
    assert bigram.extra["tokenize_plan"] == "1 process: bigram does not tokenize in a pool"


def test_the_plan_follows_the_measured_speed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe's chunks are tokenized once, in order, whatever the plan; an idle machine pools the rest."""
    monkeypatch.delenv(pool.WORKERS_ENV, raising=False)
    monkeypatch.setattr(pool, "PROBE_CHARS", 100)
    monkeypatch.setattr(pool.os, "getloadavg", lambda: (1.0, 1.0, 1.0))
    monkeypatch.setattr(pool.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(pool, "FORK_START_SECONDS", 0.0)
    monkeypatch.setattr(pool, "MIN_GAIN", 0.0)  # any predicted time pays: the pool runs
    tokenizer = get_tokenizer("jieba")
    items = [("", f"第{n}段导出文件保留三十天。") for n in range(60)]
    results, report = tokenize_chunks(tokenizer, items, keep_offsets=False)
    assert report.workers == 2 and report.plan.startswith("2 workers, batches of 7:")
    assert [body for _title, body, _offsets in results] == [" ".join(tokenizer.terms(text)) for _t, text in items]
    monkeypatch.setattr(pool.os, "getloadavg", lambda: (5.0, 5.0, 5.0))
    results, report = tokenize_chunks(tokenizer, items, keep_offsets=False)
    assert report.workers == 1 and report.plan.startswith("1 process: no free core")
    assert len(results) == len(items)


def test_index_build_prints_its_plan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from rag_eval.cli import cli

    monkeypatch.setenv(pool.WORKERS_ENV, "1")
    (tmp_path / "set").mkdir()
    (tmp_path / "set" / "corpus.jsonl").write_text('{"_id": "d1", "title": "", "text": "导出文件"}\n', encoding="utf-8")
    source = tmp_path / "set"  # the index beside it: none is written into the corpus it reads
    args = ["index", "build", str(source), "-b", "passages", "-t", "jieba", "-o", str(tmp_path / "i.sqlite")]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert result.output.rstrip().endswith("; tokenized in 1 process: $RAG_EVAL_WORKERS=1, few characters")


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
@pytest.mark.kill
def test_ctrl_c_prints_no_traceback_from_pool_workers() -> None:
    """Ctrl-C while pool workers waited for work printed their KeyboardInterrupt tracebacks ("Process
    ForkProcess-3: Traceback ...") under the command's one line."""
    env = {**os.environ, "RAG_EVAL_WORKERS": "2"}
    command = [sys.executable, "-c", POOL, "ctrl-c"]
    done = subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=60, start_new_session=True, preexec_fn=default_sigint
    )
    assert done.stdout == "interrupted\n" and "Traceback" not in done.stderr, done.stderr


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forked workers")
@pytest.mark.kill
def test_a_killed_pool_worker_is_one_error_not_a_traceback() -> None:
    """A worker killed (out of memory) ended the build with BrokenProcessPool's traceback."""
    env = {**os.environ, "RAG_EVAL_WORKERS": "2"}
    done = subprocess.run([sys.executable, "-c", POOL, "killed"], env=env, capture_output=True, text=True, timeout=60)
    assert done.stdout.startswith("error: a bigram worker process stopped"), (done.stdout, done.stderr)
