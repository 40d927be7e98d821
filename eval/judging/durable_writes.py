"""Record, undo and skip: each change to a judgments file is durable when it returns, and taken back when it
fails, so the grades in memory are always those on disk (see :mod:`.judgments` for the files' design)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...errors import RagEvalError
from ...files.outputs import write_text_atomic
from ...files.textio import display_name
from ..datasets.trec import read_trec_qrels, trec_qrels_text
from .log_records import (
    GRADES,
    MAX_LOG_BYTES,
    Grade,
    JudgmentsError,
    JudgmentsWriteError,
    check_id,
    grades_of,
    utc_now,
)

#: What to do once writing has stopped: the log on disk holds every grade acknowledged.
RESTART = "stop rag-eval judge and run the same command again: it resumes from what is on disk"


class JudgmentsWrites:
    """The grades in force and the changes to them, for :class:`.judgments.Judgments` (which opens, locks and
    reads the files, and sets these attributes)."""

    path: Path
    log: Path
    assessor: str
    events: list[Grade]
    skipped: set[tuple[str, str]]
    _fd: int
    _broken: str
    _log_size: int
    _qrels_seen: tuple[int, ...] | None

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
            self._qrels_seen = stat_of(self.path)

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
        now = stat_of(self.path)
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


def _reason(exc: BaseException, path: Path) -> str:
    """Why writing ``path`` failed, in one line."""
    if isinstance(exc, OSError):
        return f"{display_name(str(path))}: cannot write: {exc.strerror or exc}"
    return str(exc)


def stat_of(path: Path) -> tuple[int, ...] | None:
    """What changes when anything writes ``path`` (its inode, size and times), or None when it is not there."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def _write_all(fd: int, data: bytes) -> None:
    """One ``write`` (whole lines under a kill), completed if the kernel took less, then fsync."""
    written = os.write(fd, data)
    while written < len(data):
        written += os.write(fd, data[written:])
    os.fsync(fd)
