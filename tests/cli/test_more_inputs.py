"""Inputs of tokenizers, tune, datasets and segeval refused at the boundary with one error line (found by a
hostile sweep on 2026-12-02)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import one_error

from rag_eval.cli import cli
from rag_eval.errors import RagEvalError, SpecError
from rag_eval.eval.datasets.squad import export_squad
from rag_eval.eval.tuning.tune import candidates, load_space
from rag_eval.tokenizers import get_tokenizer


@pytest.mark.parametrize("strategy", ["jieba", "jieba:mode=precise", "pkuseg:model=mini"])
@pytest.mark.parametrize("content", [b"\xff\xfe\x80abc", "导出 5\n".encode("gb18030")])
def test_a_user_dictionary_that_is_not_utf8_is_a_spec_error(tmp_path: Path, strategy: str, content: bytes) -> None:
    path = tmp_path / "words.txt"
    path.write_bytes(content)
    with pytest.raises(SpecError, match="not valid UTF-8 at byte"):
        get_tokenizer(f"{strategy},userdict={path}" if ":" in strategy else f"{strategy}:userdict={path}")
    result = CliRunner().invoke(cli, ["tokenize", "-t", f"jieba:userdict={path}", "导出"])
    assert result.exit_code != 0 and "userdict" in one_error(result)


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


@pytest.mark.parametrize("option", ["--max-p95-ms", "--max-index-mb"])
@pytest.mark.parametrize("value", ["inf", "nan", "0", "-1"])
def test_tune_constraints_are_finite_numbers_above_0(tmp_path: Path, option: str, value: str) -> None:
    result = CliRunner().invoke(cli, ["tune", "evidence-mini", option, value, "-o", str(tmp_path / "out")])
    assert result.exit_code != 0 and "finite number above 0" in one_error(result)


def test_export_names_what_it_exports_when_given_a_folder(tmp_path: Path) -> None:
    folder = tmp_path / "beir"
    folder.mkdir()
    (folder / "corpus.jsonl").write_text('{"_id": "a", "title": "", "text": "x"}\n', encoding="utf-8")
    result = CliRunner().invoke(cli, ["datasets", "export", str(folder), str(tmp_path / "out")])
    assert result.exit_code != 0 and "export writes a shipped set" in one_error(result)
    assert not (tmp_path / "out").exists()


def test_tokenize_refuses_standard_input_over_its_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    from rag_eval.cli import tokenize as tokenize_cli

    monkeypatch.setattr(tokenize_cli, "MAX_STDIN_BYTES", 100)
    result = CliRunner().invoke(cli, ["tokenize", "-t", "bigram", "-"], input="导出" * 100)
    assert result.exit_code != 0 and "over 100 bytes" in one_error(result)
    result = CliRunner().invoke(cli, ["tokenize", "-t", "bigram", "-"], input="导出文件")
    assert result.exit_code == 0 and "导出" in result.output


def _squad(title: object, context: str) -> dict[str, object]:
    question = {"id": "SRC-Q1", "question": "保留多久", "answers": [{"text": "三十天", "answer_start": 6}]}
    return {"data": [{"title": title, "paragraphs": [{"id": "SRC-P1", "context": context, "qas": [question]}]}]}


@pytest.mark.parametrize(
    ("title", "context", "message"),
    [
        ("T", "ab\x00c", "NUL character"),
        ("T", "   ", "'context' is empty"),
        ({"a": [1]}, "abc", "'title' must be text"),
    ],
)
def test_convert_refuses_contexts_and_titles_a_corpus_cannot_hold(
    tmp_path: Path, title: object, context: str, message: str
) -> None:
    source = tmp_path / "in.json"
    source.write_text(json.dumps(_squad(title, context), ensure_ascii=False), encoding="utf-8")
    with pytest.raises(RagEvalError, match=message):
        export_squad([source], tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_convert_writes_where_each_question_came_from(tmp_path: Path) -> None:
    source = tmp_path / "in.json"
    source.write_text(json.dumps(_squad("T", "导出文件保留三十天。"), ensure_ascii=False), encoding="utf-8")
    export_squad([source], tmp_path / "out")
    assert json.loads((tmp_path / "out" / "original_ids.json").read_text(encoding="utf-8")) == {"q1": ["SRC-Q1"]}


def test_segeval_finds_the_project_data_from_any_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rag_eval.cli import segeval as segeval_cli

    monkeypatch.chdir(tmp_path)
    found = segeval_cli._default_data()
    project_data = Path(segeval_cli.__file__).resolve().parents[2] / segeval_cli.DEFAULT_DATA
    if not project_data.is_dir():
        assert found == segeval_cli.DEFAULT_DATA  # nothing beside the project: the relative default and its error
        pytest.skip("no ../shared/datasets/segmentation beside this checkout")
    assert found == project_data and found.is_dir()


def test_an_index_whose_user_dictionary_is_gone_says_so_not_damaged(tmp_path: Path) -> None:
    """The index is intact; the dictionary file its spec names was removed."""
    from rag_eval.eval.datasets.shipped import corpus_dir
    from rag_eval.index.writer import build

    words = tmp_path / "words.txt"
    words.write_text("导出文件 5\n", encoding="utf-8")
    index = tmp_path / "kb.sqlite"
    build(corpus_dir("evidence-mini"), index, builder="lines", tokenizer=f"jieba:userdict={words}")
    words.unlink()
    result = CliRunner().invoke(cli, ["search", str(index), "导出"])
    line = one_error(result)
    assert "cannot load the tokenizer or builder this index records" in line and "damaged" not in line
    assert "userdict" in line or str(words) in line
