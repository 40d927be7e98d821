"""System specs NAME[:key=value,...] and option validation."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import ALL_SPECS, invoke, one_error
from hypothesis import given
from hypothesis import strategies as st

from rag_eval.builders import BUILDERS, get_builder
from rag_eval.cli import cli
from rag_eval.errors import RegistryError, SpecError
from rag_eval.eval.compare.fusion import FusionError, parse_fusion
from rag_eval.index.processing import QueryProcessing
from rag_eval.spec import SystemSpec
from rag_eval.tokenizers import HybridTokenizer, get_tokenizer
from rag_eval.tokenizers.base import Field


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


# -- 6. an empty option list after ':' ----------------------------------------------------------------------------


@pytest.mark.parametrize("spec", ALL_SPECS)
def test_an_empty_option_list_is_refused_and_no_written_spec_has_one(spec: str) -> None:
    """Bug: `-t bigram:` was accepted (`bigram:x,` is refused): a ':' promises options."""
    name = spec.split(":")[0]
    for given in (f"{name}:", f"{name}: ", f"bigram+{name}:"):  # noqa: F402 - not hypothesis.given, in here
        with pytest.raises(SpecError, match=r"no options after ':'"):
            get_tokenizer(given)
    written = get_tokenizer(spec).system
    assert not written.endswith(":") and get_tokenizer(written).system == written


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_an_empty_builder_option_list_is_refused(name: str) -> None:
    with pytest.raises(SpecError, match=r"no options after ':'"):
        get_builder(f"{name}:")


def test_an_empty_option_list_is_refused_in_fusions_and_query_processing() -> None:
    with pytest.raises(FusionError, match=r"no options after ':'"):
        parse_fusion("rrf:(bigram, unigram)")
    with pytest.raises(SpecError, match=r"no options after ':'"):
        QueryProcessing.parse("query:")
    result = invoke("tokenize", "-t", "bigram:", "导出")
    assert result.exit_code == 1 and "no options after ':'" in one_error(result)


#: What a hostile spec holds where a number or a space run is expected: 100 000 characters that do not match.
HUGE = 100_000


_HYBRID = "from rag_eval.tokenizers.hybrid import is_hybrid\n"


SLOW_INPUTS = {
    "decimal digits": f"from rag_eval.spec import real\ntry:\n    real(0, 1)('1' * {HUGE} + 'x')\nexcept ValueError:\n"
    "    pass",
    "spaces in a value": _HYBRID + f"is_hybrid('bigram:x=' + ' ' * {HUGE} + 'y')",
    "spaces after a weight": _HYBRID + f"is_hybrid('bigram^2' + ' ' * {HUGE} + 'x')",
}


@pytest.mark.parametrize("case", sorted(SLOW_INPUTS))
def test_a_long_hostile_spec_is_read_in_linear_time(case: str) -> None:
    """Regression: the decimal and hybrid patterns backtracked quadratically (minutes for one 100 kB spec)."""
    # A hang guard, not a timing: the fixed patterns take milliseconds, the quadratic ones took minutes.
    subprocess.run([sys.executable, "-c", SLOW_INPUTS[case]], check=True, timeout=30)


@pytest.mark.parametrize("weight", ["١", "２", "1_0", "１.5", "", " "])
def test_a_weight_takes_the_spec_grammars_numbers_only(weight: str) -> None:
    """Regression: float() read ``^١`` as 1, ``^２`` as 2 and ``^1_0`` as 10, which every other number refuses."""
    with pytest.raises(SpecError, match="invalid weight"):
        get_tokenizer(f"bigram^{weight}+unigram")


@given(weight=st.text(st.sampled_from("0123456789١２_.eE- xn\u00a0"), min_size=1, max_size=6))
def test_an_accepted_weight_is_an_ascii_decimal(weight: str) -> None:
    try:
        tokenizer = get_tokenizer(f"bigram^{weight}+unigram")
    except SpecError:
        return
    written = weight.strip()
    assert written.isascii() and "_" not in written
    assert tokenizer.fields[0].weight == float(written)


def test_a_tokenize_command_with_a_full_width_weight_is_one_error_line() -> None:
    result = CliRunner().invoke(cli, ["tokenize", "-t", "bigram^２+unigram", "导出"])
    assert result.exit_code == 1
    assert result.stderr.startswith("error: invalid weight '２'") and "Traceback" not in result.stderr


FIELDS = ["bigram", "unigram", "bigram:t2s=true", "jieba:mode=precise", "jieba", "unicode61:remove_diacritics=2"]


WEIGHTS = ["1", "1.0", "1e0", "2", "2.0", "0.5", ".5", "1000", "0.001", "3.25"]


@st.composite
def hybrid_spellings(draw: st.DrawFn) -> tuple[str, list[tuple[str, float]]]:
    """A spec written with random spacing and weight spellings, and the fields it means."""
    fields = draw(st.lists(st.sampled_from(FIELDS), min_size=1, max_size=4, unique=True))
    pieces, meant = [], []
    for field in fields:
        weight = draw(st.one_of(st.none(), st.sampled_from(WEIGHTS)))
        space = draw(st.sampled_from(["", " ", "  "]))
        pieces.append(field + (f"{space}^{space}{weight}" if weight is not None else ""))
        meant.append((field, 1.0 if weight is None else float(weight)))
    joiner = draw(st.sampled_from(["+", " + ", "+ "]))
    return draw(st.sampled_from(["", " "])) + joiner.join(pieces), meant


@given(spelled=hybrid_spellings())
def test_every_spelling_of_a_system_has_its_canonical_name_and_reopens_as_itself(
    spelled: tuple[str, list[tuple[str, float]]],
) -> None:
    """Regression: ``bigram^1`` was a one-field hybrid named ``bigram:t2s=false``; an index built with it
    never reopened (its fingerprint keys were the hybrid's, ``0:unicode``, and the name read back as bigram)."""
    spec, meant = spelled
    tokenizer = get_tokenizer(spec)
    expected = "+".join(get_tokenizer(f).system + (f"^{w:g}" if w != 1 else "") for f, w in meant)
    assert tokenizer.system == expected  # the same system under every spelling, another under any other
    reopened = get_tokenizer(tokenizer.system)
    assert (type(reopened), reopened.spec) == (type(tokenizer), tokenizer.spec)


def test_a_one_field_hybrid_of_weight_1_is_not_a_hybrid() -> None:
    assert get_tokenizer("bigram^1").spec == get_tokenizer("bigram").spec
    assert get_tokenizer(" bigram ^ 1.0 ").spec == get_tokenizer("bigram").spec
    with pytest.raises(SpecError, match="itself"):
        HybridTokenizer([Field(get_tokenizer("bigram"), 1.0)])
    assert isinstance(get_tokenizer("bigram^2"), HybridTokenizer)  # a weight other than 1 is still one


def test_an_index_built_with_a_weight_1_spelling_opens(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# 导出\n\n导出文件保留三十天。\n", encoding="utf-8")
    index = str(tmp_path / "i.sqlite")
    runner = CliRunner()
    built = runner.invoke(cli, ["index", "build", str(docs), "-b", "sections", "-t", "bigram^1", "-o", index])
    assert built.exit_code == 0, built.stderr
    found = runner.invoke(cli, ["search", index, "导出"])
    assert found.exit_code == 0, found.stderr
    assert "a.md#导出" in found.stdout


@pytest.fixture
def dictionaries(tmp_path: Path) -> Path:
    """Links to user dictionaries whose real names a spec cannot hold as written."""
    for name in ["d,ict.txt", "dict ", "dict", "words^2", "words"]:
        (tmp_path / name).write_text("导出文件 10\n", encoding="utf-8")
    for link, target in [("comma", "d,ict.txt"), ("space", "dict "), ("caret", "words^2")]:
        (tmp_path / link).symlink_to(tmp_path / target)
    return tmp_path


@pytest.mark.parametrize("link", ["comma", "space"])
@pytest.mark.parametrize("spec", ["jieba:userdict={}", "pkuseg:model=mini,userdict={}", "bigram+jieba:userdict={}"])
def test_an_option_value_its_canonical_spec_cannot_hold_is_refused(dictionaries: Path, link: str, spec: str) -> None:
    """Regression: a user dictionary reached through a link resolved to ``/d/d,ict.txt`` (or ``/d/dict ``), and
    the canonical name read back as other options (or as the file ``/d/dict``): the index never reopened."""
    with pytest.raises(SpecError, match="which a spec cannot hold"):
        get_tokenizer(spec.format(dictionaries / link))


def test_python_option_values_obey_the_same_rule(dictionaries: Path) -> None:
    from rag_eval.tokenizers.jieba import JiebaTokenizer

    with pytest.raises(SpecError, match="which a spec cannot hold"):
        JiebaTokenizer(userdict=str(dictionaries / "d,ict.txt"))
    plain = JiebaTokenizer(userdict=str(dictionaries / "dict"))
    assert get_tokenizer(plain.system).system == plain.system


def test_a_field_whose_spec_reads_as_a_hybrid_is_refused(dictionaries: Path) -> None:
    """Regression: a field with a dictionary at ``/d/words^2`` was named like the field ``/d/words`` of weight 2."""
    with pytest.raises(SpecError, match="reads as (a|another) hybrid"):
        get_tokenizer(f"bigram+jieba:userdict={dictionaries / 'caret'}")
    assert get_tokenizer(f"bigram+jieba:userdict={dictionaries / 'words'}^2").fields[1].weight == 2


def test_a_plain_tokenizer_whose_spec_reads_as_a_hybrid_is_refused(dictionaries: Path) -> None:
    """A plain tokenizer with a dictionary at ``/d/words^2`` was named like jieba with ``/d/words`` weighted 2."""
    with pytest.raises(SpecError, match="reads as a hybrid"):
        get_tokenizer(f"jieba:userdict={dictionaries / 'caret'}")
    assert get_tokenizer(f"jieba:userdict={dictionaries / 'words'}").system.endswith("words")


def test_an_option_path_the_system_cannot_look_up_is_a_spec_error() -> None:
    """Regression: a 5000-character user dictionary path raised OSError (name too long) from the option
    parser, reported as the plug-in failing, with the whole value in the line."""
    with pytest.raises(SpecError, match="bad value .* for jieba option 'userdict'"):
        get_tokenizer("jieba:userdict=" + "a" * 5000)
