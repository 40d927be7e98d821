"""``rag-eval judge``: pool every system's top results for a knowledge base's questions and grade them in a
local page, in the order that best decides which system wins (issue #13).

This module builds the pool (one cached index per system, as ``compare`` does), serves a judging session
(:mod:`.judge_session`) on the page (:mod:`.judge_server`), or replays the order with an oracle's grades
(:mod:`.oracle`). The order and the decision come from :mod:`.selection`; the file from :mod:`.judgments`.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...builders import get_builder
from ...errors import RagEvalError
from ...files.outputs import check_file_target, recorded_name, refuse_inside_source, write_text_atomic
from ...files.textio import control_character, shown
from ...index.locks import in_use_scope
from ...records import Progress
from ...tokenizers import Tokenizer, get_tokenizer, written_spec
from ..compare.compare import Skipped, SystemProgress, default_systems
from ..compare.runner import System, run_system
from ..datasets.records import Dataset
from ..datasets.shipped import read_from
from ..datasets.sources import source_dataset
from ..metrics.measures import ranked_ids, relevant_queries
from .judgments import Judgments, PoolIdentity, check_id, counted, named_target
from .judgments_log import log_path
from .session import Session

#: What ``--oracle -o FILE`` writes, in messages.
REPLAY_WHAT = "replay"
#: Results of each system pooled per question, unless ``--depth`` says otherwise.
DEFAULT_DEPTH = 10
#: The deepest pool: far more than a person grades (a depth of 10 pools some 20 passages per question).
MAX_DEPTH = 1000


@dataclass(frozen=True)
class Pool:
    """The systems' ranked results for every question, and what identifies them."""

    dataset: Dataset
    systems: dict[str, System]
    tokenizers: dict[str, Tokenizer]
    runs: dict[str, dict[str, list[str]]]
    identity: PoolIdentity
    depth: int
    skipped: tuple[Skipped, ...] = ()


def corpus_digest(dataset: Dataset) -> str:
    """sha256 over the source's units (ids, titles, texts): the passages a grade is about."""
    digest = hashlib.sha256()
    for passage in sorted(dataset.corpus.values()):
        digest.update(json.dumps(passage, ensure_ascii=False, separators=(",", ":")).encode() + b"\n")
    return digest.hexdigest()


def questions_digest(dataset: Dataset) -> str:
    """sha256 over the questions' ids and texts (NFC): what the assessor reads beside each passage."""
    texts = {query_id: unicodedata.normalize("NFC", query.text) for query_id, query in dataset.queries.items()}
    return hashlib.sha256(json.dumps(texts, ensure_ascii=False, sort_keys=True).encode()).hexdigest()


def plan(
    source: str,
    questions: str | Path,
    *,
    tokenizers: Sequence[str] = (),
    builder: str | None = None,
    depth: int = DEFAULT_DEPTH,
    qrels: str | Path | None = None,
) -> tuple[Dataset, dict[str, System], tuple[Skipped, ...], PoolIdentity]:
    """Read the source, the questions (and judgments of them) and name the systems; nothing is built yet."""
    if type(depth) is not int or not 1 <= depth <= MAX_DEPTH:
        raise RagEvalError(f"--depth must be a whole number from 1 to {MAX_DEPTH}, not {depth}")
    dataset = source_dataset(source, questions, builder=builder, qrels=qrels)
    for query_id in dataset.queries:
        check_id(query_id, "question id")
    builder_spec = get_builder(builder or dataset.meta["builder"]).system
    mode = dataset.meta.get("mode") or "or"
    skipped: tuple[Skipped, ...] = ()
    if tokenizers:
        chosen = [System(spec, builder_spec, mode) for spec in tokenizers]
    else:
        chosen, left_out = default_systems(dataset, builder_spec, mode)
        skipped = tuple(left_out)
        if not chosen:
            raise RagEvalError("no tokenizer is available", hint="see rag-eval tokenizers")
    systems: dict[str, System] = {}
    canonical: dict[str, str] = {}
    for system in chosen:
        tokenizer = get_tokenizer(system.tokenizer)
        tokenizer.check_available()
        if tokenizer.system in canonical:
            raise RagEvalError(f"-t {system.tokenizer}: the same system as -t {canonical[tokenizer.system]}")
        name = written_spec(system.tokenizer)
        canonical[tokenizer.system] = name
        systems[name] = System(tokenizer.system, builder_spec, mode)
    identity = PoolIdentity(
        corpus=corpus_digest(dataset),
        questions=tuple(sorted(dataset.queries)),  # ids from the text: the file order does not matter
        systems=tuple(sorted(system.name for system in systems.values())),
        depth=depth,
        question_texts=questions_digest(dataset),
    )
    return dataset, systems, skipped, identity


