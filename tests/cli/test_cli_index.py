"""index build / info / list / verify, search and read through click's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import regex
from click.testing import CliRunner
from helpers import REPO
from helpers.corpora import lines_corpus, passages_corpus, sections_corpus
from make_corpus import make

from rag_eval.cli import cli
from rag_eval.index.writer import build


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


@pytest.mark.parametrize(
    ("builder", "make"),
    [
        ("passages", lambda folder: passages_corpus(folder, "备份策略", title="第一行\n第二行\t第二列\r\x85\u2028末")),
        ("sections", lambda folder: sections_corpus(folder, "# 标题\t第二列\n\n备份策略\n")),
    ],
)
def test_index_list_prints_one_line_of_three_columns_per_entry(tmp_path: Path, builder: str, make) -> None:
    """Regression: a passage title holding a line break (any JSON string may) or a heading holding a tab broke
    index list's one entry per line, three tab-separated columns."""
    source = make(tmp_path / "src")
    build(source, tmp_path / "index.sqlite", builder=builder, tokenizer="bigram")
    result = CliRunner().invoke(cli, ["index", "list", str(tmp_path / "index.sqlite")])
    assert result.exit_code == 0, result.output
    rows = result.output.splitlines()
    assert len(rows) == (2 if builder == "passages" else 1), rows
    assert all(len(row.split("\t")) == 3 for row in rows), rows


def test_read_takes_the_place_search_prints_for_a_line_in_a_file_named_with_a_hash(tmp_path: Path) -> None:
    """Regression: search printed 'a#b.txt:2' for a lines corpus file 'a#b.txt', and read refused it ('no section
    'a#b.txt:2''): the target split at its '#' and PATH:N was never tried."""
    source = lines_corpus(tmp_path / "src", "导出文件\n保留三十天\n", name="a#b.txt")
    build(source, tmp_path / "index.sqlite", builder="lines", tokenizer="bigram")
    found = CliRunner().invoke(cli, ["search", str(tmp_path / "index.sqlite"), "保留"])
    assert found.exit_code == 0 and found.output.split("\t")[2] == "a#b.txt:2", found.output
    result = CliRunner().invoke(cli, ["read", str(tmp_path / "index.sqlite"), "a#b.txt:2"])
    assert result.exit_code == 0 and result.output == "保留三十天\n", result.output


@pytest.mark.parametrize("spec", ["unicode61", "bigram"])
def test_search_output_cannot_drive_the_terminal(tmp_path: Path, spec: str) -> None:
    """A corpus's ESC sequences (and other control characters) reached the terminal raw in search's plain
    output; they are shown as their Unicode pictures, and each hit stays one line of four columns."""
    text = "导出文件 \x1b[2J\x1b]0;pwned\x07 备份\x7f数据\x9b31m"
    source = passages_corpus(tmp_path / "c", text, title="标题\x1b[1m")
    path = tmp_path / "i.sqlite"
    build(source, path, builder="passages", tokenizer=spec)
    result = CliRunner().invoke(cli, ["search", str(path), "导出 备份"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines and all(line.count("\t") == 3 for line in lines)
    assert not regex.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", result.output)
    assert "␛[2J" in result.output and "␇" in result.output
    listed = CliRunner().invoke(cli, ["index", "list", str(path)])
    assert listed.exit_code == 0 and not regex.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", listed.output)


DATASETS = REPO / "datasets"


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
