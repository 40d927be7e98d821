"""A search request as one value: what to look for and how, passed whole through the library (``search``, the
evidence result, batch search, the MCP server) rather than as a dozen copied keyword arguments."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from ..builders.lines import iso_date
from ..engines.base import search_engine
from ..errors import CorpusError, QueryError
from ..files.textio import text_argument
from ..index.processing import QueryProcessing
from .sql import Filters


@dataclass(frozen=True)
class SearchRequest:
    """One search of an index: ``query`` in ``mode`` (default: the builder's), at most ``limit`` hits (default and
    maximum: the builder's), kept by ``filters``, with ``processing`` (default: the index's; ``QueryProcessing()``
    for none) and ranked by ``engine`` (default: the index's).

    ``snippets`` adds each hit's snippet and ``explain`` says how the query was read. ``deep`` is for the evaluation
    harness and run writers: no term limit and any ``limit``. ``keys_only`` is for run writers: each hit's chunk
    carries its key alone (it excludes snippets). The arguments are checked when the request is made (the query
    itself, the mode and the limit against the index's when it is searched); a processing spec such as
    ``"stopwords=zh"`` is parsed."""

    query: Any
    mode: str | None = None
    limit: int | None = None
    filters: Filters = field(default_factory=Filters)
    processing: QueryProcessing | None = None
    engine: str | None = None
    snippets: bool = True
    keys_only: bool = False
    deep: bool = False
    explain: bool = False

    def __post_init__(self) -> None:
        processing: object = self.processing
        if isinstance(processing, str):
            object.__setattr__(
                self, "processing", QueryProcessing.parse(text_argument(processing, "processing", QueryError))
            )
        elif processing is not None and not isinstance(processing, QueryProcessing):
            kind = type(processing).__name__
            raise QueryError(f"processing must be a QueryProcessing or a spec such as 'stopwords=zh', not {kind}")
        _check_filters(self.filters)
        if self.engine is not None:
            search_engine(self.engine)
        if self.keys_only and self.snippets:
            raise QueryError("a keys-only search has no snippets: pass snippets=False")

    @classmethod
    def of(
        cls,
        query: Any,
        *,
        mode: str | None = None,
        limit: int | None = None,
        as_of: str | None = None,
        category: str | None = None,
        path_prefix: str | None = None,
        snippets: bool = True,
        deep: bool = False,
        explain: bool = False,
        processing: QueryProcessing | str | None = None,
        engine: str | None = None,
        keys_only: bool = False,
    ) -> SearchRequest:
        """The request the keyword arguments of :func:`rag_eval.search.searching.search` describe."""
        return cls(
            query,
            mode=mode,
            limit=limit,
            filters=Filters(as_of, category, path_prefix),
            processing=processing,  # type: ignore[arg-type]  # a spec string is parsed by __post_init__
            engine=engine,
            snippets=snippets,
            keys_only=keys_only,
            deep=deep,
            explain=explain,
        )

    def asking(self, query: Any) -> SearchRequest:
        """The same request for another query (a batch's next question); the rest was checked once, when made."""
        asked = copy.copy(self)
        object.__setattr__(asked, "query", query)
        return asked


def _check_filters(filters: object) -> None:
    """Each filter a string when given, the as-of date a YYYY-MM-DD date: one QueryError otherwise."""
    if not isinstance(filters, Filters):
        raise QueryError(f"filters must be a rag_eval.search.sql.Filters, not {type(filters).__name__}")
    for value, name in ((filters.category, "category"), (filters.path_prefix, "path_prefix")):
        if value is not None:
            text_argument(value, name, QueryError)
    if filters.as_of is not None:
        try:
            iso_date(filters.as_of, "as-of date")
        except CorpusError as exc:
            raise QueryError(str(exc)) from None
