"""Run systems' questions and time them: each system's index built (or reused) and its questions ranked one
system after another, then every question timed again ``repeat - 1`` times with the systems interleaved.

A question's time is the fastest of its runs (:mod:`.latency` says why). The repeats are interleaved, per
question the systems in an order that rotates, pass after pass over the questions: a slow spell of the machine
(another process busy for a second) then slows the systems it overlaps alike and one of each question's runs,
where repeats of one system in a row would all fall in it, and a system run in a quiet minute would look faster
than one run in a busy one.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from ...builders import get_builder
from ...engines.base import DEFAULT_ENGINE, Searcher, get_engine
from ...errors import RagEvalError
from ...files.runs import DEPTH, strict_run
from ...index.processing import QueryProcessing
from ...index.store import Index
from ...measure import resident_bytes
from ...records import Progress, RankedDoc
from ...tokenizers import get_tokenizer
from ..datasets.records import Dataset
from . import runner
from .latency import check_repeat
from .runner import System, SystemRun, cached_build, check_builder, corpus_source

#: ``progress(system, phase, done, total)``.
SystemsProgress = Callable[[System, str, int, int], None]
#: Questions between progress reports while the systems are timed again.
PROGRESS_EVERY = 25


def _ranking(hits: list[Any]) -> int:
    """A digest of a ranking, its hits' keys and scores in order (a repeat must return the same)."""
    return hash(tuple((hit.chunk.key, hit.score) for hit in hits))


class _Timed:
    """One system's index open and its engine prepared: its questions ranked and timed once, timed again on
    demand, and what it measured."""

    def __init__(self, dataset: Dataset, system: System, depth: int, progress: SystemsProgress | None) -> None:
        self.dataset, self.system, self.depth, self.progress = dataset, system, depth, progress
        self.queries = list(dataset.queries.values())
        self.tokenize_seconds: list[float] = []
        self.search_seconds: list[float] = []
        self.first_search_seconds: list[float] = []
        self.rankings: list[int] = []
        self.ranked: list[RankedDoc] = []
        self.zero_hits: list[str] = []
        self.false_hits: dict[str, int] = {}
        self.repeat = 1

    def _report(self, phase: str, done: int, total: int) -> None:
        if self.progress is not None:
            self.progress(self.system, phase, done, total)

    @contextmanager
    def opened(self) -> Iterator[_Timed]:
        """Build (or reuse) the index, open it and prepare the engine, warmed up by the first questions."""
        system = self.system
        self.tokenizer = get_tokenizer(system.tokenizer)
        self.engine = get_engine(system.engine or DEFAULT_ENGINE)
        processing = QueryProcessing.parse(system.query) if system.query else None
        source, default_builder = corpus_source(self.dataset)
        self.builder = get_builder(system.builder or default_builder)
        check_builder(self.dataset, self.builder)
        building = (lambda phase, done, total: self._report(f"build {phase}", done, total)) if self.progress else None
        self.path, self.build = cached_build(
            source, self.builder, self.tokenizer, progress=building, engine=self.engine.build_engine
        )
        with Index.open(self.path) as index:
            index.tokenizer.load()  # its model is not the engine's memory
            before = resident_bytes()
            self.run: Searcher = self.engine.searcher(
                index, mode=system.mode, depth=self.depth, as_of=self.dataset.meta.get("as_of"), processing=processing
            )
            prepared = resident_bytes()
            self.rss_growth = None if before is None or prepared is None else prepared - before
            for query in self.queries[: runner.WARMUP]:  # read at the call: tests lower it
                self.run(query.text)
            self.run.warmed()
            yield self

    def first_pass(self, repeat: int) -> None:
        """Every question once: the ranked run, and each question's first time."""
        self.repeat = repeat
        to_unit = self.builder.unit
        for number, query in enumerate(self.queries, start=1):
            if number % runner.FREEZE_EVERY == 1:
                gc.freeze()  # the records so far (this run's and earlier systems') out of full passes
            result = self.run(query.text)
            self.tokenize_seconds.append(result.tokenize_seconds)
            self.search_seconds.append(result.search_seconds)
            if repeat > 1:
                self.rankings.append(_ranking(result.hits))
            if not result.hits:
                self.zero_hits.append(query.id)
            if query.kind == "no-answer":
                self.false_hits[query.id] = len(result.hits)
            self.ranked += strict_run(query.id, [(to_unit(h.chunk.key), h.score) for h in result.hits])
            self._report("queries", number, len(self.queries) * repeat)
        self.first_search_seconds = list(self.search_seconds)

    def again(self, number: int) -> None:
        """Question ``number`` once more, timed: each phase keeps its fastest time."""
        query = self.queries[number]
        result = self.run.again(query.text)
        self.tokenize_seconds[number] = min(self.tokenize_seconds[number], result.tokenize_seconds)
        self.search_seconds[number] = min(self.search_seconds[number], result.search_seconds)
        if _ranking(result.hits) != self.rankings[number]:
            raise RagEvalError(
                f"{self.system.name}: question {query.id!r} returned other hits when it was run again to be timed; "
                "its engine does not answer the same question the same way",
                hint="compare it with --repeat 1, and report this engine's behaviour",
            )

    def result(self) -> SystemRun:
        stats = self.run.stats()
        if self.rss_growth is not None:
            stats.setdefault("rss_growth_bytes", self.rss_growth)
        return SystemRun(
            self.system,
            self.tokenizer.spec,
            self.builder.system,
            self.ranked,
            self.build,
            str(self.path),
            self.tokenize_seconds,
            self.search_seconds,
            self.zero_hits,
            self.false_hits,
            self.engine.spec,
            stats,
            self.repeat,
            self.first_search_seconds,
        )


