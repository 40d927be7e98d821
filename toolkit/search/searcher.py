"""Compare's searcher for an engine that ``search`` uses: every question answered by :func:`search` itself, as a
batch search answers it, so compare times the library a user calls."""

from __future__ import annotations

import functools
from typing import Any

from ..engines.base import Engine, Searcher
from ..index.processing import QueryProcessing
from ..index.store import Index
from .searching import SearchResult, search


class SearchSearcher(Searcher):
    """``search(engine=NAME, keys_only=True)`` ``depth`` deep. The index is prepared first (:meth:`Engine.prepare`:
    the impact engine reads its postings whole when they are small enough), so that queries are timed warm."""

    fallbacks = 0

    def __init__(
        self,
        engine: Engine,
        index: Index,
        *,
        mode: str,
        depth: int,
        as_of: str | None,
        processing: QueryProcessing | None,
    ) -> None:
        self.engine = engine
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
            engine=engine.system,
            keys_only=True,
        )
        self.prepared = engine.prepare(index)

    def __call__(self, text: str) -> SearchResult:
        return self.run(text)

    def stats(self) -> dict[str, Any]:
        return self.engine.searcher_stats(self.index, fallbacks=self.fallbacks, prepared=self.prepared)


class FallbackSearcher(SearchSearcher):
    """A :class:`SearchSearcher` for an engine with a ``fallback``: the queries the fallback answered instead are
    counted once each (a query timed ``again`` is not counted again)."""

    def warmed(self) -> None:
        self.fallbacks = 0

    def __call__(self, text: str) -> SearchResult:
        result = self.run(text)
        if self.engine.fallback_reason(self.index, result.query) is not None:
            self.fallbacks += 1  # counted after the timed search
        return result

    def again(self, text: str) -> SearchResult:
        return self.run(text)
