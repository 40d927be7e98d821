"""A one-field index's impact postings from the terms its build already holds, instead of a pass over FTS5's
instance table after FTS5 has built its index.

The tokenizer's pool workers count each batch's terms as they tokenize it (:func:`count_terms`: about 2% of
jieba's time there); after the pool, a thread merges the batches' counts into postings and their blocks while
SQLite builds FTS5's index in the main thread (both release the GIL for most of their work, on two cores), so
that only the blocks' inserts remain once FTS5 is done. The blocks are the instance pass's, byte for byte:
FTS5's whitespace clause splits the stored terms at spaces and folds A-Z, as :func:`count_terms` does, and
before use every row's count and the averages record are checked against FTS5's own; any difference, a term
FTS5 would split or cut short, a weight that is not a whole number, a hybrid or a large source leaves the
postings to the instance pass (:func:`rag_eval.impact.write_impacts`).
"""

from __future__ import annotations

import itertools
import re
import threading
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

#: A build counts its terms for the postings when its sources hold at most this many bytes; a larger one
#: reads FTS5's instances after FTS5's build, so that its memory stays bounded by a batch.
COUNT_BYTES = 8_000_000
_UPPER = re.compile("[A-Z]")
_FOLD = {code: code + 32 for code in range(ord("A"), ord("Z") + 1)}
#: What FTS5's whitespace clause (the ascii tokenizer, every ASCII punctuation a token character) splits a
#: stored term at besides the space between terms: ASCII control characters. A term holding one is not one
#: FTS5 token, so its batch is not counted.
_SEPARATOR = re.compile("[\x00-\x1f\x7f]")


@dataclass
class TermPartial:
    """The terms of consecutive chunks, as numbers: ``vocab`` holds their distinct terms, space-joined, in
    order of first appearance; ``ids`` numbers every instance (title, then body, chunk after chunk), where a
    term's number is that of its first instance (``firsts``, in ``vocab``'s order); ``sizes`` holds each
    chunk's title and body token counts in turn. Plain arrays: the pool's workers make them without numpy,
    which this process imports in the thread that uses them, while SQLite builds FTS5's index."""

    vocab: str
    firsts: array[int]
    ids: array[int]
    sizes: array[int]

    @property
    def chunks(self) -> int:
        return len(self.sizes) // 2


class TermCounter:
    """Numbers the terms of one batch of chunks, column after column (:meth:`add`), into a :class:`TermPartial`.

    Given the tokenizer's own term strings, a term's hash is often already computed (jieba's come from its
    dictionary): numbering them costs about a third less than re-splitting the stored text."""

    def __init__(self) -> None:
        self._local: dict[str, int] = {}
        self._numbers = itertools.count()
        self._ids: array[int] = array("q")
        self._sizes: array[int] = array("q")
        self._countable = True

    def add(self, terms: Sequence[str], stored: str) -> None:
        """One column: its terms and the space-joined text stored for FTS5."""
        if not self._countable:
            return
        if _SEPARATOR.search(stored) is not None:
            self._countable = False  # FTS5 splits such a term: not one token
            return
        if _UPPER.search(stored) is not None:
            terms = stored.translate(_FOLD).split(" ")  # FTS5's clause folds A-Z
        self._sizes.append(len(terms))
        self._ids.extend(map(self._local.setdefault, terms, self._numbers))

    def partial(self) -> TermPartial | None:
        """What was counted; None when a term holds a character FTS5 would split it at."""
        if not self._countable:
            return None
        local = self._local
        return TermPartial(" ".join(local), array("q", local.values()), self._ids, self._sizes)


def count_terms(columns: Sequence[tuple[str, str]]) -> TermPartial | None:
    """Count the stored terms of chunks given as (title terms, body terms), space-joined as a build stores
    them; None when a term holds a character FTS5 would split it at."""
    counter = TermCounter()
    for pair in columns:
        for text in pair:
            counter.add(text.split(" ") if text else [], text)
    return counter.partial()


