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
import json
import os
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

from ...files.outputs import OutputError, checked_target, write_text_atomic
from ...files.textio import decode_utf8, display_name, parse_json, read_bytes, split_lines
from ...index.meta import RagEvalWarning
from ..datasets.trec import read_trec_qrels, trec_qrels_text
from .durable_writes import JudgmentsWrites, stat_of
from .log_records import (
    FORMAT,
    GRADES,
    MAX_LOG_BYTES,
    VERSION,
    Grade,
    JudgmentsError,
    PoolIdentity,
    check_id,
    grades_of,
    log_path,
)


def named_target(path: str | Path, *, what: str, example: str) -> Path:
    """The output path as :func:`checked_target` accepts it for a file; refused with an example of the file wanted."""
    try:
        return checked_target(path, what=what, file=True)
    except OutputError as exc:
        raise OutputError(str(exc), hint=f"name the {what}, e.g. -o {example}") from None


class Judgments(JudgmentsWrites):
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
        #: Where the log's unterminated last line starts, and its number (a write cut short by a crash).
        self._torn: tuple[int, int] | None = None
        #: Why no more can be written, once a failed write could not be taken back.
        self._broken = ""
        #: The log's size and the qrels file's stat as rag-eval last left them: anything else is an edit by hand.
        self._log_size = 0
        self._qrels_seen: tuple[int, ...] | None = None

    @classmethod
    def check(cls, path: str | Path, identity: PoolIdentity) -> list[Grade]:
        """The grades of an existing judgments file for this pool ([] when there is none); writes nothing."""
        target = named_target(path, what="judgments file", example="out/kb.qrels")
        if target.is_dir():
            raise JudgmentsError(
                f"{display_name(str(target))}: is a folder; the judgments file is a file (TREC qrels)",
                hint=f"name a file in it, e.g. -o {display_name(str(Path(path) / 'kb.qrels'))}",
            )
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
        judgments._check_not_in_use()
        return list(judgments.events)

    @classmethod
    def open(cls, path: str | Path, identity: PoolIdentity, *, assessor: str) -> Judgments:
        """Create the judgments file and its log, or open them to resume; the qrels file is brought up to date."""
        target = named_target(path, what="judgments file", example="out/kb.qrels")
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
            judgments._drop_torn_line()
            judgments._sync_qrels()
            judgments._log_size = os.fstat(judgments._fd).st_size
            judgments._qrels_seen = stat_of(judgments.path)
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
            raise self._in_use() from None

    def _check_not_in_use(self) -> None:
        """Refuse, before any index is built, a log another judging session holds (a shared lock, let go at once)."""
        try:
            fd = os.open(self.log, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            return  # read a moment ago; open says what is wrong with it
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            raise self._in_use() from None
        finally:
            os.close(fd)

    def _in_use(self) -> JudgmentsError:
        return JudgmentsError(
            f"{display_name(str(self.path))}: another rag-eval judge is writing this file",
            hint="finish that session first, or judge into another file",
        )

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
        data = read_bytes(log, JudgmentsError, max_bytes=MAX_LOG_BYTES)
        # Every event is appended whole with its newline, so an unterminated last line is one a crash cut
        # short: never acknowledged, and dropped (by open, which cuts it off); any other damage is an error.
        whole = whole_lines(data)
        if data and not whole:  # the header is written atomically, with its newline
            raise JudgmentsError(f"{name}:1: an unterminated line; this is not a judgments log rag-eval wrote")
        lines = list(enumerate(split_lines(decode_utf8(data[:whole], str(log), JudgmentsError)), start=1))
        self._torn = None if whole == len(data) else (whole, len(lines) + 1)
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

    def _drop_torn_line(self) -> None:
        """Cut off the log's unterminated last line (see ``_read``), so the next event starts on a new line."""
        if self._torn is None:
            return
        offset, number = self._torn
        try:
            os.ftruncate(self._fd, offset)
            os.fsync(self._fd)
        except OSError as exc:
            why = exc.strerror or exc
            raise JudgmentsError(
                f"{display_name(str(self.log))}: cannot cut off its incomplete last line: {why}"
            ) from None
        self._torn = None
        warnings.warn(
            f"{display_name(str(self.log))}:{number}: dropped an incomplete last line (a write cut short, never "
            "acknowledged); resuming from the grades before it",
            RagEvalWarning,
            stacklevel=3,
        )

    def _check_header(self, header: dict[str, Any], name: str) -> None:
        if header.get("format") != FORMAT or header.get("version") != VERSION:
            raise JudgmentsError(f"{name}: not a rag-eval judgments log (format {FORMAT!r}, version {VERSION})")
        identity = self.identity
        if "question_texts" not in header:  # a log written before the texts were part of the pool: ids only
            identity = replace(identity, question_texts="")
        if header.get("pool") != identity.fingerprint():
            why = "; ".join(self.identity.differences(header)) or "the pool differs"
            raise JudgmentsError(
                f"{display_name(str(self.path))}: these judgments belong to another pool: {why}",
                hint="use the same SOURCE, --queries, -t and --depth as when it was started, or a new -o path",
            )

    def _sync_qrels(self) -> None:
        """Bring the qrels file up to date with the log, if it is at most one event behind (a kill between
        the two writes) or ends in a line cut short; any other difference means someone edited it, and it is
        left alone."""
        if not self.path.exists() and not self.path.is_symlink():
            self._rewrite_qrels()  # killed between creating the log and the qrels file, or deleted: ours to write
            return
        expected = self.grades
        behind = list(self.events)
        if self._last is not None:
            kind, event = self._last
            behind = self.events[:-1] if kind == "grade" else [*self.events, event]
        data = read_bytes(self.path, JudgmentsError, max_bytes=MAX_LOG_BYTES)
        whole = whole_lines(data)
        if whole == len(data):
            current = read_trec_qrels(self.path)
            if current == expected:
                return
            explained = self._last is not None and current == grades_of(behind)
        else:
            # An append cut short (re-grades and undos replace the file whole): the log's last event is the
            # grade being appended, and the lines before the torn one are the grades before it.
            kept = sorted(split_lines(decode_utf8(data[:whole], str(self.path), JudgmentsError)))
            last_is_grade = self._last is not None and self._last[0] == "grade"
            explained = last_is_grade and kept == _qrels_lines(grades_of(behind))
        if not explained:
            raise JudgmentsError(
                f"{display_name(str(self.path))}: does not match its log {self.log.name} (edited by hand?)",
                hint="restore it, or judge into a new -o path (rag-eval rewrites only what it can explain)",
            )
        if whole != len(data):
            warnings.warn(
                f"{display_name(str(self.path))}: dropped an incomplete last line (a write cut short); "
                f"rewritten from its log {self.log.name}",
                RagEvalWarning,
                stacklevel=3,
            )
        self._rewrite_qrels()


def _qrels_lines(grades: dict[str, dict[str, int]]) -> list[str]:
    return sorted(split_lines(trec_qrels_text(grades)))


def whole_lines(data: bytes) -> int:
    """How many leading bytes of ``data`` are whole lines: up to and including its last newline."""
    return data.rfind(b"\n") + 1
