"""A hostile argument thousands of characters long is shown shortened in its error line, whatever option it came in.

Regression: a hybrid of 5,000 fields gave a 95 KB error line; long specs, processing and fusion specs were echoed whole.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers.cli import _one_safe_error

from rag_eval.cli import cli
from rag_eval.errors import SpecError
from rag_eval.index.processing import QueryProcessing
from rag_eval.spec import SystemSpec
from rag_eval.tokenizers import get_tokenizer

LONG = "x" * 5000
HYBRID = "+".join(["bigram"] * 5000)


@pytest.mark.parametrize(
    "arguments",
    [
        ["tokenize", "-t", HYBRID, "x"],
        ["tokenize", "-t", LONG, "x"],
        ["tokenize", "-t", f"bigram:{LONG}=1", "x"],
        ["tokenize", "-t", f"bigram:t2s={LONG}", "x"],
        ["compare", "handbook", "-t", "bigram", "--processing", LONG, "-o", "{out}"],
        ["compare", "handbook", "-t", "bigram", "--processing", f"{LONG}=1", "-o", "{out}"],
        ["compare", "handbook", "-t", "bigram", "-t", "unigram", "--fuse", LONG, "-o", "{out}"],
        [
            "compare",
            "handbook",
            "-t",
            "bigram",
            "-t",
            "unigram",
            "--fuse",
            f"rrf:k={LONG}(bigram, unigram)",
            "-o",
            "{out}",
        ],
        ["compare", "handbook", "-t", "bigram", "-b", LONG, "-o", "{out}"],
        ["judge", "handbook", "-t", "bigram", "--queries", "{q}", "--method", LONG, "-o", "{out}"],
    ],
    ids=["hybrid", "name", "option", "value", "processing", "processing-option", "fuse", "fuse-k", "builder", "method"],
)
def test_a_long_hostile_argument_is_one_short_error_line(tmp_path: Path, arguments: list[str]) -> None:
    out, questions = str(tmp_path / "out"), tmp_path / "q.txt"
    questions.write_text("导出文件\n", encoding="utf-8")
    given = [argument.replace("{out}", out).replace("{q}", str(questions)) for argument in arguments]
    result = CliRunner().invoke(cli, given)
    assert result.exit_code != 0
    lines = result.stderr.splitlines()
    assert sum(line.startswith("error:") for line in lines) == 1, result.stderr[:300]
    assert len(result.stderr) < 600, result.stderr[:300]
    assert not Path(out).exists()


#: Specs whose error once repeated the whole argument (a 95 KB error line for a long one).
HOSTILE_SPECS = {
    "invalid name": f"Bigram{LONG}",
    "invalid option": f"bigram:{LONG}",
    "option twice": f"bigram:t2s=1,t2s={LONG}",
    "unknown option": f"bigram:{LONG}=1",
    "bad value": f"bigram:t2s={LONG}",
    "path too long": f"jieba:userdict=/tmp/{LONG}",
}


@pytest.mark.parametrize("case", sorted(HOSTILE_SPECS))
def test_a_spec_error_shows_a_long_argument_shortened(case: str) -> None:
    """Bug: spec errors repeated the whole argument: -t bigram:<5000 x>=1 gave a 5 KB error line."""
    with pytest.raises(SpecError) as raised:
        get_tokenizer(HOSTILE_SPECS[case])
    assert len(str(raised.value)) < 300, len(str(raised.value))
    assert "..." in str(raised.value)


@pytest.mark.parametrize("text", [f"stopwords={LONG}", f"{LONG}=1", LONG, f"max_df=1,{LONG}"])
def test_a_processing_error_shows_a_long_argument_shortened(text: str) -> None:
    """Bug: --processing <5000 x> printed the value twice (10 KB)."""
    with pytest.raises(SpecError) as raised:
        QueryProcessing.parse(text)
    assert len(str(raised.value)) < 300, len(str(raised.value))


@pytest.mark.parametrize("case", sorted(HOSTILE_SPECS))
def test_a_spec_error_on_the_command_line_is_short(case: str) -> None:
    result = CliRunner().invoke(cli, ["tokenize", "-t", HOSTILE_SPECS[case], "导出"])
    assert len(_one_safe_error(result)) < 300


def test_a_short_spec_is_still_shown_whole() -> None:
    with pytest.raises(SpecError, match=r"^invalid spec 'Bigram': expected NAME"):
        SystemSpec.parse("Bigram")
