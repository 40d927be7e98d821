"""Where a build's write phase goes: one `passages` build per round, with each step of the write timed.

    RAG_EVAL_WORKERS=2 .venv/bin/python tools/build_phases.py CORPUS STRATEGY ROUNDS [ENGINE] [--into-given] > OUT.jsonl

Each line: the build report's tokenize and write seconds, and within the write the chunk-row inserts, FTS5's
rebuild and optimize, the impact postings (their instance pass alone as ``postings_counted``), the commit
and the final checkpoint; then what follows the write: the new file's sync (``sync_to_disk``) and its
publication under its name (``publish``). ``build_over_tokenize`` is the whole build after the tokenizer's
load over the tokenize phase. ENGINE is the build's ``--engine`` (default ``auto``: with impact postings).
By default the index is a new path, built as ``rag-eval index build`` builds one (in a hidden file,
bulk-loaded); ``--into-given`` passes the build a connection instead (WAL, as a sync of an existing index
writes). The index goes to a temporary folder that is removed. Timing wraps the library's functions and the
connection's statements; nothing else changes.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rag_eval.engines import impact
from rag_eval.engines.impact import write as impact_write
from rag_eval.index import writer
from rag_eval.index.store import connect

STEPS = {
    "INSERT INTO chunks": "chunk_rows",
    "INSERT INTO search(search) VALUES ('rebuild')": "fts5_rebuild",
    "INSERT INTO search(search) VALUES ('optimize')": "fts5_optimize",
    "COMMIT": "commit",
}
spent: dict[str, float] = {}


def timed(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            spent[name] = spent.get(name, 0.0) + time.perf_counter() - started

    return wrapper


class Timed(sqlite3.Connection):
    def _time(self, sql: str, run: Callable[[], Any]) -> Any:
        started = time.perf_counter()
        try:
            return run()
        finally:
            for prefix, name in STEPS.items():
                if sql.startswith(prefix):
                    spent[name] = spent.get(name, 0.0) + time.perf_counter() - started

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:  # type: ignore[override]
        return self._time(sql, lambda: super(Timed, self).execute(sql, *args))

    def executemany(self, sql: str, *args: Any) -> sqlite3.Cursor:  # type: ignore[override]
        return self._time(sql, lambda: super(Timed, self).executemany(sql, *args))


def main() -> None:
    given = "--into-given" in sys.argv
    arguments = [argument for argument in sys.argv[1:] if argument != "--into-given"]
    corpus, strategy, rounds = arguments[0], arguments[1], int(arguments[2])
    engine = arguments[3] if len(arguments) > 3 else "auto"
    impact.write_impacts = timed("postings", impact.write_impacts)  # type: ignore[assignment]
    impact_write._write_counted = timed("postings_counted", impact_write._write_counted)  # type: ignore[assignment]
    writer._checkpoint = timed("checkpoint", writer._checkpoint)  # type: ignore[assignment]
    writer.flush_to_disk = timed("sync_to_disk", writer.flush_to_disk)  # type: ignore[assignment]
    writer.publish = timed("publish", writer.publish)  # type: ignore[assignment]
    writer.connect = lambda path, **options: connect(path, factory=Timed, **options)  # type: ignore[assignment]
    for number in range(1, rounds + 1):
        spent.clear()
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "phases.sqlite"
            db = connect(path, factory=Timed) if given else None
            load = os.getloadavg()[0]
            try:
                report = writer.build(corpus, path, builder="passages", tokenizer=strategy, db=db, engine=engine)
            finally:
                if db is not None:
                    db.close()
        line = {
            "round": number,
            "corpus": Path(corpus).name,
            "strategy": strategy,
            "engine": engine,
            "workers": os.environ.get("RAG_EVAL_WORKERS", "auto"),
            "load": load,
            "plan": report.extra["tokenize_plan"],
            "tokenize": round(report.tokenize_seconds, 3),
            "write": round(report.write_seconds, 3),
            "into": "given connection" if given else "new file",
            "build_over_tokenize": round((report.seconds - report.tokenizer_load_seconds) / report.tokenize_seconds, 3),
            **{name: round(seconds, 3) for name, seconds in sorted(spent.items())},
        }
        steps = ("chunk_rows", "fts5_rebuild", "fts5_optimize", "postings", "commit")
        line["write_other"] = round(line["write"] - sum(line.get(name, 0.0) for name in steps), 3)
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
