"""A hostile argument thousands of characters long is shown shortened in its error line, whatever option it came in.

Regression: a hybrid of 5,000 fields gave a 95 KB error line; long specs, processing and fusion specs were echoed whole.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from rag_eval.cli import cli

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
