"""Whether a strategy converts traditional characters is declared (``Tokenizer.converts_traditional``), not read
from an option that happens to be called ``t2s``: phrase filters and window snippets follow the declaration."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import regex

from rag_eval.search.query import compile_query
from rag_eval.spec import Option, OptionSet, parse_bool
from rag_eval.tokenizers import TOKENIZERS, Token, Tokenizer, get_tokenizer


class OwnT2s(Tokenizer):
    """A plug-in whose own option named ``t2s`` means something else (here: nothing about characters)."""

    name = "declared-own-t2s"
    option_set = OptionSet((Option("t2s", "split titles to sentences (not a conversion)", False, parse_bool),))

    def _tokenize(self, text: str) -> list[Token]:
        return [Token(m.group(), m.start(), m.end()) for m in regex.finditer(r"\w", text)]


@pytest.fixture
def own_t2s() -> Iterator[str]:
    TOKENIZERS.register(OwnT2s)
    yield OwnT2s.name
    TOKENIZERS.unregister(OwnT2s.name)


def test_an_option_named_t2s_converts_only_where_the_strategy_declares_it(own_t2s: str) -> None:
    plugin = get_tokenizer(f"{own_t2s}:t2s=true")
    assert plugin.converts_traditional is False
    assert compile_query(plugin, "體育館", "phrase").phrase_filter == "體育館"  # read by name, it was 体育馆
    for spec in ("bigram:t2s=true", "jieba:t2s=true+unigram"):
        converting = get_tokenizer(spec)
        assert converting.converts_traditional is True
        assert compile_query(converting, "體育館", "phrase").phrase_filter == "体育馆"
    assert get_tokenizer("bigram").converts_traditional is False
    assert compile_query(get_tokenizer("bigram"), "體育館", "phrase").phrase_filter == "體育館"
