"""The sections builder: seed 001's behaviours through it and the DocIndex compatibility class, and CRLF files split
as their LF twins."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import ALL_SPECS
from helpers.corpora import sections_corpus

from rag_eval.builders.sections import AnchorSet, Section, slugify, split_markdown, split_oversized
from rag_eval.compat import DocIndex
from rag_eval.errors import ReadError
from rag_eval.index.store import Index
from rag_eval.index.writer import build
from rag_eval.search.read import list_entries, read
from rag_eval.search.searching import search


def test_anchor_set_checks_every_candidate() -> None:
    """Seed 001's reserve() gave headings A, A, A-2 two 'a-2' anchors."""
    anchors = AnchorSet()
    assert [anchors.reserve(slugify(h)) for h in ("A", "A", "A-2")] == ["a", "a-2", "a-2-2"]


@pytest.mark.parametrize(
    ("heading", "slug"),
    [
        ("导出 文件", "导出-文件"),
        ("ＦＡＱ", "faq"),
        ("!!!", "section"),
        ("Python 3.11 安装", "python-3-11-安装"),
        ("", "section"),
    ],
)
def test_slugify(heading: str, slug: str) -> None:
    assert slugify(heading) == slug


def test_sections_of_the_fixture(docs: Path, tmp_path: Path) -> None:
    path = tmp_path / "index.sqlite"
    build(docs, path, builder="sections", tokenizer="bigram")
    with Index.open(path) as index:
        entries = {(e["path"], e["anchor"]): e for e in list_entries(index)}
    export = [(a, e["heading_path"]) for (p, a), e in entries.items() if p == "guide/export.md"]
    assert export == [
        ("_preamble", ""),
        ("导出指南", "导出指南"),
        ("导出文件", "导出指南 > 导出文件"),
        ("a", "导出指南 > A"),
        ("a-2", "导出指南 > A"),
        ("a-2-2", "导出指南 > A-2"),
        ("深层-标题", "导出指南 > A-2 > 深层 标题"),
        ("第四层", "导出指南 > A-2 > 深层 标题 > 第四层"),
    ]
    assert entries[("notes.md", "_root")]["category"] == ""
    assert entries[("guide/export.md", "a")]["category"] == "guide"
    assert [a for (p, a) in entries if p == "guide/long.md"] == ["备份", "备份~2", "备份~3", "备份~4"]
    assert all(e["chars"] <= 2000 for e in entries.values())


def test_fenced_code_is_not_a_heading() -> None:
    sections = split_markdown("# 一\n\n```\n# 不是标题\n```\n\n~~~~\n## 也不是\n~~~~\n# 二\n", "doc")
    assert [s.anchor for s in sections] == ["一", "二"]
    assert "# 不是标题" in sections[0].text and "## 也不是" in sections[0].text


def test_setext_headings_are_text() -> None:
    sections = split_markdown("标题\n===\n\n正文\n---\n", "doc")
    assert [s.anchor for s in sections] == ["_root"]


def test_oversized_split_at_blank_lines_and_hard_cut_only_for_one_paragraph() -> None:
    section = Section("x", "X", "X", "\n\n".join(["甲" * 900, "乙" * 900, "丙" * 900]) + "\n\n" + "丁" * 4500)
    parts = split_oversized(section, 2000)
    assert [p.anchor for p in parts] == ["x", "x~2", "x~3", "x~4", "x~5"]
    assert [p.text for p in parts] == [
        "甲" * 900 + "\n\n" + "乙" * 900,
        "丙" * 900,
        "丁" * 2000,
        "丁" * 2000,
        "丁" * 500,
    ]


def test_anchors_stable_across_rebuilds(docs: Path, tmp_path: Path) -> None:
    first, second = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    build(docs, first, builder="sections", tokenizer="jieba")
    (docs / "guide" / "zzz.md").write_text("# 新增\n\n新内容。\n", encoding="utf-8")
    build(docs, second, builder="sections", tokenizer="jieba")
    with Index.open(first) as a, Index.open(second) as b:
        before = {e["path"] + "#" + e["anchor"] for e in list_entries(a)}
        after = {e["path"] + "#" + e["anchor"] for e in list_entries(b)}
    assert before < after and after - before == {"guide/zzz.md#新增"}


