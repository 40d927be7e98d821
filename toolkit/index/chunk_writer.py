"""A build's chunk rows: inserted in id order, the ones without reusable tokens tokenized in batches."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from ..errors import RagEvalError
from ..records import Chunk, Progress
from ..tokenizers import Tokenizer
from .tokenize_pool import tokenize_chunks

#: Chunks tokenized and inserted together, by count or by characters awaiting tokenization, whichever
#: comes first; bounds the memory a build holds besides one file, and is large enough for the pool
#: (tokenize_pool.POOL_MIN_CHARS) to pay off on corpora of short chunks.
FLUSH_CHUNKS = 20_000
FLUSH_CHARS = 600_000
#: The chunks table's columns before the extra fields' token columns.
_BASE_COLUMNS = 17

#: What a chunk's tokens are stored as: field 0's title and body terms and offsets, then the title and body
#: terms of every further field.
Stored = tuple[Any, ...]


class ChunkWriter:
    """Inserts chunk rows in id order, tokenizing the ones without reusable tokens in batches."""

    def __init__(self, db: sqlite3.Connection, tokenizer: Tokenizer, keep_offsets: bool) -> None:
        self.db = db
        self.tokenizer = tokenizer
        self.keep_offsets = keep_offsets
        extra = 2 * (len(tokenizer.fields) - 1)
        self.insert = "INSERT INTO chunks VALUES (" + ", ".join("?" * (_BASE_COLUMNS + extra)) + ")"
        self.buffer: list[tuple[Chunk, str, Stored | None]] = []
        self.pending_chars = 0
        #: Chunks handed in without reusable tokens so far (tokenized now or at the next flush).
        self.queued = 0
        self.rows = 0
        self.tokenized = 0
        self.tokenize_wall = 0.0
        self.tokenize_cpu = 0.0
        self.workers = 1
        self.start_method = ""
        self.worker_load_seconds: list[float] = []
        #: Each tokenize call's plan (tokenize_pool.PoolPlan): one process or a pool, and why.
        self.plans: list[tuple[int, str]] = []
        self.on_insert: Callable[[int], None] | None = None
        self.progress: Progress | None = None

    def _duplicate(self, rows: list[tuple[Any, ...]]) -> str | None:
        """The first key in ``rows`` that an earlier row of the batch or of the index already has, with the
        sources of both (two names can make one key: ``a b.md`` and ``a%20b.md`` are both ``a%20b.md``)."""
        seen: dict[str, str] = {}
        for row in rows:
            found = self.db.execute("SELECT id, path FROM chunks WHERE key = ?", (row[1],)).fetchone()
            earlier = seen.get(row[1])  # a path: never None once seen
            if earlier is None and found is not None and found[0] != row[0]:
                earlier = found[1]
            if earlier is not None:
                sources = f"{earlier!r}" if earlier == row[2] else f"{earlier!r} and {row[2]!r}"
                return f"{row[1]!r} (from {sources})"
            seen[row[1]] = row[2]
        return None

    def plan_summary(self) -> str:
        """The first tokenize call's plan, and how many of the calls used a pool when there were several."""
        if len(self.plans) < 2:
            return self.plans[0][1] if self.plans else ""
        pooled = sum(workers > 1 for workers, _plan in self.plans)
        return f"{self.plans[0][1]} (first of {len(self.plans)} tokenize calls; {pooled} pooled)"

    def add(self, chunk: Chunk, title: str, stored: Stored | None) -> None:
        self.buffer.append((chunk, title, stored))
        if stored is None:
            self.queued += 1
            self.pending_chars += len(title) + len(chunk.text)
        if len(self.buffer) >= FLUSH_CHUNKS or self.pending_chars >= FLUSH_CHARS:
            self.flush()

    def flush(self) -> None:
        """Tokenize the buffered chunks that need it and insert every buffered row."""
        pending = [(title, chunk.text) for chunk, title, stored in self.buffer if stored is None]
        tokenized = self._tokenize(pending) if pending else []
        self.pending_chars = 0
        fresh = iter(tokenized)
        rows = []
        for chunk, _title, stored in self.buffer:
            self.rows += 1
            rows.append(_row(self.rows, chunk, stored if stored is not None else next(fresh)))
        self.buffer = []
        try:
            # chunks.key is UNIQUE: SQLite finds a duplicate without a set of every key in memory (807,231
            # lines keys held 140 MB of a 200 MB corpus's build).
            self.db.executemany(self.insert, rows)
        except sqlite3.IntegrityError:
            duplicate = self._duplicate(rows)
            if duplicate is None:
                raise
            raise RagEvalError(f"duplicate chunk key {duplicate}") from None
        if self.on_insert is not None:
            self.on_insert(self.rows)

    def _tokenize(self, pending: list[tuple[str, str]]) -> list[Stored]:
        """The (title, body, offsets) of field 0 then (title, body) of every further field, per pending chunk;
        how each field was tokenized (pool plan, times, workers) is recorded."""
        fields = self.tokenizer.fields
        per_field = []
        for number, field in enumerate(fields):
            report = self.progress
            done_before = self.tokenized * len(fields) + number * len(pending)
            total = self.queued * len(fields)
            results, pool = tokenize_chunks(
                field.tokenizer,
                pending,
                keep_offsets=self.keep_offsets and number == 0,
                progress=None if report is None else _tokenizing(report, done_before, total),
            )
            per_field.append(results)
            self.tokenize_wall += pool.wall_seconds
            self.tokenize_cpu += pool.cpu_seconds
            self.plans.append((pool.workers, pool.plan))
            if pool.workers > 1:
                self.workers, self.start_method = pool.workers, pool.start_method
                self.worker_load_seconds = sorted(set(self.worker_load_seconds) | set(pool.worker_load_seconds))
        self.tokenized += len(pending)
        return [
            first + tuple(term for rest in others for term in rest[:2])
            for first, *others in zip(*per_field, strict=True)
        ]


def _row(number: int, chunk: Chunk, tokens: Stored) -> tuple[Any, ...]:
    """The chunks table's row of a chunk, in its columns' order, its tokens last."""
    return (
        number,
        chunk.key,
        chunk.path,
        chunk.doc,
        chunk.title,
        chunk.anchor,
        chunk.heading_path,
        chunk.category,
        chunk.line,
        chunk.revision,
        chunk.sha256,
        chunk.status,
        chunk.expires,
        chunk.text,
        *tokens,
    )


def _tokenizing(report: Progress, done_before: int, total: int) -> Callable[[int], None]:
    return lambda done: report("tokenizing", done_before + done, total)
