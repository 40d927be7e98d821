"""The tokenizer contract: Token records, the Tokenizer base class and the Python-strategy template."""

from __future__ import annotations

import stat
import unicodedata
from collections.abc import Callable, Iterable
from importlib.metadata import PackageNotFoundError, version
from operator import itemgetter
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import regex

from ..errors import RagEvalError, SpecError, UnavailableError
from ..files.textio import file_kind, read_bytes
from ..registry import PluginError, plugin_failure
from ..spec import Configurable, Option, OptionSet, parse_bool
from .normalise import Normalised, check_text, normalise, normalise_with_offsets

#: Option keys of the shared normalisation; native strategies reject them by name.
NORMALISATION_KEYS = ("t2s",)


class Token(NamedTuple):
    """A token: its indexed text and character offsets ``[start, end)`` into the original text."""

    text: str
    start: int
    end: int


def library_version(distribution: str) -> str:
    """Installed version of a distribution, or ``missing``."""
    try:
        return version(distribution)
    except PackageNotFoundError:
        return "missing"


#: How a Python strategy's column is declared: FTS5's ascii tokenizer with every printable ASCII symbol
#: as a token character separates on whitespace and control characters only and folds only A-Z (already
#: folded), so the terms FTS5 stores are exactly the space-joined Python tokens.
_ASCII_TOKENCHARS = "".join(chr(c) for c in range(0x21, 0x7F) if not chr(c).isalnum()).replace("'", "''")
WHITESPACE_CLAUSE = f"ascii tokenchars '{_ASCII_TOKENCHARS}'"


class QueryTerms(NamedTuple):
    """How a query becomes FTS5 terms: the distinct terms, the strings snippets highlight, and the parts of
    the query that yield no term (reported by ``--explain``; they make an ``and`` query unsatisfiable)."""

    terms: tuple[str, ...]
    highlight: tuple[str, ...]
    dropped: tuple[str, ...] = ()


class Field(NamedTuple):
    """One field of a system: a tokenizer and its bm25 weight (a plain strategy is one field of weight 1)."""

    tokenizer: Tokenizer
    weight: float


