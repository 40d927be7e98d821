"""The engine of a compared system: what ranks its queries over the index a strategy built.

``fts5`` is FTS5's own bm25 statement; ``impact`` the exact impact postings (:mod:`rag_eval.engines.impact`, the same
chunks, order and scores); ``bm25s`` the bm25s library as a peer over the same tokens
(:mod:`.bm25s_system`). An engine is named by a spec like a tokenizer (``bm25s:method=robertson``) and
declares what it needs: the index build it reads (with or without impact postings), the query modes and
fields it ranks, whether it reproduces FTS5's ranking exactly, and the libraries it needs. Compare, tune and
the runner ask it; none of them checks an engine's name.
"""

from __future__ import annotations

import functools
import sqlite3
from typing import Any, ClassVar

from ..builders import Builder
from ..errors import RagEvalError, UnavailableError
from ..index.store import Index
from ..registry import Registry
from ..search.processing import QueryProcessing
from ..search.query import MODES
from ..search.searching import SearchResult, search, weights_for
from ..spec import Configurable, SystemSpec
from ..tokenizers import Tokenizer
from ..tokenizers.base import library_version
from . import impact

#: The engine of a system that names none: the exact impact engine, chosen by measurement (FTS5's hits, order
#: and scores, bit for bit, at a fraction of its latency: reports/engines.md, reports/latency.md), the engine
#: ``search`` uses on an index built by default; a query it cannot answer from postings is FTS5's.
DEFAULT_ENGINE = "impact"
#: FTS5's own bm25 statement: the reference every exact engine reproduces, and the build of an index that
#: recorded no engine (built before engines were recorded).
REFERENCE_ENGINE = "fts5"


class Searcher:
    """An engine prepared over one open index: answers one query at a time, then says what it measured."""

    def __call__(self, text: str) -> SearchResult:
        """The query's ranked hits; a run needs ids and scores only, so each hit's chunk need carry no
        more than its ``key`` (``search(keys_only=True)``)."""
        raise NotImplementedError

    def stats(self) -> dict[str, Any]:
        """What this engine measured or holds (build time, in-memory bytes, fallbacks), for the report row."""
        return {}

    def warmed(self) -> None:
        """The warm-up queries are done: what the engine counts per query starts from here."""

    def again(self, text: str) -> SearchResult:
        """The query just answered, answered again only to be timed: what the engine counts per query (fallbacks,
        its own timings) counts it once."""
        return self(text)


class Engine(Configurable):
    """Base of every engine: declarations the harness asks, ``check`` before any build, ``searcher`` after."""

    summary: ClassVar[str] = ""
    #: The index build it reads: ``fts5`` (a plain build) or ``impact`` (with impact postings). Cached builds
    #: are keyed by it, so an index without postings is never handed to an engine that needs them.
    build_engine: ClassVar[str] = "fts5"
    #: True when it returns FTS5's ranking exactly (same hits, order and scores): its quality equals fts5's.
    exact: ClassVar[bool] = True
    #: The query modes it answers.
    modes: ClassVar[tuple[str, ...]] = MODES
    #: True when it ranks only one-field systems (a hybrid's per-field columns have no counterpart in it).
    one_field: ClassVar[bool] = False
    #: Distributions it imports (their versions go into its spec); a missing one makes it unavailable.
    libraries: ClassVar[tuple[str, ...]] = ()
    install_hint: ClassVar[str] = ""

    @property
    def spec(self) -> str:
        """Canonical spec with library versions, e.g. ``bm25s:b=0.75,k1=1.2,method=lucene [bm25s=0.3.16]``."""
        versions = ", ".join(f"{lib}={library_version(lib)}" for lib in self.libraries)
        return f"{self.system} [{versions}]" if versions else self.system

    def availability(self) -> str | None:
        """None when usable; otherwise why not (the install command is in ``install_hint``)."""
        missing = [lib for lib in self.libraries if library_version(lib) == "missing"]
        return "not installed: " + ", ".join(missing) if missing else None

    def check_available(self) -> None:
        """Raise UnavailableError with the install command when a library it needs is missing."""
        reason = self.availability()
        if reason is not None:
            raise UnavailableError(f"engine {self.name!r} is unavailable: {reason}", hint=self.install_hint or None)

    def check(self, tokenizer: Tokenizer, builder: Builder, mode: str, label: str) -> None:
        """Refuse, before anything is built, a system this engine cannot rank as named (``label`` names it)."""
        self.check_available()
        if mode not in self.modes:
            raise RagEvalError(
                f"{label}: engine {self.name!r} answers {' and '.join(self.modes)} queries, not {mode!r}",
                hint=f"use --mode {self.modes[0]}, or another engine",
            )
        if self.one_field and len(tokenizer.fields) != 1:
            raise RagEvalError(
                f"{label}: engine {self.name!r} ranks one-field systems; {tokenizer.system!r} has "
                f"{len(tokenizer.fields)} fields, whose per-field columns only FTS5 ranks",
                hint="use engine fts5 for hybrids",
            )
        self._check(tokenizer, builder, label)

    def _check(self, tokenizer: Tokenizer, builder: Builder, label: str) -> None:
        """Subclasses refuse what else they cannot rank here."""

    def searcher(
        self, index: Index, *, mode: str, depth: int, as_of: str | None, processing: QueryProcessing | None
    ) -> Searcher:
        """Prepare to answer ``index``'s queries ``depth`` deep (bm25s indexes its tokens here)."""
        raise NotImplementedError


