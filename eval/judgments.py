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
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..errors import RagEvalError
from ..indexmeta import RagEvalWarning
from ..outputs import OutputError, checked_target, write_text_atomic
from ..textio import counted, decode_utf8, display_name, fits_trec_column, parse_json, read_bytes, split_lines  # noqa: F401
from .trec import read_trec_qrels, trec_qrels_text

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


def named_target(path: str | Path, *, what: str, example: str) -> Path:
    """The output path as :func:`checked_target` accepts it for a file; refused with an example of the file wanted."""
    try:
        return checked_target(path, what=what, file=True)
    except OutputError as exc:
        raise OutputError(str(exc), hint=f"name the {what}, e.g. -o {example}") from None


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
            judgments._qrels_seen = _stat_of(judgments.path)
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

    # -- state ---------------------------------------------------------------------------------------------

    @property
    def grades(self) -> dict[str, dict[str, int]]:
        """Query id -> doc id -> grade, each pair's latest grade still in force, in first-judged order."""
        return grades_of(self.events)

    def history(self) -> list[tuple[str, str]]:
        """Judged pairs in the order they were first graded (what j/k step through; a re-grade keeps its place)."""
        return list(dict.fromkeys((event.query_id, event.doc_id) for event in self.events))

    def grade_of(self, query_id: str, doc_id: str) -> int | None:
        """The pair's grade in force, or None."""
        return self.grades.get(query_id, {}).get(doc_id)

    # -- writing -------------------------------------------------------------------------------------------
    # Each change is written first and applied to ``events`` and ``skipped`` only once both files hold it; a
    # failed write is taken back, so what is in memory is always what is on disk.

    def record(self, query_id: str, doc_id: str, grade: int) -> Grade:
        """Grade a pair (a re-grade replaces the earlier grade); durable when this returns."""
        if grade not in GRADES or isinstance(grade, bool):
            raise JudgmentsError(f"grade must be one of {', '.join(map(str, GRADES))}, not {grade!r}")
        check_id(query_id, "query")
        check_id(doc_id, "passage")
        regrade = self.grade_of(query_id, doc_id) is not None
        event = Grade(query_id, doc_id, grade, self.assessor, utc_now())
        after = [*self.events, event]
        self._commit(
            {
                "event": "grade",
                "query": query_id,
                "doc": doc_id,
                "grade": grade,
                "assessor": event.assessor,
                "time": event.time,
            },
            (lambda: self._rewrite_qrels(grades_of(after)))
            if regrade
            else (lambda: self._append_qrels(trec_qrels_text({query_id: {doc_id: grade}}))),
        )
        self.events.append(event)
        self.skipped.discard((query_id, doc_id))
        return event

    def undo(self) -> Grade | None:
        """Withdraw the last grade (an earlier grade of the same pair comes back); None when there is none."""
        if not self.events:
            return None
        last = self.events[-1]
        before = self.events[:-1]
        self._commit(
            {"event": "undo", "query": last.query_id, "doc": last.doc_id, "assessor": self.assessor, "time": utc_now()},
            lambda: self._rewrite_qrels(grades_of(before)),
        )
        self.events.pop()
        return last

    def skip(self, query_id: str, doc_id: str) -> None:
        """Remember that the assessor passed over a pair (shown again once nothing else is left)."""
        self._commit({"event": "skip", "query": query_id, "doc": doc_id, "assessor": self.assessor, "time": utc_now()})
        self.skipped.add((query_id, doc_id))

    def _commit(self, record: dict[str, Any], then: Callable[[], None] | None = None) -> None:
        """Append ``record`` to the log, then run ``then`` (the qrels file's update); when either fails, the
        log is cut back to its length before, and the failure is one :class:`JudgmentsWriteError`."""
        if self._fd < 0:
            raise JudgmentsWriteError(f"{self.path}: the judgments file is closed")
        if self._broken:
            raise JudgmentsWriteError(self._broken, hint=RESTART)
        self._check_log_in_place(record["event"])
        if then is not None:
            self._check_qrels_unchanged(record["event"])
        size = os.fstat(self._fd).st_size
        line = (json.dumps(record, ensure_ascii=False) + "\n").encode()
        if size + len(line) > MAX_LOG_BYTES:  # a log the next start could not read back
            raise JudgmentsWriteError(
                f"{display_name(str(self.log))}: reached its limit of {MAX_LOG_BYTES:,} bytes; this {record['event']} "
                "was not recorded",
                hint=f"the grades so far are in {display_name(str(self.path))}; judge on into a new -o path",
            )
        try:
            _write_all(self._fd, line)
        except BaseException as exc:
            raise self._failed(exc, size, record, _reason(exc, self.log)) from None
        try:
            if then is not None:
                then()
        except BaseException as exc:
            why = _reason(exc, self.path)
            if self.path.is_symlink():
                why = f"{display_name(str(self.path))}: is now a symbolic link, which rag-eval did not create and "
                why += "does not write through"
            raise self._failed(exc, size, record, why) from None
        self._log_size = size + len(line)
        if then is not None:
            self._qrels_seen = _stat_of(self.path)

    def _failed(self, exc: BaseException, size: int, record: dict[str, Any], why: str) -> BaseException:
        """Take the log back to ``size`` bytes; the error to raise (an interrupt stays what it is)."""
        self._cut_back(self._fd, size, self.log)
        if not isinstance(exc, (OSError, RagEvalError)):
            return exc
        if self._broken:
            return JudgmentsWriteError(f"{why}; {self._broken}", hint=RESTART)
        # Nothing of this change is on disk or in memory; a restart brings the judgments file up to date from the
        # log, so it mends a judgments file deleted or replaced meanwhile.
        return JudgmentsWriteError(f"{why}; this {record['event']} was not recorded", hint=RESTART)

    def _check_log_in_place(self, event: str) -> None:
        """Refuse to write when the log open since the start is no longer the file at its path, or was changed."""
        mine = os.fstat(self._fd)
        try:
            there = os.lstat(self.log)
        except OSError:
            there = None
        if there is None or (there.st_dev, there.st_ino) != (mine.st_dev, mine.st_ino):
            raise JudgmentsWriteError(
                f"{display_name(str(self.log))}: moved, removed or replaced while judging; nothing more is written",
                hint=RESTART,
            )
        if mine.st_size != self._log_size:
            raise JudgmentsWriteError(
                f"{display_name(str(self.log))}: changed by another program while judging (edited by hand?); "
                f"this {event} was not recorded",
                hint=f"put it back as it was, or stop and judge into a new -o path (the grades so far are in "
                f"{display_name(str(self.path))})",
            )

    def _check_qrels_unchanged(self, event: str) -> None:
        """Refuse to write a qrels file someone changed since rag-eval last wrote it (edited by hand while judging):
        a rewrite would drop the edit, an append add to it. The stat tells at once; the lines decide."""
        now = _stat_of(self.path)
        if now is None or now == self._qrels_seen or self.path.is_symlink():
            return  # gone or a link: the write itself refuses it, and says how to go on
        try:
            same = read_trec_qrels(self.path) == self.grades
        except RagEvalError:
            same = False
        if not same:
            name = display_name(str(self.path))
            raise JudgmentsWriteError(
                f"{name}: changed by another program while judging (edited by hand?), and rag-eval does not write "
                f"over it; this {event} was not recorded",
                hint=f"put back the lines rag-eval wrote and go on, or stop, move {name} aside and run the same "
                f"command again (it is written anew from {self.log.name})",
            )
        self._qrels_seen = now

    def _cut_back(self, fd: int, size: int, path: Path) -> None:
        """Take back a partly done write: the file at ``fd`` back to ``size`` bytes."""
        try:
            if os.fstat(fd).st_size != size:
                os.ftruncate(fd, size)
                os.fsync(fd)
        except OSError as exc:
            self._broken = (
                f"{display_name(str(path))}: a failed write could not be taken back ({exc.strerror or exc}); "
                "nothing more is written"
            )

    def _append_qrels(self, line: str) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW)
        try:
            size = os.fstat(fd).st_size
            try:
                _write_all(fd, line.encode())
            except BaseException:
                self._cut_back(fd, size, self.path)
                raise
        finally:
            os.close(fd)

    def _rewrite_qrels(self, grades: dict[str, dict[str, int]] | None = None) -> None:
        text = trec_qrels_text(self.grades if grades is None else grades)
        write_text_atomic(self.path, text, owned=lambda _path: None, what="judgments file")

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


