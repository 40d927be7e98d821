"""The engine contract: what ranks a compiled query over an index, a plug-in declared like a tokenizer or builder.

Engines are registered through the entry-point group ``rag_eval.engines`` (the built-in ``fts5``, ``impact`` and
``bm25s`` are declared in pyproject.toml exactly like a third-party one) and loaded on first use. An engine is
named by a spec (``bm25s:method=robertson``) and declares what the rest of rag-eval needs to know; the core calls
its hooks and never compares its name:

- ``search`` compiles the query and asks the engine the index records (or the one named) to :meth:`Engine.rank`
  it with the search's filters and limit. When :meth:`Engine.fallback_reason` says it cannot answer a query
  exactly, the engine it names as ``fallback`` ranks it and ``--explain`` says why.
- ``index build --engine`` records the engine (``auto`` is :data:`DEFAULT_ENGINE`) and, inside the build's
  transaction, calls :meth:`Engine.write_postings`; every engine's ``tables`` are dropped before a build.
- ``index verify`` asks the recorded engine to :meth:`Engine.check_postings`.
- ``search --queries`` and the MCP server :meth:`Engine.prepare` an index before many queries.
- ``compare`` and ``tune`` :meth:`Engine.check` a system before anything is built, then rank its questions with a
  :class:`Searcher` from :meth:`Engine.searcher`.

A *peer* engine (bm25s) ranks only in ``compare``, over the index built for another engine (``build_engine``);
``search`` and ``index build`` offer the engines that are not peers.

This module is the contract and the registry only: it imports no engine, so the library's search and build
reach engines through the registry, never by import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, cast

from ..errors import IndexFileError, QueryError, RagEvalError, SpecError, UnavailableError
from ..registry import Registry
from ..spec import Configurable, SystemSpec
from ..tokenizers.base import library_version

if TYPE_CHECKING:
    import sqlite3

    from ..builders import Builder
    from ..index.integrity import Damage
    from ..index.processing import QueryProcessing
    from ..index.store import Index
    from ..records import Hit
    from ..search.query import CompiledQuery
    from ..search.searching import SearchResult
    from ..search.sql import Filters
    from ..tokenizers import Tokenizer

#: The engine of a system that names none and of ``index build --engine auto``: the exact impact engine, chosen by
#: measurement (FTS5's hits, order and scores, bit for bit, at a fraction of its latency: reports/engines.md,
#: reports/latency.md; for two hybrids the same ranking on all 4,218 questions and 6 to 10x faster at p95).
DEFAULT_ENGINE = "impact"
#: FTS5's own bm25 statement: the ranking every exact engine reproduces, and the engine of an index that
#: recorded none (built before engines were recorded).
REFERENCE_ENGINE = "fts5"
#: What ``index build --engine`` takes besides an engine: :data:`DEFAULT_ENGINE`.
AUTO = "auto"


class Ranked(NamedTuple):
    """An engine's ranking of one query: the hits in rank order, and the build generation they were read from
    (an engine that ranks inside the search's read transaction returns the index's own)."""

    hits: list[Hit]
    generation: str | None


class Searcher:
    """An engine prepared over one open index for compare: answers one query at a time, then says what it measured."""

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
    """Base of every engine: what it declares, the hooks search, build and verify call, and compare's ``check`` and
    ``searcher``. Every hook has a default, so an engine overrides only what it does."""

    summary: ClassVar[str] = ""
    #: The engine an index it ranks is built for: the engine ``index build`` records (its own name for an engine
    #: search uses; for a peer, the engine whose index it reads). Compare's cached builds are keyed by it, so an
    #: index without postings is never handed to an engine that needs them.
    build_engine: ClassVar[str] = ""
    #: True for an engine that ranks only in compare, over an index built for ``build_engine``.
    peer: ClassVar[bool] = False
    #: True when it returns FTS5's ranking exactly (same hits, order and scores): its quality equals fts5's. Per
    #: instance: an engine whose options change its ranking (``impact:k1=0.9``) sets it in ``__init__``.
    exact: bool = True
    #: The query modes it answers; empty for every mode the query compiler knows.
    modes: ClassVar[tuple[str, ...]] = ()
    #: True when it ranks only one-field systems (a hybrid's per-field columns have no counterpart in it).
    one_field: ClassVar[bool] = False
    #: Distributions it imports (their versions go into its spec); a missing one makes it unavailable.
    libraries: ClassVar[tuple[str, ...]] = ()
    install_hint: ClassVar[str] = ""
    #: The engine that answers a query this one cannot answer exactly (see :meth:`fallback_reason`); empty for none.
    fallback: ClassVar[str] = ""
    #: The tables its postings live in (every table a build of it ever wrote): dropped before every build.
    tables: ClassVar[tuple[str, ...]] = ()
    #: True when its ranking is one SQL statement that returns the build generation with its rows: a search
    #: with it then needs no read transaction (a single statement reads one snapshot by itself).
    one_statement: ClassVar[bool] = False
    #: True when it ranks a weighted bag of terms (each term's bm25 contribution times its weight), as query
    #: processing with pseudo-relevance feedback (``query:prf=rm3``) makes; an engine without it refuses them.
    weighted_terms: ClassVar[bool] = False

    @property
    def spec(self) -> str:
        """Canonical spec with library versions, e.g. ``bm25s:b=0.75,k1=1.2,method=lucene [bm25s=0.3.16]``."""
        versions = ", ".join(f"{lib}={library_version(lib)}" for lib in self.libraries)
        return f"{self.system} [{versions}]" if versions else self.system

    def written(self, given: SystemSpec) -> str:
        """How system names write this engine asked for as ``given`` (its options sorted, as written); an engine
        whose spec with its defaults spelled out must name the same system as its bare name returns
        :attr:`system` without them."""
        return str(given)

    def _check_options(self, given: dict[str, str]) -> None:
        """An option this engine does not take but another engine does: one error naming those engines."""
        known = {option.name for option in self.option_set.options}
        for key in sorted(set(given) - known):
            others = []
            for name in ENGINES:
                try:
                    cls = engine_class(name)
                except RagEvalError:
                    continue
                if any(option.name == key for option in cls.option_set.options):
                    others.append((cls.peer, name))
            if others:
                takers = [name for _, name in sorted(others)]  # the engines search uses first
                raise SpecError(
                    f"engine {self.name!r} takes no option {key!r} (valid options: "
                    f"{', '.join(sorted(known)) or 'none'}); {' and '.join(takers)} take it",
                    hint=f"write {takers[0]}:{key}=VALUE",
                )

    def availability(self) -> str | None:
        """None when usable; otherwise why not (the install command is in ``install_hint``)."""
        missing = [lib for lib in self.libraries if library_version(lib) == "missing"]
        return "not installed: " + ", ".join(missing) if missing else None

    def check_available(self) -> None:
        """Raise UnavailableError with the install command when a library it needs is missing."""
        reason = self.availability()
        if reason is not None:
            raise UnavailableError(f"engine {self.name!r} is unavailable: {reason}", hint=self.install_hint or None)

    # --- search ------------------------------------------------------------------------------------------------

    def rank(self, index: Index, compiled: CompiledQuery, limit: int, filters: Filters, keys_only: bool) -> Ranked:
        """``compiled`` (with an expression) ranked over ``index``: at most ``limit`` hits that pass ``filters``,
        best first, ties by chunk id; with ``keys_only`` each hit's chunk carries its key alone."""
        raise NotImplementedError(f"engine {self.name!r} ranks only in compare")

    def fallback_reason(self, index: Index, compiled: CompiledQuery) -> str | None:
        """Why this engine cannot answer ``compiled`` exactly over ``index`` (``fallback`` answers it then), or
        None when it can; a QueryError when it cannot answer this index at all."""
        return None

    def prepare(self, index: Index) -> bool:
        """Ready ``index`` for many queries (read what every query would read); True when it is all in memory."""
        return False

    def searcher_stats(self, index: Index, *, fallbacks: int, prepared: bool) -> dict[str, Any]:
        """What compare reports of this engine after ranking with search(): ``fallbacks`` queries the fallback
        answered, whether :meth:`prepare` held the index in memory."""
        return {}

    # --- build and verify ----------------------------------------------------------------------------------------

    def write_postings(self, db: sqlite3.Connection, tokenizer: Tokenizer, weights: list[float]) -> int:
        """Write this engine's postings from the FTS5 table just built (inside the build's transaction);
        ``weights`` are bm25's column weights. Returns the number of terms written."""
        return 0

    def check_postings(self, index: Index) -> list[Damage]:
        """The damage found in this engine's postings of ``index`` (called inside ``index.reading()``, after
        SQLite's and FTS5's own checks passed); ``[]`` when they are intact or there are none."""
        return []

    # --- compare -------------------------------------------------------------------------------------------------

    def check(
        self, tokenizer: Tokenizer, builder: Builder, mode: str, label: str, processing: QueryProcessing | None = None
    ) -> None:
        """Refuse, before anything is built, a system this engine cannot rank as named (``label`` names it)."""
        self.check_available()
        self.check_processing(processing, mode, label)
        if self.modes and mode not in self.modes:
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

    def check_processing(self, processing: QueryProcessing | None, mode: str | None, label: str) -> None:
        """Refuse query processing this engine cannot rank (weighted queries need ``weighted_terms``), and feedback
        in any mode but ``or`` (``mode`` None: not known yet); one QueryError naming ``label``."""
        if processing is None or not processing.weighted:
            return
        if mode is not None and mode != "or":
            raise QueryError(
                f"{label}: query processing {processing.written} expands 'or' queries, not {mode!r} ones",
                hint="feedback expands only 'or' queries: choose mode or, or leave prf out",
            )
        if not self.weighted_terms:
            able = weighting_engine_names()
            raise QueryError(
                f"{label}: engine {self.name!r} cannot weight query terms, which {processing.written} needs",
                hint=f"use engine {' or '.join(able)}" if able else "no registered engine weights query terms",
            )

    def searcher(
        self, index: Index, *, mode: str, depth: int, as_of: str | None, processing: QueryProcessing | None
    ) -> Searcher:
        """Prepare to answer ``index``'s queries ``depth`` deep for compare. An engine search uses returns
        :class:`rag_eval.search.searcher.SearchSearcher` (:class:`~rag_eval.search.searcher.FallbackSearcher` when it
        declares a ``fallback``); a peer, its own (bm25s indexes its tokens here)."""
        raise NotImplementedError


