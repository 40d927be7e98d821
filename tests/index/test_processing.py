"""Query processing: question and function words removed, frequent terms pruned, terms capped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from rag_eval.cli import cli
from rag_eval.errors import SpecError
from rag_eval.index.processing import QueryProcessing, question_words
from rag_eval.index.store import Index
from rag_eval.index.writer import build
from rag_eval.search.searching import search


def test_the_shipped_list_holds_the_documented_words_in_both_scripts() -> None:
    words = question_words()
    assert {"什么", "哪", "哪里", "如何", "怎么", "吗", "呢", "是", "的"} <= words
    assert {"什麼", "哪裡", "怎麼", "嗎", "為什麼"} <= words


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("max_df=0", "finite number above 0 and at most 1"),
        ("max_df=1.5", "finite number above 0 and at most 1"),
        ("max_df=x", "finite number above 0 and at most 1"),
        ("top_terms=-1", "from 0"),
        ("stopwords=fr", "expected one of: none, zh"),
        ("nope=1", "unknown option 'nope' for query"),
        ("other:stopwords=zh", "invalid"),
    ],
)
def test_malformed_processing_is_a_spec_error(spec: str, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        QueryProcessing.parse(spec)


def test_specs_are_canonical_and_inactive_by_default() -> None:
    assert not QueryProcessing.parse("").active
    processing = QueryProcessing.parse("top_terms=5, stopwords=zh")
    assert processing.system == "query:max_df=1.0,stopwords=zh,top_terms=5" and processing.active
    assert QueryProcessing.parse("query:stopwords=zh,top_terms=5,max_df=1").system == processing.system


@pytest.mark.parametrize(
    ("question", "kept", "removed"),
    [
        ("导出文件保留多久呢", "导出文件保留   ", ("多久", "呢")),
        ("目的是什么", "目的   ", ("是", "什么")),  # 目的 is one word: its 的 stays
        ("這個功能怎麼用", "這個功能  用", ("怎麼",)),
        ("如何导出？", "  导出？", ("如何",)),
    ],
)
def test_question_words_are_removed_as_words(question: str, kept: str, removed: tuple[str, ...]) -> None:
    assert QueryProcessing.parse("stopwords=zh").strip(question) == (kept, removed)


def test_pruning_drops_frequent_terms_caps_the_rest_and_never_empties_a_field() -> None:
    frequencies = {"的": 90, "导": 40, "出": 30, "文": 5, "件": 5, "保": 2}
    processing = QueryProcessing.parse("max_df=0.35")
    kept, seen = processing.prune([("的", "导", "出", "文"), ("的",)], frequencies.__getitem__, 100)
    assert kept == [("出", "文"), ("的",)] and seen["的"] == 90  # 的 alone is kept rather than nothing
    capped, _ = QueryProcessing.parse("top_terms=2").prune([("导", "文", "件", "保")], frequencies.__getitem__, 100)
    assert capped == [("文", "保")]  # the two rarest, in query order; 文 and 件 tie and the earlier wins
    capped, _ = QueryProcessing.parse("top_terms=2").prune([("导", "件", "文", "保")], frequencies.__getitem__, 100)
    assert capped == [("件", "保")]


@pytest.fixture
def index(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    sections = [f"# 第{n}节\n\n这是第{n}段的内容，说明了什么是备份。\n" for n in range(8)]
    sections.append("# 导出\n\n导出文件保留三十天。\n")
    (docs / "a.md").write_text("\n".join(sections), encoding="utf-8")
    path = tmp_path / "index.sqlite"
    build(docs, path, builder="sections", tokenizer="unigram")
    return path


def test_search_applies_processing_and_explains_it(index: Path) -> None:
    processing = QueryProcessing.parse("stopwords=zh,max_df=0.5")
    with Index.open(index) as opened:
        plain = search(opened, "什么是导出", explain=True)
        processed = search(opened, "什么是导出", explain=True, processing=processing)
        phrase = search(opened, "导出文件", mode="phrase", processing=processing)
        frequent = search(opened, "备份内容导出", processing=QueryProcessing.parse("max_df=0.5"))
    assert "什" in plain.query.terms and "是" in plain.query.terms
    assert processed.query.terms == ("导", "出") and processed.query.removed == ("什么", "是")
    explained = processed.explain["processing"]
    assert explained["removed"] == ["什么", "是"] and explained["chunks"] == 9
    assert [h.chunk.anchor for h in processed.hits] == ["导出"]
    assert [h.chunk.anchor for h in phrase.hits] == ["导出"] and phrase.query.removed == ()
    assert frequent.query.pruned == ("备", "份", "内", "容") and frequent.query.terms == ("导", "出")


def test_compare_and_search_take_processing_from_the_command_line(index: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    found = runner.invoke(
        cli, ["search", str(index), "什么是导出", "--processing", "stopwords=zh", "--json", "--explain"]
    )
    assert found.exit_code == 0, found.stderr
    assert json.loads(found.stdout)["explain"]["processing"]["removed"] == ["什么", "是"]
    bad = runner.invoke(cli, ["search", str(index), "导出", "--processing", "max_df=2"])
    assert bad.exit_code == 1 and bad.stderr.startswith("error: bad value '2' for query option 'max_df'")
    report = runner.invoke(
        cli,
        [
            "compare",
            "evidence-mini",
            "-t",
            "bigram",
            "--processing",
            "stopwords=zh",
            "--json",
            "-o",
            str(tmp_path / "out"),
        ],
    )
    assert report.exit_code == 0, report.stderr
    names = [row["name"] for row in json.loads(report.stdout)["systems"]]
    assert names == ["bigram | lines | and | query:stopwords=zh"]
    systems = tmp_path / "systems.toml"
    systems.write_text(
        '[[system]]\ntokenizer = "bigram"\n\n[[system]]\ntokenizer = "bigram"\nquery = "max_df=0.5"\n', encoding="utf-8"
    )
    both = runner.invoke(
        cli, ["compare", "evidence-mini", "--systems", str(systems), "--json", "-o", str(tmp_path / "o2")]
    )
    assert both.exit_code == 0, both.stderr
    assert [row["name"] for row in json.loads(both.stdout)["systems"]] == [
        "bigram | lines | and",
        "bigram | lines | and | query:max_df=0.5",
    ]


def test_an_index_records_its_processing_and_searches_use_it(tmp_path: Path, index: Path) -> None:
    docs = tmp_path / "docs"
    rec = tmp_path / "recommendation.toml"
    rec.write_text(
        '[[system]]\ntokenizer = "unigram^2+bigram"\nbuilder = "sections"\nquery = "stopwords=zh"\n', encoding="utf-8"
    )
    built = tmp_path / "built.sqlite"
    runner = CliRunner()
    result = runner.invoke(cli, ["index", "build", str(docs), "--from", str(rec), "-o", str(built)])
    assert result.exit_code == 0, result.stderr
    with Index.open(built) as opened:
        assert opened.tokenizer.system == "unigram:t2s=false^2+bigram:t2s=false"
        assert opened.processing is not None and opened.processing.system == "query:max_df=1.0,stopwords=zh,top_terms=0"
        assert search(opened, "什么是导出").query.removed == ("什么", "是")  # the index's own processing
        assert search(opened, "什么是导出", processing=QueryProcessing()).query.removed == ()  # none asked for
    overridden = runner.invoke(
        cli,
        [
            "index",
            "build",
            str(docs),
            "--from",
            str(rec),
            "-t",
            "bigram",
            "--processing",
            "none",
            "-o",
            str(tmp_path / "b.sqlite"),
        ],
    )
    assert overridden.exit_code == 0, overridden.stderr
    with Index.open(tmp_path / "b.sqlite") as opened:
        assert opened.tokenizer.name == "bigram" and opened.processing is None
    two = tmp_path / "two.toml"
    two.write_text('[[system]]\ntokenizer = "bigram"\n\n[[system]]\ntokenizer = "unigram"\n', encoding="utf-8")
    refused = runner.invoke(cli, ["index", "build", str(docs), "--from", str(two), "-o", str(tmp_path / "c.sqlite")])
    assert refused.exit_code == 1 and "expected exactly one [[system]]" in refused.stderr


@pytest.mark.parametrize(
    "spec", ["top_terms=1_0", "top_terms=١", "top_terms=-1", "top_terms=10001", "max_df=nan", "max_df=0", "max_df=1.5"]
)
def test_query_processing_refuses_numbers_outside_the_grammar(spec: str) -> None:
    with pytest.raises(SpecError, match="expected a"):
        QueryProcessing.parse(spec)


def test_query_processing_takes_its_edges() -> None:
    assert QueryProcessing.parse("top_terms=0,max_df=1").system == QueryProcessing.parse("").system
    assert "top_terms=10000" in QueryProcessing.parse("top_terms=10000").system
