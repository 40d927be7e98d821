"""tune's search space (--space FILE and the shipped default): every value checked at load, naming file and key;
spellings of one system are one candidate; a space too large to enumerate is refused before any candidate is made."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import invoke, one_error
from helpers.cli import _error_lines

from rag_eval.cli import cli
from rag_eval.errors import RagEvalError
from rag_eval.eval.tuning import space as tune_space
from rag_eval.eval.tuning.space import load_space
from rag_eval.eval.tuning.tune import candidates


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("hybrid_sizes=[-1]", "hybrid_sizes must be whole numbers from 2"),
        ("hybrid_sizes=[0]", "hybrid_sizes must be whole numbers from 2"),
        ("hybrid_sizes=[100]", "hybrid_sizes must be whole numbers from 2"),
        ("weights=[1e308]", "weights must be numbers from 0.001 to 1000"),
        ("weights=[0]", "weights must be numbers from 0.001 to 1000"),
        ("weights=[nan]", "weights must be numbers from 0.001 to 1000"),
    ],
)
def test_a_search_space_out_of_range_is_refused(tmp_path: Path, line: str, message: str) -> None:
    space = tmp_path / "space.toml"
    space.write_text(f'tokenizers=["unigram", "bigram"]\n{line}\n', encoding="utf-8")
    with pytest.raises(RagEvalError, match=message):
        load_space(space)
    result = CliRunner().invoke(cli, ["tune", "evidence-mini", "--space", str(space), "-o", str(tmp_path / "out")])
    assert result.exit_code != 0 and message in one_error(result)
    assert not (tmp_path / "out").exists()


def test_a_value_listed_twice_in_a_space_is_one_candidate(tmp_path: Path) -> None:
    space = tmp_path / "space.toml"
    space.write_text('tokenizers=["unigram", "unigram", "bigram"]\nhybrid_sizes=[2, 2]\n', encoding="utf-8")
    names = [candidate.name for candidate in candidates(load_space(space))]
    assert names == ["unigram", "bigram", "unigram+bigram"]


def _huge_space(tmp_path: Path) -> Path:
    """A space under 100 kB of 3,000 weights and 3,001 query processings: 9 million candidates."""
    weights = ", ".join(f"{1 + i / 10000:.4f}" for i in range(1, 3001))
    processing = ", ".join(f'"top_terms={i}"' for i in range(1, 3001))
    path = tmp_path / "space.toml"
    path.write_text(
        'tokenizers = ["bigram", "unigram"]\nhybrid_sizes = [2]\n'
        f'weights = [{weights}]\nprocessing = ["", {processing}]\n',
        encoding="utf-8",
    )
    return path


def test_a_space_of_millions_of_candidates_is_refused_before_any_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bug: a space file under the 100 kB limit multiplied to 16 million candidates, which tune enumerated (for
    hours, gigabytes of memory) before running 3 x --budget of them."""
    path = _huge_space(tmp_path)

    def made(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a candidate was made: the space was enumerated instead of refused")

    monkeypatch.setattr(tune_space, "Candidate", made)  # looked up where candidates() is
    with pytest.raises(RagEvalError, match=r"candidates, more than \d+"):
        candidates(load_space(path))
    result = CliRunner().invoke(cli, ["tune", "handbook", "--space", str(path), "-o", str(tmp_path / "out")])
    assert result.exit_code == 1 and len(_error_lines(result)) == 1 and "candidates" in result.output
    assert not (tmp_path / "out").exists()


def test_the_default_space_and_a_wide_space_are_still_enumerated() -> None:
    """The bound refuses only what is too large to enumerate: the shipped space and 2,000 weights pass."""
    assert candidates(load_space(None))
    space = {"tokenizers": ["bigram", "unigram"], "hybrid_sizes": [2], "weights": [1 + i / 1000 for i in range(2000)]}
    assert len(candidates(space)) == 2 + 2000


# --- 4. tune space and --systems files -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("space", "says"),
    [
        ('tokenizers = ["bigram"]\nfusion = ["bogus"]', "fusion: unknown fusion method 'bogus'"),
        ('tokenizers = ["bigram", "unigram"]\nfusion = ["bogus"]', "fusion: unknown fusion method 'bogus'"),
        ('tokenizers = ["bigram"]\nfusion = ["rrf"]', "fusion: a fusion combines two tokenizers"),
        ('tokenizers = ["bigram"]\nprocessing = ["bogus=1"]', "processing: unknown option 'bogus'"),
        ('tokenizers = ["bogus"]', "tokenizers: unknown tokenizer 'bogus'"),
        ('tokenizers = ["bigram"]\nengines = ["bogus"]', "engines: unknown engine 'bogus'"),
        ('tokenizers = ["trigram", "unigram"]\nhybrid_sizes = [2]', "hybrid_sizes: a hybrid of 2 needs 2"),
        ('tokenizers = ["bigram+unigram", "bigram"]\nhybrid_sizes = [2]', "hybrid_sizes: a hybrid of 2 needs 2"),
    ],
)
def test_every_value_of_a_space_file_is_checked_at_load_naming_file_and_key(
    space: str, says: str, tmp_path: Path
) -> None:
    path = tmp_path / "space.toml"
    path.write_text(space, encoding="utf-8")
    with pytest.raises(RagEvalError) as caught:
        load_space(path)
    assert str(caught.value).startswith(f"{path}: {says}"), caught.value
    assert one_error(
        invoke("tune", "evidence-mini", "--space", str(path), "-o", str(tmp_path / "t")), alone=True
    ).startswith(f"error: {path}: {says}")
    assert not (tmp_path / "t").exists()


