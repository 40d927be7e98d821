"""index build / info / list / verify, search and read through click's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from make_corpus import make

from rag_eval.cli import cli


@pytest.fixture
def built(tmp_path: Path) -> tuple[CliRunner, Path, Path]:
    root = tmp_path / "corpus"
    make(root)
    index = tmp_path / "index.sqlite"
    runner = CliRunner()
    result = runner.invoke(cli, ["index", "build", str(root), "-o", str(index), "-b", "lines", "-t", "jieba"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith(
        f"indexed 12 chunks (non-empty lines of the manifest's documents) from 6 files into {index}"
    )
    return runner, root, index


def test_search_text_and_json(built) -> None:
    runner, _, index = built
    result = runner.invoke(cli, ["search", str(index), "导出 保留", "--as-of", "2026-10-07"])
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert lines[0].split("\t")[2:] == ["compact.txt:1", "[导出]文件[保留]三十天"]
    assert lines[1].split("\t")[2:] == ["handbook.txt:2", "[导出] 文件 [保留] 30 天 ， 到期 后 清理 。"]
    payload = json.loads(
        runner.invoke(cli, ["search", str(index), "导出 保留", "--as-of", "2026-10-07", "--json"]).output
    )
    assert payload["action_authority"] is False and len(payload["hits"]) == 3
    assert payload["hits"][0]["source_id"].startswith("compact@r1:")


def test_search_explain_and_no_hits(built) -> None:
    runner, _, index = built
    result = runner.invoke(cli, ["search", str(index), "发票", "--explain"])
    assert result.exit_code == 0
    assert '# match: "\\"发票\\""' in result.output
    assert "no hits" in result.stderr


def test_info_list_read(built) -> None:
    runner, _, index = built
    info = json.loads(runner.invoke(cli, ["index", "info", str(index), "--json"]).output)
    assert info["builder"] == "lines:max_bytes=1000000" and info["chunks"] == "12"
    listing = runner.invoke(cli, ["index", "list", str(index)]).output.splitlines()
    assert listing[0] == "handbook-v1@r1\tarchived\t-\thandbook-v1.txt\t2 lines"
    assert (
        runner.invoke(cli, ["read", str(index), "garden.txt"]).output
        == "窗台 养护 笔记\n薄荷 每周 检查 土壤 湿度 。\n\n"
    )


def test_verify_exit_codes(built) -> None:
    runner, root, index = built
    ok = runner.invoke(cli, ["index", "verify", str(index), "--root", str(root)])
    assert ok.exit_code == 0 and "# files: 6 ok, 0 stale, 0 missing, 0 new" in ok.stderr
    (root / "garden.txt").write_text("变了\n", encoding="utf-8")
    stale = runner.invoke(cli, ["index", "verify", str(index)])
    assert stale.exit_code == 1 and "# files: 5 ok, 1 stale, 0 missing, 0 new" in stale.stderr
    assert "stale\tgarden.txt\t2\tthe file changed since the build" in stale.output
    chunks = runner.invoke(cli, ["index", "verify", str(index), "--chunks", "--problems"])
    assert chunks.exit_code == 1 and "# chunks: 10 ok, 2 stale, 0 missing, 0 new" in chunks.stderr
    assert [line.split("\t")[1].split(":")[0] for line in chunks.stdout.splitlines()] == ["garden@r1", "garden@r1"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["search", "{index}", "导出", "--limit", "0"], "error: limit must be an integer from 1 to 20, not 0"),
        (["search", "{index}", "导出", "--as-of", "tomorrow"], "error: as-of date 'tomorrow': use YYYY-MM-DD"),
        (["read", "{index}", "../x.txt"], "error: no file '../x.txt' is served from this index"),
        (["read", "{index}", "garden.txt#nope"], "error: no section 'garden.txt#nope' in this index"),
        (
            ["index", "build", "{root}", "-o", "{index}", "-b", "nope"],
            "error: unknown builder 'nope'; choose from: lines, passages, sections",
        ),
        (
            ["index", "build", "{root}", "-o", "{index}", "-b", "lines:x=1"],
            "error: unknown option 'x' for lines; valid options: max_bytes",
        ),
        (["index", "build", "{root}", "-o", "{index}", "-b", "sections"], "error: {root}: no .md files found"),
        (["index", "info", "{root}/manifest.json"], "error: {root}/manifest.json: not a rag-eval index"),
    ],
)
def test_errors_are_one_line(built, args: list[str], message: str) -> None:
    runner, root, index = built
    args = [a.replace("{index}", str(index)).replace("{root}", str(root)) for a in args]
    result = runner.invoke(cli, args)
    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines()[0].startswith(message.replace("{root}", str(root)))
    assert "Traceback" not in result.stderr


def test_second_build_while_locked_is_refused(built) -> None:
    runner, root, index = built
    from rag_eval.index.store import build_lock

    with build_lock(str(index)):
        result = runner.invoke(cli, ["index", "build", str(root), "-o", str(index), "-b", "lines", "-t", "jieba"])
    assert result.exit_code == 1
    assert "another build is running on this index" in result.stderr


def test_the_builder_is_the_recorded_one_or_the_sources_layout(built, tmp_path: Path) -> None:
    """Without -b, a sync keeps the builder the index records (options included) and a new index takes the
    one the source's layout calls for; -b '' and a source no builder recognises are one error line each."""
    from rag_eval.eval.datasets.shipped import corpus_dir
    from rag_eval.index.store import Index

    runner, root, index = built
    docs = corpus_dir("handbook")

    def build(*args: str) -> str:
        result = runner.invoke(cli, ["index", "build", *args])
        assert result.exit_code == 0, result.output
        with Index.open(args[args.index("-o") + 1]) as opened:
            return opened.meta["builder"].split(":")[0] + (
                ":1500" if "max_chars=1500" in opened.meta["builder"] else ""
            )

    assert build(str(root), "-o", str(tmp_path / "lines.sqlite")) == "lines"
    assert build(str(docs), "-o", str(tmp_path / "docs.sqlite")) == "sections"
    assert build(str(docs), "-o", str(tmp_path / "split.sqlite"), "-b", "sections:max_chars=1500") == "sections:1500"
    result = runner.invoke(cli, ["index", "build", str(docs), "-o", str(tmp_path / "split.sqlite")])
    assert result.exit_code == 0 and "tokenized 0 chunks" in result.output, result.output  # same builder: a sync
    assert build(str(docs), "-o", str(tmp_path / "split.sqlite")) == "sections:1500"
    assert build(str(root), "-o", str(index)) == "lines"  # the fixture's lines index, synced
    (tmp_path / "empty").mkdir()
    for args, message in (
        (["-b", ""], "error: -b is empty"),
        ([], "no builder recognises this source"),
    ):
        result = runner.invoke(
            cli, ["index", "build", str(tmp_path / "empty"), "-o", str(tmp_path / "e.sqlite"), *args]
        )
        assert result.exit_code != 0 and message in result.output and "Traceback" not in result.output, result.output
        assert not (tmp_path / "e.sqlite").exists()