def run_system(
    dataset: Dataset, system: System, *, depth: int = DEPTH, progress: Progress | None = None, repeat: int = 1
) -> SystemRun:
    """Build (or reuse) the system's index, run every query ``depth`` deep with its engine, and time each
    phase; the engine's own figures (and the resident memory its preparation added) go to ``engine_stats``.

    Every question runs ``repeat`` times (``compare`` runs it :data:`.latency.DEFAULT_REPEAT` times), in as many
    passes over the questions: the first pass is the one ranked, the others must return the same hits and scores,
    and each phase's time is a question's fastest (a slower run is the same work plus time the machine spent
    elsewhere). Several systems timed together: :func:`run_systems`."""
    report = (lambda _system, phase, done, total: progress(phase, done, total)) if progress is not None else None
    return run_systems(dataset, [system], depth=depth, progress=report, repeat=repeat)[0]


def run_systems(
    dataset: Dataset,
    systems: list[System],
    *,
    depth: int = DEPTH,
    progress: SystemsProgress | None = None,
    repeat: int = 1,
) -> list[SystemRun]:
    """Build (or reuse) each system's index and run every question ``depth`` deep with its engine, one system
    after another (the ranked runs); then, with every index open, each question ``repeat - 1`` times more per
    system, interleaved (see the module's note), each phase's time the fastest of its runs. The repeats must
    return the ranked hits and scores. The engines' own figures go to ``engine_stats``."""
    repeat = check_repeat(repeat)
    count = len(dataset.queries)
    with ExitStack() as stack:
        stack.callback(gc.unfreeze)
        timed = []
        for system in systems:
            one = stack.enter_context(_Timed(dataset, system, depth, progress).opened())
            one.first_pass(repeat)
            timed.append(one)
        for again_pass in range(1, repeat):
            for number in range(count):
                if number % runner.FREEZE_EVERY == 0:
                    gc.freeze()
                for offset in range(len(timed)):  # a rotating order: no system always first after another's
                    timed[(number + again_pass + offset) % len(timed)].again(number)
                if (number + 1) % PROGRESS_EVERY == 0 or number + 1 == count:
                    for one in timed:
                        one._report("queries", again_pass * count + number + 1, count * repeat)
        return [one.result() for one in timed]