def test_read_by_anchor_and_whole_file(docs: Path, tmp_path: Path) -> None:
    path = tmp_path / "index.sqlite"
    build(docs, path, builder="sections", tokenizer="bigram")
    with Index.open(path) as index:
        assert read(index, "guide/export.md#a-2") == "## A\n\n第二个 A。"
        assert read(index, "notes.md") == (docs / "notes.md").read_text(encoding="utf-8")
        with pytest.raises(ReadError, match="no section 'guide/export.md#nope'") as caught:
            read(index, "guide/export.md#nope")
        assert "anchors in guide/export.md: _preamble, 导出指南" in (caught.value.hint or "")


@pytest.mark.parametrize(
    "target",
    [
        "../secret.md",
        "/etc/passwd",
        "guide/../../secret.md",
        "guide\\..\\secret.md",
        "notes.md\x00.txt",
        "link.md",
        "C:/x.md",
        "",
    ],
)
def test_read_refuses_traversal(docs: Path, tmp_path: Path, target: str) -> None:
    (tmp_path / "secret.md").write_text("secret", encoding="utf-8")
    os.symlink(tmp_path / "secret.md", docs / "link.md")
    path = tmp_path / "index.sqlite"
    (docs / "link.md").unlink()  # the builder refuses escaping symlinks, so build first without it
    build(docs, path, builder="sections", tokenizer="bigram")
    os.symlink(tmp_path / "secret.md", docs / "link.md")
    with Index.open(path) as index, pytest.raises(ReadError):
        read(index, target)


def test_percent_encoding_is_not_decoded(docs: Path, tmp_path: Path) -> None:
    path = tmp_path / "index.sqlite"
    build(docs, path, builder="sections", tokenizer="bigram")
    with Index.open(path) as index, pytest.raises(ReadError, match="no file '%2e%2e/secret.md'"):
        read(index, "%2e%2e/secret.md")


# Exact snippets per strategy: full-width and traditional fixture text, 【】 density window.
SNIPPETS = {
    ("bigram", "wi-fi 密码"): ("faq/fullwidth.md#faq", "# ＦＡＱ\n\n【Ｗｉ－Ｆｉ】 密碼在設定頁面，版本 Ｖ２．３。"),
    ("jieba", "wi-fi 密码"): ("faq/fullwidth.md#faq", "# ＦＡＱ\n\n【Ｗｉ】－【Ｆｉ】 密碼在設定頁面，版本 Ｖ２．３。"),
    ("unigram", "wi-fi 密码"): (
        "faq/fullwidth.md#faq",
        "# ＦＡＱ\n\n【Ｗｉ－Ｆｉ】 【密】碼在設定頁面，版本 Ｖ２．３。",
    ),
    ("bigram:t2s=true", "资料库备份"): ("faq/fullwidth.md#資料庫備份", "# 【資料庫備份】\n\n資料庫備份會保留三十天。"),
    ("jieba", "資料庫备份"): ("faq/fullwidth.md#資料庫備份", "# 【資料庫】備份\n\n資料庫備份會保留三十天。"),
    ("trigram", "資料庫"): ("faq/fullwidth.md#資料庫備份", "# 【資料庫】備份\n\n資料庫備份會保留三十天。"),
    ("unicode61", "导出文件"): (
        "guide/export.md#导出文件",
        "## 【导出文件】\n\n在设置页面点击导出按钮，选择 CSV 或 Excel 格式。\n\n"
        "```bash\n# 这不是标题\nexport --all\n```",
    ),
    ("pkuseg:model=mini", "导出文件"): (
        "guide/export.md#导出文件",
        "## 【导出文件】\n\n在设置页面点击导出按钮，选择 CSV 或 Excel 格式。\n\n"
        "```bash\n# 这不是标题\nexport --all\n```",
    ),
}