class Tokenizer(Configurable):
    """Base class of every strategy. Subclasses set the class attributes and implement ``_tokenize``.

    A tokenizer is built from validated options, loads heavy resources in ``load()`` (called lazily by
    ``tokenize``), and uses one ``tokenize`` for documents and queries alike. What the index and the query
    compiler do with it comes from what it declares here, never from its name.
    """

    summary: ClassVar[str] = ""
    #: True when FTS5 tokenizes natively: the index stores the raw text under ``fts5_clause`` and FTS5's
    #: own tokenizer splits documents and phrases. False: the index stores this strategy's tokens.
    native: ClassVar[bool] = False
    #: True when tokens overlap (trigram): FTS5's own snippet() repeats the overlapping text for such
    #: tokens (SQLite 3.40), so their FTS5-style snippets are made from the Python mirror's tokens instead.
    overlapping_tokens: ClassVar[bool] = False
    #: True when tokenizing is slow enough that index builds pay for a process pool (jieba, pkuseg).
    parallel: ClassVar[bool] = False
    #: False for a strategy a default ``compare`` or ``judge`` leaves out (it is still listed and can be
    #: named with ``-t``): rjieba, which ranks like jieba (reports/builds.md) and would only double its cost.
    in_default_comparison: ClassVar[bool] = True
    #: Distributions whose versions belong in the spec and in ``rag-eval --version``.
    libraries: ClassVar[tuple[str, ...]] = ()
    install_hint: ClassVar[str] = ""
    #: True when no token ever contains whitespace, so the tokens can be stored space-joined in a column
    #: (every Python strategy by construction, unicode61); false for trigram, whose tokens may hold a space.
    whitespace_free_tokens: ClassVar[bool] = True
    #: Fingerprint keys that record only a version: drift since a build warns instead of failing.
    version_keys: ClassVar[frozenset[str]] = frozenset({"unicode", "sqlite", "opencc"})
    #: Options under which the tokens are one non-overlapping cut of the text into words when the defaults'
    #: are not (jieba: search mode adds overlapping sub-words, ``mode=precise`` does not). ``rag-eval segeval``
    #: scores a strategy with these options; whether tokens are a segmentation is measured there, on the text.
    segmentation_options: ClassVar[tuple[tuple[str, str], ...]] = ()

    def __init__(self, **options: Any) -> None:
        try:
            super().__init__(**options)
        except RagEvalError:
            raise
        except Exception as exc:  # a plug-in's option parser that raised something other than ValueError
            raise plugin_failure("tokenizer", self.name, f"parsing its options {options}", exc) from exc
        self._loaded = False

    def _check_options(self, given: dict[str, str]) -> None:
        if not self.native:
            return
        for key in given:
            if key in NORMALISATION_KEYS and key not in {o.name for o in self.option_set.options}:
                raise SpecError(
                    f"{self.name} is FTS5's native tokenizer and indexes the raw text: option {key!r} "
                    "(shared normalisation) applies only to Python strategies such as bigram or jieba"
                )

    @property
    def fts5_clause(self) -> str:
        """The FTS5 ``tokenize=`` argument of the index's columns: a native strategy's own tokenizer, or
        the whitespace-only ascii tokenizer under which a Python strategy's tokens are stored."""
        return WHITESPACE_CLAUSE

    def query_terms(self, text: str) -> QueryTerms:
        """The query's distinct terms, tokenized exactly as documents are (duplicates would change bm25)."""
        terms = tuple(dict.fromkeys(self.terms(text)))
        return QueryTerms(terms, terms)

    @property
    def fields(self) -> tuple[Field, ...]:
        """The index columns this strategy fills: one field of weight 1 (a hybrid has several)."""
        return (Field(self, 1.0),)

    def field_queries(self, text: str) -> list[QueryTerms]:
        """The query's terms for each field, in field order."""
        return [self.query_terms(text)]

    @property
    def converts_traditional(self) -> bool:
        """Whether this strategy converts traditional characters to simplified before tokenizing, so that
        phrase filters and window snippets normalise a hit's raw text the same way (no conversion here)."""
        return False

    def phrase_highlight(self, phrase: str, terms: tuple[str, ...]) -> str:
        """What snippets highlight for a native phrase query: by default the normalised phrase as typed."""
        return normalise(phrase)

    def is_version_key(self, key: str) -> bool:
        """Whether fingerprint ``key`` records only a library version (drift warns rather than fails)."""
        return key in self.version_keys or key in self.libraries

    @classmethod
    def missing_libraries(cls) -> str | None:
        """None when every declared library is installed; otherwise which are not."""
        missing = [lib for lib in cls.libraries if library_version(lib) == "missing"]
        return "not installed: " + ", ".join(missing) if missing else None

    @classmethod
    def availability(cls) -> str | None:
        """None when usable with its default options; otherwise why not (the install hint is in ``install_hint``)."""
        return cls.missing_libraries()

    def check_available(self) -> None:
        """Raise UnavailableError with the install hint when this strategy cannot run with its options."""
        try:
            reason = self.availability()
        except RagEvalError:
            raise
        except Exception as exc:  # a plug-in's own check: one line naming it
            raise plugin_failure("tokenizer", self.name, "to check it can run", exc) from exc
        if reason is not None:
            raise UnavailableError(f"tokenizer {self.name!r} is unavailable: {reason}", hint=self.install_hint or None)

    def load(self) -> None:
        """Load models and dictionaries now rather than on the first ``tokenize`` call."""
        if not self._loaded:
            self.check_available()
            try:
                self._load()
            except RagEvalError:
                raise
            except Exception as exc:  # a plug-in's loader: one line, not a traceback
                raise plugin_failure("tokenizer", self.name, "to load", exc) from exc
            self._loaded = True

    def _load(self) -> None:
        """Subclasses load heavy resources here."""

    def fingerprint(self) -> dict[str, str]:
        """What besides the options decides the tokens: library versions, model checksums."""
        return {lib: library_version(lib) for lib in self.libraries}

    @property
    def spec(self) -> str:
        """Stable identity: canonical system spec plus fingerprint, e.g. ``jieba:mode=search,... [jieba=0.42.1]``."""
        try:
            fingerprint = self.fingerprint()
            details = ", ".join(f"{key}={value}" for key, value in sorted(fingerprint.items()))
        except RagEvalError:
            raise
        except Exception as exc:  # a plug-in's own fingerprint (its model checksums, versions): one line naming it
            raise plugin_failure("tokenizer", self.name, "to give its fingerprint", exc) from exc
        return f"{self.system} [{details}]" if details else self.system

    def tokenize(self, text: str) -> list[Token]:
        """Tokens of ``text`` ordered by (start, end); offsets index the original, un-normalised text."""
        check_text(text)
        self.load()
        return self._checked(text, lambda: self._tokenize(text))

    def _checked(self, text: str, make: Callable[[], Iterable[Token]]) -> list[Token]:
        """The tokens ``make()`` gives for ``text``, checked against the contract; a failure of the strategy's
        own code is one error line naming it and the text, never a traceback (and never an index)."""
        try:
            tokens = make()
            if not isinstance(tokens, list):
                tokens = list(tokens)
        except RagEvalError:
            raise
        except Exception as exc:  # a strategy's own code
            raise self._failure(text, exc) from exc
        problem = self._token_problem(text, tokens)
        if problem is not None:
            raise self._broken(text, problem)
        return tokens

    def _failure(self, text: str, exc: BaseException) -> PluginError:
        return plugin_failure("tokenizer", self.system, f"on {_excerpt(text)}", exc)

    def _broken(self, text: str, problem: str) -> PluginError:
        return PluginError(f"tokenizer {self.system!r} broke the tokenizer contract on {_excerpt(text)}: {problem}")

    def _token_problem(self, text: str, tokens: list[Any]) -> str | None:
        """What is wrong with ``tokens`` as :meth:`tokenize` must return them, or None: ``Token``s of non-empty
        strings with offsets inside ``text``, holding no whitespace or control character when they are stored
        space-joined (every Python strategy, and any strategy that declares ``whitespace_free_tokens``)."""
        length = len(text)
        for number, token in enumerate(tokens):
            if not isinstance(token, Token):
                return f"token {number} is {token!r}, not a rag_eval.tokenizers.Token"
            piece, start, end = token
            if not isinstance(piece, str) or not piece:
                return f"token {number} has the text {piece!r}, not a non-empty str"
            if not (isinstance(start, int) and isinstance(end, int) and 0 <= start <= end <= length):
                return f"token {number} ({piece!r}) has offsets ({start!r}, {end!r}) outside [0, {length}]"
        if self.whitespace_free_tokens or not self.native:
            return _separator_problem([token.text for token in tokens])
        return None

    def _tokenize(self, text: str) -> list[Token]:
        raise NotImplementedError

    def terms(self, text: str) -> list[str]:
        """Just the token texts, in order."""
        return [token.text for token in self.tokenize(text)]

    def terms_and_spans(self, text: str) -> tuple[list[str], list[tuple[int, int]]]:
        """The token texts and their ``(start, end)`` offsets into ``text``, in order (what a build that keeps
        offsets stores): :meth:`tokenize`'s tokens, taken apart."""
        return _taken_apart(self.tokenize(text))

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.system}>"


