"""Tokenize chunks for an index, in a process pool when the strategy is slow (jieba, pkuseg).

Workers are forked from a process that has already loaded the tokenizer when that is safe (Linux, one
thread), so they share its model copy-on-write and start at once; otherwise they start fresh and load
the model themselves, and that load time is reported.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass, field

from ..errors import RagEvalError
from ..tokenizers import Tokenizer, get_tokenizer
from .locks import release_inherited_locks
from .offsets import encode_spans

#: With ``$RAG_EVAL_WORKERS`` set, a pool of that many workers tokenizes calls of at least this many
#: characters (the plan is the user's); unset, :func:`plan_pool` decides from measured costs.
POOL_MIN_CHARS = 200_000
BATCH = 200
WORKERS_ENV = "RAG_EVAL_WORKERS"
#: Characters tokenized in this process first, to measure the strategy's speed here and now (the work counts).
PROBE_CHARS = 20_000
#: Wall seconds before a worker tokenizes: forked, it shares the loaded model (2 forked workers took
#: cmrc2018_dev_trial's jieba from 1.82 s to 1.01 s, 0.1 s over half: reports/speed.md, 2026-11-29);
#: spawned, it starts Python and loads the model itself (pkuseg 4.2 s, jieba 0.5 s there).
FORK_START_SECONDS = 0.15
SPAWN_START_SECONDS = 5.0
#: Share of the ideal speed-up a pool keeps after pickling batches and merging results (1.8x with 2
#: workers on cmrc2018_dev_trial, jieba and pkuseg); a pool is used only when predicted MIN_GAIN times faster.
EFFICIENCY = 0.9
MIN_GAIN = 1.25
#: Batches per worker: enough that a slow batch does not leave the other worker idle at the end.
BATCHES_PER_WORKER = 4
_PR_SET_PDEATHSIG = 1

Tokenized = tuple[str, str, "bytes | None"]

_worker_tokenizer: Tokenizer | None = None
_worker_load_seconds: float | None = None


@dataclass
class PoolReport:
    """How tokenization ran: workers, their model-load time, CPU time against wall time."""

    workers: int = 1
    start_method: str = ""
    worker_load_seconds: list[float] = field(default_factory=list)
    cpu_seconds: float = 0.0
    wall_seconds: float = 0.0
    #: The plan in words: why one process, or how many workers and what they were predicted to save.
    plan: str = ""


@dataclass(frozen=True)
class PoolPlan:
    """How one call tokenizes: in this process (``workers`` 1) or in a pool, ``batch`` chunks per task."""

    workers: int
    batch: int
    reason: str

    def describe(self) -> str:
        """``1 process: ...`` or ``2 workers, batches of 138: ...``."""
        if self.workers < 2:
            return f"1 process: {self.reason}"
        return f"{self.workers} workers, batches of {self.batch}: {self.reason}"


def plan_pool(
    *, characters: int, items: int, cores: int, busy: float, chars_per_second: float, start_seconds: float
) -> PoolPlan:
    """Pool or not, from what the work costs: ``characters`` at ``chars_per_second`` in one process, against
    ``start_seconds`` per worker plus the work split over the cores that ``busy`` (runnable processes besides
    this one: the load average) leaves free. A pool is chosen only when predicted MIN_GAIN times faster.

    Free cores, not all cores: Linux shares the CPU between sessions (autogroup), so under load a second
    worker adds overhead and no CPU (a pool measured 0.53x one process for pkuseg on a busy machine).
    """
    single = characters / chars_per_second if chars_per_second > 0 else 0.0
    free = min(float(cores), max(1.0, cores - busy))
    workers = min(cores, math.ceil(free), items)
    if workers < 2:
        return PoolPlan(1, max(items, 1), f"no free core for a worker ({cores} cores, load {busy:.1f} besides this)")
    pooled = start_seconds + single / (free * EFFICIENCY)
    estimate = f"{single:.1f} s alone, {pooled:.1f} s predicted with {workers} workers ({free:.1f} free cores)"
    if single < MIN_GAIN * pooled:
        return PoolPlan(1, max(items, 1), f"a pool would not pay: {estimate}")
    return PoolPlan(workers, max(1, math.ceil(items / (workers * BATCHES_PER_WORKER))), estimate)


def _tokenize_one(tokenizer: Tokenizer, title: str, text: str, keep_offsets: bool) -> Tokenized:
    title_terms = " ".join(tokenizer.terms(title)) if title else ""
    if not keep_offsets:
        return title_terms, " ".join(tokenizer.terms(text)), None
    terms, spans = tokenizer.terms_and_spans(text)
    return title_terms, " ".join(terms), encode_spans(spans)


def _die_with(parent: int) -> None:
    """Make this worker die with its parent: a SIGKILLed build must not leave workers running on.

    Linux delivers SIGKILL to the worker when the parent exits (PR_SET_PDEATHSIG); a parent that died
    before that was set is caught by the getppid check. Elsewhere the pool's own shutdown is relied on.
    """
    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


def _stop_now(pool: ProcessPoolExecutor) -> None:
    """Stop a pool whose results are no longer wanted (Ctrl-C, SIGTERM, an error): leaving its ``with`` waits for
    every batch already submitted, which tokenized the rest of the corpus (5 s of pkuseg on DRCD's 1.3 MB)
    before the command could stop. The batches not started are cancelled and the workers ended (the executor
    has no public way to end them before Python 3.14's ``terminate_workers``)."""
    processes = list((getattr(pool, "_processes", None) or {}).values())  # shutdown forgets them
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        try:
            process.terminate()
        except (OSError, ValueError):  # already gone, or closed
            pass


def _init_worker(system: str, parent: int) -> None:
    global _worker_tokenizer, _worker_load_seconds
    _die_with(parent)
    # Ctrl-C reaches every process of the terminal's group: the parent stops the pool, and a worker waiting for
    # work printed KeyboardInterrupt's traceback under the one-line message. A SIGTERM ends a worker at once,
    # whatever handler the parent has.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    # A forked worker inherits the build lock's descriptor; only the parent may hold the lock, so that
    # it is released the moment the parent dies, whatever its workers are doing.
    release_inherited_locks()
    started = time.perf_counter()
    if _worker_tokenizer is None or _worker_tokenizer.system != system:
        _worker_tokenizer = get_tokenizer(system)
    _worker_tokenizer.load()
    _worker_load_seconds = time.perf_counter() - started


def _work(batch: list[tuple[str, str]], keep_offsets: bool) -> tuple[list[Tokenized], int, float, float]:
    assert _worker_tokenizer is not None
    started = time.process_time()
    results = [_tokenize_one(_worker_tokenizer, title, text, keep_offsets) for title, text in batch]
    return results, os.getpid(), _worker_load_seconds or 0.0, time.process_time() - started


def _busy() -> float:
    """Runnable processes besides this one: the 1-minute load average less one (0 where there is none)."""
    try:
        return max(0.0, os.getloadavg()[0] - 1)
    except (AttributeError, OSError):  # no load average on this platform
        return 0.0


def worker_count() -> int:
    """``$RAG_EVAL_WORKERS`` or the number of cores."""
    configured = os.environ.get(WORKERS_ENV, "")
    return max(1, int(configured)) if configured.isdigit() else (os.cpu_count() or 1)


class TokenMemo:
    """Tokens already computed in this process, by strategy and chunk, for builds of many indexes of one
    corpus (``tune``: a hybrid's fields are strategies it has built alone). Holds at most ``max_chars``
    characters of chunk text; past that, chunks are tokenized as usual and not remembered."""

    def __init__(self, max_chars: int = 50_000_000) -> None:
        self.max_chars = max_chars
        self.chars = 0
        self.hits = 0
        self._tokens: dict[str, dict[tuple[str, str], Tokenized]] = {}

    def get(self, system: str, item: tuple[str, str], keep_offsets: bool) -> Tokenized | None:
        found = self._tokens.get(system, {}).get(item)
        if found is None or (keep_offsets and found[2] is None):
            return None
        self.hits += 1
        return found if keep_offsets else (found[0], found[1], None)

    def put(self, system: str, item: tuple[str, str], tokens: Tokenized) -> None:
        size = len(item[0]) + len(item[1])
        if self.chars + size > self.max_chars:
            return
        self.chars += size
        self._tokens.setdefault(system, {})[item] = tokens


_memo: TokenMemo | None = None


@contextmanager
def remembering_tokens(max_chars: int = 50_000_000) -> Iterator[TokenMemo]:
    """Within this block, every build in this process reuses the tokens of chunks it tokenized before
    with the same strategy (its spec with its fingerprint: options, library versions, model checksums)."""
    global _memo
    outer, _memo = _memo, TokenMemo(max_chars)
    try:
        yield _memo
    finally:
        _memo = outer


def tokenize_chunks(
    tokenizer: Tokenizer,
    items: list[tuple[str, str]],
    *,
    keep_offsets: bool,
    progress: Callable[[int], None] | None = None,
) -> tuple[list[Tokenized], PoolReport]:
    """``(title, text)`` pairs to ``(title terms, body terms, offsets)``, in order."""
    memo = _memo
    if memo is None:
        return _tokenize_chunks(tokenizer, items, keep_offsets=keep_offsets, progress=progress)
    system = tokenizer.spec  # options and fingerprint: library versions, model and dictionary checksums
    known = [memo.get(system, item, keep_offsets) for item in items]
    missing = [item for item, tokens in zip(items, known, strict=True) if tokens is None]
    computed, report = _tokenize_chunks(tokenizer, missing, keep_offsets=keep_offsets, progress=progress)
    fresh = iter(computed)
    results = []
    for item, tokens in zip(items, known, strict=True):
        if tokens is None:
            tokens = next(fresh)
            memo.put(system, item, tokens)
        results.append(tokens)
    return results, report


def _tokenize_chunks(
    tokenizer: Tokenizer,
    items: list[tuple[str, str]],
    *,
    keep_offsets: bool,
    progress: Callable[[int], None] | None = None,
) -> tuple[list[Tokenized], PoolReport]:
    started = time.perf_counter()
    cpu = time.process_time()
    results: list[Tokenized] = []

    def alone(part: list[tuple[str, str]]) -> None:
        for title, text in part:
            results.append(_tokenize_one(tokenizer, title, text, keep_offsets))
            if progress is not None and len(results) % 50 == 0:
                progress(len(results))

    forkable = "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1
    plan, rest = _plan(tokenizer, items, alone, forkable)
    if plan.workers < 2:
        alone(rest)
        report = PoolReport(1, "", [], time.process_time() - cpu, time.perf_counter() - started, plan.describe())
        return results, report
    report = PoolReport(plan.workers, "fork" if forkable else "spawn", plan=plan.describe())
    report.cpu_seconds = time.process_time() - cpu  # the probe's
    _in_pool(tokenizer, rest, plan, report, keep_offsets, results, progress)
    report.wall_seconds = time.perf_counter() - started
    return results, report


def _plan(
    tokenizer: Tokenizer, items: list[tuple[str, str]], alone: Callable[[list[tuple[str, str]]], None], forkable: bool
) -> tuple[PoolPlan, list[tuple[str, str]]]:
    """How to tokenize ``items``, and the items left to it: a pool's plan probes this strategy's speed on the first
    chunks, tokenized here (``alone``) under whatever else the machine is running."""
    characters = sum(len(title) + len(text) for title, text in items)
    configured = os.environ.get(WORKERS_ENV, "")
    if not tokenizer.parallel:
        return PoolPlan(1, len(items), f"{tokenizer.name} does not tokenize in a pool"), items
    if configured:  # the user's choice, as before plans existed
        workers = worker_count() if characters >= POOL_MIN_CHARS else 1
        reason = f"${WORKERS_ENV}={configured}" + ("" if characters >= POOL_MIN_CHARS else ", few characters")
        return PoolPlan(workers, BATCH if workers > 1 else len(items), reason), items
    if characters < 2 * PROBE_CHARS:
        return PoolPlan(1, len(items), f"{characters} characters: too few for a pool"), items
    probe_started = time.perf_counter()
    probed = done = 0
    while probed < PROBE_CHARS:
        title, text = items[done]
        alone([(title, text)])
        probed += len(title) + len(text)
        done += 1
    rest = items[done:]
    plan = plan_pool(
        characters=characters - probed,
        items=len(rest),
        cores=os.cpu_count() or 1,
        busy=_busy(),
        chars_per_second=probed / max(time.perf_counter() - probe_started, 1e-9),
        start_seconds=FORK_START_SECONDS if forkable else SPAWN_START_SECONDS,
    )
    return plan, rest


def _in_pool(
    tokenizer: Tokenizer,
    rest: list[tuple[str, str]],
    plan: PoolPlan,
    report: PoolReport,
    keep_offsets: bool,
    results: list[Tokenized],
    progress: Callable[[int], None] | None,
) -> None:
    """Tokenize ``rest`` in ``plan.workers`` worker processes, appending each batch's tokens to ``results`` in
    order; the workers' CPU time and load times go into ``report``."""
    global _worker_tokenizer
    method = report.start_method
    _worker_tokenizer = tokenizer if method == "fork" else None  # inherited, already loaded, by forked workers
    batches = [rest[i : i + plan.batch] for i in range(0, len(rest), plan.batch)]
    loads: dict[int, float] = {}
    try:
        with ProcessPoolExecutor(
            max_workers=plan.workers,
            mp_context=multiprocessing.get_context(method),
            initializer=_init_worker,
            initargs=(tokenizer.system, os.getpid()),
        ) as pool:
            try:
                for batch_results, pid, load, worker_cpu in pool.map(_work, batches, [keep_offsets] * len(batches)):
                    results += batch_results
                    loads[pid] = load
                    report.cpu_seconds += worker_cpu
                    if progress is not None:
                        progress(len(results))
            except BaseException:
                _stop_now(pool)
                raise
    except BrokenProcessPool:
        # A worker killed (the out-of-memory killer, a kill) or failing to start: one error, not a traceback.
        raise RagEvalError(
            f"a {tokenizer.name} worker process stopped before tokenizing its share (killed, or out of memory)",
            hint=f"run again; {WORKERS_ENV}=1 tokenizes in this process alone",
        ) from None
    finally:
        _worker_tokenizer = None
    report.worker_load_seconds = sorted(round(v, 3) for v in loads.values())
