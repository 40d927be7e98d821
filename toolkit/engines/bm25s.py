"""bm25s as a peer engine in ``compare``: the bm25s library's own BM25 over exactly the tokens FTS5 indexed.

The tokens come from the strategy's FTS5 index itself (``fts5vocab``'s instance table: every token of every
chunk's title and text, as FTS5 stored it), so native strategies (unicode61, trigram) and Python strategies
alike give bm25s the same documents FTS5 scores, with no second tokenization that could differ; each chunk's
title and text are one bm25s document, as FTS5 sums a term's frequency over both columns (weight 1 each). A
query is compiled by the strategy exactly as for FTS5 (``compile_query``: the same terms) and answered by
``BM25.retrieve``; its hits' keys are read from the index, as a keys-only ``search`` reads them.

Scoring: bm25s ``method=lucene`` by default (its own default), k1 1.2 and b 0.75 as FTS5: the same term
saturation ``tf * (k1 + 1) / (tf + k1 * (1 - b + b * |D| / avgdl))`` as FTS5, with Lucene's IDF
``log(1 + (N - n + 0.5) / (n + 0.5))`` where FTS5 uses ``log((N - n + 0.5) / (n + 0.5))`` clamped at 1e-6;
scores are float32 (bm25s's default). Rows with score 0 (no query term) are not hits, as in FTS5.
"""

from __future__ import annotations

import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import RagEvalError
from ..index.columns import weights_for
from ..index.processing import QueryProcessing
from ..index.store import FTS5_TOKEN_BYTES, Index
from ..measure import latency_summary, resident_bytes
from ..search.query import compile_query
from ..search.searching import SearchResult
from ..search.sql import Filters, hits_for
from ..spec import Option, OptionSet, real
from ..tokenizers import Tokenizer
from .base import Engine, Searcher

if TYPE_CHECKING:
    import numpy as np

    from ..builders import Builder

METHODS = ("lucene", "robertson", "atire", "bm25l", "bm25+")
_VOCAB = "temp.rag_eval_bm25s_instances"


class Bm25sEngine(Engine):
    """bm25s (sparse-matrix BM25 in numpy) over the tokens of the strategy's FTS5 index."""

    name = "bm25s"
    summary = "the bm25s library's BM25 over the same tokens (a peer, not FTS5's ranking)"
    build_engine = "fts5"
    peer = True
    exact = False
    modes = ("or",)
    one_field = True
    #: ``BM25.retrieve`` counts each query token once; it takes no weights.
    weighted_terms = False
    libraries: ClassVar[tuple[str, ...]] = ("bm25s",)
    install_hint = "pip install 'rag-eval[bm25s]' (or: pip install bm25s)"
    option_set = OptionSet(
        (
            Option("method", "bm25s's BM25 variant (its default: lucene)", "lucene", str, METHODS),
            # bm25s checks neither: with k1 nan or 1e308 every score is nan or 0 (float32), and a b past 1 makes
            # a short chunk's length norm negative.
            Option("k1", "term-frequency saturation (FTS5's: 1.2)", 1.2, real(0, 1000, above=True)),
            Option("b", "length normalisation (FTS5's: 0.75)", 0.75, real(0, 1)),
        )
    )

    def _check(self, tokenizer: Tokenizer, builder: Builder, label: str) -> None:
        weights = weights_for(tokenizer, builder.query_defaults())
        if any(weight != 1.0 for weight in weights):
            raise RagEvalError(
                f"{label}: engine 'bm25s' scores a chunk's title and text as one field, but this builder weights "
                f"its columns {', '.join(f'{w:g}' for w in weights)}",
                hint="compare bm25s with column weights of 1 (the builders' default title_weight)",
            )

    def searcher(
        self, index: Index, *, mode: str, depth: int, as_of: str | None, processing: QueryProcessing | None
    ) -> Searcher:
        return Bm25sSearcher(index, self.options, mode=mode, depth=depth, as_of=as_of, processing=processing)


def index_rows(index: Index) -> list[int]:
    """The index's chunk ids, ascending."""
    try:
        return [row[0] for row in index.db.execute("SELECT id FROM chunks ORDER BY id")]
    except sqlite3.Error as exc:  # pragma: no cover - a cached index rag-eval just built or checked
        raise RagEvalError(f"{index.path}: cannot read its chunks: {exc}") from None


def index_tokens(index: Index) -> tuple[list[int], list[list[int]], dict[str, int]]:
    """The chunk ids, each chunk's tokens as term ids (title and text together) and the vocabulary, read from
    FTS5's own record of what it indexed."""
    rows = index_rows(index)
    position = {rowid: number for number, rowid in enumerate(rows)}
    documents: list[list[int]] = [[] for _ in rows]
    vocabulary: dict[str, int] = {}
    reader = index.db.cursor()
    reader.row_factory = None
    reader.execute(f"DROP TABLE IF EXISTS {_VOCAB}")
    reader.execute(f"CREATE VIRTUAL TABLE {_VOCAB} USING fts5vocab(main, 'search', 'instance')")
    try:
        term, term_id = None, -1
        # A term FTS5 cut at its 32,768-byte limit may end inside a character: it is read as bytes and named
        # by them ("\0" + hex: no query's term, nor any other term, holds a NUL).
        terms = f"CASE WHEN length(CAST(term AS BLOB)) < {FTS5_TOKEN_BYTES} THEN term ELSE CAST(term AS BLOB) END"
        for found, rowid in reader.execute(f"SELECT {terms}, doc FROM {_VOCAB}"):
            if found != term:  # the instance table is ordered by term
                name = "\0" + found.hex() if isinstance(found, bytes) else found
                term, term_id = found, vocabulary.setdefault(name, len(vocabulary))
            documents[position[rowid]].append(term_id)
    finally:
        reader.execute(f"DROP TABLE IF EXISTS {_VOCAB}")
    return rows, documents, vocabulary


