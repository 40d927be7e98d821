"""Query compiler: user text to an FTS5 MATCH expression in which every term is a quoted string."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple

from ..errors import QueryError
from ..files.textio import shown
from ..index.columns import field_columns
from ..index.processing import DocumentFrequency, QueryProcessing
from ..tokenizers import Tokenizer, normalise
from ..tokenizers.base import QueryTerms as FieldQuery
from ..tokenizers.normalise import check_text

MODES = ("and", "or", "phrase")


def quote(term: str) -> str:
    """An FTS5 string literal: inner double quotes doubled, so the term is data, never syntax."""
    return '"' + term.replace('"', '""') + '"'


class Weighted(NamedTuple):
    """A query expanded by pseudo-relevance feedback (:mod:`rag_eval.search.feedback`): a weighted bag of terms."""

    #: The feedback method (``rm3``, ``bo1``).
    method: str
    #: The feedback chunks' ids, best first.
    documents: tuple[int, ...]
    #: Each field's term weights, aligned with its terms (one group for a one-field query, aligned with ``terms``).
    weights: tuple[tuple[float, ...], ...]


@dataclass(frozen=True)
class CompiledQuery:
    """A query as rag-eval runs it, for ``search --explain`` and for reproducibility."""

    text: str
    mode: str
    normalised: str
    terms: tuple[str, ...]
    expression: str | None
    highlight: tuple[str, ...]
    phrase_filter: str | None = None
    dropped: tuple[str, ...] = ()
    #: A hybrid's terms per field, in field order (empty for a one-field strategy, whose terms are ``terms``).
    fields: tuple[tuple[str, ...], ...] = ()
    #: The numbers of a hybrid's fields in ``expression``, in order: a field without terms is left out, and so
    #: in ``and`` mode is a field that dropped a word (it cannot match).
    matching: tuple[int, ...] = ()
    #: Query processing: the words removed before tokenizing, the terms pruned, every term's document frequency.
    removed: tuple[str, ...] = ()
    pruned: tuple[str, ...] = ()
    frequencies: tuple[tuple[str, int], ...] = ()
    #: The expanded query's weights (None for an unweighted query: every term counts once).
    weighted: Weighted | None = None


def check_query(text: object, *, max_chars: int | None, max_terms: int | None) -> str:
    """The seed contract: a string, at most ``max_chars`` characters, no NUL, at most ``max_terms`` words."""
    if not isinstance(text, str):
        raise QueryError(f"query must be a string, not {type(text).__name__}")
    if max_chars is not None and len(text) > max_chars:
        raise QueryError(f"query is {len(text)} characters; the limit is {max_chars}")
    if "\x00" in text:
        raise QueryError("query contains a NUL character")
    check_text(text)
    if max_terms is not None and len(text.split()) > max_terms:
        raise QueryError(f"query has {len(text.split())} whitespace-separated terms; the limit is {max_terms}")
    return text


def compile_query(
    tokenizer: Tokenizer,
    text: str,
    mode: str,
    *,
    max_chars: int | None = None,
    max_terms: int | None = None,
    processing: QueryProcessing | None = None,
    document_frequency: DocumentFrequency | None = None,
    chunks: int = 0,
) -> CompiledQuery:
    """Compile ``text`` for an index built with ``tokenizer``.

    Every strategy: the query becomes terms through the tokenizer's ``query_terms`` (the same tokenization
    as documents; trigram per whitespace-separated word, reporting words too short for a trigram), each a
    quoted term. ``phrase`` for a native strategy is one FTS5 phrase; for the others all tokens must
    match, then the hit's normalised raw text must contain the normalised query (overlapping tokens, as
    search mode makes, make FTS5 phrases unreliable).

    ``processing`` (see :mod:`rag_eval.index.processing`) removes words before tokenizing and prunes terms by
    ``document_frequency`` over ``chunks`` chunks; a phrase query is exact and never processed.
    """
    if mode not in MODES:
        raise QueryError(f"unknown mode {shown(mode)}; choose from: {', '.join(MODES)}")
    check_query(text, max_chars=max_chars, max_terms=max_terms)
    normalised = " ".join(normalise(text, t2s=tokenizer.converts_traditional).split())
    if not any(c.isalnum() for c in text):
        return CompiledQuery(text, mode, normalised, (), None, ())
    if tokenizer.native and mode == "phrase":
        return _native_phrase(tokenizer, text, normalised)
    process = processing is not None and processing.active and mode != "phrase"
    source, removed = processing.strip(text) if process and processing is not None else (text, ())
    queries = tokenizer.field_queries(source)
    pruned: tuple[str, ...] = ()
    frequencies: dict[str, int] = {}
    if process and processing is not None and processing.needs_frequencies and document_frequency is not None:
        queries, pruned, frequencies = _pruned(queries, processing, document_frequency, chunks)
    shared = _Shared(text, normalised, normalised if mode == "phrase" else None, removed, pruned, frequencies)
    return _one_field(queries[0], mode, shared) if len(queries) == 1 else _fields(queries, mode, shared)


def _native_phrase(tokenizer: Tokenizer, text: str, normalised: str) -> CompiledQuery:
    """A native strategy's phrase: FTS5 tokenizes the phrase itself, so the whole query is one quoted phrase (for
    trigram a substring of at least 3 characters, whitespace included, so the text is kept as given)."""
    tokens = tuple(tokenizer.terms(text))
    if not tokens:
        return CompiledQuery(text, "phrase", normalised, (), None, (), None, (text,))
    return CompiledQuery(text, "phrase", normalised, (text,), quote(text), (tokenizer.phrase_highlight(text, tokens),))


def _pruned(
    queries: list[FieldQuery], processing: QueryProcessing, document_frequency: DocumentFrequency, chunks: int
) -> tuple[list[FieldQuery], tuple[str, ...], dict[str, int]]:
    """Each field's query after processing's ``max_df`` and ``top_terms``, the terms pruned, every term's frequency."""
    kept, frequencies = processing.prune([query.terms for query in queries], document_frequency, chunks)
    pruned = tuple(
        term for query, after in zip(queries, kept, strict=True) for term in query.terms if term not in after
    )
    # A pruned term matched nothing, so snippets do not mark it (or choose their window by it) either.
    queries = [
        query._replace(terms=after, highlight=_unpruned(query.highlight, query.terms, after))
        for query, after in zip(queries, kept, strict=True)
    ]
    return queries, pruned, frequencies