def build_pool(
    dataset: Dataset,
    systems: dict[str, System],
    identity: PoolIdentity,
    *,
    skipped: tuple[Skipped, ...] = (),
    progress: SystemProgress | None = None,
) -> Pool:
    """Build (or reuse) every system's index and run each question ``depth`` deep."""
    runs: dict[str, dict[str, list[str]]] = {}
    with in_use_scope():  # the pool keeps the runs; no index is read once they are made
        for name, system in systems.items():
            callback: Progress | None = None
            if progress is not None:
                callback = functools.partial(_system_progress, progress, name)
            result = run_system(dataset, system, depth=identity.depth, progress=callback)
            found = ranked_ids(result.run)
            runs[name] = {q: [check_id(doc, "passage id") for doc in found.get(q, [])] for q in dataset.queries}
    tokenizers = {name: get_tokenizer(system.tokenizer) for name, system in systems.items()}
    return Pool(dataset, systems, tokenizers, runs, identity, identity.depth, skipped)


def pooled_count(pool: Pool) -> int:
    """How many (question, passage) pairs the pool holds: what a complete judging grades."""
    return sum(len({d for run in pool.runs.values() for d in run[q][: pool.depth]}) for q in pool.dataset.queries)


def check_pool(pool: Pool) -> int:
    """The pool's size, refused when it is empty: no system found a passage for any question."""
    pooled = pooled_count(pool)
    if not pooled:
        count = len(pool.dataset.queries)
        questions = "the question" if count == 1 else f"any of the {count} questions"
        raise RagEvalError(
            f"nothing to judge: no system found a passage for {questions}",
            hint="check that the questions are about SOURCE, or try other tokenizers (-t)",
        )
    return pooled


def _system_progress(report: SystemProgress, name: str, phase: str, done: float, total: float) -> None:
    report(name, phase, int(done), int(total))


# -- the command ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class JudgeResult:
    """What a judging session left behind."""

    path: Path
    judged: int
    pooled: int
    decision: str
    stopped: str


def judge(
    source: str,
    questions: str | Path,
    *,
    output: str | Path,
    tokenizers: Sequence[str] = (),
    builder: str | None = None,
    depth: int = DEFAULT_DEPTH,
    method: str | None = None,
    assessor: str | None = None,
    port: int = 0,
    idle_timeout: float | None = None,
    announce: Callable[[str], None] = print,
    progress: SystemProgress | None = None,
) -> JudgeResult:
    """Pool the systems' results and serve the judging page on 127.0.0.1 until Ctrl-C or the idle timeout.

    Every bad input is refused before anything is written: the source and questions, the systems, a
    judgments file of another pool (or not rag-eval's), a port in use.
    """
    from .selection import Selector
    from .server import JudgeServer

    chosen = check_method(method)
    idle_seconds = check_idle_timeout(idle_timeout)
    recorded_assessor = check_assessor(assessor)
    target = named_target(output, what="judgments file", example="out/kb.qrels")
    for written, what in ((output, "judgments file"), (log_path(target), "judgments log")):
        refuse_inside_source(written, [read_from(source)], what=what)
    dataset, systems, skipped, identity = plan(source, questions, tokenizers=tokenizers, builder=builder, depth=depth)
    Judgments.check(output, identity)
    server = JudgeServer.bind(port)
    try:
        pool = build_pool(dataset, systems, identity, skipped=skipped, progress=progress)
        check_pool(pool)
        selector = Selector(pool.runs, depth=depth, method=chosen)
        with Judgments.open(output, identity, assessor=recorded_assessor) as judgments:
            session = Session(pool, judgments, selector)
            try:
                stopped = server.serve(session, announce=announce, idle_timeout=idle_seconds)
            finally:
                # A request thread may still be writing a grade: let it finish before the file closes.
                session.lock.acquire()
            decision = selector.decision()
            return JudgeResult(judgments.path, decision.judged, decision.pooled, decision.line(), stopped)
    finally:
        server.close()


def check_idle_timeout(idle_timeout: float | None) -> float | None:
    """Seconds without a request before the server stops, or None for never (given as None, 0 or inf)."""
    if idle_timeout is None:
        return None
    if math.isnan(idle_timeout) or idle_timeout < 0:
        raise RagEvalError(
            f"--idle-timeout must be a number of minutes of at least 0 (0: never stop), not {idle_timeout / 60:g}"
        )
    return None if idle_timeout == 0 or math.isinf(idle_timeout) else float(idle_timeout)


#: The longest assessor name: it is written into every line of the log.
MAX_ASSESSOR_CHARS = 100


def check_assessor(assessor: str | None) -> str:
    """The assessor name the log records with every grade ("" when None: no name), refused before anything is
    built when it is empty, blank, too long, or holds a control character or a line break."""
    if assessor is None:
        return ""
    if not isinstance(assessor, str):
        raise RagEvalError(f"--assessor must be text, not {shown(assessor)}")
    if not assessor.strip():
        raise RagEvalError(
            f"--assessor {shown(assessor)} is blank: give a name or id", hint="or leave --assessor out (no name)"
        )
    if len(assessor) > MAX_ASSESSOR_CHARS:
        raise RagEvalError(f"--assessor is {len(assessor)} characters long; at most {MAX_ASSESSOR_CHARS}")
    bad = control_character(assessor) or next((c for c in assessor if c.isspace() and c != " "), None)
    if bad is not None:
        raise RagEvalError(f"--assessor {shown(assessor)} holds U+{ord(bad):04X}; a name is one line of text")
    return assessor


