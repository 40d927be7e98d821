"""A judgments file as ``rag-eval judge`` writes it: TREC qrels that any tool reads, and beside it an
append-only log that says which pool the grades belong to, who gave each grade and when.

``JUDGMENTS`` holds one ``QID 0 DOCID GRADE`` line per judged pair, so ``trec_eval``, ``compare --qrels``
and ``evaluate`` read it as it is. ``JUDGMENTS.jsonl`` (the log) is the source of truth: a header naming
the pool, then one event per grade, undo and skip. Every change is appended to the log and fsynced, then
the qrels file is brought up to date (a new pair is one appended line, a re-grade or an undo rewrites it
atomically, since trec_eval wants one line per pair) and fsynced, and only then acknowledged. Each append
is a single ``write`` call on an ``O_APPEND`` descriptor, so a process killed at any moment leaves whole
lines; a qrels file one event behind its log (killed between the two writes) is brought up to date when
the file is opened again. A qrels file without a log was not written by rag-eval and is never touched.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..errors import RagEvalError
from ..outputs import checked_target, write_text_atomic
from ..textio import display_name, iter_lines, parse_json
from .trec import read_trec_qrels, trec_qrels_text

FORMAT = "rag-eval judgments"
VERSION = 1
#: Grades a person gives: 0 not relevant, 1 partly, 2 answers the question.
GRADES = (0, 1, 2)
#: Largest log read back, in bytes (a grade is about 150 bytes: some 60,000 events).
MAX_LOG_BYTES = 10_000_000


class JudgmentsError(RagEvalError):
    """A judgments file that cannot be used: another pool's, not rag-eval's, damaged or in use."""


@dataclass(frozen=True)
class PoolIdentity:
    """What a set of judgments was made for: the source's units, the questions, the systems and the depth."""

    corpus: str
    questions: tuple[str, ...]
    systems: tuple[str, ...]
    depth: int

    def fingerprint(self) -> str:
        """sha256 over the identity's canonical JSON."""
        data = {"corpus": self.corpus, "questions": list(self.questions), "systems": list(self.systems)}
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
        if header.get("systems") != mine["systems"]:
            out.append(f"the systems differ ({', '.join(map(str, header.get('systems') or []))} then)")
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
    if not value or any(char.isspace() or ord(char) < 32 for char in value):
        raise JudgmentsError(
            f"{what} {value!r} cannot be written to TREC qrels (empty or holds whitespace)",
            hint="TREC qrels separate columns by whitespace; give passages and questions ids without spaces",
        )
    return value


