"""Every command with bad arguments and bad files: non-zero exit, one error line, no traceback."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from rag_eval.cli import cli


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("bad")
    (folder / "junk.bin").write_bytes(b"\x00\xff" * 100)
    (folder / "empty").mkdir()
    (folder / "run.txt").write_text("q1 Q0 d1 1 high x\n", encoding="utf-8")
    (folder / "qrels.txt").write_text("q1 0 d1\n", encoding="utf-8")
    (folder / "good.run").write_text("q1 Q0 d1 1 2.0 x\n", encoding="utf-8")
    (folder / "binary.tsv").write_bytes(b"q1\td1\t1\n\xff\xfe\n")
    (folder / "bad.json").write_text("{", encoding="utf-8")
    (folder / "systems.toml").write_text("[[system]]\nname = 1\n", encoding="utf-8")
    return {"dir": str(folder)}


CASES = [
    ["tokenize", "-t", "bigram:x", "文本"],
    ["tokenize", "-t", "jieba:userdict={dir}/missing.txt", "文本"],
    ["models", "install", "pkuseg", "--sdist", "{dir}/junk.bin"],
    ["models", "train-pkuseg", "{dir}/junk.bin", "-o", "{dir}/model-out"],
    ["index", "build", "{dir}/empty", "-b", "sections", "-o", "{dir}/i.sqlite"],
    ["index", "build", "{dir}/empty", "-b", "lines", "-o", "{dir}/i.sqlite"],
    ["index", "build", "{dir}/empty", "-b", "passages", "-o", "{dir}/i.sqlite"],
    ["index", "build", "{dir}/empty", "-b", "sections", "-t", "nope", "-o", "{dir}/i.sqlite"],
    ["index", "info", "{dir}/junk.bin"],
    ["index", "list", "{dir}/junk.bin"],
    ["index", "verify", "{dir}/junk.bin"],
    ["search", "{dir}/junk.bin", "导出"],
    ["read", "{dir}/junk.bin", "a.md"],
    ["datasets", "show", "{dir}/empty"],
    ["datasets", "export", "nope", "{dir}/out"],
    ["datasets", "convert", "squad", "{dir}/bad.json", "-o", "{dir}/conv"],
    ["compare", "{dir}/empty", "-o", "{dir}/cmp"],
    ["compare", "evidence-mini", "--systems", "{dir}/systems.toml", "-o", "{dir}/cmp"],
    ["compare", "evidence-mini", "-t", "bigram", "--run", "x={dir}/run.txt", "-o", "{dir}/cmp"],
    ["evaluate", "{dir}/run.txt", "{dir}/qrels.txt"],
    ["evaluate", "{dir}/junk.bin", "{dir}/qrels.txt"],
    ["evaluate", "{dir}/good.run", "{dir}/junk.bin"],
    ["evaluate", "{dir}/good.run", "{dir}/binary.tsv"],
]


@pytest.mark.parametrize("args", CASES, ids=[" ".join(c[:3]) for c in CASES])
def test_error_is_one_line(files: dict[str, str], args: list[str]) -> None:
    result = CliRunner().invoke(cli, [a.replace("{dir}", files["dir"]) for a in args])
    assert result.exit_code == 1, (result.exit_code, result.output, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr + result.output
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit)


@pytest.mark.parametrize("args", [["tokenize"], ["index", "build"], ["search"], ["compare"], ["nope"], ["--bogus"]])
def test_usage_errors_exit_2(args: list[str]) -> None:
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2 and "Usage:" in result.stderr and "Traceback" not in result.stderr
