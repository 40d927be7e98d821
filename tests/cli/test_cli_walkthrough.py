"""What a new user's walkthrough of the README and docs/commands.md found (2026-12-02): help without examples, a
hint that pointed to a file that is not there, a summary printed as a raw dict."""

from __future__ import annotations

import json
from pathlib import Path

import click
from click.testing import CliRunner
from helpers import REPO

from rag_eval.cli import cli
from rag_eval.index.writer import build

DATASETS = REPO / "datasets"


def _commands(command: click.Command, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    if isinstance(command, click.Group):
        return [found for name, sub in command.commands.items() for found in _commands(sub, (*path, name))]
    return [(path, command)]


def test_every_command_help_ends_with_examples() -> None:
    runner = CliRunner()
    missing = []
    for path, _command in _commands(cli):
        shown = runner.invoke(cli, [*path, "--help"])
        assert shown.exit_code == 0, shown.output
        examples = shown.output.split("Examples:", 1)
        if len(examples) < 2 or f"rag-eval {' '.join(path)}" not in examples[1]:
            missing.append(" ".join(path))
    assert missing == []


def test_a_missing_section_suggests_a_trailing_hash_only_for_a_file_the_index_holds(tmp_path: Path) -> None:
    index = tmp_path / "handbook.sqlite"
    build(DATASETS / "handbook" / "docs", index, builder="sections", tokenizer="bigram")
    runner = CliRunner()
    missing = runner.invoke(cli, ["read", str(index), "guide/export.md#导出指南"])
    assert missing.exit_code == 1
    assert "no section 'guide/export.md#导出指南'" in missing.stderr
    assert "trailing '#'" not in missing.stderr and "rag-eval index list" in missing.stderr
    section = runner.invoke(cli, ["read", str(index), "data/export-data.md#支持的导出格式"])
    assert section.exit_code == 0 and section.stdout.startswith("## 支持的导出格式")


def test_datasets_convert_prints_a_sentence_and_json_on_request(tmp_path: Path) -> None:
    squad = {
        "data": [
            {
                "title": "t",
                "paragraphs": [
                    {"context": "第一段。", "qas": [{"id": "q1", "question": "问一？", "answers": []}]},
                    {"context": "第二段。", "qas": [{"id": "q2", "question": "问二？", "answers": []}]},
                ],
            }
        ]
    }
    source = tmp_path / "dev.json"
    source.write_text(json.dumps(squad, ensure_ascii=False), encoding="utf-8")
    runner = CliRunner()
    said = runner.invoke(cli, ["datasets", "convert", "squad", str(source), "-o", str(tmp_path / "a")])
    assert said.exit_code == 0, said.output
    assert said.stdout.startswith(f"wrote {tmp_path / 'a'}: 2 passages (0 repeated paragraphs merged), 2 queries")
    counts = runner.invoke(cli, ["datasets", "convert", "squad", str(source), "-o", str(tmp_path / "b"), "--json"])
    assert json.loads(counts.stdout)["qrels"] == 2


def test_training_pkuseg_logs_on_stderr_and_refuses_too_little_text(tmp_path: Path) -> None:
    """The trainer's log filled standard output; under 10 sentences it died with a ZeroDivisionError traceback."""
    few = tmp_path / "few.txt"
    few.write_text("导出 文件 保留 三十 天\n退款 申请 审核 通过\n", encoding="utf-8")
    runner = CliRunner()
    refused = runner.invoke(cli, ["models", "train-pkuseg", str(few), "-o", str(tmp_path / "m1")])
    assert refused.exit_code == 1 and refused.stderr.startswith(
        f"error: {few}: 2 sentences; training needs at least 10"
    )
    assert "Traceback" not in refused.output and not (tmp_path / "m1").exists()
    enough = tmp_path / "enough.txt"
    enough.write_text("导出 文件 保留 三十 天\n退款 申请 审核 通过\n" * 6, encoding="utf-8")
    trained = runner.invoke(
        cli, ["models", "train-pkuseg", str(enough), "-o", str(tmp_path / "m2"), "--iterations", "1"]
    )
    assert trained.exit_code == 0, trained.output
    assert trained.stdout == f"wrote {tmp_path / 'm2'}\n"
    assert (tmp_path / "m2" / "weights.npz").is_file()


def test_a_category_no_chunk_has_is_named_beside_no_hits(tmp_path: Path) -> None:
    index = tmp_path / "handbook.sqlite"
    build(DATASETS / "handbook" / "docs", index, builder="sections", tokenizer="bigram")
    runner = CliRunner()
    unknown = runner.invoke(cli, ["search", str(index), "导出", "--category", "guide"])
    assert unknown.exit_code == 0 and unknown.stdout == ""
    assert unknown.stderr == (
        "no hits\nhint: no chunk has category 'guide'; see the categories with: rag-eval index list INDEX\n"
    )
    known = runner.invoke(cli, ["search", str(index), "熊猫", "--category", "data"])  # a category, just no match
    assert known.exit_code == 0 and known.stderr == "no hits\n"
    found = runner.invoke(cli, ["search", str(index), "导出", "--category", "data"])
    assert found.stdout and found.stderr == ""
