"""What a judgments log records: its header names the pool the grades belong to (:class:`PoolIdentity`), then
one event per grade (:class:`Grade`), undo and skip; and the errors of a judgments file. The file itself is
:mod:`.judgments`."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ...errors import RagEvalError
from ...files.textio import fits_trec_column

FORMAT = "rag-eval judgments"
VERSION = 1
#: Grades a person gives: 0 not relevant, 1 partly, 2 answers the question.
GRADES = (0, 1, 2)
#: Largest log read back, in bytes (a grade is about 150 bytes: some 60,000 events).
MAX_LOG_BYTES = 10_000_000


class JudgmentsError(RagEvalError):
    """A judgments file that cannot be used: another pool's, not rag-eval's, damaged or in use."""


class JudgmentsConflict(JudgmentsError):
    """A grade for a passage that was graded meanwhile from another page (a second tab): refused, not applied."""


class JudgmentsWriteError(JudgmentsError):
    """A grade, undo or skip that could not be written; the files and the grades in memory are as before it."""


@dataclass(frozen=True)
class PoolIdentity:
    """What a set of judgments was made for: the source's units, the questions, the systems and the depth."""

    corpus: str
    questions: tuple[str, ...]
    systems: tuple[str, ...]
    depth: int
    #: sha256 over the questions' ids and texts: a queries.jsonl keeps its ids when a question is reworded.
    question_texts: str = ""

    def fingerprint(self) -> str:
        """sha256 over the identity's canonical JSON (without ``question_texts`` when empty, as logs before it)."""
        data = {"corpus": self.corpus, "questions": list(self.questions), "systems": list(self.systems)}
        if self.question_texts:
            data["question_texts"] = self.question_texts
        text = json.dumps(data | {"depth": self.depth}, ensure_ascii=False, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()

    def header(self) -> dict[str, Any]:
        """The log's first record."""
        return {
            "format": FORMAT,
            "version": VERSION,
            "pool": self.fingerprint(),
            "corpus": self.corpus,
            "questions": hashlib.sha256("\n".join(self.questions).encode()).hexdigest(),
            "question_count": len(self.questions),
            "question_texts": self.question_texts,
            "systems": list(self.systems),
            "depth": self.depth,
            "created": utc_now(),
        }

    def differences(self, header: dict[str, Any]) -> list[str]:
        """How a log's header differs from this pool, in words (empty when only the fingerprint could tell)."""
        mine = self.header()
        out = []
        if header.get("corpus") != mine["corpus"]:
            out.append("the source's passages differ")
        if header.get("questions") != mine["questions"]:
            out.append(f"the questions differ ({header.get('question_count')} then, {len(self.questions)} now)")
        elif header.get("question_texts", mine["question_texts"]) != mine["question_texts"]:
            out.append("the questions' texts differ (the same ids, reworded)")
        if header.get("systems") != mine["systems"]:
            then = [str(system) for system in header.get("systems") or []]
            left_out = [system for system in then if system not in self.systems]
            added = [system for system in self.systems if system not in then]
            change = [
                f"{' and '.join(names)} {what}" for names, what in ((left_out, "left out"), (added, "added")) if names
            ]
            now = ", ".join(self.systems) or "none"
            out.append(
                f"the systems differ ({', '.join(then) or 'none'} then) from now ({now}): "
                f"{', '.join(change) or 'another order'}"
            )
        if header.get("depth") != self.depth:
            out.append(f"the depth differs ({header.get('depth')} then, {self.depth} now)")
        return out


@dataclass(frozen=True)
class Grade:
    """One grade as the log records it."""

    query_id: str
    doc_id: str
    grade: int
    assessor: str
    time: str


def utc_now() -> str:
    """The current UTC time, ISO 8601 to the second."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def log_path(path: str | Path) -> Path:
    """The log beside a judgments file: ``JUDGMENTS.jsonl``."""
    path = Path(path)
    return path.with_name(path.name + ".jsonl")


def check_id(value: str, what: str) -> str:
    """An id that fits a TREC column: non-empty, no whitespace, no control character."""
    if not fits_trec_column(value):
        raise JudgmentsError(
            f"{what} {value!r} cannot be written to TREC qrels (empty or holds whitespace)",
            hint="TREC qrels separate columns by whitespace; give passages and questions ids without spaces",
        )
    return value


def grades_of(events: Iterable[Grade]) -> dict[str, dict[str, int]]:
    """Query id -> doc id -> grade after ``events`` (grades in force), in first-judged order."""
    out: dict[str, dict[str, int]] = {}
    for event in events:
        out.setdefault(event.query_id, {})[event.doc_id] = event.grade
    return out
