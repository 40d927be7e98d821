"""Hybrid systems: several tokenizers' terms in separate columns of one FTS5 table, weighted in bm25."""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import tokenizer_for

from rag_eval.cli import cli
from rag_eval.compat import DocIndex
from rag_eval.errors import SpecError
from rag_eval.index.columns import field_columns
from rag_eval.index.store import Index
from rag_eval.index.verify import verify_index
from rag_eval.index.writer import build
from rag_eval.search.searching import search
from rag_eval.tokenizers import HybridTokenizer, get_tokenizer, written_spec

HYBRID = "unigram^2+bigram+jieba:mode=precise"


@pytest.fixture
def hybrid_index(tmp_path: Path, docs: Path) -> Path:
    path = tmp_path / "hybrid.sqlite"
    build(docs, path, builder="sections", tokenizer=HYBRID)
    return path


def test_spec_syntax_and_canonical_form() -> None:
    tokenizer = get_tokenizer(" unigram ^2 + bigram + jieba:mode=precise ")
    assert isinstance(tokenizer, HybridTokenizer)
    assert tokenizer.system == "unigram:t2s=false^2+bigram:t2s=false+jieba:hmm=true,mode=precise,t2s=false"
    assert [(f.tokenizer.name, f.weight) for f in tokenizer.fields] == [
        ("unigram", 2.0),
        ("bigram", 1.0),
        ("jieba", 1.0),
    ]
    assert get_tokenizer(tokenizer.system).system == tokenizer.system  # the canonical form parses back
    assert written_spec(" unigram ^2 + bigram ") == "unigram^2+bigram"
    assert get_tokenizer("jieba:userdict=").system == "jieba:hmm=true,mode=search,t2s=false"  # not a hybrid
    assert "0:unicode" in tokenizer.fingerprint() and tokenizer.is_version_key("2:jieba")
    assert not tokenizer.is_version_key("9:jieba")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("trigram+bigram", "cannot be a field of a hybrid: its tokens may contain whitespace"),
        ("bigram^0+unigram", "must be from 0.001 to 1000"),
        ("bigram^nan+unigram", "must be from 0.001 to 1000"),
        ("bigram^1e9", "must be from 0.001 to 1000"),
        ("bigram^1e-300+unigram", "must be from 0.001 to 1000"),  # underflowed to 0 with a small title weight
        ("bigram^x", "invalid weight 'x'"),
        ("bigram+bigram", "names the same field twice"),
        ("+bigram", "empty field"),
    ],
)
def test_malformed_hybrids_are_spec_errors(spec: str, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        get_tokenizer(spec)


def vocabulary(path: Path, column: str) -> set[str]:
    db = sqlite3.connect(path)
    try:
        db.execute("CREATE VIRTUAL TABLE temp.v USING fts5vocab(main, 'search', 'col')")
        return {term for (term,) in db.execute("SELECT term FROM temp.v WHERE col = ?", (column,))}
    finally:
        db.close()


def test_each_columns_vocabulary_equals_its_tokenizers_tokens(hybrid_index: Path, docs: Path) -> None:
    with Index.open(hybrid_index) as index:
        texts = [(row["title"], row["text"]) for row in index.db.execute("SELECT title, text FROM chunks")]
    for number, spec in enumerate(["unigram", "bigram", "jieba:mode=precise"]):
        tokenizer = tokenizer_for(spec)
        title_column, body_column = field_columns(number)
        assert vocabulary(hybrid_index, body_column) == {t for _, text in texts for t in tokenizer.terms(text)}
        assert vocabulary(hybrid_index, title_column) == {t for title, _ in texts for t in tokenizer.terms(title)}


def test_scores_equal_the_weighted_bm25_over_the_fields_columns(hybrid_index: Path) -> None:
    with Index.open(hybrid_index) as index:
        result = search(index, "导出文件", explain=True)
        expression = result.query.expression
        assert expression is not None and expression.count("} : (") == 3
        weights = result.explain["column_weights"]
        assert weights == {
            "fts_title": 2.0,
            "fts_body": 2.0,
            "fts_title_1": 1.0,
            "fts_body_1": 1.0,
            "fts_title_2": 1.0,
            "fts_body_2": 1.0,
        }
        bare = index.db.execute(
            "SELECT rowid, bm25(search, 2.0, 2.0, 1.0, 1.0, 1.0, 1.0) AS s FROM search WHERE search MATCH ? "
            "ORDER BY s, rowid LIMIT 10",
            (expression,),
        ).fetchall()
        assert [(h.id, h.score) for h in result.hits] == [(row[0], row[1]) for row in bare]
        fields = result.explain["fields"]
        assert [f["tokens"] for f in fields] == [["导", "出", "文", "件"], ["导出", "出文", "文件"], ["导出", "文件"]]
        assert fields[1]["hits_per_term"]["出文"] >= 1 and "k1 / w" in result.explain["note"]


def test_a_field_matches_only_its_own_columns(tmp_path: Path) -> None:
    """出导 holds 导 and 出 as unigrams but not the bigram 导出: the query 导出 finds it through the unigram
    field alone, and the bigram field's term matches nothing in its own columns."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# 甲\n\n出导\n", encoding="utf-8")
    path = tmp_path / "index.sqlite"
    build(docs, path, builder="sections", tokenizer="bigram+unigram")
    with Index.open(path) as index:
        result = search(index, "导出", explain=True)
    assert [h.chunk.key for h in result.hits] == ["a.md#甲"]
    bigram, unigram = result.explain["fields"]
    assert bigram["hits_per_term"] == {"导出": 0} and unigram["hits_per_term"] == {"导": 1, "出": 1}


def test_a_field_weight_favours_chunks_that_match_in_that_field(tmp_path: Path) -> None:
    """Chunk 二 holds the bigram 导出, chunk 一 only its characters: weighting the bigram field widens 二's lead."""
    docs = tmp_path / "docs"
    docs.mkdir()
    filler = "".join(f"# 其{n}\n\n其他 内容 第{n}段\n\n" for n in range(6))  # keeps 导 and 出 rare (idf > 0)
    (docs / "a.md").write_text(
        "# 一\n\n导入 出口 导入 出口 导入 出口\n\n# 二\n\n导出 进口 进口 进口 进口 进口\n\n" + filler, encoding="utf-8"
    )
    path = tmp_path / "index.sqlite"
    lead = {}
    for spec in ("unigram^5+bigram", "unigram+bigram^5"):
        build(docs, path, builder="sections", tokenizer=spec)
        with Index.open(path) as index:
            scores = {h.chunk.anchor: h.score for h in search(index, "导出").hits}
        assert set(scores) == {"一", "二"}
        lead[spec] = scores["二"] / scores["一"]  # bm25 is negative: a larger ratio is a wider lead
    assert lead["unigram+bigram^5"] > lead["unigram^5+bigram"] > 1


def test_every_feature_works_on_a_hybrid(hybrid_index: Path, docs: Path, tmp_path: Path) -> None:
    with Index.open(hybrid_index) as index:
        assert search(index, "导出 文件", mode="and").hits
        phrase = search(index, "文件保留三十天", mode="phrase").hits
        assert [h.chunk.key for h in phrase] == ["guide/export.md#导出指南"]
        assert "【" in search(index, "资料库备份").hits[0].snippet
        assert {s.status for s in verify_index(index)} == {"ok"}
    again = build(docs, hybrid_index, builder="sections", tokenizer=HYBRID)
    assert again.chunks_tokenized == 0  # a sync reuses every field's tokens
    db = sqlite3.connect(hybrid_index)
    db.execute("UPDATE chunks SET fts_body_2 = 'tampered' WHERE id = 2")
    db.commit()
    db.close()
    with Index.open(hybrid_index) as index:
        stale = [s for s in verify_index(index) if s.status != "ok"]
    assert len(stale) == 1 and "jieba" in stale[0].detail


def test_lines_snippets_of_a_hybrid_highlight_every_fields_terms(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("导出文件保留三十天\n", encoding="utf-8")
    (corpus / "manifest.json").write_text(
        json.dumps([{"doc_id": "a", "revision": "r1", "status": "current", "expires": None, "path": "a.txt"}]),
        encoding="utf-8",
    )
    path = tmp_path / "lines.sqlite"
    build(corpus, path, builder="lines", tokenizer="unicode61+jieba")
    with Index.open(path) as index:
        hit = search(index, "保留", as_of="2026-01-01").hits[0]
    assert hit.snippet == "导出文件[保留]三十天"


def test_the_cli_and_the_seed_api_take_hybrid_specs(docs: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    path = tmp_path / "cli.sqlite"
    built = runner.invoke(
        cli, ["index", "build", str(docs), "-b", "sections", "-t", "bigram+unigram^0.5", "-o", str(path)]
    )
    assert built.exit_code == 0, built.stderr
    info = json.loads(runner.invoke(cli, ["index", "info", str(path), "--json"]).stdout)
    assert info["tokenizer"] == "bigram:t2s=false+unigram:t2s=false^0.5"
    found = json.loads(runner.invoke(cli, ["search", str(path), "备份", "--json"]).stdout)
    assert found["hits"] and found["index"]["tokenizer"].startswith("bigram:t2s=false+unigram")
    bad = runner.invoke(cli, ["index", "build", str(docs), "-b", "sections", "-t", "trigram+bigram", "-o", str(path)])
    assert bad.exit_code == 1 and bad.stderr.startswith("error: trigram") and "Traceback" not in bad.stderr
    seed = DocIndex(docs, tokenizer="unigram+jieba")
    assert seed.build() == 15 and seed.search("导出")[0].path == "guide/export.md"
    seed.close()


def test_compare_takes_a_hybrid_system(tmp_path: Path) -> None:
    systems = tmp_path / "systems.toml"
    systems.write_text(
        '[[system]]\ntokenizer = "bigram"\n\n[[system]]\ntokenizer = "unigram^2 + bigram"\n', encoding="utf-8"
    )
    result = CliRunner().invoke(
        cli, ["compare", "evidence-mini", "--systems", str(systems), "--json", "-o", str(tmp_path / "out")]
    )
    assert result.exit_code == 0, result.stderr
    rows = {row["name"]: row for row in json.loads(result.stdout)["systems"]}
    hybrid = rows["unigram^2+bigram | lines | and"]
    assert all(math.isfinite(value) for value in hybrid["metrics"].values())


@pytest.mark.parametrize("weight", ["1.0000001", "1.2345678", "0.333333333"])
def test_a_weight_finer_than_the_recorded_spec_is_refused(weight: str) -> None:
    """The canonical spec, which an index records and reopens with, writes 6 significant digits: ``^1.0000001``
    was recorded as ``^1`` (found by the tune audit), so a reopened index ranked with another weight."""
    with pytest.raises(SpecError, match="more than 6 significant digits"):
        get_tokenizer(f"bigram^{weight}+unigram")


def test_weights_with_six_significant_digits_are_recorded_as_given() -> None:
    tokenizer = get_tokenizer("bigram^1.23457+unigram^0.5")
    assert tokenizer.system == "bigram:t2s=false^1.23457+unigram:t2s=false^0.5"
    assert [field.weight for field in tokenizer.fields] == [1.23457, 0.5]
