"""The tokenizer contract: Token records, the Tokenizer base class and the Python-strategy template."""

from __future__ import annotations

import unicodedata
from importlib.metadata import PackageNotFoundError, version
from typing import Any, ClassVar, Iterable, NamedTuple

import regex

from ..errors import SpecError, UnavailableError
from ..spec import Option, OptionSet, SystemSpec, format_value, parse_bool
from .normalise import check_text, normalise_with_offsets

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


class Tokenizer:
    """Base class of every strategy. Subclasses set the class attributes and implement ``_tokenize``.

    A tokenizer is built from validated options, loads heavy resources in ``load()`` (called lazily by
    ``tokenize``), and uses one ``tokenize`` for documents and queries alike.
    """

    name: ClassVar[str]
    summary: ClassVar[str] = ""
    #: True when FTS5 tokenizes natively (the index declares ``fts5_clause`` and stores raw text).
    native: ClassVar[bool] = False
    #: True when tokens overlap (trigram): FTS5's own snippet() repeats the overlapping text for such
    #: tokens (SQLite 3.40), so their FTS5-style snippets are made from the Python mirror's tokens instead.
    overlapping_tokens: ClassVar[bool] = False
    option_set: ClassVar[OptionSet] = OptionSet()
    #: Distributions whose versions belong in the spec and in ``rag-eval --version``.
    libraries: ClassVar[tuple[str, ...]] = ()
    install_hint: ClassVar[str] = ""

    def __init__(self, **options: Any) -> None:
        given = {key: value if isinstance(value, str) else format_value(value) for key, value in options.items()}
        self._reject_normalisation_options(given)
        self.options: dict[str, Any] = self.option_set.resolve(self.name, given)
        self._loaded = False

    @classmethod
    def _reject_normalisation_options(cls, given: dict[str, str]) -> None:
        if not cls.native:
            return
        for key in given:
            if key in NORMALISATION_KEYS and key not in {o.name for o in cls.option_set.options}:
                raise SpecError(
                    f"{cls.name} is FTS5's native tokenizer and indexes the raw text: option {key!r} "
                    "(shared normalisation) applies only to Python strategies such as bigram or jieba"
                )

    @classmethod
    def from_spec(cls, spec: SystemSpec) -> "Tokenizer":
        """Instantiate from a parsed spec with this class's name."""
        return cls(**dict(spec.options))

    @classmethod
    def is_available(cls) -> bool:
        """True when this strategy can run with its default options."""
        return cls.availability() is None

    @classmethod
    def availability(cls) -> str | None:
        """None when usable; otherwise why not (the install hint is in ``install_hint``)."""
        missing = [lib for lib in cls.libraries if library_version(lib) == "missing"]
        if missing:
            return "not installed: " + ", ".join(missing)
        return None

    def check_available(self) -> None:
        """Raise UnavailableError with the install hint when this strategy cannot run."""
        reason = self.availability()
        if reason is not None:
            raise UnavailableError(f"tokenizer {self.name!r} is unavailable: {reason}", hint=self.install_hint or None)

    def load(self) -> None:
        """Load models and dictionaries now rather than on the first ``tokenize`` call."""
        if not self._loaded:
            self.check_available()
            self._load()
            self._loaded = True

    def _load(self) -> None:
        """Subclasses load heavy resources here."""

    @property
    def system(self) -> str:
        """The canonical ``NAME:key=value,...``: every option with a value, defaults included, sorted."""
        parts = [f"{key}={format_value(value)}" for key, value in sorted(self.options.items()) if format_value(value)]
        return self.name + (":" + ",".join(parts) if parts else "")

    def fingerprint(self) -> dict[str, str]:
        """What besides the options decides the tokens: library versions, model checksums."""
        return {lib: library_version(lib) for lib in self.libraries}

    @property
    def spec(self) -> str:
        """Stable identity: canonical system spec plus the fingerprint, e.g. ``jieba:mode=search,... [jieba=0.42.1]``."""
        details = ", ".join(f"{key}={value}" for key, value in sorted(self.fingerprint().items()))
        return f"{self.system} [{details}]" if details else self.system

    def tokenize(self, text: str) -> list[Token]:
        """Tokens of ``text`` ordered by (start, end); offsets index the original, un-normalised text."""
        check_text(text)
        self.load()
        return self._tokenize(text)

    def _tokenize(self, text: str) -> list[Token]:
        raise NotImplementedError

    def terms(self, text: str) -> list[str]:
        """Just the token texts, in order."""
        return [token.text for token in self.tokenize(text)]

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.system}>"


#: Unicode version Python's normalisation uses; part of every Python strategy's fingerprint.
UNICODE_VERSION = unicodedata.unidata_version

_WORDLIKE = regex.compile(r"[\p{L}\p{N}]")
_NON_SPACE = regex.compile(r"\S+")
_HAS_SPACE = regex.compile(r"\s")


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

    def fingerprint(self) -> dict[str, str]:
        details = super().fingerprint()
        details["unicode"] = UNICODE_VERSION
        if self.options.get("t2s"):
            details["opencc"] = library_version("opencc")
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

    def _tokenize(self, text: str) -> list[Token]:
        normalised = normalise_with_offsets(text, t2s=bool(self.options.get("t2s")))
        norm = normalised.text
        spans = self._spans(norm)
        if not self.clean_spans:
            spans = self._word_spans(norm, spans)
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
                if n_end - n_start != end - start and _HAS_SPACE.search(piece):
                    continue  # widened over a character whose normal form has a space (¨, ﷺ): unindexable
                tokens.append(Token(piece, o_start, o_end))
        if not self.ordered_spans or not normalised.identity:
            tokens.sort(key=_token_order)
        return tokens


def _token_order(token: Token) -> tuple[int, int]:
    return token.start, token.end


def with_options(base: OptionSet, *extra: Option) -> OptionSet:
    """An option set extended with strategy-specific options."""
    return OptionSet(base.options + extra)
