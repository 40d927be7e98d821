"""Pseudo-relevance feedback (query:prf=rm3, query:prf=bo1): the weights on hand-computed examples, the weighted
ranking against an independent sum of FTS5's own per-term scores, each system expanding with its own tokens, and
every command refusing bad feedback options, engines that cannot weight terms and modes other than or."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from helpers.cli import invoke, one_error

from rag_eval.index.processing import QueryProcessing
from rag_eval.index.store import Index
from rag_eval.index.writer import build
from rag_eval.search.feedback import bo1, rm3
from rag_eval.search.searching import search

PASSAGES = [
    "导出文件保留三十天，到期后自动清理导出文件。",
    "在设置页面点击导出按钮，选择表格格式下载文件。",
    "账户密码可以在设置页面修改，修改后需要重新登录。",
    "大文件下载速度取决于网络，下载中断可以继续。",
    "删除的数据保留三十天，然后永久删除。",
    "数据备份每天进行一次，备份文件保留七天。",
    "登录失败五次后账户锁定三十分钟。",
    "导出任务在后台运行，完成后发送邮件通知。",
    "表格文件可以用电子表格软件打开。",
    "网络设置页面可以修改代理和端口。",
    "邮件通知可以在账户设置里关闭。",
    "后台任务的运行状态可以在任务页面查看。",
]


def test_rm3_weights_by_hand() -> None:
    # Query a, b; chunk 1 scored 2.0 holds x 5 (x is common: dropped), c 3, a 2, d 1; chunk 2 scored 1.0 holds
    # a, c, e once each. fb_terms 2: chunk 1 keeps c 3, a 2 (norm 5); chunk 2 keeps a, c (ties by term; norm 2).
    # RM1: c = 3/5 * 2 + 1/2 * 1 = 1.7, a = 2/5 * 2 + 1/2 * 1 = 1.3; L1: c 17/30, a 13/30.
    # Interpolated at 0.5 with q = (a 1/2, b 1/2): a = 1/4 + 13/60 = 28/60, b = 15/60, c = 17/60.
    documents = [(2.0, {"x": 5, "c": 3, "a": 2, "d": 1}), (1.0, {"c": 1, "e": 1, "a": 1})]
    got = rm3(["a", "b"], documents, lambda term: term == "x", 2, 0.5)
    assert list(got) == ["a", "b", "c"]
    for term, expected in {"a": 28 / 60, "b": 15 / 60, "c": 17 / 60}.items():
        assert got[term] == pytest.approx(expected, abs=1e-12)
    # original_weight 1 keeps the query alone (weight 0 terms are left out); 0 keeps the relevance model alone.
    assert rm3(["a", "b"], documents, lambda term: term == "x", 2, 1.0) == {"a": 0.5, "b": 0.5}
    alone = rm3(["a", "b"], documents, lambda term: term == "x", 2, 0.0)
    assert alone == pytest.approx({"c": 17 / 30, "a": 13 / 30}, abs=1e-12)


def test_bo1_weights_by_hand() -> None:
    # N = 10 chunks; query a; three feedback chunks {a 1, b 2, c 1}, {b 1, d 3}, {c 1}: tf_x a 1, b 3, c 2, d 3.
    # d is in one chunk only (fewer than 2) and no query term: left out. F: a 5, b 4, c 2, so Pn a .5, b .4, c .2.
    # w(t) = tf_x log2((1 + Pn) / Pn) + log2(1 + Pn); b is best; the normaliser is w with Pn = tf_x / N = .3.
    w_a = 1 * math.log2(1.5 / 0.5) + math.log2(1.5)
    w_b = 3 * math.log2(1.4 / 0.4) + math.log2(1.4)
    w_c = 2 * math.log2(1.2 / 0.2) + math.log2(1.2)
    norm = 3 * math.log2(1.3 / 0.3) + math.log2(1.3)
    frequency = {"a": 5, "b": 4, "c": 2, "d": 4}.__getitem__
    documents = [{"a": 1, "b": 2, "c": 1}, {"b": 1, "d": 3}, {"c": 1}]
    got = bo1(["a"], documents, frequency, 10, 3)
    assert list(got) == ["a", "b", "c"]
    for term, expected in {"a": 1 + w_a / norm, "b": w_b / norm, "c": w_c / norm}.items():
        assert got[term] == pytest.approx(expected, abs=1e-12)
    # fb_terms 2: b and c are the two best; a keeps its weight 1.
    assert bo1(["a"], documents, frequency, 10, 2) == pytest.approx({"a": 1.0, "b": w_b / norm, "c": w_c / norm})
    # One feedback chunk: no two-chunk rule (Terrier's), so d counts: w(d) = 3 log2(1.4/.4) + log2(1.4) = w_b.
    single = bo1(["a"], [{"d": 3}], frequency, 10, 1)
    assert single == pytest.approx({"a": 1.0, "d": w_b / norm}, abs=1e-12)


def _index(tmp_path: Path, tokenizer: str, processing: str = "") -> Path:
    corpus = tmp_path / f"corpus-{tokenizer.replace(':', '-').replace('+', '-')}"
    corpus.mkdir()
    rows = [{"_id": f"d{n}", "title": "", "text": text} for n, text in enumerate(PASSAGES)]
    (corpus / "corpus.jsonl").write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), "utf-8")
    path = corpus.with_suffix(".sqlite")
    build(corpus / "corpus.jsonl", path, builder="passages", tokenizer=tokenizer, processing=processing or None)
    return path


@pytest.mark.parametrize("method", ["rm3", "bo1"])
def test_the_expanded_ranking_sums_each_terms_fts5_score_times_its_weight(tmp_path: Path, method: str) -> None:
    path = _index(tmp_path, "unigram")
    with Index.open(path) as index:
        expanded = search(index, "导出文件", processing=f"prf={method},fb_docs=4", explain=True, limit=20)
        weights = expanded.explain["feedback"]["weights"]
        assert len(weights) > 4  # the query's 4 characters and some of the feedback chunks'
        expected: dict[int, float] = {}
        for term, weight in weights.items():  # FTS5's own bm25 of each term alone, over every chunk
            for hit in search(index, term, processing="none", engine="fts5", limit=20).hits:
                expected[hit.id] = expected.get(hit.id, 0.0) + weight * hit.score
        assert [hit.id for hit in expanded.hits] == sorted(expected, key=lambda id_: (expected[id_], id_))
        for hit in expanded.hits:
            assert hit.score == pytest.approx(expected[hit.id], rel=1e-12)
        plain = search(index, "导出文件", processing="none", limit=20)
        assert [hit.id for hit in plain.hits] != [hit.id for hit in expanded.hits] or plain.hits[0].score != (
            expanded.hits[0].score
        )


def test_a_one_field_and_a_hybrid_expand_with_their_own_tokens(tmp_path: Path) -> None:
    unigram = _index(tmp_path, "unigram", "prf=bo1,fb_docs=3")
    hybrid = _index(tmp_path, "jieba:mode=precise+unigram", "prf=rm3,fb_docs=3")
    with Index.open(unigram) as index:
        found = search(index, "导出文件", explain=True)
        assert found.explain["feedback"]["method"] == "bo1"
        assert all(len(term) == 1 for term in found.explain["feedback"]["weights"])
    with Index.open(hybrid) as index:
        found = search(index, "导出文件", explain=True)
        words, characters = found.explain["feedback"]["weights"]
        jieba = index.tokenizer.fields[0].tokenizer
        feedback_text = "".join(PASSAGES[int(key[1:])] for key in found.explain["feedback"]["documents"])
        assert set(words) - {"导出", "文件"} <= set(jieba.terms(feedback_text))
        assert any(len(word) > 1 for word in words if word not in ("导出", "文件"))
        assert all(len(term) == 1 for term in characters)
        assert sum(words.values()) == pytest.approx(1.0) and sum(characters.values()) == pytest.approx(1.0)


def _beir(tmp_path: Path) -> Path:
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    rows = [{"_id": f"d{n}", "title": "", "text": text} for n, text in enumerate(PASSAGES)]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), "utf-8")
    queries = {"q1": "导出文件多久", "q2": "修改密码", "q3": "邮件通知"}
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q, "text": t}, ensure_ascii=False) + "\n" for q, t in queries.items()), "utf-8"
    )
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td0\t1\nq2\td2\t1\nq3\td10\t1\n")
    return folder


def test_compare_runs_feedback_systems_end_to_end(tmp_path: Path) -> None:
    folder = _beir(tmp_path)
    systems = tmp_path / "systems.toml"
    systems.write_text(
        '[[system]]\ntokenizer = "unigram"\n\n[[system]]\ntokenizer = "unigram"\nquery = "prf=rm3,fb_docs=2"\n\n'
        '[[system]]\ntokenizer = "bigram"\nquery = "prf=bo1"\n'
    )
    result = invoke("compare", folder, "--systems", systems, "--repeat", "1", "--json", "-o", tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    rows = {row["name"]: row for row in json.loads(result.stdout)["systems"]}
    assert any("query:fb_docs=2,prf=rm3" in name for name in rows)
    assert any("query:prf=bo1" in name for name in rows)
    assert all(0 <= row["metrics"]["nDCG@10"] <= 1 for row in rows.values())


BAD = [
    ("fb_docs=0", "fb_docs"),  # feedback options without prf, and out of range
    ("prf=rm3,fb_docs=0", "fb_docs"),
    ("prf=rm3,fb_terms=0", "fb_terms"),
    ("prf=rm3,original_weight=1.5", "original_weight"),
    ("prf=xyz", "prf"),
    ("prf=bo1,original_weight=0.5", "original_weight"),
]


@pytest.mark.parametrize(("spec", "word"), BAD)
def test_bad_feedback_options_are_one_error_in_every_command(tmp_path: Path, spec: str, word: str) -> None:
    index = _index(tmp_path, "bigram")
    corpus = index.with_suffix("")
    systems = tmp_path / "systems.toml"
    systems.write_text(f'[[system]]\ntokenizer = "bigram"\nquery = "{spec}"\n')
    space = tmp_path / "space.toml"
    space.write_text(f'tokenizers = ["bigram"]\nprocessing = ["", "{spec}"]\n')
    commands = [
        ("search", index, "导出", "--processing", spec),
        ("index", "build", corpus, "-o", tmp_path / "new.sqlite", "--processing", spec),
        ("index", "build", corpus, "-o", tmp_path / "new.sqlite", "--from", systems),
        ("compare", _beir(tmp_path), "--systems", systems, "-o", tmp_path / "out"),
        ("compare", tmp_path / "beir", "-t", "bigram", "--processing", spec, "-o", tmp_path / "out"),
        ("tune", tmp_path / "beir", "--space", space, "-o", tmp_path / "tuned"),
    ]
    for command in commands:
        one_error(invoke(*command), word, code=None)
    assert not (tmp_path / "new.sqlite").exists()


def test_engines_that_cannot_weight_terms_are_refused_before_anything_is_built(tmp_path: Path) -> None:
    index = _index(tmp_path, "bigram")
    corpus = index.with_suffix("")
    folder = _beir(tmp_path)
    systems = tmp_path / "systems.toml"
    systems.write_text('[[system]]\ntokenizer = "bigram"\nquery = "prf=rm3"\nengine = "fts5"\n')
    peer = tmp_path / "peer.toml"
    peer.write_text('[[system]]\ntokenizer = "bigram"\nquery = "prf=bo1"\nengine = "bm25s"\n')
    made = tmp_path / "made.sqlite"
    for command in [
        ("index", "build", corpus, "-o", made, "--processing", "prf=rm3", "--engine", "fts5"),
        ("compare", folder, "--systems", systems, "-o", tmp_path / "out1"),
        ("compare", folder, "--systems", peer, "-o", tmp_path / "out2"),
        ("search", index, "导出", "--processing", "prf=rm3", "--engine", "fts5"),
    ]:
        error = one_error(invoke(*command), "cannot weight query terms", code=None)
        assert "prf=" in error
    assert not made.exists() and not (tmp_path / "out1").exists() and not (tmp_path / "out2").exists()
    hinted = invoke("search", index, "导出", "--processing", "prf=rm3", "--engine", "fts5")
    assert "hint: use engine impact" in hinted.stderr


def test_feedback_expands_or_queries_only(tmp_path: Path) -> None:
    index = _index(tmp_path, "bigram")
    one_error(invoke("search", index, "导出", "--processing", "prf=rm3", "--mode", "and"), "'or' queries")
    lines = tmp_path / "lines"
    lines.mkdir()
    (lines / "a.txt").write_text("导出文件保留三十天\n", encoding="utf-8")
    (lines / "manifest.json").write_text(
        '[{"doc_id": "a", "revision": "r1", "status": "current", "expires": null, "path": "a.txt"}]'
    )
    made = tmp_path / "lines.sqlite"
    one_error(invoke("index", "build", lines, "-b", "lines", "-o", made, "--processing", "prf=bo1"), "'or' queries")
    assert not made.exists()
    # A phrase is exact and never processed: answered unexpanded.
    with Index.open(index) as opened:
        phrase = search(opened, "导出文件", mode="phrase", processing="prf=rm3", explain=True)
        assert "feedback" not in phrase.explain and phrase.hits


def test_unweighted_queries_carry_no_weights(tmp_path: Path) -> None:
    # Guards the bit-identical promise: a query without feedback is compiled and ranked exactly as before.
    index = _index(tmp_path, "unigram")
    with Index.open(index) as opened:
        for processing in ("none", "stopwords=zh", "max_df=0.5"):
            result = search(opened, "导出文件", processing=processing, limit=20)
            assert result.query.weighted is None
            fts5 = search(opened, "导出文件", processing=processing, engine="fts5", limit=20)
            assert [(h.id, h.score) for h in result.hits] == [(h.id, h.score) for h in fts5.hits]
    assert not QueryProcessing.parse("stopwords=zh").weighted


@pytest.mark.parametrize(
    ("spelled", "same_as"),
    [
        ("prf=rm3,fb_docs=10", "prf=rm3"),
        ("prf=rm3,fb_docs=10,fb_terms=10,original_weight=0.5", "prf=rm3"),
        ("prf=bo1,fb_docs=3,fb_terms=10", "prf=bo1"),
        ("stopwords=zh,prf=bo1,fb_terms=10", "prf=bo1,stopwords=zh"),
    ],
)
def test_a_method_s_defaults_written_out_are_the_same_system(spelled: str, same_as: str) -> None:
    """One system, one name: compare's rows, tune's candidates and the index cache key by it."""
    assert QueryProcessing.parse(spelled).written == QueryProcessing.parse(same_as).written
    assert QueryProcessing.parse(spelled).system == QueryProcessing.parse(same_as).system
    assert QueryProcessing.parse("prf=rm3,fb_docs=5").written != QueryProcessing.parse("prf=rm3").written
