"""System specs NAME[:key=value,...] and option validation."""

from __future__ import annotations

import pytest

from rag_eval.errors import RegistryError, SpecError
from rag_eval.spec import SystemSpec
from rag_eval.tokenizers import get_tokenizer


def test_parse_and_canonical_form() -> None:
    spec = SystemSpec.parse(" jieba : t2s=true , mode=precise ")
    assert spec.name == "jieba"
    assert spec.options == (("mode", "precise"), ("t2s", "true"))
    assert str(spec) == "jieba:mode=precise,t2s=true"
    assert str(SystemSpec.parse("bigram")) == "bigram"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "invalid spec"),
        ("Jieba", "invalid spec"),
        ("jieba:mode", "expected key=value"),
        ("jieba:mode=search,mode=precise", "given twice"),
        ("jieba:=x", "expected key=value"),
    ],
)
def test_malformed_specs(text: str, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        SystemSpec.parse(text)


def test_unknown_option_names_the_valid_ones() -> None:
    with pytest.raises(SpecError, match=r"unknown option 'moed' for jieba; valid options: hmm, mode, t2s, userdict"):
        get_tokenizer("jieba:moed=precise")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("jieba:mode=fast", r"bad value 'fast' for jieba option 'mode': expected one of: search, precise"),
        ("bigram:t2s=maybe", r"bad value 'maybe' for bigram option 't2s': expected true or false"),
        ("unicode61:remove_diacritics=3", r"expected one of: 0, 1, 2"),
        ("jieba:userdict=/no/such/file", r"no such file"),
    ],
)
def test_bad_option_values(spec: str, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        get_tokenizer(spec)


@pytest.mark.parametrize("name", ["unicode61", "trigram"])
def test_native_strategies_reject_normalisation_options(name: str) -> None:
    with pytest.raises(SpecError, match=rf"{name} is FTS5's native tokenizer and indexes the raw text: option 't2s'"):
        get_tokenizer(f"{name}:t2s=true")


def test_spec_is_stable_and_complete() -> None:
    first = get_tokenizer("jieba:mode=precise")
    second = get_tokenizer("jieba:hmm=true,mode=precise,t2s=false")
    assert first.spec == second.spec
    assert first.spec.startswith("jieba:hmm=true,mode=precise,t2s=false [jieba=")
    assert "unicode=" in first.spec
    assert get_tokenizer("bigram:t2s=yes").system == "bigram:t2s=true"
    assert "opencc=" in get_tokenizer("bigram:t2s=true").spec


def test_pkuseg_spec_carries_model_checksum() -> None:
    spec = get_tokenizer("pkuseg:model=mini").spec
    assert "model=mini@sha256:" in spec and "spacy-pkuseg=" in spec


def test_unknown_tokenizer_lists_registered_names() -> None:
    with pytest.raises(
        RegistryError,
        match=r"unknown tokenizer 'nope'; choose from: bigram, jieba, pkuseg, rjieba, trigram, unicode61, unigram",
    ):
        get_tokenizer("nope")