#: Every engine by name (entry-point group ``rag_eval.engines``), loaded on first use.
ENGINES: Registry[Engine] = Registry("rag_eval.engines", "engine", Engine)


def engine_names() -> list[str]:
    """The registered engines' names, sorted (choices and error messages come from here)."""
    return sorted(ENGINES)


def engine_class(name: str) -> type[Engine]:
    """The registered engine class named ``name`` (loaded on first use); RegistryError naming the engines otherwise."""
    return cast("type[Engine]", ENGINES[name])


def get_engine(spec: str) -> Engine:
    """An engine from a spec such as ``impact`` or ``bm25s:method=robertson``; unknown names list the engines."""
    parsed = SystemSpec.parse(spec)
    return engine_class(parsed.name).from_spec(parsed)


def written_engine(spec: str) -> str:
    """An engine spec as written, tidied (options sorted, defaults not added, or left out where the engine says
    so: :meth:`Engine.written`): what system names carry."""
    parsed = SystemSpec.parse(spec)
    return get_engine(spec).written(parsed)  # an unknown engine or option is refused with the registry's message


def weighting_engine_names() -> list[str]:
    """The engines ``search`` uses that rank weighted queries (declare ``weighted_terms``), sorted."""
    names = []
    for name in search_engine_names():
        try:
            if engine_class(name).weighted_terms:
                names.append(name)
        except RagEvalError:
            continue
    return sorted(names)