def check_method(method: str | None) -> str:
    """The judging order to use, refused before anything is built when unknown."""
    from .selection import DEFAULT_METHOD, METHODS

    if method is None:
        return DEFAULT_METHOD
    if method not in METHODS:
        raise RagEvalError(f"unknown judging order {shown(method)}; choose from: {', '.join(METHODS)}")
    return method


# -- the oracle ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OracleResult:
    """A judging order replayed with grades from existing qrels, and the sampling study."""

    systems: list[str]
    questions: int
    judged_questions: int
    pooled: int
    method: str
    #: The systems with the best mean nDCG@10 under the full qrels (several when they tie exactly).
    winners: list[str]
    #: After each judgment: ``judged``, ``pick``, ``right``, ``confidence``, ``settled``, ``certain``.
    steps: list[dict[str, Any]]
    #: How often the pick equals the winner over random samples of questions (None with ``samples=0``).
    study: dict[str, Any] | None
    parameters: dict[str, Any]


def oracle(
    source: str,
    questions: str | Path,
    qrels: str | Path,
    *,
    tokenizers: Sequence[str] = (),
    builder: str | None = None,
    depth: int = DEFAULT_DEPTH,
    method: str | None = None,
    samples: int = 200,
    sample_queries: int = 50,
    seed: int = 0,
    progress: SystemProgress | None = None,
    output: str | Path | None = None,
) -> OracleResult:
    """Judge the pool in the judging order with grades read from ``qrels`` instead of a person (a pooled
    passage they do not grade counts as not relevant), and report the pick after every judgment; then the
    same over ``samples`` random samples of ``sample_queries`` judged questions (``samples=0``: no study).
    With ``output``, the result is also written there as JSON (a new file, checked before any work)."""
    from . import oracle as replaying

    chosen = check_method(method)
    if samples < 0 or sample_queries < 1:
        raise RagEvalError("--samples must be at least 0 and --sample-queries at least 1")
    if type(seed) is not int or seed < 0:
        raise RagEvalError(f"--seed must be a whole number of at least 0, not {seed}")
    if output is not None:
        named_target(output, what=REPLAY_WHAT, example="replay.json")
        check_file_target(output, owned=None, what=REPLAY_WHAT)
        refuse_inside_source(output, [read_from(source)], what=REPLAY_WHAT)
    dataset, systems, skipped, identity = plan(
        source, questions, tokenizers=tokenizers, builder=builder, depth=depth, qrels=qrels
    )
    judged = relevant_queries(dataset.qrels)
    if not judged:
        raise RagEvalError(f"{qrels}: no question has a relevant passage; there is no winner to find")
    if samples and len(judged) < sample_queries:
        raise RagEvalError(
            f"{counted(len(judged), 'question has', 'questions have')} a relevant passage, fewer than the "
            f"{sample_queries} a sample needs",
            hint=f"use --sample-queries {len(judged) * 3 // 4 or 1} (or --samples 0 for no study)",
        )
    pool = build_pool(dataset, systems, identity, skipped=skipped, progress=progress)
    pooled = check_pool(pool)
    replay = replaying.replay(pool.runs, dataset.qrels, method=chosen, budget=pooled, seed=seed)
    steps = [
        {
            "judged": step.judged,
            "pick": step.pick,
            "right": step.pick in replay.winners,
            "confidence": round(step.confidence, 4),
            "settled": step.settled,
            "certain": step.certain,
        }
        for step in replay.steps
    ]
    study = None
    if samples:
        budget = max(replaying.CHECKPOINTS)
        raw = replaying.sampling_study(
            pool.runs,
            dataset.qrels,
            samples=samples,
            sample_queries=sample_queries,
            methods=[chosen],
            budget=budget,
            until_settled=0,
            seed=seed,
            progress=None if progress is None else functools.partial(progress, "oracle study"),
        )
        summary = replaying.summarise(raw)[chosen]
        study = {key: summary[key] for key in ("samples", "correct", "settled_by", "first_settled_right")} | {
            "sample_queries": sample_queries,
            "seed": seed,
        }
    result = OracleResult(
        systems=list(pool.systems),
        questions=len(dataset.queries),
        judged_questions=len(judged),
        pooled=pooled,
        method=chosen,
        winners=sorted(replay.winners),
        steps=steps,
        study=study,
        parameters={
            "source": recorded_name(source),
            "questions": recorded_name(questions),
            "qrels": recorded_name(qrels),
            "depth": depth,
            "builder": next(iter(systems.values())).builder,
        },
    )
    if output is not None:
        text = json.dumps(dataclasses.asdict(result), ensure_ascii=False, indent=1) + "\n"
        write_text_atomic(output, text, owned=None, what=REPLAY_WHAT)
    return result
