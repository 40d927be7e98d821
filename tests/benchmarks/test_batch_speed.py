"""Batch search against single searches of the same queries: same-run ratios, and proof the gate can fail.

Three paths over the handbook's 324 queries on one bigram index (the fastest search, so any per-query
overhead of the batch shows most):

- batch: ``rag_eval.search.batch.batch_search``, end to end (topics read, index opened, every query, run written);
- run loop: the index opened, then per query ``search(keys_only=True)`` (a run needs only keys) and the
  same run lines (``strict_run`` and ``trec_run_text``, what ``compare``'s runner does per query), written
  with the same atomic write: the same run file made by a caller of single searches;
- search loop: the index opened, then ``search(keys_only=True)`` per query and nothing else.

Every round runs the three, in an order that rotates; a ratio is the median over rounds of batch / loop
within the round. Times are this process's CPU time (``time.process_time``): the machine is shared with
other work, and wall-clock rounds of the same batch varied by up to 2.4x under that load, CPU time by up
to 1.5x. SQLite runs in this process, so its work is counted; waiting (the run file's fsync) is not.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from rag_eval.eval.datasets.records import Query
from rag_eval.eval.datasets.shipped import corpus_dir, datasets_root
from rag_eval.files.outputs import write_text_atomic
from rag_eval.files.runs import DEPTH, strict_run, trec_run_text
from rag_eval.index.store import Index
from rag_eval.index.writer import build
from rag_eval.search.batch import batch_search, read_topics_file
from rag_eval.search.searching import search

ROUNDS = 11
QUERIES = datasets_root() / "handbook" / "queries.jsonl"
#: batch / run loop. The batch adds reading the topics to the run loop's work (about 2%); measured 0.90 to
#: 1.12 (median of 7 rounds, 12 runs) on the 2-core development machine at a load average of 7 to 11.
#: Fails when the batch does per-query work of its own worth a fifth of a search.
RUN_RATIO_BOUND = 1.2
#: batch / search loop: the run lines themselves (each hit's judged unit, ``strict_run``'s strictly
#: decreasing scores, the text) cost about 40% of a 100-deep bigram search; measured 1.31 to 1.65 under
#: the same load, and 1.36 to 2.14 over 26 CI runs of this machine (median of 7 rounds; 2.14 failed the
#: first bound, 2.0, on unchanged code). Now 11 rounds, and the bound fails when that conversion becomes
#: about three times as expensive.
SEARCH_RATIO_BOUND = 2.5


def _batch(index_path: Path, queries: list[Query], out: Path) -> None:
    batch_search(index_path, QUERIES, out)


def _run_loop(index_path: Path, queries: list[Query], out: Path) -> None:
    with Index.open(index_path) as index:
        unit = index.builder.unit
        lines = []
        for query in queries:
            hits = search(index, query.text, limit=DEPTH, deep=True, snippets=False, keys_only=True).hits
            lines.append(trec_run_text(strict_run(query.id, [(unit(h.chunk.key), h.score) for h in hits]), "x"))
    write_text_atomic(out, "".join(lines), owned=None, what="run file")


def _search_loop(index_path: Path, queries: list[Query], out: Path) -> None:
    with Index.open(index_path) as index:
        for query in queries:
            search(index, query.text, limit=DEPTH, deep=True, snippets=False, keys_only=True)


PATHS: dict[str, Callable[[Path, list[Query], Path], None]] = {
    "batch": _batch,
    "run_loop": _run_loop,
    "search_loop": _search_loop,
}


def _cpu_seconds(path: Callable[[Path, list[Query], Path], None], *args: object) -> float:
    """CPU seconds of one call, with the garbage collector run before and held off during it (a collection
    of the previous path's objects would otherwise land in whichever path happens to run next)."""
    gc.collect()
    gc.disable()
    try:
        started = time.process_time()
        path(*args)  # type: ignore[arg-type]
        return time.process_time() - started
    finally:
        gc.enable()


def batch_ratios(index_path: Path, folder: Path, rounds: int = ROUNDS) -> dict[str, float]:
    """Best CPU seconds of each path, and the ratios: the median over rounds of batch / each loop."""
    queries = list(read_topics_file(QUERIES).values())
    times: dict[str, list[float]] = {name: [] for name in PATHS}
    names = list(PATHS)
    for number in range(rounds):
        for name in names[number % 3 :] + names[: number % 3]:  # each path runs first, second and third in turn
            times[name].append(_cpu_seconds(PATHS[name], index_path, queries, folder / f"{number}.{name}.run"))
    found = {f"{name}_s": min(values) for name, values in times.items()}
    for loop in ("run_loop", "search_loop"):
        ratios = [b / other for b, other in zip(times["batch"], times[loop], strict=True)]
        found[f"batch_vs_{loop}"] = statistics.median(ratios)
    return found


@pytest.fixture(scope="module")
def bigram_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("batch-gate") / "handbook-bigram.sqlite"
    build(corpus_dir("handbook"), path, builder="sections", tokenizer="bigram")
    return path


def test_batch_search_ratio(benchmark, bigram_index: Path, tmp_path: Path) -> None:
    benchmark.group = "gate:batch"
    found = benchmark.pedantic(batch_ratios, args=(bigram_index, tmp_path), rounds=1, iterations=1)
    benchmark.extra_info.update({key: round(value, 4) for key, value in found.items()})
    benchmark.extra_info.update({"run_ratio_bound": RUN_RATIO_BOUND, "search_ratio_bound": SEARCH_RATIO_BOUND})
    assert found["batch_vs_run_loop"] <= RUN_RATIO_BOUND, (
        f"batch search {found['batch_vs_run_loop']:.2f}x single searches writing the same run (bound {RUN_RATIO_BOUND})"
    )
    assert found["batch_vs_search_loop"] <= SEARCH_RATIO_BOUND, (
        f"batch search {found['batch_vs_search_loop']:.2f}x bare single searches (bound {SEARCH_RATIO_BOUND})"
    )


def test_the_batch_gate_fails_on_an_injected_slowdown(
    benchmark, bigram_index: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression guard: 2 ms of CPU per query in the batch path alone must push both ratios over their bounds."""
    import rag_eval.search.batch as batch_module

    original = batch_module.strict_run

    def slow(*args, **kwargs):
        started = time.process_time()
        while time.process_time() - started < 0.002:
            pass
        return original(*args, **kwargs)

    monkeypatch.setattr(batch_module, "strict_run", slow)
    found = benchmark.pedantic(batch_ratios, args=(bigram_index, tmp_path, 3), rounds=1, iterations=1)
    assert found["batch_vs_run_loop"] > RUN_RATIO_BOUND
    assert found["batch_vs_search_loop"] > SEARCH_RATIO_BOUND
