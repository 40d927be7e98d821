"""The pool a judging grades: every system's top ``depth`` results for each question of a knowledge base, built
(or reused) one cached index per system as ``compare`` does, and what identifies it (:class:`PoolIdentity`: the
passages, the questions, the systems and the depth), so that grades are never mixed across pools."""

from __future__ import annotations

import functools
import hashlib
import json
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ...builders import get_builder
from ...errors import RagEvalError
from ...index.locks import in_use_scope
from ...records import Progress
from ...tokenizers import Tokenizer, get_tokenizer, written_spec
from ..compare.compare import Skipped, SystemProgress, default_systems
from ..compare.runner import System
from ..compare.timing import run_system
from ..datasets.records import Dataset
from ..datasets.sources import source_dataset
from ..metrics.measures import ranked_ids
from .log_records import PoolIdentity, check_id

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
