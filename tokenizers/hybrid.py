"""Hybrid strategies: several tokenizers' terms in separate columns of one FTS5 table.

A hybrid spec joins field specs with ``+``; each field may carry a bm25 weight after ``^``:
``unigram^2+bigram^2+jieba:mode=precise^2``. Documents are tokenized by every field's tokenizer into
that field's columns (title and body); a query is tokenized by every field's tokenizer and matched
against that field's columns only, and bm25 ranks with the fields' weights. Note that FTS5 multiplies a
column's weight into the term frequency before saturation, so a uniform weight ``w`` acts like
``k1 / w`` as much as like a weight: weights are also a saturation knob.

Every field stores its tokens as whitespace-separated terms, so a field's tokens must never contain
whitespace: Python strategies and unicode61 (through its Python mirror, which equals FTS5 term for
term) qualify; trigram (whose tokens may hold a space) does not.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from typing import Any, ClassVar

from ..errors import SpecError
from ..files.textio import shown
from .base import Field, QueryTerms, Token, Tokenizer

#: ``+`` separates fields only before something that reads as a field spec (a lowercase name then ``:``,
#: ``^``, ``+`` or the end), so an option value such as a path ``a+b.txt`` is not split. Neither pattern
#: starts or ends with optional whitespace (the parts are stripped instead): a long run of spaces made
#: their search quadratic, a minute for one 100 kB spec.
_FIELD_START = re.compile(r"\+\s*(?=[a-z][a-z0-9_-]*\s*(?:[:^+]|\Z))")
_WEIGHT = re.compile(r"\^([^:^+]*)\Z")
#: Largest field weight accepted: far beyond any useful one, small enough to keep bm25 finite.
MAX_WEIGHT = 1000.0


def valid_weight(weight: float) -> bool:
    """Whether a field weight is finite and from 1/MAX_WEIGHT to MAX_WEIGHT: at least that, because a tiny weight
    times a tiny title weight underflows to 0 and scores nothing."""
    return math.isfinite(weight) and 1 / MAX_WEIGHT <= weight <= MAX_WEIGHT


def is_hybrid(spec: str) -> bool:
    """Whether a spec names several fields or a weighted field (``a+b``, ``a^2``)."""
    return bool(_FIELD_START.search(spec) or _WEIGHT.search(spec))


def split_fields(spec: str) -> list[tuple[str, float]]:
    """``(field spec, weight)`` pairs of a hybrid spec, in column order; malformed specs are SpecErrors."""
    parts = _FIELD_START.split(spec.strip())
    fields: list[tuple[str, float]] = []
    for part in parts:
        part = part.strip()
        weight = 1.0
        found = _WEIGHT.search(part)
        if found is not None:
            written = found.group(1).strip()
            try:
                # ASCII only, as every other number in a spec: float() also reads ١, ２ and 1_0.
                if not written.isascii() or "_" in written:
                    raise ValueError(written)
                weight = float(written)
            except ValueError:
                raise SpecError(f"invalid weight {written!r} in {spec!r}: expected a number after ^") from None
            if not valid_weight(weight):
                raise SpecError(f"weight {written} in {spec!r} must be from {1 / MAX_WEIGHT:g} to {MAX_WEIGHT:g}")
            if float(f"{weight:g}") != weight:
                # The canonical spec (what an index records and reopens with) writes 6 significant digits: a
                # finer weight would be recorded as another one, and the reopened index would rank with it.
                raise SpecError(
                    f"weight {written} in {spec!r} has more than 6 significant digits",
                    hint=f"write it with at most 6, e.g. ^{weight:g}",
                )
            part = part[: found.start()].strip()
        if not part:
            raise SpecError(f"empty field in hybrid spec {spec!r}: expected FIELD[^WEIGHT]+FIELD[^WEIGHT]...")
        fields.append((part, weight))
    return fields


def reads_as_one_field(system: str) -> bool:
    """Whether a plain tokenizer's canonical spec reads back as itself, not as fields or a weight (a user
    dictionary at ``/d/words^2`` names ``/d/words`` with weight 2)."""
    try:
        return split_fields(system) == [(system, 1.0)]
    except SpecError:
        return False


class HybridTokenizer(Tokenizer):
    """Several fields, each a tokenizer with a bm25 weight; built from a hybrid spec, never registered."""

    name = "hybrid"
    summary = "several tokenizers' terms in separate FTS5 columns, ranked together (a hybrid spec: a+b^2+c)"
    native: ClassVar[bool] = False

    def __init__(self, fields: list[Field]) -> None:
        super().__init__()
        if not fields:
            raise SpecError("a hybrid needs at least one field")
        if len(fields) == 1 and fields[0].weight == 1:
            # Its canonical spec would be the field's own, which reopens as the plain tokenizer.
            raise SpecError(f"a hybrid of one field of weight 1 is {fields[0].tokenizer.system} itself: use that")
        for field in fields:
            if isinstance(field.tokenizer, HybridTokenizer):
                raise SpecError("a hybrid's field cannot itself be a hybrid")
            if not reads_as_one_field(field.tokenizer.system):
                raise SpecError(
                    f"{field.tokenizer.system} cannot be a field of a hybrid: its spec reads as another hybrid "
                    "(an option value holds ^ or +NAME)"
                )
            if not field.tokenizer.whitespace_free_tokens:
                raise SpecError(
                    f"{field.tokenizer.system} cannot be a field of a hybrid: its tokens may contain whitespace, "
                    "which a field's column cannot store"
                )
        systems = [field.tokenizer.system for field in fields]
        repeated = [system for system, count in Counter(systems).items() if count > 1]
        if repeated:  # named alone: the whole hybrid may be thousands of fields long
            raise SpecError(f"a hybrid names the same field twice: {shown(repeated[0])}")
        self._fields = tuple(fields)
        # The phrase filter normalises raw text once for every field: with t2s when any field converts.
        self.options: dict[str, Any] = {"t2s": any(f.tokenizer.converts_traditional for f in fields)}

    @property
    def converts_traditional(self) -> bool:
        """When any field converts (the phrase filter normalises the raw text once for every field)."""
        return bool(self.options["t2s"])

    @classmethod
    def parse(cls, spec: str, make: Callable[[str], Tokenizer]) -> Tokenizer:
        """A hybrid from its spec; ``make`` builds each field's tokenizer from its own spec. One field of
        weight 1 (``bigram^1``) is that field's tokenizer: the same system as ``bigram``, under its name."""
        fields = [Field(make(part), weight) for part, weight in split_fields(spec)]
        if len(fields) == 1 and fields[0].weight == 1:
            return fields[0].tokenizer
        return cls(fields)

    @property
    def fields(self) -> tuple[Field, ...]:
        return self._fields

    @property
    def system(self) -> str:
        """The canonical hybrid spec: each field's canonical spec and its weight when not 1, in column order."""
        return "+".join(f.tokenizer.system + (f"^{f.weight:g}" if f.weight != 1 else "") for f in self._fields)

    @property
    def parallel(self) -> bool:  # type: ignore[override]
        return any(f.tokenizer.parallel for f in self._fields)

    @property
    def libraries(self) -> tuple[str, ...]:  # type: ignore[override]
        return tuple(dict.fromkeys(lib for f in self._fields for lib in f.tokenizer.libraries))

    def availability(self) -> str | None:  # type: ignore[override]
        for field in self._fields:
            reason = field.tokenizer.availability()
            if reason is not None:
                return f"{field.tokenizer.system}: {reason}"
        return None

    def check_available(self) -> None:
        for field in self._fields:
            field.tokenizer.check_available()

    def _load(self) -> None:
        for field in self._fields:
            field.tokenizer.load()

    def fingerprint(self) -> dict[str, str]:
        """Every field's fingerprint, keys prefixed by the field's position (``0:jieba``)."""
        return {
            f"{n}:{key}": value for n, f in enumerate(self._fields) for key, value in f.tokenizer.fingerprint().items()
        }

    def is_version_key(self, key: str) -> bool:
        position, _, inner = key.partition(":")
        if not position.isdigit() or int(position) >= len(self._fields):
            return False
        return self._fields[int(position)].tokenizer.is_version_key(inner)

    def _tokenize(self, text: str) -> list[Token]:
        """Every field's tokens together, ordered by (start, end), each distinct token once (for snippets)."""
        merged = {token for field in self._fields for token in field.tokenizer.tokenize(text)}
        return sorted(merged, key=lambda token: (token.start, token.end, token.text))

    def query_terms(self, text: str) -> QueryTerms:
        """The union of the fields' terms (for highlighting); matching uses :meth:`field_queries`."""
        queries = self.field_queries(text)
        terms = tuple(dict.fromkeys(term for query in queries for term in query.terms))
        highlight = tuple(dict.fromkeys(term for query in queries for term in query.highlight))
        return QueryTerms(terms, highlight, ())

    def field_queries(self, text: str) -> list[QueryTerms]:
        return [field.tokenizer.query_terms(text) for field in self._fields]
