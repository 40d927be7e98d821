"""Seed 000's evidence result, built in one place for the CLI, ``compat``, the Python API and the MCP server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..index.processing import QueryProcessing
from ..index.store import Index
from .request import SearchRequest
from .searching import search

#: The ``kind`` of every evidence result (seed 000).
KIND = "document_evidence"


def describe(index: Index) -> dict[str, Any]:
    """Which index answered: its name (the file stem), tokenizer spec and builder spec."""
    return {
        "name": Path(index.path).stem,
        "tokenizer": index.tokenizer.spec,
        "builder": index.meta["builder"],
    }


def evidence(
    index: Index,
    query: str | SearchRequest,
    *,
    as_of: str | None = None,
    limit: int | None = None,
    mode: str | None = None,
    category: str | None = None,
    path_prefix: str | None = None,
    explain: bool = False,
    processing: QueryProcessing | str | None = None,
    engine: str | None = None,
) -> dict[str, Any]:
    """Seed 000's agent tool result: evidence with full provenance, never an answer or authority.

    ``query`` is a :class:`~rag_eval.search.request.SearchRequest` (with snippets), or the query's text with the
    request's parts as keywords. ``as_of`` is a host policy value (configuration or an option), never a date taken
    from the query or the model. The other arguments are :func:`rag_eval.search.searching.search`'s (mode,
    category, path_prefix, explain, processing, engine). Hits carry :meth:`rag_eval.records.Hit.as_dict`'s fields;
    line hits also carry seed 000's own names (``source_id``, ``doc_id``, ``lexical_score``).
    """
    if isinstance(query, SearchRequest):
        result = search(index, query)
        request = query
    else:
        request = SearchRequest.of(
            query,
            as_of=as_of,
            limit=limit,
            mode=mode,
            category=category,
            path_prefix=path_prefix,
            explain=explain,
            processing=processing,
            engine=engine,
        )
        result = search(index, request)
    payload: dict[str, Any] = {
        "kind": KIND,
        "query": request.query,
        "as_of": request.filters.as_of,
        "index": describe(index),
        "hits": [hit.as_dict() for hit in result.hits],
        "action_authority": False,
    }
    if result.explain:
        payload["explain"] = result.explain
    return payload


def search_tool(
    index: Index,
    query: str,
    *,
    as_of: str | None,
    limit: int | None = None,
    mode: str | None = None,
    category: str | None = None,
    path_prefix: str | None = None,
    explain: bool = False,
    processing: QueryProcessing | str | None = None,
    engine: str | None = None,
) -> dict[str, Any]:
    """Seed 000's agent tool result; the same as :func:`evidence` (kept for old callers)."""
    return evidence(
        index,
        query,
        as_of=as_of,
        limit=limit,
        mode=mode,
        category=category,
        path_prefix=path_prefix,
        explain=explain,
        processing=processing,
        engine=engine,
    )