@pytest.mark.parametrize(("spec", "query"), list(SNIPPETS), ids=[f"{s}-{q}" for s, q in SNIPPETS])
def test_exact_snippets(docs: Path, tmp_path: Path, spec: str, query: str) -> None:
    path = tmp_path / "index.sqlite"
    build(docs, path, builder="sections", tokenizer=spec)
    with Index.open(path) as index:
        top = search(index, query).hits[0]
    assert (top.chunk.key, top.snippet) == SNIPPETS[(spec, query)]


def test_long_section_snippet_is_a_window_with_ellipses(docs: Path, tmp_path: Path) -> None:
    (docs / "guide" / "window.md").write_text(
        "# 窗口\n\n" + "无关内容。" * 80 + "关键词导出在这里" + "其他内容。" * 80, encoding="utf-8"
    )
    path = tmp_path / "index.sqlite"
    build(docs, path, builder="sections", tokenizer="jieba")
    with Index.open(path) as index:
        hit = search(index, "关键词", category="guide").hits[0]
    assert hit.chunk.key == "guide/window.md#窗口"
    assert hit.snippet.startswith("…") and hit.snippet.endswith("…") and "【关键词】" in hit.snippet
    assert len(hit.snippet) <= 300 + 2 + 2


@pytest.mark.parametrize("spec", ALL_SPECS)
def test_docindex_seed_api(docs: Path, spec: str) -> None:
    index = DocIndex(docs, tokenizer=spec)
    assert index.build() == 15
    hits = index.search("导出文件保留三十天", limit=3)
    assert hits and hits[0].path == "guide/export.md" and hits[0].anchor == "导出指南"
    assert {s["category"] for s in index.list("faq")} == {"faq"}
    assert index.read("guide/export.md", "a-2-2").startswith("## A-2")
    with pytest.raises(PermissionError):
        index.read("../outside.md")
    index.close()


def test_docindex_defaults_to_jieba_in_memory(docs: Path) -> None:
    index = DocIndex(docs)
    index.build()
    assert index.db_path == ":memory:" and index.tokenizer == "jieba"
    assert [h.anchor for h in index.search("导出", limit=2)] == ["导出指南", "导出文件"]


def test_a_crlf_markdown_file_has_the_sections_of_its_lf_twin() -> None:
    """Regression: in a CRLF file a heading's closing #s stayed in its title and heading path ('标题 #'), and no
    blank line was seen between paragraphs, so an oversized section was cut mid-paragraph."""
    lines = ["# 标题 #", "", "a" * 800, "", "b" * 800, "  ", "```", "# 代码", "```", "", "c" * 800, "## 二 ##", "x", ""]
    sections = {}
    for newline in ("\n", "\r\n"):
        sections[newline] = [
            (part.anchor, part.title, part.heading_path, part.text.replace("\r", ""))
            for section in split_markdown(newline.join(lines), "a")
            for part in split_oversized(section, 2000)
        ]
    assert sections["\r\n"] == sections["\n"]
    assert [(anchor, title, path) for anchor, title, path, _ in sections["\n"]] == [
        ("标题", "标题", "标题"),
        ("标题~2", "标题", "标题"),
        ("二", "二", "标题 > 二"),
    ]
    assert sections["\n"][1][3] == "c" * 800  # split at the blank line, not inside a paragraph


def test_a_crlf_section_text_ends_where_its_lf_twin_ends(tmp_path: Path) -> None:
    """A CRLF section read back ends at its last line, not at a stray carriage return."""
    sections_corpus(tmp_path / "docs", "# 导出\r\n\r\n导出文件保留三十天\r\n\r\n## 备份\r\n\r\n备份策略\r\n")
    build(tmp_path / "docs", tmp_path / "index.sqlite", builder="sections", tokenizer="bigram")
    with Index.open(tmp_path / "index.sqlite") as index:
        assert read(index, "a.md#导出") == "# 导出\r\n\r\n导出文件保留三十天"
        assert read(index, "a.md#备份") == "## 备份\r\n\r\n备份策略"
