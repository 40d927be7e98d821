"""The command line through click's CliRunner: output, errors as one line, help everywhere."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from helpers import REPO, make_docs, one_error

from rag_eval.cli import cli

README = REPO / "README.md"


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def test_version_lists_sqlite_and_libraries(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["--version"])
    assert result.exit_code == 0
    for line in ("rag-eval ", "sqlite 3.", "jieba 0.42", "spacy-pkuseg 1.", "opencc 1."):
        assert line in result.output


def test_tokenizers_lists_every_strategy(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["tokenizers"])
    assert result.exit_code == 0
    for name in ("bigram", "jieba", "pkuseg", "trigram", "unicode61", "unigram"):
        assert re.search(rf"^{name}  \((Python|native FTS5)\)  (available|unavailable)$", result.output, re.M)
    assert "option mode={search|precise}" in result.output
    assert "spec: bigram:t2s=false [unicode=" in result.output


def test_tokenizers_json(runner: CliRunner) -> None:
    rows = json.loads(runner.invoke(cli, ["tokenizers", "--json"]).output)
    by_name = {row["name"]: row for row in rows}
    assert by_name["unicode61"]["kind"] == "native FTS5"
    assert by_name["bigram"]["available"] is True


def test_tokenize_prints_offsets(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["tokenize", "-t", "jieba:mode=precise", "导出文件保留三十天"])
    assert result.exit_code == 0
    assert result.output.splitlines()[1:] == ["0\t2\t导出", "2\t4\t文件", "4\t6\t保留", "6\t9\t三十天"]


def test_tokenize_compares_strategies_side_by_side(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["tokenize", "-t", "unicode61", "-t", "bigram", "导出文件"])
    assert result.exit_code == 0
    assert result.output.splitlines() == [
        "unicode61:remove_diacritics=1  导出文件",
        "bigram:t2s=false               导出 | 出文 | 文件",
    ]


def test_tokenize_without_spec_runs_every_strategy(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["tokenize", "导出文件保留三十天"])
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert len(lines) == 7
    assert any(
        line.startswith("pkuseg") and "unavailable" in line and "models install pkuseg" in line for line in lines
    )
    assert any(line.startswith("jieba:") and "导出 | 文件" in line for line in lines)


def test_tokenize_json_from_stdin(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["tokenize", "-t", "bigram", "--json", "-"], input="ＡＢＣ 导出".encode())
    payload = json.loads(result.output)
    assert payload["spec"].startswith("bigram:t2s=false")
    assert payload["tokens"] == [{"text": "abc", "start": 0, "end": 3}, {"text": "导出", "start": 4, "end": 6}]


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        (["tokenize", "-t", "nope", "x"], None, "error: unknown tokenizer 'nope'; choose from: bigram,"),
        (["tokenize", "-t", "bigram:x=1", "x"], None, "error: unknown option 'x' for bigram; valid options: t2s"),
        (["tokenize", "-t", "unicode61:t2s=true", "x"], None, "error: unicode61 is FTS5's native tokenizer"),
        (["tokenize", "-t", "bigram", "-"], b"ok \xff\xfe", "error: standard input is not valid UTF-8 at byte 3"),
        (
            ["tokenize", "-t", "bigram", "a\ud800"],
            None,
            "error: TEXT: text is not valid Unicode: lone surrogate U+D800 at character 1",
        ),
        (["models", "install", "pkuseg", "--sdist", "{file}"], None, "error: {file} has sha256"),
        (["models", "install", "pkuseg", "--sdist", "{file}.missing"], None, "error: No such file or directory"),
    ],
)
def test_errors_are_one_line_and_exit_nonzero(
    runner: CliRunner, tmp_path: Path, args: list[str], stdin: bytes | None, message: str
) -> None:
    not_an_sdist = tmp_path / "pkuseg-0.0.25.tar.gz"
    not_an_sdist.write_bytes(b"not a tarball")
    args = [a.replace("{file}", str(not_an_sdist)) for a in args]
    message = message.replace("{file}", str(not_an_sdist))
    result = runner.invoke(cli, args, input=stdin)
    if message == "Usage:":  # click's own usage errors: exit 2 with usage and one error line
        assert result.exit_code == 2 and "does not exist" in result.stderr
        return
    assert result.exit_code == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith(message)
    assert "Traceback" not in result.output + result.stderr


def test_missing_pkuseg_model_error_names_install_command(runner: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    result = runner.invoke(cli, ["tokenize", "-t", "pkuseg", "导出"])
    assert result.exit_code == 1
    assert result.stderr.splitlines()[0].startswith("error: the pkuseg default model is not installed")
    assert "hint: run: rag-eval models install pkuseg" in result.stderr


def test_debug_shows_traceback() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "rag_eval", "--debug", "tokenize", "-t", "nope", "x"], capture_output=True, text=True
    )
    assert result.returncode != 0
    assert "Traceback" in result.stderr and "RegistryError" in result.stderr


def test_models_list(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["models", "list"])
    assert result.exit_code == 0
    assert "pkuseg:model=mini\tinstalled" in result.output


def _commands(group: click.Group, prefix: str = "") -> list[tuple[str, click.Command]]:
    found = []
    for name, command in sorted(group.commands.items()):
        found.append((f"{prefix}{name}", command))
        if isinstance(command, click.Group):
            found += _commands(command, f"{prefix}{name} ")
    return found


@pytest.mark.parametrize(("path", "command"), _commands(cli), ids=[p for p, _ in _commands(cli)])
def test_every_command_has_help_and_is_documented(path: str, command: click.Command) -> None:
    assert command.help and len(command.help.split()) >= 4
    assert CliRunner().invoke(cli, path.split() + ["--help"]).exit_code == 0
    # The command reference lives in docs/commands.md, linked from the README; each command has a usage line.
    assert "(docs/commands.md)" in README.read_text(encoding="utf-8")
    assert f"`rag-eval {path}" in (README.parent / "docs" / "commands.md").read_text(encoding="utf-8")


def test_readme_starts_with_the_two_commands() -> None:
    blocks = re.findall(r"```(?:bash|sh)\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert "rag-eval" in blocks[0] and "pytest" in blocks[1]
    ci = (README.parent / ".ci" / "run").read_text(encoding="utf-8")
    assert "readme_command" in ci


def test_tokenize_refuses_standard_input_over_its_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    from rag_eval.cli import tokenize as tokenize_cli

    monkeypatch.setattr(tokenize_cli, "MAX_STDIN_BYTES", 100)
    result = CliRunner().invoke(cli, ["tokenize", "-t", "bigram", "-"], input="导出" * 100)
    assert result.exit_code != 0 and "over 100 bytes" in one_error(result)
    result = CliRunner().invoke(cli, ["tokenize", "-t", "bigram", "-"], input="导出文件")
    assert result.exit_code == 0 and "导出" in result.output


RAG_EVAL = Path(sys.executable).with_name("rag-eval")  # the console script: outputs record its command line


EXAMPLES = REPO / "docs" / "examples"


def console(*args: str | bytes, cwd: Path) -> tuple[int, str]:
    done = subprocess.run([RAG_EVAL, *args], cwd=cwd, capture_output=True, check=False)
    return done.returncode, (done.stdout + done.stderr).decode("utf-8", "backslashreplace")


@pytest.mark.parametrize(
    "args",
    [
        ["compare", "evidence-mini", "-t", "bigram", "-o", b"r\xff"],
        ["compare", "evidence-mini", "-t", "bigram", "--against", b"b\xff", "-o", "out"],
        ["tune", "evidence-mini", "--budget", "2", "-o", b"t\xff"],
        ["judge", "handbook", "--queries", "questions.txt", "-t", "bigram", "--oracle", b"j\xff.qrels"]
        + ["--samples", "0", "-o", "replay.json"],
    ],
    ids=["compare -o", "compare --against", "tune -o", "judge --oracle"],
)
def test_a_file_name_that_is_not_utf8_is_recorded_escaped_not_a_traceback(tmp_path: Path, args: list) -> None:
    """report.json, tune.json and the replay record the command line and input paths: a file name with a byte that
    is not UTF-8 (a lone surrogate in Python) ended in a UnicodeEncodeError traceback after the whole run."""
    code, output = console(
        "compare", "evidence-mini", "-t", "bigram", "-o", "base", "--write-baseline", "b.json", cwd=tmp_path
    )
    assert code == 0, output
    os.rename(tmp_path / "b.json", os.fsdecode(bytes(tmp_path) + b"/b\xff"))
    shutil.copy(EXAMPLES / "handbook-questions.txt", tmp_path / "questions.txt")
    shutil.copy(EXAMPLES / "handbook-questions.qrels", os.fsdecode(bytes(tmp_path) + b"/j\xff.qrels"))
    code, output = console(*args, cwd=tmp_path)
    assert code == 0 and "Traceback" not in output, output
    written = [path for path in tmp_path.rglob("*.json") if path.name in ("report.json", "tune.json", "replay.json")]
    assert any("\\xff" in path.read_text(encoding="utf-8") for path in written if "base" not in path.parts)


def test_an_index_source_that_is_not_utf8_is_one_error_before_any_work(tmp_path: Path) -> None:
    """The index records its source path in its meta table, which holds UTF-8 text only: refused up front (it was
    a UnicodeEncodeError traceback after tokenizing the whole source)."""
    make_docs(Path(os.fsdecode(bytes(tmp_path) + b"/docs\xff")))
    code, output = console("index", "build", b"docs\xff", "-t", "bigram", "-o", "kb.sqlite", cwd=tmp_path)
    lines = [line for line in output.splitlines() if line.startswith("error:")]
    assert code == 1 and len(lines) == 1 and "Traceback" not in output, output
    assert "not valid UTF-8" in lines[0]
    assert sorted(os.listdir(tmp_path)) == [os.fsdecode(b"docs\xff")]


def _leaf_commands(command: click.Command, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    if isinstance(command, click.Group):
        return [found for name, sub in command.commands.items() for found in _leaf_commands(sub, (*path, name))]
    return [(path, command)]


def test_every_command_help_ends_with_examples() -> None:
    runner = CliRunner()
    missing = []
    for path, _command in _leaf_commands(cli):
        shown = runner.invoke(cli, [*path, "--help"])
        assert shown.exit_code == 0, shown.output
        examples = shown.output.split("Examples:", 1)
        if len(examples) < 2 or f"rag-eval {' '.join(path)}" not in examples[1]:
            missing.append(" ".join(path))
    assert missing == []
