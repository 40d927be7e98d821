"""``rag-eval judge``: grade the systems' pooled results for a knowledge base's questions in a local page, in the
order that best decides which system wins (issue #13), or replay that order with an oracle's grades (``--oracle``).

:func:`judge` builds the pool (:mod:`.pool`) and serves a judging session (:mod:`.session`) on the page
(:mod:`.server`); :func:`oracle` replays the order with grades read from qrels (:mod:`.oracle`). The order and the
decision come from :mod:`.selection`; the judgments file from :mod:`.judgments`.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import RagEvalError
from ...files.outputs import check_file_target, recorded_name, refuse_inside_source, write_text_atomic
from ...files.textio import control_character, counted, shown
from ..compare.compare import SystemProgress
from ..datasets.records import Dataset
from ..datasets.shipped import read_from
from ..metrics.measures import relevant_queries
from .judgments import Judgments, named_target
from .log_records import log_path
from .pool import DEFAULT_DEPTH, Pool, build_pool, check_pool, plan
from .session import Session

if TYPE_CHECKING:
    from .oracle import Step

#: What ``--oracle -o FILE`` writes, in messages.
REPLAY_WHAT = "replay"


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
    _check_study_options(samples, sample_queries, seed)
    if output is not None:
        named_target(output, what=REPLAY_WHAT, example="replay.json")
        check_file_target(output, owned=None, what=REPLAY_WHAT)
        refuse_inside_source(output, [read_from(source)], what=REPLAY_WHAT)
    dataset, systems, skipped, identity = plan(
        source, questions, tokenizers=tokenizers, builder=builder, depth=depth, qrels=qrels
    )
    judged = _judged_questions(dataset, qrels, samples, sample_queries)
    pool = build_pool(dataset, systems, identity, skipped=skipped, progress=progress)
    pooled = check_pool(pool)
    replay = replaying.replay(pool.runs, dataset.qrels, method=chosen, budget=pooled, seed=seed)
    result = OracleResult(
        systems=list(pool.systems),
        questions=len(dataset.queries),
        judged_questions=len(judged),
        pooled=pooled,
        method=chosen,
        winners=sorted(replay.winners),
        steps=[_step_row(step, replay.winners) for step in replay.steps],
        study=_study(pool, chosen, samples, sample_queries, seed, progress) if samples else None,
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


def _check_study_options(samples: int, sample_queries: int, seed: int) -> None:
    """The sampling study's options, refused before anything is read or built."""
    if samples < 0 or sample_queries < 1:
        raise RagEvalError("--samples must be at least 0 and --sample-queries at least 1")
    if type(seed) is not int or seed < 0:
        raise RagEvalError(f"--seed must be a whole number of at least 0, not {seed}")


def _judged_questions(dataset: Dataset, qrels: str | Path, samples: int, sample_queries: int) -> list[str]:
    """The questions with a relevant passage (there is a winner to find only then), enough of them for a sample."""
    judged = relevant_queries(dataset.qrels)
    if not judged:
        raise RagEvalError(f"{qrels}: no question has a relevant passage; there is no winner to find")
    if samples and len(judged) < sample_queries:
        raise RagEvalError(
            f"{counted(len(judged), 'question has', 'questions have')} a relevant passage, fewer than the "
            f"{sample_queries} a sample needs",
            hint=f"use --sample-queries {len(judged) * 3 // 4 or 1} (or --samples 0 for no study)",
        )
    return judged


def _step_row(step: Step, winners: frozenset[str]) -> dict[str, Any]:
    """One judgment of the replay as :attr:`OracleResult.steps` lists it."""
    return {
        "judged": step.judged,
        "pick": step.pick,
        "right": step.pick in winners,
        "confidence": round(step.confidence, 4),
        "settled": step.settled,
        "certain": step.certain,
    }


def _study(
    pool: Pool, method: str, samples: int, sample_queries: int, seed: int, progress: SystemProgress | None
) -> dict[str, Any]:
    """The sampling study of ``method`` on the pool: how often its pick is the winner after the checkpoints'
    judgment counts, and how soon the decision settles."""
    from . import oracle as replaying

    raw = replaying.sampling_study(
        pool.runs,
        pool.dataset.qrels,
        samples=samples,
        sample_queries=sample_queries,
        methods=[method],
        budget=max(replaying.CHECKPOINTS),
        until_settled=0,
        seed=seed,
        progress=None if progress is None else functools.partial(progress, "oracle study"),
    )
    summary = replaying.summarise(raw)[method]
    return {key: summary[key] for key in ("samples", "correct", "settled_by", "first_settled_right")} | {
        "sample_queries": sample_queries,
        "seed": seed,
    }
