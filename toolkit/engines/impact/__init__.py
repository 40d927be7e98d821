"""The impact engine (:class:`ImpactEngine`, entry point ``impact``): its declarations and hooks, which queries it
answers exactly, and every name callers import, re-exported from the modules that hold them.

The engine ranks with FTS5's own bm25, exactly, from per-term postings, at FTS5's k1 = 1.2 and b = 0.75 or, as
``impact:k1=K,b=B``, at any other pair with the same formula (not FTS5's ranking then: the instance is not
``exact``): :mod:`rag_eval.engines.impact.write` writes
them at build time (its docstring describes the format and why the scores are FTS5's bit for bit),
:mod:`rag_eval.engines.impact.read` reads, checks and caches them, and :mod:`rag_eval.engines.impact.rank` ranks a
query with them (MaxScore pruning included) on the numpy helpers of :mod:`rag_eval.engines.impact.arrays`, and
:mod:`rag_eval.engines.impact.verify` checks them for ``index verify``.

Settings such as ``PRUNE`` or ``CACHE_BYTES`` are re-exported to be read: to change one, set it on the module
that uses it (``impact_rank.PRUNE``, ``impact_read.CACHE_BYTES``).
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any

from ...errors import QueryError, RagEvalError
from ...index.store import FTS5_TOKEN_BYTES
from ...search.searcher import FallbackSearcher
from ...search.sql import BY_IDS, Filters, hits_for, ids_json
from ...spec import Option, OptionSet, SystemSpec, format_value, real
from ..base import Engine, Ranked, Searcher
from .rank import (
    CHECK_FRACTION,
    CHECK_POSTINGS,
    CHECK_SHARE,
    CUT_MIN_POSTINGS,
    DISTINCT_COST,
    LOOKUP_COST,
    POOL_POSTINGS,
    PRUNE,
    PRUNE_MIN_POSTINGS,
    PRUNE_SHARE,
    Accept,
    Ranking,
    query_keys,
    ranked,
)
from .read import (
    BEST_ROWS,
    CACHE_BYTES,
    CLAMPED_IDF,
    ENTRY_BYTES,
    PRELOAD_BYTES,
    Parameters,
    Postings,
    check_parameters,
    current_layout,
    has_impacts,
    has_tfs,
    idf,
    postings_bytes,
    postings_table,
    preload,
    stored_postings,
)
from .verify import postings_damage
from .write import (
    BLOCK_POSTINGS,
    BLOCK_TERMS,
    BLOCKS_TABLE,
    K1,
    LEGACY_TABLE,
    TABLES,
    TF_COLUMN,
    TF_TYPES,
    B,
    field_key,
    impacts,
    write_impacts,
)

if TYPE_CHECKING:
    from ...builders import Builder
    from ...index.integrity import Damage
    from ...index.processing import QueryProcessing
    from ...index.store import Index
    from ...search.query import CompiledQuery
    from ...tokenizers import Tokenizer

__all__ = [
    "BEST_ROWS",
    "BLOCKS_TABLE",
    "BLOCK_POSTINGS",
    "BLOCK_TERMS",
    "CACHE_BYTES",
    "CHECK_FRACTION",
    "CHECK_POSTINGS",
    "CHECK_SHARE",
    "CLAMPED_IDF",
    "CUT_MIN_POSTINGS",
    "DISTINCT_COST",
    "ENTRY_BYTES",
    "FTS5_TOKEN_BYTES",
    "ImpactEngine",
    "K1",
    "LEGACY_TABLE",
    "LOOKUP_COST",
    "POOL_POSTINGS",
    "PRELOAD_BYTES",
    "PRUNE",
    "PRUNE_MIN_POSTINGS",
    "PRUNE_SHARE",
    "TABLES",
    "TF_COLUMN",
    "TF_TYPES",
    "Accept",
    "B",
    "Parameters",
    "Postings",
    "Ranking",
    "current_layout",
    "fallback_reason",
    "field_key",
    "has_impacts",
    "has_tfs",
    "impacts",
    "idf",
    "postings_bytes",
    "postings_table",
    "preload",
    "query_keys",
    "ranked",
    "stored_postings",
    "write_impacts",
]


class ImpactEngine(Engine):
    """The exact impact engine: FTS5's bm25 from stored per-term postings (same hits, order and scores). A query
    the postings cannot answer exactly (a phrase) is answered by FTS5's statement, its ``fallback``, and compare
    counts those (``fts5_fallbacks``). With ``k1`` or ``b`` other than FTS5's it ranks with the same formula at
    those (not FTS5's ranking: ``exact`` is False for that instance, and its spec names them)."""

    name = "impact"
    summary = "exact impact postings (FTS5's scores and order, faster on frequent terms; the default); k1, b: bm25's"
    build_engine = "impact"
    fallback = "fts5"
    tables = TABLES
    weighted_terms = True  # it sums idf * impact per term itself: a term's weight multiplies its share
    option_set = OptionSet(
        (
            Option("k1", "bm25's term-frequency saturation (FTS5's: 1.2)", K1, real(0, 1000)),
            Option("b", "bm25's length normalisation, 0 none to 1 full (FTS5's: 0.75)", B, real(0, 1)),
        )
    )

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        k1, b = (float(self.options[key]) + 0.0 for key in ("k1", "b"))  # + 0.0: -0 is 0
        self.options.update(k1=k1, b=b)
        #: None at FTS5's k1 and b (the stored impacts: FTS5's ranking), else the pair the impacts are computed at.
        self.parameters: Parameters = None if (k1, b) == (K1, B) else (k1, b)
        self.exact = self.parameters is None
        defaults = {option.name: option.default for option in self.option_set.options}
        parts = [
            f"{key}={format_value(value)}" for key, value in sorted(self.options.items()) if value != defaults[key]
        ]
        self._system = self.name + (":" + ",".join(parts) if parts else "")

    @property
    def system(self) -> str:
        """``impact``, with ``k1`` and ``b`` only where they are not FTS5's: ``impact:k1=1.2,b=0.75`` is ``impact``
        (search compares it per query: made once)."""
        return self._system

    def written(self, given: SystemSpec) -> str:
        return self.system

    def check(self, tokenizer: Tokenizer, builder: Builder, mode: str, label: str, *more: Any, **given: Any) -> None:
        super().check(tokenizer, builder, mode, label, *more, **given)
        if self.parameters is not None and mode == "phrase":
            raise RagEvalError(
                f"{label}: engine {self.system!r} ranks or and and queries at its k1 and b; FTS5 answers phrase "
                "queries, at its own k1 = 1.2 and b = 0.75",
                hint="use --mode or or and, or engine impact for phrases",
            )

    def rank(self, index: Index, compiled: CompiledQuery, limit: int, filters: Filters, keys_only: bool) -> Ranked:
        """The postings' ranking, filtered like the FTS5 statement and read from ``chunks`` the same way."""
        reader = index.db.cursor()
        reader.row_factory = None
        accept: Accept | None = None
        if any(filters.given):
            sql = f"SELECT c.id {BY_IDS} WHERE {' AND '.join(filters.clauses())}"
            params = filters.params()

            def accept(ids: list[int]) -> set[int]:
                return {row[0] for row in reader.execute(sql, [ids_json(ids), *params])}

        found = ranked(index, compiled, limit, accept, parameters=self.parameters)
        return Ranked(hits_for(index, reader, found, keys_only), index.generation)

    def fallback_reason(self, index: Index, compiled: CompiledQuery) -> str | None:
        present = index.statements.get("impacts")
        if present is None:
            present = index.statements["impacts"] = "yes" if has_impacts(index) else "no"
        if present == "no" and len(index.tokenizer.fields) > 1:
            # Hybrids built before their fields had postings (an ``impact`` build wrote none then).
            return "this hybrid index holds no impact postings; rebuild it with --engine impact"
        if present == "no":
            raise QueryError(
                f"{index.path}: this index holds no impact postings",
                hint="rebuild it with: rag-eval index build --engine impact",
            )
        check_parameters(index, self.parameters)  # an index without tfs is refused before any query is answered
        reason = fallback_reason(index, compiled)
        if reason is not None and self.parameters is not None:
            reason += " (at FTS5's own k1 = 1.2 and b = 0.75)"
        return reason

    def prepare(self, index: Index) -> bool:
        if self.parameters is None:
            return preload(index)
        check_parameters(index, self.parameters)
        return preload(index, parameters=self.parameters)

    def searcher_stats(self, index: Index, *, fallbacks: int, prepared: bool) -> dict[str, Any]:
        # The postings the engine reads into memory (its per-index cache holds each queried term's).
        return {"fts5_fallbacks": fallbacks, "postings_bytes": postings_bytes(index.db), "postings_preloaded": prepared}

    def write_postings(self, db: sqlite3.Connection, tokenizer: Tokenizer, weights: list[float]) -> int:
        return write_impacts(db, tokenizer, weights)

    def check_postings(self, index: Index) -> list[Damage]:
        return postings_damage(index)

    def searcher(
        self, index: Index, *, mode: str, depth: int, as_of: str | None, processing: QueryProcessing | None
    ) -> Searcher:
        return FallbackSearcher(self, index, mode=mode, depth=depth, as_of=as_of, processing=processing)


def fallback_reason(index: Index, compiled: CompiledQuery) -> str | None:
    """Why the impact engine cannot answer ``compiled`` exactly (FTS5 answers then), or None when it can."""
    if compiled.mode not in ("or", "and") or compiled.phrase_filter is not None:
        return f"{compiled.mode} queries are answered by FTS5"
    for term in compiled.terms:
        if _too_long(term):
            return f"FTS5 keeps only the first {FTS5_TOKEN_BYTES:,} bytes of a {len(term):,}-character term"
        if not _single_token(index.tokenizer, term):
            return f"FTS5 reads the quoted term {term!r} as a phrase of several tokens"
    return None


def _too_long(term: str) -> bool:
    """Whether FTS5 may hold ``term`` cut short: it keeps fewer than :data:`FTS5_TOKEN_BYTES` bytes whole."""
    return len(term) * 4 >= FTS5_TOKEN_BYTES and len(term.encode("utf-8", "surrogatepass")) >= FTS5_TOKEN_BYTES


def _single_token(tokenizer: Tokenizer, term: str) -> bool:
    """Whether FTS5 tokenizes the quoted ``term`` into exactly the one token ``term``."""
    if tokenizer.native:
        return tokenizer.terms(term) == [term]  # the Python mirror gives FTS5's tokens (test_fts5_parity)
    # A Python strategy's column: FTS5's ascii tokenizer splits on whitespace and control characters and
    # folds A-Z; a term with none of them is one token, itself.
    return bool(term) and not any(c <= " " or c == "\x7f" or "A" <= c <= "Z" for c in term)