class Bm25sSearcher(Searcher):
    """A bm25s index of one FTS5 index's tokens, answering its queries one at a time."""

    def __init__(
        self,
        index: Index,
        options: dict[str, Any],
        *,
        mode: str,
        depth: int,
        as_of: str | None,
        processing: QueryProcessing | None,
    ) -> None:
        import bm25s
        import numpy as np

        self.index = index
        self.reader = index.db.cursor()
        self.reader.row_factory = None
        self.mode = mode
        self.processing = processing if processing is not None else index.processing
        self.options = options
        before = resident_bytes()
        started = time.perf_counter()
        self.rows, documents, vocabulary = index_tokens(index)
        read = time.perf_counter()
        self.model = bm25s.BM25(k1=options["k1"], b=options["b"], method=options["method"])
        self.empty = not vocabulary
        if not self.empty:
            self.model.index((documents, vocabulary), create_empty_token=False, show_progress=False)
        indexed = time.perf_counter()
        tokens = sum(len(document) for document in documents)
        del documents
        self.depth = min(depth, len(self.rows))
        self.mask: np.ndarray | None = None
        if as_of is not None:  # search's as_of filter: current chunks not expired by then
            kept = Filters(as_of=as_of)
            where = " AND ".join(kept.clauses())
            current = {row[0] for row in index.db.execute(f"SELECT c.id FROM chunks c WHERE {where}", kept.params())}
            self.mask = np.array([1.0 if rowid in current else 0.0 for rowid in self.rows], dtype=np.float32)
        self.rank_seconds: list[float] = []
        #: Where each question's ranking time is in ``rank_seconds`` (its repeats keep the fastest there).
        self.asked: dict[str, int] = {}
        self.prepared = {
            "read_tokens_seconds": round(read - started, 4),
            "bm25s_index_seconds": round(indexed - read, 4),
            "terms": len(vocabulary),
            "tokens": tokens,
            "rss_growth_bytes": None if before is None else (resident_bytes() or before) - before,
        }
        self.prepared.update(self._sizes(vocabulary))

    def _sizes(self, vocabulary: dict[str, int]) -> dict[str, Any]:
        """The in-memory arrays' bytes, the vocabulary's (Python objects) and the saved index's on disk."""
        if self.empty:
            return {"arrays_bytes": 0, "vocabulary_bytes": 0, "saved_bytes": 0}
        arrays = sum(self.model.scores[key].nbytes for key in ("data", "indices", "indptr"))
        words = sys.getsizeof(vocabulary) + sum(sys.getsizeof(t) + sys.getsizeof(i) for t, i in vocabulary.items())
        with tempfile.TemporaryDirectory(prefix="rag-eval-bm25s-") as folder:
            self.model.save(folder, show_progress=False)
            saved = sum(path.stat().st_size for path in Path(folder).iterdir() if path.is_file())
        return {"arrays_bytes": int(arrays), "vocabulary_bytes": words, "saved_bytes": saved}

    def __call__(self, text: str) -> SearchResult:
        result, rank = self._answer(text)
        self.asked[text] = len(self.rank_seconds)
        self.rank_seconds.append(rank)
        return result

    def again(self, text: str) -> SearchResult:
        result, rank = self._answer(text)  # timed again: the question's ranking time is its fastest
        if text in self.asked:
            self.rank_seconds[self.asked[text]] = min(self.rank_seconds[self.asked[text]], rank)
        return result

    def _answer(self, text: str) -> tuple[SearchResult, float]:
        started = time.perf_counter()
        compiled = compile_query(
            self.index.tokenizer,
            text,
            self.mode,
            processing=self.processing,
            document_frequency=self.index.document_frequency,
            chunks=self.index.chunks,
        )
        tokenized = time.perf_counter()
        top: list[tuple[int, float]] = []
        if compiled.terms and not self.empty:
            found = self.model.retrieve(
                [list(compiled.terms)], k=self.depth, show_progress=False, n_threads=0, weight_mask=self.mask
            )
            top = [
                (self.rows[int(doc)], float(score))
                for doc, score in zip(found.documents[0], found.scores[0], strict=True)
                if score > 0
            ]
        ranked = time.perf_counter()
        # FTS5's convention, which the runner expects: lower is better.
        hits = hits_for(self.index, self.reader, [(i, -score) for i, score in top], keys_only=True)
        done = time.perf_counter()
        return SearchResult(compiled, hits, tokenized - started, done - tokenized), ranked - tokenized

    def stats(self) -> dict[str, Any]:
        return {
            "variant": f"bm25s {self.options['method']}, k1 {self.options['k1']:g}, b {self.options['b']:g}, float32",
            **self.prepared,
            # retrieve() one query at a time, n_threads=0: as the other engines answer
            "rank_ms": latency_summary(self.rank_seconds),
        }