def search_engine_names() -> list[str]:
    """The engines ``search --engine`` and ``index build --engine`` offer: every registered engine that is not a
    peer, sorted (a plug-in that fails to load is not offered; naming it says why)."""
    names = []
    for name in ENGINES:
        try:
            if not engine_class(name).peer:
                names.append(name)
        except RagEvalError:
            continue
    return names


#: One engine without options per class: search asks for one every query.
_INSTANCES: dict[type[Engine], Engine] = {}
#: Engines with options by spec, as search asks for them (a few at a time; cleared when it holds more).
_WITH_OPTIONS: dict[str, Engine] = {}
_WITH_OPTIONS_HELD = 64


def _default_instance(cls: type[Engine]) -> Engine:
    found = _INSTANCES.get(cls)
    if found is None:
        found = _INSTANCES[cls] = cls()
    return found


def search_engine(name: object) -> Engine:
    """The engine ``search`` ranks with, by name or spec (``impact:k1=0.9,b=0.4``); an unknown engine or a peer is
    one QueryError naming the choices, a bad option one SpecError."""
    if isinstance(name, str) and name in ENGINES:
        cls = engine_class(name)
        if not cls.peer:
            return _default_instance(cls)
    elif isinstance(name, str) and ":" in name and name.partition(":")[0].strip() in ENGINES:
        found = _WITH_OPTIONS.get(name)
        if found is not None:
            return found
        parsed = SystemSpec.parse(name)
        cls = engine_class(parsed.name)
        if not cls.peer:
            if len(_WITH_OPTIONS) >= _WITH_OPTIONS_HELD:
                _WITH_OPTIONS.clear()
            found = _WITH_OPTIONS[name] = cls.from_spec(parsed)
            return found
    raise QueryError(f"unknown engine {name!r}; choose from: {', '.join(search_engine_names())}")


def recorded_engine(index: Index, asked: str | None = None) -> Engine:
    """The engine a search of ``index`` uses: ``asked``, else the one the index recorded, else the reference (an
    index built before engines were recorded); a recorded name that is no search engine is a damaged index."""
    if asked is not None:
        return search_engine(asked)
    name = index.meta.get("engine") or REFERENCE_ENGINE
    try:
        return search_engine(name)
    except (QueryError, SpecError):
        raise IndexFileError(f"{index.path}: damaged index meta: engine is {name!r}", hint="rebuild it") from None


def build_engine(choice: object) -> Engine:
    """The engine a build records for ``choice``: ``auto`` is :data:`DEFAULT_ENGINE`'s build; anything that is no
    search engine is one QueryError naming them."""
    if choice == AUTO:
        return search_engine(get_engine(DEFAULT_ENGINE).build_engine)
    return search_engine(choice)


def postings_engines() -> list[Engine]:
    """Every registered engine whose build writes postings (declares ``tables``), by name (a plug-in that fails
    to load is passed over: it wrote nothing this version can read)."""
    found = []
    for name in ENGINES:
        try:
            cls = engine_class(name)
        except RagEvalError:
            continue
        if cls.tables:
            found.append(_default_instance(cls))
    return found


def postings_tables() -> list[str]:
    """Every table an engine's postings may live in (what a build drops before writing its own)."""
    return list(dict.fromkeys(table for engine in postings_engines() for table in engine.tables))