@dataclass
class Prepared:
    """What the thread computed: the blocks' rows, and the row sizes and totals they were computed with."""

    rows: list[tuple[Any, ...]]
    terms: int
    sizes: np.ndarray
    chunks: int
    tokens: int


class TermCounts:
    """The counted terms of every row of a build, by rowid, turned into impact blocks in a thread."""

    def __init__(self) -> None:
        #: (rowids, counts) per run of counted chunks, and (rowids, (title, body) terms) per run still to count.
        self._counted: list[tuple[Sequence[int], TermPartial]] = []
        self._uncounted: list[tuple[list[int], list[tuple[str, str]]]] = []
        self.given_up = False
        #: Whether the postings were written from the counts.
        self.used = False
        self._thread: threading.Thread | None = None
        self._prepared: Prepared | None = None
        self._failure: BaseException | None = None

    def add_counted(self, rowids: Sequence[int], partial: TermPartial | None) -> None:
        """The counts of a batch whose chunks become rows ``rowids`` (None: not countable, give up)."""
        if partial is None or partial.chunks != len(rowids):
            self.give_up()
        if not self.given_up:
            assert partial is not None
            self._counted.append((rowids, partial))

    def add_terms(self, rowids: Sequence[int], columns: Sequence[tuple[str, str]]) -> None:
        """Rows whose stored terms were not counted where they were made (reused, or tokenized here): counted
        in the thread."""
        if not self.given_up and rowids:
            self._uncounted.append((list(rowids), list(columns)))

    def give_up(self) -> None:
        """Stop counting: the postings will come from FTS5's instances."""
        self.given_up = True
        self.close()

    def close(self) -> None:
        """Wait for a computation already started and free what was counted. A build calls it when it ends,
        failed or not, so that no thread outlives it (a later build forks its tokenizer's workers only while
        this process runs one thread)."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._counted, self._uncounted, self._prepared = [], [], None

    def prepare(self, weights: list[float]) -> None:
        """Start computing the blocks in a thread (while the caller has SQLite build FTS5's index). ``weights``:
        bm25's title and body weights; only whole numbers are taken (any order of adding gives FTS5's tf)."""
        if self.given_up or len(weights) != 2 or not all(float(weight).is_integer() for weight in weights):
            self.give_up()
            return
        self._thread = threading.Thread(target=self._run, args=(weights,), name="rag-eval postings", daemon=True)
        self._thread.start()

    def _run(self, weights: list[float]) -> None:
        try:
            self._prepared = self._compute(weights)
        except BaseException as exc:  # handed to the caller by write()
            self._failure = exc

    def _compute(self, weights: list[float]) -> Prepared | None:
        import numpy as np

        from .impact import Blocks, any_too_long, batch_ends

        for uncounted, columns in self._uncounted:
            partial = count_terms(columns)
            if partial is None:
                return None
            self._counted.append((uncounted, partial))
        self._uncounted = []
        vocab: dict[str, int] = {}
        numbers = itertools.count()
        term_parts, row_parts, column_parts, count_parts, size_parts, rowid_parts = [], [], [], [], [], []
        for given, partial in self._counted:
            rowids = np.asarray(given, dtype=np.int64)
            local = partial.vocab.split(" ") if partial.vocab else []
            global_of = np.fromiter(map(vocab.setdefault, local, numbers), dtype=np.int64, count=len(local))
            firsts = np.frombuffer(partial.firsts, dtype=np.int64)
            ids = np.frombuffer(partial.ids, dtype=np.int64)
            sizes_of = np.frombuffer(partial.sizes, dtype=np.int64)
            dense = np.zeros(int(ids.max()) + 1 if len(ids) else 0, dtype=np.int64)
            dense[firsts] = np.arange(len(firsts))
            slots = 2 * len(rowids)
            # One key per (term, chunk, column) with its instances counted.
            keys, counts = np.unique(dense[ids] * slots + np.repeat(np.arange(slots), sizes_of), return_counts=True)
            term_parts.append(global_of[keys // slots])
            slot = keys % slots
            row_parts.append(rowids[slot // 2])
            column_parts.append(slot % 2)
            count_parts.append(counts)
            size_parts.append(sizes_of.reshape(-1, 2).sum(axis=1))
            rowid_parts.append(rowids)
        self._counted = []
        all_rowids = np.concatenate(rowid_parts) if rowid_parts else np.zeros(0, dtype=np.int64)
        if len(np.unique(all_rowids)) != len(all_rowids):
            return None  # a row counted twice: never, but then the counts are not FTS5's
        largest = int(all_rowids.max()) if len(all_rowids) else 0
        sizes = np.zeros(1 + largest)
        sizes[all_rowids] = np.concatenate(size_parts) if size_parts else np.zeros(0)
        terms = sorted(vocab)
        if any_too_long(terms):
            return None  # FTS5 holds such a term cut short: left to the instance pass, which skips it
        rank = np.zeros(next(numbers), dtype=np.int64)
        rank[np.fromiter(map(vocab.__getitem__, terms), dtype=np.int64, count=len(terms))] = np.arange(len(terms))
        term = rank[np.concatenate(term_parts)] if term_parts else np.zeros(0, dtype=np.int64)
        rows = np.concatenate(row_parts) if row_parts else np.zeros(0, dtype=np.int64)
        column = np.concatenate(column_parts) if column_parts else np.zeros(0, dtype=np.int64)
        count = np.concatenate(count_parts) if count_parts else np.zeros(0, dtype=np.int64)
        instances = np.bincount(term, weights=count, minlength=len(terms)).astype(np.int64)
        # Postings in FTS5's order: term, then row; a row's tf adds its title's instances, then its body's.
        key = term * (largest + 1) + rows
        order = np.argsort(key * 2 + column, kind="stable")
        key, column, count = key[order], column[order], count[order]
        new_posting = np.empty(len(key), dtype=bool)
        new_posting[:1] = True
        np.not_equal(key[1:], key[:-1], out=new_posting[1:])
        starts = np.flatnonzero(new_posting)
        tf = np.add.reduceat(np.array(weights, dtype="<f8")[column] * count, starts) if len(key) else np.zeros(0)
        posting = key[starts]
        term_ends = np.searchsorted(posting // (largest + 1), np.arange(1, len(terms) + 1)).tolist()
        chunks, tokens = len(all_rowids), int(sizes.sum())
        blocks = Blocks(None, sizes, float(tokens) / float(chunks) if chunks else 0.0)
        out: list[tuple[Any, ...]] = []
        ids = posting % (largest + 1)
        first = 0
        # The instance pass writes a batch once it holds enough instances: the same batches, the same blocks.
        for last in batch_ends(instances):
            low = term_ends[first - 1] if first else 0
            ends = term_ends[first:last]
            out += blocks.rows(terms[first:last], ids[low : ends[-1]], tf[low : ends[-1]], [e - low for e in ends])
            first = last
        return Prepared(out, len(terms), sizes, chunks, tokens)

    def write(self, db: Any, sizes: np.ndarray, chunks: int, tokens: int) -> int | None:
        """Insert the blocks :meth:`prepare` computed when FTS5 holds what was counted (``sizes``: its tokens
        per rowid; ``chunks`` and ``tokens``: its averages record); the number of terms, or None with nothing
        written (the caller reads FTS5's instances)."""
        import numpy as np

        if self._thread is None:
            return None
        self._thread.join()
        self._thread = None
        if self._failure is not None:
            raise self._failure
        prepared, self._prepared = self._prepared, None
        if prepared is None or (prepared.chunks, prepared.tokens) != (chunks, tokens):
            return None
        if len(prepared.sizes) != len(sizes) or not np.array_equal(prepared.sizes, sizes):
            return None
        db.executemany("INSERT INTO impact_blocks VALUES (?, ?, ?, ?, ?, ?)", prepared.rows)
        self.used = True
        return prepared.terms