def _space(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "space.toml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "text",
    [
        'tokenizers = ["bigram", "unigram"]\nprocessing = ["stopwords=zh"]\n',  # no "" in processing
        'tokenizers = ["bigram+unigram"]\n',  # only a hybrid
    ],
)
def test_a_space_without_a_plain_single_tokenizer_is_one_error_before_any_run(tmp_path: Path, text: str) -> None:
    """The recommendation is tested against the best plain single tokenizer: without one, tune used to run the
    whole space and end in a traceback (max() of an empty sequence)."""
    outcome = CliRunner().invoke(
        cli, ["tune", "evidence-mini", "--space", str(_space(tmp_path, text)), "-o", str(tmp_path / "out")]
    )
    assert "no single tokenizer without query processing" in one_error(outcome, alone=True)
    assert not (tmp_path / "out").exists()


def test_spellings_of_one_system_are_one_candidate(tmp_path: Path) -> None:
    """bigram and bigram:t2s=false, weights 1 and 1.0000001 (both written ^1), processing options in another
    order: one system each, not a hybrid of a field with itself or a system 'given twice'."""
    space = _space(
        tmp_path,
        'tokenizers = ["bigram", "bigram:t2s=false", "unigram"]\nhybrid_sizes = [2]\nweights = [1, 1.0000001]\n'
        'processing = ["", "stopwords=zh,max_df=0.5", "max_df=0.5,stopwords=zh"]\n',
    )
    names = [c.name for c in candidates(load_space(space))]
    assert len(names) == len(set(names)) == 2 * 2 + 1 * 2  # (bigram, unigram) x 2 processings + their hybrid x 2
    assert [c.name for c in candidates(load_space(space)) if c.single] == ["bigram", "unigram"]


def test_a_hybrid_listed_as_a_tokenizer_is_a_candidate_not_a_field(tmp_path: Path) -> None:
    space = _space(tmp_path, 'tokenizers = ["bigram+unigram", "bigram", "unigram"]\nhybrid_sizes = [2]\n')
    names = [c.name for c in candidates(load_space(space))]
    assert names == ["bigram+unigram", "bigram", "unigram"]


def test_wide_names_the_shipped_wider_space_unless_a_file_of_that_name_is_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--space wide: the default's candidates, and the same systems under bm25 k1/b pairs and with Bo1 feedback."""
    from rag_eval.eval.tuning.space import candidates, load_space

    monkeypatch.chdir(tmp_path)
    default, wide = candidates(load_space(None)), candidates(load_space(Path("wide")))
    names = {c.name for c in wide}
    assert {c.name for c in default} <= names and len(wide) > 3 * len(default) - 100
    assert "bigram | engine=impact:b=0.3,k1=0.4" in names and "unigram | query:prf=bo1" in names
    (tmp_path / "wide").write_text('tokenizers = ["bigram"]\n', encoding="utf-8")
    assert [c.name for c in candidates(load_space(Path("wide")))] == ["bigram"]