#: Unicode version Python's normalisation uses; part of every Python strategy's fingerprint.
UNICODE_VERSION = unicodedata.unidata_version
#: How the per-character t2s table is made; part of the fingerprint when t2s is on, so an index converted by
#: an earlier table asks to be rebuilt ("settled": each conversion followed until it changes nothing).
T2S_TABLE = "settled"

_WORDLIKE = regex.compile(r"[\p{L}\p{N}]")
#: Runs between separators: whitespace, and the control characters FTS5's whitespace clause also separates on
#: (``\x00`` even ends the column's text): a token holding one would be stored as other terms than it is.
_NON_SPACE = regex.compile(r"[^\s\x00-\x1f\x7f]+")
_SEPARATOR = regex.compile(r"[\s\x00-\x1f\x7f]")


def _separator_problem(terms: list[Any]) -> str | None:
    """Why ``terms`` cannot be stored space-joined, or None: a term that is not a str, is empty, or holds
    whitespace or a control character (FTS5 would store other terms than the strategy gave)."""
    try:
        joined = "".join(terms)
    except TypeError:
        bad = next(term for term in terms if not isinstance(term, str))
        return f"a token is {bad!r}, not a str"
    if "" in terms:
        return "a token is the empty string"
    found = _SEPARATOR.search(joined)
    if found is not None:
        bad = next(term for term in terms if _SEPARATOR.search(term))
        return f"the token {bad!r} holds {found.group()!r}; a stored token holds no whitespace or control character"
    return None