class Judgments:
    """An open judgments file: the grades so far, and methods that record, undo and skip durably.

    Holds an exclusive ``flock`` on the log while open, so two judging sessions never write one file.
    """

    def __init__(self, path: Path, identity: PoolIdentity, assessor: str) -> None:
        self.path = path
        self.log = log_path(path)
        self.identity = identity
        self.assessor = assessor
        #: Grade events still in force, oldest first (an undo removes the last one).
        self.events: list[Grade] = []
        self.skipped: set[tuple[str, str]] = set()
        self._fd = -1
        #: The log's last event, when it is a grade or an undo (what the qrels file may lag behind by).
        self._last: tuple[str, Grade] | None = None

    @classmethod
    def check(cls, path: str | Path, identity: PoolIdentity) -> list[Grade]:
        """The grades of an existing judgments file for this pool ([] when there is none); writes nothing."""
        target = checked_target(path, what="judgments file")
        log = log_path(target)
        if not log.exists() and not log.is_symlink():
            if target.exists() or target.is_symlink():
                raise JudgmentsError(
                    f"{display_name(str(target))}: exists, and rag-eval did not write it (no {log.name} beside it); "
                    "refusing to change it",
                    hint="give a new path with -o (rag-eval judge resumes only its own judgments files)",
                )
            return []
        judgments = cls(target, identity, "")
        judgments._read(log)
        return list(judgments.events)

    @classmethod
    def open(cls, path: str | Path, identity: PoolIdentity, *, assessor: str) -> Judgments:
        """Create the judgments file and its log, or open them to resume; the qrels file is brought up to date."""
        target = checked_target(path, what="judgments file")
        cls.check(target, identity)
        judgments = cls(target, identity, assessor)
        target.parent.mkdir(parents=True, exist_ok=True)
        if not judgments.log.exists():
            # The log first: a qrels file without its log would look like someone else's file next time.
            header = json.dumps(identity.header(), ensure_ascii=False) + "\n"
            write_text_atomic(judgments.log, header, owned=None, what="judgments log")
        judgments._lock()
        try:
            judgments._read(judgments.log)
            judgments._sync_qrels()
        except BaseException:
            judgments.close()
            raise
        return judgments

    def _lock(self) -> None:
        try:
            self._fd = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError as exc:
            raise JudgmentsError(f"{self.log}: cannot open: {exc.strerror or exc}") from None
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.close()
            raise JudgmentsError(
                f"{display_name(str(self.path))}: another rag-eval judge is writing this file",
                hint="finish that session first, or judge into another file",
            ) from None

    def close(self) -> None:
        """Release the file (the lock goes with the descriptor)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> Judgments:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- reading -------------------------------------------------------------------------------------------

    def _read(self, log: Path) -> None:
        name = display_name(str(log))
        events: list[Grade] = []
        skipped: set[tuple[str, str]] = set()
        last: tuple[str, Grade] | None = None
        lines = list(iter_lines(log, JudgmentsError, max_bytes=MAX_LOG_BYTES))
        if not lines:
            raise JudgmentsError(f"{name}: empty; this is not a judgments log rag-eval wrote")
        for number, line in lines:
            where = f"{name}:{number}"
            record = parse_json(line, where, JudgmentsError)
            if not isinstance(record, dict):
                raise JudgmentsError(f"{where}: expected a JSON object")
            if number == 1:
                self._check_header(record, name)
                continue
            kind = record.get("event")
            query, doc = record.get("query"), record.get("doc")
            if not isinstance(query, str) or not isinstance(doc, str):
                raise JudgmentsError(f"{where}: expected string 'query' and 'doc'")
            if kind == "grade":
                grade = record.get("grade")
                if type(grade) is not int or grade not in GRADES:
                    raise JudgmentsError(f"{where}: grade must be one of {', '.join(map(str, GRADES))}")
                events.append(
                    Grade(
                        check_id(query, "query"),
                        check_id(doc, "passage"),
                        grade,
                        str(record.get("assessor", "")),
                        str(record.get("time", "")),
                    )
                )
                skipped.discard((query, doc))
            elif kind == "undo":
                if not events or (events[-1].query_id, events[-1].doc_id) != (query, doc):
                    raise JudgmentsError(f"{where}: undo of {query} / {doc}, which is not the last grade")
                last = ("undo", events.pop())
                continue
            elif kind == "skip":
                skipped.add((query, doc))
                last = None  # the grade before it was written in full before the skip was
                continue
            else:
                raise JudgmentsError(f"{where}: unknown event {kind!r}")
            last = ("grade", events[-1])
        self.events, self.skipped, self._last = events, skipped, last

    def _check_header(self, header: dict[str, Any], name: str) -> None:
        if header.get("format") != FORMAT or header.get("version") != VERSION:
            raise JudgmentsError(f"{name}: not a rag-eval judgments log (format {FORMAT!r}, version {VERSION})")
        if header.get("pool") != self.identity.fingerprint():
            why = "; ".join(self.identity.differences(header)) or "the pool differs"
            raise JudgmentsError(
                f"{display_name(str(self.path))}: these judgments belong to another pool: {why}",
                hint="use the same SOURCE, --queries, -t and --depth as when it was started, or a new -o path",
            )

    # -- state ---------------------------------------------------------------------------------------------

    @property
    def grades(self) -> dict[str, dict[str, int]]:
        """Query id -> doc id -> grade, each pair's latest grade still in force, in first-judged order."""
        out: dict[str, dict[str, int]] = {}
        for event in self.events:
            out.setdefault(event.query_id, {})[event.doc_id] = event.grade
        return out

    def history(self) -> list[tuple[str, str]]:
        """Judged pairs in the order they were first graded (what j/k step through; a re-grade keeps its place)."""
        return list(dict.fromkeys((event.query_id, event.doc_id) for event in self.events))

    def grade_of(self, query_id: str, doc_id: str) -> int | None:
        """The pair's grade in force, or None."""
        return self.grades.get(query_id, {}).get(doc_id)

    # -- writing -------------------------------------------------------------------------------------------

    def record(self, query_id: str, doc_id: str, grade: int) -> Grade:
        """Grade a pair (a re-grade replaces the earlier grade); durable when this returns."""
        if grade not in GRADES or isinstance(grade, bool):
            raise JudgmentsError(f"grade must be one of {', '.join(map(str, GRADES))}, not {grade!r}")
        check_id(query_id, "query")
        check_id(doc_id, "passage")
        regrade = self.grade_of(query_id, doc_id) is not None
        event = Grade(query_id, doc_id, grade, self.assessor, utc_now())
        self._append(
            {
                "event": "grade",
                "query": query_id,
                "doc": doc_id,
                "grade": grade,
                "assessor": event.assessor,
                "time": event.time,
            }
        )
        self.events.append(event)
        self.skipped.discard((query_id, doc_id))
        if regrade:
            self._rewrite_qrels()
        else:
            self._append_qrels(trec_qrels_text({query_id: {doc_id: grade}}))
        return event

    def undo(self) -> Grade | None:
        """Withdraw the last grade (an earlier grade of the same pair comes back); None when there is none."""
        if not self.events:
            return None
        last = self.events[-1]
        self._append(
            {"event": "undo", "query": last.query_id, "doc": last.doc_id, "assessor": self.assessor, "time": utc_now()}
        )
        self.events.pop()
        self._rewrite_qrels()
        return last

    def skip(self, query_id: str, doc_id: str) -> None:
        """Remember that the assessor passed over a pair (shown again once nothing else is left)."""
        self._append({"event": "skip", "query": query_id, "doc": doc_id, "assessor": self.assessor, "time": utc_now()})
        self.skipped.add((query_id, doc_id))

    def _append(self, record: dict[str, Any]) -> None:
        if self._fd < 0:
            raise JudgmentsError(f"{self.path}: the judgments file is closed")
        _write_all(self._fd, (json.dumps(record, ensure_ascii=False) + "\n").encode())

    def _append_qrels(self, line: str) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW)
        try:
            _write_all(fd, line.encode())
        finally:
            os.close(fd)

    def _rewrite_qrels(self) -> None:
        write_text_atomic(self.path, trec_qrels_text(self.grades), owned=lambda _path: None, what="judgments file")

    def _sync_qrels(self) -> None:
        """Bring the qrels file up to date with the log, if it is at most one event behind (a kill between
        the two writes); any other difference means someone edited it, and it is left alone."""
        if not self.path.exists() and not self.path.is_symlink():
            self._rewrite_qrels()  # killed between creating the log and the qrels file, or deleted: ours to write
            return
        expected = self.grades
        current = read_trec_qrels(self.path)
        if current == expected:
            return
        behind = Judgments(self.path, self.identity, self.assessor)
        if self._last is not None:
            kind, event = self._last
            behind.events = self.events[:-1] if kind == "grade" else [*self.events, event]
        if self._last is None or current != behind.grades:
            raise JudgmentsError(
                f"{display_name(str(self.path))}: does not match its log {self.log.name} (edited by hand?)",
                hint="restore it, or judge into a new -o path (rag-eval rewrites only what it can explain)",
            )
        self._rewrite_qrels()


def _write_all(fd: int, data: bytes) -> None:
    """One ``write`` (whole lines under a kill), completed if the kernel took less, then fsync."""
    written = os.write(fd, data)
    while written < len(data):
        written += os.write(fd, data[written:])
    os.fsync(fd)