class _Fts5Searcher(Searcher):
    """``search()`` with a named engine: FTS5's statement or the impact postings."""

    def __init__(
        self, index: Index, engine: str, mode: str, depth: int, as_of: str | None, processing: QueryProcessing | None
    ) -> None:
        self.index = index
        self.run = functools.partial(
            search,
            index,
            mode=mode,
            limit=depth,
            deep=True,
            as_of=as_of,
            snippets=False,
            processing=processing,
            engine=engine,
            keys_only=True,
        )

    def __call__(self, text: str) -> SearchResult:
        return self.run(text)


class _ImpactSearcher(_Fts5Searcher):
    """``search(engine="impact")``, counting the queries FTS5's statement answered instead. Prepared with the
    index's postings read whole when they are small enough (:func:`rag_eval.engines.impact.preload`), so that its
    queries are timed warm rather than each reading its terms' blocks for the first time."""

    fallbacks = 0

    def __init__(
        self, index: Index, engine: str, mode: str, depth: int, as_of: str | None, processing: QueryProcessing | None
    ) -> None:
        super().__init__(index, engine, mode, depth, as_of, processing)
        self.preloaded = impact.preload(index)

    def warmed(self) -> None:
        self.fallbacks = 0

    def __call__(self, text: str) -> SearchResult:
        result = self.run(text)
        if impact.fallback_reason(self.index, result.query) is not None:
            self.fallbacks += 1  # counted after the timed search
        return result

    def again(self, text: str) -> SearchResult:
        return self.run(text)

    def stats(self) -> dict[str, Any]:
        # The postings the engine reads into memory (its per-index cache holds each queried term's).
        return {
            "fts5_fallbacks": self.fallbacks,
            "postings_bytes": impact.postings_bytes(self.index.db),
            "postings_preloaded": self.preloaded,
        }


class Fts5Engine(Engine):
    """FTS5's own bm25 statement (``ORDER BY bm25(...), rowid``)."""

    name = "fts5"
    summary = "FTS5's bm25 statement (the reference ranking)"

    def searcher(
        self, index: Index, *, mode: str, depth: int, as_of: str | None, processing: QueryProcessing | None
    ) -> Searcher:
        return _Fts5Searcher(index, "fts5", mode, depth, as_of, processing)


class ImpactEngine(Engine):
    """The exact impact engine: FTS5's bm25 from stored per-term postings (same hits, order and scores). A query
    the postings cannot answer exactly (a phrase) is answered by FTS5's statement and
    counted (``fts5_fallbacks``), as ``search`` does on an index built by default."""

    name = "impact"
    summary = "exact impact postings (FTS5's scores and order, faster on frequent terms; the default)"
    build_engine = "impact"

    def searcher(
        self, index: Index, *, mode: str, depth: int, as_of: str | None, processing: QueryProcessing | None
    ) -> Searcher:
        return _ImpactSearcher(index, "impact", mode, depth, as_of, processing)


#: Every engine by name (entry-point group ``rag_eval.engines`` for plug-ins).
ENGINES: Registry[Engine] = Registry("rag_eval.engines", "engine")
ENGINES.register(Fts5Engine)
ENGINES.register(ImpactEngine)


@functools.cache
def _peers() -> None:
    # bm25s's module imports this one (for Engine); it registers on first use rather than at import.
    from .bm25s import Bm25sEngine

    ENGINES.register(Bm25sEngine)


def engine_names() -> list[str]:
    """The registered engines' names, sorted (choices and error messages come from here)."""
    _peers()
    return sorted(ENGINES)


def get_engine(spec: str) -> Engine:
    """An engine from a spec such as ``impact`` or ``bm25s:method=robertson``; unknown names list the engines."""
    _peers()
    parsed = SystemSpec.parse(spec)
    cls = ENGINES[parsed.name]
    if not (isinstance(cls, type) and issubclass(cls, Engine)):
        raise RagEvalError(f"engine {parsed.name!r} is {cls!r}, not a rag_eval Engine subclass")
    return cls.from_spec(parsed)


def written_engine(spec: str) -> str:
    """An engine spec as written, tidied (options sorted, defaults not added): what system names carry."""
    get_engine(spec)  # refuse an unknown engine or option here, with the registry's message
    return str(SystemSpec.parse(spec))


def column_weights_of(tokenizer: Tokenizer, builder: Builder) -> list[float]:
    """bm25's column weights of an index this builder and tokenizer make (before it is built)."""
    return weights_for(tokenizer, builder.query_defaults())


def index_rows(index: Index) -> list[int]:
    """The index's chunk ids, ascending."""
    try:
        return [row[0] for row in index.db.execute("SELECT id FROM chunks ORDER BY id")]
    except sqlite3.Error as exc:  # pragma: no cover - a cached index rag-eval just built or checked
        raise RagEvalError(f"{index.path}: cannot read its chunks: {exc}") from None