def _excerpt(text: str) -> str:
    """A text named in an error: its start, quoted, and its length."""
    shown = text[:40] + ("…" if len(text) > 40 else "")
    return f"the text {shown!r} ({len(text)} characters)"


class PythonTokenizer(Tokenizer):
    """Template for strategies written in Python: normalise, segment, map offsets back, filter.

    Subclasses implement ``_spans(normalised_text)`` returning ``(start, end)`` pairs in the normalised
    text. Tokens with no letter or digit (punctuation, symbols, whitespace) are dropped, and a token never
    contains whitespace, so FTS5 stores exactly these terms when only whitespace separates them.
    """

    option_set = OptionSet(
        (Option("t2s", "convert traditional to simplified characters (OpenCC t2s, per character)", False, parse_bool),)
    )
    libraries: ClassVar[tuple[str, ...]] = ()

    @property
    def converts_traditional(self) -> bool:
        """The ``t2s`` option every Python strategy has."""
        return bool(self.options.get("t2s"))

    def fingerprint(self) -> dict[str, str]:
        details = super().fingerprint()
        details["unicode"] = UNICODE_VERSION
        if self.options.get("t2s"):
            details["opencc"] = library_version("opencc")
            details["t2s"] = T2S_TABLE
        return details

    #: True when ``_spans`` only returns whitespace-free spans with a letter or digit (skips the filter).
    clean_spans: ClassVar[bool] = False
    #: True when ``_spans`` returns spans already ordered by (start, end) (skips the sort).
    ordered_spans: ClassVar[bool] = False

    def _spans(self, text: str) -> Iterable[tuple[int, int]]:
        raise NotImplementedError

    def _word_spans(self, text: str, spans: Iterable[tuple[int, int]]) -> Iterable[tuple[int, int]]:
        """Split spans at whitespace and drop the parts with no letter or digit."""
        for start, end in spans:
            piece = text[start:end]
            if piece.isalnum():
                yield start, end
                continue
            for part in _NON_SPACE.finditer(piece):
                if _WORDLIKE.search(part.group()):
                    yield start + part.start(), start + part.end()

    def terms(self, text: str) -> list[str]:
        """Just the token texts, in order (see :meth:`terms_and_spans`)."""
        return self.terms_and_spans(text)[0]

    def terms_and_spans(self, text: str) -> tuple[list[str], list[tuple[int, int]]]:
        """The token texts and their offsets, in order: when normalising kept every offset, straight from the
        spans, with no :class:`Token` made (a build needs only these, and making the Tokens took as long as
        bigram's segmentation: reports/builds.md §9)."""
        if type(self)._tokenize is not PythonTokenizer._tokenize:  # a subclass with its own tokens
            return super().terms_and_spans(text)
        check_text(text)
        self.load()
        normalised = normalise_with_offsets(text, t2s=self.converts_traditional)
        if not normalised.identity:
            return _taken_apart(self._checked(text, lambda: self._tokens(normalised)))
        norm = normalised.text
        try:
            spans = self._clean(norm)
            # (start, end) is the order of tokens
            ordered = spans if self.ordered_spans and isinstance(spans, list) else sorted(spans)
            terms = [norm[start:end] for start, end in ordered]
        except RagEvalError:
            raise
        except Exception as exc:  # the strategy's _spans: one line naming it and the text
            raise self._failure(text, exc) from exc
        # Checked in C over the whole list (a unigram build makes millions of spans): inside the text, none
        # empty (which also catches start >= end), none holding a separator (only when _spans is trusted).
        if ordered and (ordered[0][0] < 0 or max(map(itemgetter(1), ordered)) > len(norm)):
            raise self._broken(text, f"_spans gave a span outside [0, {len(norm)}]")
        problem = _separator_problem(terms) if self.clean_spans else ("" in terms and "_spans gave an empty span")
        if problem:
            raise self._broken(text, problem)
        return terms, ordered

    def _clean(self, norm: str) -> Iterable[tuple[int, int]]:
        spans = self._spans(norm)
        return spans if self.clean_spans else self._word_spans(norm, spans)

    def _tokenize(self, text: str) -> list[Token]:
        # ``tokenize`` turns a failure of ``_spans`` into one line and checks these tokens.
        return self._tokens(normalise_with_offsets(text, t2s=self.converts_traditional))

    def _tokens(self, normalised: Normalised) -> list[Token]:
        norm = normalised.text
        spans = self._clean(norm)
        if normalised.identity:
            tokens = [Token(norm[start:end], start, end) for start, end in spans]
        else:
            seen: set[tuple[int, int]] = set()
            tokens = []
            for start, end in spans:
                n_start, n_end, o_start, o_end = normalised.span(start, end)
                if (o_start, o_end) in seen:  # two spans inside one expanding character widen alike
                    continue
                seen.add((o_start, o_end))
                piece = norm[n_start:n_end]
                if n_end - n_start != end - start and _SEPARATOR.search(piece):
                    # Widened over a character whose normal form has a space (¨, ﷺ), or over a control
                    # character normalised into one unit with a combining mark after it: unindexable.
                    continue
                tokens.append(Token(piece, o_start, o_end))
        if not self.ordered_spans or not normalised.identity:
            tokens.sort(key=_token_order)
        return tokens


