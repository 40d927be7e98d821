"""Query compiler: user text to an FTS5 MATCH expression in which every term is a quoted string."""

from __future__ import annotations

from dataclasses import dataclass

from .errors import QueryError
from .tokenizers import Tokenizer, normalise
from .tokenizers.normalise import check_text

MODES = ("and", "or", "phrase")


def quote(term: str) -> str:
    """An FTS5 string literal: inner double quotes doubled, so the term is data, never syntax."""
    return '"' + term.replace('"', '""') + '"'


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
    tokenizer: Tokenizer, text: str, mode: str, *, max_chars: int | None = None, max_terms: int | None = None
) -> CompiledQuery:
    """Compile ``text`` for an index built with ``tokenizer``.

    Every strategy: the query goes through the same tokenization as documents and each distinct token is
    a quoted term (duplicates would change bm25). For trigram, tokens come from each whitespace-separated
    word, and words under 3 characters (no trigram) are dropped and reported.
    ``phrase`` for Python strategies means: all tokens must match, then the hit's normalised raw text
    must contain the normalised query (search mode's overlapping tokens make FTS5 phrases unreliable).
    """
    if mode not in MODES:
        raise QueryError(f"unknown mode {mode!r}; choose from: {', '.join(MODES)}")
    check_query(text, max_chars=max_chars, max_terms=max_terms)
    t2s = bool(tokenizer.options.get("t2s"))
    normalised = " ".join(normalise(text, t2s=t2s).split())
    if not any(c.isalnum() for c in text):
        return CompiledQuery(text, mode, normalised, (), None, ())
    dropped: list[str] = []
    if tokenizer.native and mode == "phrase":
        # The whole query is one FTS5 phrase (for trigram: a substring of at least 3 characters,
        # whitespace included, so the text is kept as given).
        phrase = text
        tokens = tuple(tokenizer.terms(phrase))
        highlight = (" ".join(tokens) if tokenizer.name == "unicode61" else normalise(phrase),) if tokens else ()
        return CompiledQuery(text, mode, normalised, (phrase,) if tokens else (), quote(phrase) if tokens else None,
                             highlight, None, () if tokens else (phrase,))
    if tokenizer.native:
        # unicode61: the query's own tokens, as for documents. trigram: the trigrams of each
        # whitespace-separated word (none across the space between words); a word under 3 characters
        # has none, is dropped and makes an AND query unsatisfiable.
        if tokenizer.name == "trigram":
            per_word = [(word, tokenizer.terms(word)) for word in text.split()]
            dropped = [word for word, grams in per_word if not grams]
            tokens = tuple(dict.fromkeys(gram for _, grams in per_word for gram in grams))
            highlight = tuple(normalise(word) for word, grams in per_word if grams)
        else:
            tokens = tuple(dict.fromkeys(tokenizer.terms(text)))
            highlight = tokens
        expression = _join(tokens, mode) if tokens and (mode == "or" or not dropped) else None
        return CompiledQuery(text, mode, normalised, tokens, expression, highlight, None, tuple(dropped))
    tokens = tuple(dict.fromkeys(tokenizer.terms(text)))
    expression = _join(tokens, "and" if mode == "phrase" else mode) if tokens else None
    phrase_filter = normalised if mode == "phrase" else None
    return CompiledQuery(text, mode, normalised, tokens, expression, tokens, phrase_filter)


def _join(terms: tuple[str, ...], mode: str) -> str:
    return f" {mode.upper()} ".join(quote(term) for term in terms)