def test_a_sync_keeps_what_the_index_records(tmp_path: Path) -> None:
    """Builder, tokenizer, query processing and engine left out of a sync are the index's own (a sync without
    -t made a jieba index bigram, and dropped its processing, without a word); given ones replace them."""
    from rag_eval.eval.datasets.shipped import corpus_dir
    from rag_eval.index.store import Index

    runner = CliRunner()
    docs, index = corpus_dir("handbook"), tmp_path / "kb.sqlite"

    def settings() -> tuple[str, str, str, str]:
        with Index.open(index) as opened:
            meta = opened.meta
            return meta["builder"].split(":")[0], meta["tokenizer"], meta["query_processing"], meta["engine"]

    def build(*args: str) -> str:
        result = runner.invoke(cli, ["index", "build", str(docs), "-o", str(index), *args])
        assert result.exit_code == 0, result.output
        return result.output

    build("-t", "unigram", "--processing", "stopwords=zh", "--engine", "fts5")
    first = settings()
    assert first[1].startswith("unigram") and "stopwords" in first[2] and first[3] == "fts5"
    assert "tokenized 0 chunks" in build()
    assert settings() == first
    build("--processing", "")
    assert settings() == (*first[:2], "", "fts5")
    build("-t", "bigram", "--engine", "auto")
    assert settings()[1].startswith("bigram") and settings()[3] == "impact"
    fresh = tmp_path / "new.sqlite"
    result = runner.invoke(cli, ["index", "build", str(docs), "-o", str(fresh)])
    assert result.exit_code == 0, result.output
    with Index.open(fresh) as opened:
        assert opened.meta["tokenizer"].startswith("bigram") and opened.meta["engine"] == "impact"
        assert opened.meta["query_processing"] == ""


def test_read_takes_the_place_plain_search_shows(built) -> None:
    """Plain search output shows a line hit as path:line; read takes that too."""
    runner, _root, index = built
    shown = runner.invoke(cli, ["search", str(index), "导出"])
    assert shown.exit_code == 0, shown.output
    place = shown.output.splitlines()[0].split("\t")[2]
    assert place.endswith((":1", ":2", ":3", ":4", ":5"))
    as_json = runner.invoke(cli, ["search", str(index), "导出", "--json"])
    first = json.loads(as_json.output)["hits"][0]
    result = runner.invoke(cli, ["read", str(index), place])
    assert result.exit_code == 0 and result.output.strip() == first["text"].strip(), result.output
    result = runner.invoke(cli, ["read", str(index), place.rsplit(":", 1)[0] + ":999"])
    assert result.exit_code == 1 and "error:" in result.output


def test_plain_search_prints_one_hit_per_line(tmp_path: Path) -> None:
    """Section snippets hold line breaks; the plain output keeps one hit per line of four tab-separated columns."""
    from rag_eval.eval.datasets.shipped import corpus_dir
    from rag_eval.index.writer import build

    index = tmp_path / "hb.sqlite"
    build(corpus_dir("handbook"), index, builder="sections", tokenizer="bigram")
    shown = CliRunner().invoke(cli, ["search", str(index), "导出文件保留多久", "--limit", "10"])
    as_json = CliRunner().invoke(cli, ["search", str(index), "导出文件保留多久", "--limit", "10", "--json"])
    hits = json.loads(as_json.output)["hits"]
    assert any("\n" in hit["snippet"] for hit in hits)  # the case this is about
    lines = shown.stdout.splitlines()
    assert len(lines) == len(hits) == 10 and all(len(line.split("\t")) == 4 for line in lines)
    assert [line.split("\t")[2] for line in lines] == [hit["key"] for hit in hits]