def _taken_apart(tokens: list[Token]) -> tuple[list[str], list[tuple[int, int]]]:
    """Tokens' texts and their ``(start, end)`` offsets (:meth:`Tokenizer.terms_and_spans`)."""
    return [token.text for token in tokens], [(token.start, token.end) for token in tokens]


def _token_order(token: Token) -> tuple[int, int]:
    return token.start, token.end


def with_options(base: OptionSet, *extra: Option) -> OptionSet:
    """An option set extended with strategy-specific options."""
    return OptionSet(base.options + extra)


#: Largest user dictionary a strategy reads (jieba's own dictionary is about 5 MB).
MAX_USERDICT_BYTES = 64_000_000


def user_dictionary(value: str) -> str:
    """A user dictionary option's value: '' (none), or an existing UTF-8 text file, as an absolute path; the
    segmenters fail with a traceback of their own on anything else (jieba: 'must be utf-8')."""
    if not value:
        return ""
    path = Path(value).expanduser()
    if not path.exists():
        raise ValueError(f"no such file: {value}")
    kind = stat.S_IFMT(path.stat().st_mode)
    if kind != stat.S_IFREG:  # /dev/zero, a FIFO, a folder: there, but no dictionary (and a FIFO would block)
        raise ValueError(f"{value}: {file_kind(kind)}, not a regular file")
    # Opened without blocking and checked again on the descriptor: the path may have changed since.
    data = read_bytes(path, SpecError, max_bytes=MAX_USERDICT_BYTES, label=value)
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{value}: not valid UTF-8 at byte {exc.start}") from None
    return str(path.resolve())