#: What to do once writing has stopped: the log on disk holds every grade acknowledged.
RESTART = "stop rag-eval judge and run the same command again: it resumes from what is on disk"


def grades_of(events: Iterable[Grade]) -> dict[str, dict[str, int]]:
    """Query id -> doc id -> grade after ``events`` (grades in force), in first-judged order."""
    out: dict[str, dict[str, int]] = {}
    for event in events:
        out.setdefault(event.query_id, {})[event.doc_id] = event.grade
    return out


def _reason(exc: BaseException, path: Path) -> str:
    """Why writing ``path`` failed, in one line."""
    if isinstance(exc, OSError):
        return f"{display_name(str(path))}: cannot write: {exc.strerror or exc}"
    return str(exc)


def _qrels_lines(grades: dict[str, dict[str, int]]) -> list[str]:
    return sorted(split_lines(trec_qrels_text(grades)))


def _stat_of(path: Path) -> tuple[int, ...] | None:
    """What changes when anything writes ``path`` (its inode, size and times), or None when it is not there."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def whole_lines(data: bytes) -> int:
    """How many leading bytes of ``data`` are whole lines: up to and including its last newline."""
    return data.rfind(b"\n") + 1


def _write_all(fd: int, data: bytes) -> None:
    """One ``write`` (whole lines under a kill), completed if the kernel took less, then fsync."""
    written = os.write(fd, data)
    while written < len(data):
        written += os.write(fd, data[written:])
    os.fsync(fd)