class _Shared(NamedTuple):
    """What a compiled query holds whatever its fields: the text, normalised, its phrase filter, the processing."""

    text: str
    normalised: str
    phrase_filter: str | None
    removed: tuple[str, ...]
    pruned: tuple[str, ...]
    frequencies: dict[str, int]


def _one_field(query: FieldQuery, mode: str, shared: _Shared) -> CompiledQuery:
    """A one-field strategy's terms joined in ``mode`` (a phrase's terms must all match: the filter does the rest)."""
    # A query part with no term (a trigram word under 3 characters) cannot match, so `and` cannot either.
    satisfiable = bool(query.terms) and (mode == "or" or not query.dropped)
    expression = _join(query.terms, _join_mode(mode)) if satisfiable else None
    return CompiledQuery(
        shared.text,
        mode,
        shared.normalised,
        query.terms,
        expression,
        query.highlight,
        shared.phrase_filter,
        query.dropped,
        removed=shared.removed,
        pruned=shared.pruned,
        frequencies=tuple(shared.frequencies.items()),
    )


def _fields(queries: list[FieldQuery], mode: str, shared: _Shared) -> CompiledQuery:
    """Several fields: each field's terms match only that field's columns; a chunk matches when any field
    matches (in `and` mode, all of that field's terms)."""
    parts = []
    matching = []
    for number, query in enumerate(queries):
        if query.terms and (mode == "or" or not query.dropped):
            columns = " ".join(field_columns(number))
            parts.append(f"{{{columns}}} : ({_join(query.terms, _join_mode(mode))})")
            matching.append(number)
    return CompiledQuery(
        shared.text,
        mode,
        shared.normalised,
        tuple(dict.fromkeys(term for query in queries for term in query.terms)),
        " OR ".join(parts) or None,
        tuple(dict.fromkeys(term for query in queries for term in query.highlight)),
        shared.phrase_filter,
        tuple(dict.fromkeys(word for query in queries for word in query.dropped)),
        tuple(query.terms for query in queries),
        tuple(matching),
        removed=shared.removed,
        pruned=shared.pruned,
        frequencies=tuple(shared.frequencies.items()),
    )


def weighted_query(compiled: CompiledQuery, fields: list[dict[str, float]], weighted: Weighted) -> CompiledQuery:
    """``compiled`` (an ``or`` query) with each field's terms replaced by the weighted ``fields`` (term -> weight, in
    the order they are summed); ``weighted`` says how they were chosen (its ``weights`` are filled in here)."""
    groups = tuple(tuple(terms) for terms in fields)
    weights = tuple(tuple(terms.values()) for terms in fields)
    chosen = weighted._replace(weights=weights)
    if not compiled.fields:
        expression = _join(groups[0], "or") if groups[0] else None
        return replace(compiled, terms=groups[0], expression=expression, weighted=chosen)
    parts = [
        (number, f"{{{' '.join(field_columns(number))}}} : ({_join(terms, 'or')})")
        for number, terms in enumerate(groups)
        if terms
    ]
    return replace(
        compiled,
        terms=tuple(dict.fromkeys(term for terms in groups for term in terms)),
        expression=" OR ".join(part for _, part in parts) or None,
        fields=groups,
        matching=tuple(number for number, _ in parts),
        weighted=chosen,
    )


def _join_mode(mode: str) -> str:
    """How a mode joins its terms: a phrase's terms must all match (the phrase filter then checks the text)."""
    return "and" if mode == "phrase" else mode


def _join(terms: tuple[str, ...], mode: str) -> str:
    return f" {mode.upper()} ".join(quote(term) for term in terms)


def _unpruned(highlight: tuple[str, ...], terms: tuple[str, ...], kept: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """``highlight`` without the terms that pruning removed (entries that are not terms, such as phrases, stay)."""
    gone = set(terms) - set(kept)
    return tuple(word for word in highlight if word not in gone)
