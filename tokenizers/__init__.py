"""Tokenizer registry and contract: ``get_tokenizer("jieba:mode=precise").tokenize(text)``."""

from __future__ import annotations

from typing import NamedTuple

from ..errors import RagEvalError, RegistryError, SpecError
from ..records import Progress
from ..registry import Registry, plugin_failure
from ..spec import SystemSpec
from .base import Field, PythonTokenizer, Token, Tokenizer
from .hybrid import HybridTokenizer, is_hybrid, reads_as_one_field, split_fields
from .normalise import normalise, normalise_with_offsets

#: Every tokenizer, built-in or plug-in, keyed by name (entry-point group ``rag_eval.tokenizers``).
TOKENIZERS: Registry[Tokenizer] = Registry("rag_eval.tokenizers", "tokenizer", Tokenizer)


def tokenizer_class(name: str) -> type[Tokenizer]:
    """The registered class for ``name``; unknown names list the registered ones."""
    cls = TOKENIZERS[name]
    if not (isinstance(cls, type) and issubclass(cls, Tokenizer)):
        raise RegistryError(f"tokenizer {name!r} is {cls!r}, not a rag_eval Tokenizer subclass")
    return cls


def get_tokenizer(spec: str | SystemSpec) -> Tokenizer:
    """A tokenizer from a system spec such as ``bigram`` or ``jieba:mode=precise,t2s=true``, or a hybrid of
    several fields such as ``unigram^2+bigram+jieba:mode=precise`` (see :mod:`rag_eval.tokenizers.hybrid`)."""
    if isinstance(spec, str) and is_hybrid(spec):
        return HybridTokenizer.parse(spec, get_tokenizer)
    parsed = spec if isinstance(spec, SystemSpec) else SystemSpec.parse(spec)
    cls = tokenizer_class(parsed.name)
    try:
        tokenizer = cls.from_spec(parsed)
    except RagEvalError:
        raise
    except Exception as exc:  # a plug-in's own constructor: one line naming it, never a traceback
        raise plugin_failure("tokenizer", parsed.name, "to start", exc) from exc
    if not reads_as_one_field(tokenizer.system):
        # A user dictionary reached through a link to /d/words^2: the name would read back as /d/words weighted 2.
        raise SpecError(f"{tokenizer.system} cannot be a system's name: it reads as a hybrid (an option value holds ^)")
    return tokenizer


def written_spec(spec: str) -> str:
    """A tokenizer or hybrid spec as written, tidied (whitespace removed, options sorted, defaults not added):
    the name systems carry in reports and baselines."""
    if is_hybrid(spec):
        return "+".join(
            str(SystemSpec.parse(part)) + (f"^{weight:g}" if weight != 1 else "") for part, weight in split_fields(spec)
        )
    return str(SystemSpec.parse(spec))


class TokenizeResult(NamedTuple):
    """The tokens one strategy gives a text, or why the strategy could not run."""

    system: str
    spec: str
    tokens: list[Token]
    error: str | None = None


def tokenize_many(specs: list[str], text: str, *, progress: Progress | None = None) -> list[TokenizeResult]:
    """Tokenize ``text`` with each spec; no specs means every registered strategy.

    Named specs must work (their errors propagate). When comparing every strategy, one that is
    unavailable (a missing model) is reported in its row instead of stopping the others.
    ``progress(phase, done, total)`` hears of each strategy as it loads and runs (pkuseg's model takes seconds).
    """
    from .normalise import check_text

    check_text(text)
    names = list(specs) or list(TOKENIZERS)
    results = []
    for number, name in enumerate(names):
        if progress is not None:
            progress(f"tokenizing with {name}", number, len(names))
        try:
            # A registered name is a strategy's own name, never a spec: an entry point named "bigram+jieba"
            # must not run as a hybrid of two others under that name.
            if not specs and (is_hybrid(name) or SystemSpec.parse(name) != SystemSpec(name)):
                raise RegistryError(f"tokenizer {name!r} is registered under a name a spec cannot hold")
            tokenizer = get_tokenizer(name)
            results.append(TokenizeResult(tokenizer.system, tokenizer.spec, tokenizer.tokenize(text)))
        except RagEvalError as exc:
            if specs:
                raise
            reason = f"{exc} ({exc.hint})" if exc.hint else str(exc)
            results.append(TokenizeResult(name, name, [], reason))
    if progress is not None:
        progress(f"tokenizing with {names[-1]}" if names else "tokenizing", len(names), len(names))
    return results


__all__ = [
    "Field",
    "HybridTokenizer",
    "TokenizeResult",
    "written_spec",
    "tokenize_many",
    "TOKENIZERS",
    "PythonTokenizer",
    "Token",
    "Tokenizer",
    "get_tokenizer",
    "normalise",
    "normalise_with_offsets",
    "tokenizer_class",
]
