"""The impact engine returns exactly FTS5's ranking: same ids, same order, scores within 1e-9 relative."""

from __future__ import annotations

import json
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import pytest
from helpers import tokenizer_for
from helpers.engines import assert_same, fts5_top, impact_top
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_eval.engines import impact
from rag_eval.engines.impact import rank as impact_rank
from rag_eval.engines.impact import read as impact_read
from rag_eval.engines.impact import write as impact_write
from rag_eval.errors import QueryError
from rag_eval.eval.datasets.shipped import corpus_dir, datasets_root, entry
from rag_eval.index.store import Index, foreign_reason
from rag_eval.index.writer import build
from rag_eval.search.query import compile_query
from rag_eval.search.searching import search

STRATEGIES = ["bigram", "unicode61", "trigram", "unigram", "jieba", "pkuseg:model=mini"]


def queries(dataset: str) -> list[str]:
    path = datasets_root() / dataset / "queries.jsonl"
    return [json.loads(line)["text"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Path]:
    return {}


def shipped_index(built: dict[tuple[str, str], Path], folder: Path, dataset: str, spec: str) -> Index:
    key = (dataset, spec)
    if key not in built:
        built[key] = folder / f"{dataset}-{len(built)}.sqlite"
        build(corpus_dir(dataset), built[key], builder=entry(dataset)["builder"], tokenizer=spec, engine="impact")
    return Index.open(built[key])


@pytest.mark.parametrize("dataset", ["handbook", "evidence-mini"])
@pytest.mark.parametrize("spec", STRATEGIES)
def test_shipped_sets_rank_exactly_as_fts5(
    built: dict[tuple[str, str], Path], tmp_path_factory: pytest.TempPathFactory, dataset: str, spec: str
) -> None:
    tokenizer_for(spec)  # loaded once for the run
    with shipped_index(built, tmp_path_factory.getbasetemp(), dataset, spec) as index:
        for text in queries(dataset):
            for mode in ("or", "and"):
                assert_same(fts5_top(index, text, mode, 100), impact_top(index, text, mode, 100))


@pytest.mark.parametrize("spec", ["bigram", "trigram"])
def test_filters_and_small_limits(
    built: dict[tuple[str, str], Path], tmp_path_factory: pytest.TempPathFactory, spec: str
) -> None:
    filters: list[dict[str, Any]] = [
        {"as_of": "2026-10-07"},
        {"as_of": "2026-09-01", "path_prefix": "refund"},
        {"category": ""},
        {"category": "nothing"},
        {"path_prefix": "vpn"},
    ]
    with shipped_index(built, tmp_path_factory.getbasetemp(), "evidence-mini", spec) as index:
        for text in queries("evidence-mini"):
            for chosen in filters:
                for limit in (1, 2, 7):
                    for mode in ("or", "and"):
                        expected = fts5_top(index, text, mode, limit, **chosen)
                        assert_same(expected, impact_top(index, text, mode, limit, **chosen))


def test_handbook_sections_filters(
    built: dict[tuple[str, str], Path], tmp_path_factory: pytest.TempPathFactory
) -> None:
    with shipped_index(built, tmp_path_factory.getbasetemp(), "handbook", "bigram") as index:
        categories = [row[0] for row in index.db.execute("SELECT DISTINCT category FROM chunks ORDER BY category")]
        assert len(categories) > 1
        for text in queries("handbook")[:40]:
            for category in categories[:3]:
                for limit in (1, 3):
                    expected = fts5_top(index, text, "or", limit, category=category)
                    assert_same(expected, impact_top(index, text, "or", limit, category=category))


@pytest.mark.parametrize("engine", ["fts5", "impact"])
@pytest.mark.parametrize("spec", ["bigram", "jieba"])
def test_keys_only_searches_return_the_same_hits_with_only_their_keys(
    built: dict[tuple[str, str], Path], tmp_path_factory: pytest.TempPathFactory, engine: str, spec: str
) -> None:
    """What ``compare`` and batch search read: the same ids, order, scores and keys as a full search, and
    nothing else of the row; with filters, both modes, phrases (FTS5 answers them) and limits down to 1."""
    tokenizer_for(spec)
    filters: list[dict[str, Any]] = [{}, {"as_of": "2026-09-01", "path_prefix": "refund"}, {"category": "nothing"}]
    checked = 0
    with shipped_index(built, tmp_path_factory.getbasetemp(), "evidence-mini", spec) as index:
        for text in queries("evidence-mini"):
            for chosen in filters:
                for mode in ("or", "and", "phrase"):
                    for limit in (1, 100):
                        options: dict[str, Any] = {"mode": mode, "limit": limit, "deep": True, "snippets": False}
                        full = search(index, text, engine=engine, **options, **chosen).hits
                        keys = search(index, text, engine=engine, keys_only=True, **options, **chosen).hits
                        assert [(h.id, h.rank, h.score, h.chunk.key) for h in keys] == [
                            (h.id, h.rank, h.score, h.chunk.key) for h in full
                        ]
                        if mode != "phrase":  # a phrase filter reads the text to check it; it keeps what it read
                            assert all(h.chunk.text == "" and h.chunk.path == "" for h in keys)
                        checked += len(full)
    assert checked > 100


@pytest.mark.parametrize("engine", ["fts5", "impact"])
def test_keys_only_searches_follow_a_rebuild(tmp_path: Path, docs: Path, engine: str) -> None:
    """Keys-only searches keep the keys they read per build: after a rebuild that gives the same chunk ids
    other keys, an open index answers with the new keys, the same as a full search's."""
    path = tmp_path / "docs.sqlite"
    build(docs, path, builder="sections", tokenizer="bigram", engine="impact")
    options: dict[str, Any] = {"limit": 100, "deep": True, "snippets": False, "engine": engine}
    with Index.open(path) as index:
        before = [(h.id, h.chunk.key) for h in search(index, "导出 备份 说明", keys_only=True, **options).hits]
        for source in sorted(docs.rglob("*.md")):
            source.rename(source.with_name("renamed-" + source.name))
        build(docs, path, builder="sections", tokenizer="bigram", engine="impact")
        after = [(h.id, h.chunk.key) for h in search(index, "导出 备份 说明", keys_only=True, **options).hits]
        full = [(h.id, h.chunk.key) for h in search(index, "导出 备份 说明", **options).hits]
    assert after == full
    assert len(before) > 3
    assert {i for i, _ in before} & {i for i, _ in after}
    assert not {key for _, key in before} & {key for _, key in after}


def test_an_open_index_reads_the_postings_of_a_rebuild(tmp_path: Path) -> None:
    """The postings an open index has read belong to its build: after a rebuild with other text (other
    postings, IDFs and lengths) it ranks as FTS5 does on the new build."""
    root = write_sections(tmp_path / "kb", [("导出", "导出文件 备份 " * 3), ("备份", "备份 说明")])
    path = tmp_path / "kb.sqlite"
    build(root, path, builder="sections", tokenizer="bigram", engine="impact")
    with Index.open(path) as index:
        before = impact_top(index, "导出 备份", "or", 10)
        write_sections(root, [("说明", "导出 说明 " * 5), ("备份", "备份 备份 导出"), ("其他", "无关 内容")])
        build(root, path, builder="sections", tokenizer="bigram", engine="impact")
        after = impact_top(index, "导出 备份", "or", 10)
        assert after == fts5_top(index, "导出 备份", "or", 10)
    assert before != after and len(after) == 2


def test_keys_only_searches_have_no_snippets(
    built: dict[tuple[str, str], Path], tmp_path_factory: pytest.TempPathFactory
) -> None:
    with shipped_index(built, tmp_path_factory.getbasetemp(), "evidence-mini", "bigram") as index:
        with pytest.raises(QueryError, match="no snippets"):
            search(index, "退款", keys_only=True)


def write_sections(root: Path, docs: list[tuple[str, str]]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    text = "".join(f"# {title}\n\n{body}\n\n" for title, body in docs)
    (root / "docs.md").write_text(text, encoding="utf-8")
    return root


def test_ties_break_by_id_and_non_integer_title_weights(tmp_path: Path) -> None:
    # Identical sections tie exactly; a title weight of 0.3 is added instance by instance, as FTS5 does.
    docs = [("导出 文件", "导出文件保留三十天"), ("导出 文件", "导出文件保留三十天")] * 3 + [("备份", "导出 导出 导出")]
    path = tmp_path / "ties.sqlite"
    build(
        write_sections(tmp_path / "docs", docs),
        path,
        builder="sections:title_weight=0.3",
        tokenizer="unigram",
        engine="impact",
    )
    with Index.open(path) as index:
        for text in ("导出", "导出 文件 三十", "保留"):
            expected = fts5_top(index, text, "or", 20)
            assert len({score for _, score in expected}) < len(expected)  # ties exist
            got = impact_top(index, text, "or", 20)
            assert got == expected  # bit-identical, ids ascending within a tie


def test_empty_results(built: dict[tuple[str, str], Path], tmp_path_factory: pytest.TempPathFactory) -> None:
    with shipped_index(built, tmp_path_factory.getbasetemp(), "handbook", "bigram") as index:
        assert impact_top(index, "量子纠缠", "or", 10) == fts5_top(index, "量子纠缠", "or", 10) == []
        assert impact_top(index, "导出 量子纠缠", "and", 10) == []
        result = search(index, "？？", engine="impact", snippets=False)
        assert result.hits == []


def test_fallbacks_are_named(built: dict[tuple[str, str], Path], tmp_path_factory: pytest.TempPathFactory) -> None:
    with shipped_index(built, tmp_path_factory.getbasetemp(), "handbook", "unicode61") as index:
        phrase = search(index, "客户端", mode="phrase", engine="impact", explain=True, snippets=False)
        assert phrase.explain["engine"] == "fts5" and "phrase" in phrase.explain["engine_fallback"]
        plain = search(index, "客户端", engine="fts5", explain=True, snippets=False)
        assert plain.explain["engine"] == "fts5" and "engine_fallback" not in plain.explain
        recorded = search(index, "客户端", explain=True, snippets=False)  # the engine recorded at build
        assert recorded.explain["engine"] == "impact"
        with pytest.raises(QueryError, match="unknown engine"):
            search(index, "客户端", engine="bm25")


def test_a_term_fts5_splits_falls_back() -> None:
    tokenizer = tokenizer_for("bigram")
    assert impact._single_token(tokenizer, "导出")
    assert not impact._single_token(tokenizer, "ab c")
    assert not impact._single_token(tokenizer, "Ab")  # the ascii column tokenizer folds A-Z
    assert not impact._single_token(tokenizer_for("unicode61"), "a-b")


def test_hybrids_rank_exactly_as_fts5_in_both_modes(tmp_path: Path, docs: Path) -> None:
    """A hybrid's postings are per (field, term): its column filters make FTS5 count a field's own instances
    for tf and its own rows for IDF, with |D| over every column. ``and`` is any one field holding all its
    terms; a hybrid built before its fields had postings is answered by FTS5."""
    path = tmp_path / "hybrid.sqlite"
    build(docs, path, builder="sections", tokenizer="unigram^2+bigram+jieba^0.3", engine="impact")
    with Index.open(path) as index:
        for text in ("导出文件", "导出 的 文件保留多久", "备份备份备份", "wi-fi 设置", "导出什么"):
            for mode in ("or", "and"):
                for limit in (100, 2):
                    assert_same(fts5_top(index, text, mode, limit), impact_top(index, text, mode, limit))
    db = sqlite3.connect(path)
    db.execute("DROP TABLE impact_blocks")
    db.commit()
    db.close()
    with Index.open(path) as index:
        result = search(index, "导出文件", engine="impact", explain=True, snippets=False)
        assert result.explain["engine"] == "fts5" and "rebuild" in result.explain["engine_fallback"]
        assert result.hits


def test_a_hybrids_and_counts_only_the_fields_a_row_matches(tmp_path: Path) -> None:
    """FTS5 forgets the positions of a field's conjunction that failed in a row, even where the row holds
    some of that field's terms: those terms add nothing to its score."""
    root = write_sections(
        tmp_path / "docs",
        [("甲", "导出文件的设置"), ("乙", "导出文"), ("丙", "导出说明里的文和件"), ("丁", "没有关系")],
    )
    path = tmp_path / "hybrid.sqlite"
    build(root, path, builder="sections", tokenizer="jieba+unigram^0.5", engine="impact")
    with Index.open(path) as index:
        compiled = compile_query(index.tokenizer, "导出文件", "and")
        assert impact.fallback_reason(index, compiled) is None and len(compiled.matching) == 2
        expected = fts5_top(index, "导出文件", "and", 10)
        got = impact_top(index, "导出文件", "and", 10)
        assert_same(expected, got)
        assert {chunk for chunk, _ in got} == {1, 3}  # 乙 holds 导出 and 文 but neither field's every term;
        # 丙 holds jieba's 导出 (not 文件) and every character: only the characters count
        with index.reading():
            # A sum over every key the row holds (both fields) is another score for 丙.
            everything = dict(impact.ranked(index, compile_query(index.tokenizer, "导出文件", "or"), 10))
        score = dict(got)[3]
        assert abs(everything[3] - score) > 1e-6 * abs(score)


def test_an_index_without_impacts_is_an_error(tmp_path: Path, docs: Path) -> None:
    plain = tmp_path / "plain.sqlite"
    build(docs, plain, builder="sections", tokenizer="bigram", engine="fts5")
    assert foreign_reason(plain) is None
    with Index.open(plain) as index, pytest.raises(QueryError, match="no impact postings") as caught:
        search(index, "导出", engine="impact")
    assert "--engine impact" in str(caught.value.hint)


def test_field_keys_ascend_as_their_terms_then_by_field() -> None:
    keys = [impact.field_key(number, term) for term in ("a", "ab", "b") for number in range(12)]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)


def impacts_of(path: Path) -> list[tuple[str, bytes, bytes]]:
    db = sqlite3.connect(path)
    try:
        return [(key, rowids, weights) for key, rowids, weights, _ in impact.stored_postings(db)]
    finally:
        db.close()


@pytest.mark.parametrize("spec", ["bigram", "unicode61", "jieba", "unigram^2+bigram", "jieba+unigram^0.3"])
@pytest.mark.parametrize("title_weight", [None, 3.0, 0.3])
def test_counted_postings_equal_the_instance_by_instance_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spec: str, title_weight: float | None
) -> None:
    """numpy's per-(term, field, row) sums, in batches that split between terms (a term longer than a batch is
    one batch), store the same bytes as the instance-by-instance path a walk out of step takes: for integer
    weights (summed in any order) and others (added in FTS5's order), one field or a hybrid's several."""
    source = tmp_path / "corpus.jsonl"
    words = ["导出", "备份", "文件", "保留", "的", "Wi-Fi", "设置"]
    lines = [
        {
            "_id": f"p{n}",
            "title": words[n % 7] * (n % 3),
            "text": " ".join(words[(n * k) % 7] for k in range(n % 11 + 1)),
        }
        for n in range(60)
    ]
    source.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    builder = "passages" if title_weight is None else f"passages:title_weight={title_weight}"
    monkeypatch.setattr(impact_write, "_BATCH_INSTANCES", 7)
    counted = tmp_path / "counted.sqlite"
    build(source, counted, builder=builder, tokenizer=spec, engine="impact")

    def out_of_step(*args: object) -> int:
        raise impact_write._OutOfStep

    monkeypatch.setattr(impact_write, "_write_counted", out_of_step)
    stepped = tmp_path / "stepped.sqlite"
    build(source, stepped, builder=builder, tokenizer=spec, engine="impact")
    assert len(impacts_of(counted)) > 5
    assert impacts_of(counted) == impacts_of(stepped)
    with Index.open(counted) as index:
        for text in ("导出备份", "的 文件", "wi-fi 设置", "设置的设置 保留保留保留"):
            assert_same(fts5_top(index, text, "or", 100), impact_top(index, text, "or", 100))


def test_sync_keeps_impacts_in_step(tmp_path: Path, docs: Path) -> None:
    path = tmp_path / "docs.sqlite"
    build(docs, path, builder="sections", tokenizer="bigram", engine="impact")
    before = impacts_of(path)
    held = Index.open(path)  # a searcher open across the sync must not answer from the old postings
    assert_same(fts5_top(held, "导出备份", "or", 50), impact_top(held, "导出备份", "or", 50))
    (docs / "notes.md").write_text("# 新增\n\n导出备份的新说明，导出前请确认。\n", encoding="utf-8")
    build(docs, path, builder="sections", tokenizer="bigram", engine="impact")
    after = impacts_of(path)
    with held:
        got = impact_top(held, "导出备份", "or", 50)
        assert_same(fts5_top(held, "导出备份", "or", 50), got)
        assert len(got) > 0
    assert after != before
    fresh = tmp_path / "fresh.sqlite"
    build(docs, fresh, builder="sections", tokenizer="bigram", engine="impact")
    assert impacts_of(fresh) == after
    with Index.open(path) as index:
        for text in ("导出备份", "说明 确认", "导出文件保留多久"):
            assert_same(fts5_top(index, text, "or", 50), impact_top(index, text, "or", 50))
    build(docs, path, builder="sections", tokenizer="bigram", engine="fts5")  # a sync to fts5 drops the postings
    assert impacts_of(path) == []
    db = sqlite3.connect(path)
    assert impact.postings_table(db) is None
    db.close()


def test_failed_build_leaves_the_previous_impacts(tmp_path: Path, docs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "docs.sqlite"
    build(docs, path, builder="sections", tokenizer="bigram", engine="impact")
    before = impacts_of(path)
    (docs / "notes.md").write_text("# 变了\n\n全新的内容。\n", encoding="utf-8")
    real = impact.write_impacts

    def half_then_fail(db: sqlite3.Connection, *args: Any) -> int:
        real(db, *args)
        raise RuntimeError("killed while writing impacts")

    monkeypatch.setattr("rag_eval.engines.impact.write_impacts", half_then_fail)
    with pytest.raises(RuntimeError, match="killed"):
        build(docs, path, builder="sections", tokenizer="bigram", engine="impact")
    assert impacts_of(path) == before


def test_unknown_engine_at_build_writes_nothing(tmp_path: Path, docs: Path) -> None:
    with pytest.raises(QueryError, match="unknown engine"):
        build(docs, tmp_path / "x.sqlite", builder="sections", tokenizer="bigram", engine="fast")
    assert not (tmp_path / "x.sqlite").exists()


def test_idf_matches_fts5_clamp() -> None:
    assert impact.idf(10, 5) == 1e-6  # log(1) = 0 is clamped
    assert impact.idf(10, 9) == 1e-6
    assert impact.idf(10, 1) > 1.0


ALPHABET = list("的是什么导出文件保留天备份Ab 1，")
WORDS = st.text(st.sampled_from(ALPHABET), min_size=0, max_size=12).map(lambda s: " ".join(s.split()))
CORPUS = st.lists(st.tuples(WORDS.filter(lambda s: s.strip() != ""), WORDS), min_size=1, max_size=12)


@settings(max_examples=40)
@given(
    corpus=CORPUS,
    texts=st.lists(WORDS, min_size=1, max_size=4),
    spec=st.sampled_from(["unigram", "bigram", "unicode61", "trigram", "unigram+bigram^0.5", "unicode61^2+unigram"]),
    weight=st.sampled_from(["1", "0.3", "2.5"]),
)
def test_random_corpora_rank_exactly_as_fts5(
    corpus: list[tuple[str, str]], texts: list[str], spec: str, weight: str
) -> None:
    tokenizer_for(spec)
    with tempfile.TemporaryDirectory() as folder:
        root = write_sections(Path(folder) / "docs", [(f"{title} {n}", body) for n, (title, body) in enumerate(corpus)])
        path = Path(folder) / "index.sqlite"
        build(root, path, builder=f"sections:title_weight={weight}", tokenizer=spec, engine="impact")
        with Index.open(path) as index:
            for text in texts:
                for mode in ("or", "and"):
                    compiled = compile_query(index.tokenizer, text, mode)
                    if compiled.expression is None or impact.fallback_reason(index, compiled) is not None:
                        continue
                    assert_same(fts5_top(index, text, mode, 5), impact_top(index, text, mode, 5))


def test_cli_build_and_search_name_the_engine(tmp_path: Path, docs: Path) -> None:
    from click.testing import CliRunner

    from rag_eval.cli import cli

    runner = CliRunner()
    path = str(tmp_path / "docs.sqlite")
    built = runner.invoke(
        cli, ["index", "build", str(docs), "-b", "sections", "-t", "bigram", "-o", path, "--engine", "impact"]
    )
    assert built.exit_code == 0, built.output
    answered = runner.invoke(cli, ["search", path, "导出文件", "--explain"])
    assert answered.exit_code == 0 and '# engine: "impact"' in answered.output
    forced = runner.invoke(cli, ["search", path, "导出文件", "--explain", "--engine", "fts5"])
    assert forced.exit_code == 0 and '# engine: "fts5"' in forced.output
    assert [line for line in answered.output.splitlines() if not line.startswith("#")] == [
        line for line in forced.output.splitlines() if not line.startswith("#")
    ]
    phrase = runner.invoke(cli, ["search", path, "导出文件", "--mode", "phrase", "--explain"])
    assert '# engine: "fts5"' in phrase.output and "# engine_fallback:" in phrase.output
    wrong = runner.invoke(cli, ["search", path, "导出", "--engine", "fast"])
    assert wrong.exit_code != 0 and "fast" in wrong.output


def pruning_used(index: Index, compiled: Any, limit: int) -> bool:
    """Whether MaxScore answered ``compiled`` by pruning rather than falling back to scoring every row."""
    present = {t: p for t in compiled.terms if (p := impact_read._postings_of(index, t)) is not None}
    if not present:
        return False
    scorer = impact_rank._Scorer(compiled.terms, present, conjunctive=False)
    calls = []
    everything = scorer.everything
    scorer.everything = lambda k: calls.append(k) or everything(k)  # type: ignore[method-assign]
    scorer.maxscore(limit)
    return not calls


@pytest.mark.parametrize("dataset", ["handbook", "evidence-mini"])
@pytest.mark.parametrize("spec", STRATEGIES)
def test_pruned_equals_unpruned_and_fts5(
    built: dict[tuple[str, str], Path], tmp_path_factory: pytest.TempPathFactory, dataset: str, spec: str
) -> None:
    tokenizer_for(spec)
    pruned = 0
    with shipped_index(built, tmp_path_factory.getbasetemp(), dataset, spec) as index, index.reading():
        for text in queries(dataset)[:60] + ["的是什么", "是的 导出"]:
            for mode in ("or", "and"):
                compiled = compile_query(index.tokenizer, text, mode)
                if compiled.expression is None or impact.fallback_reason(index, compiled) is not None:
                    continue
                for limit in (1, 3, 10, 100):
                    full = impact.ranked(index, compiled, limit, prune=False)
                    assert impact.ranked(index, compiled, limit, prune=True) == full  # bit for bit
                    assert_same(fts5_top(index, text, mode, limit), full)
                    if mode == "or":
                        pruned += pruning_used(index, compiled, limit)
    if dataset == "handbook":
        assert pruned > 0  # the pruned path was taken, not only the fallback


@pytest.mark.parametrize("spec", ["jieba", "unigram"])
def test_pruning_by_default_where_one_list_leads(
    built: dict[tuple[str, str], Path],
    tmp_path_factory: pytest.TempPathFactory,
    spec: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # By default a query is pruned when its longest list holds most of its postings (a frequent term's); the
    # list's length floor is for 135k rows, so it is lowered to the handbook's. Both paths must be taken, and agree.
    tokenizer_for(spec)
    monkeypatch.setattr(impact_rank, "PRUNE_MIN_POSTINGS", 0)
    taken = {"maxscore": 0, "everything": 0}

    def counted(name: str) -> Any:
        real = getattr(impact_rank._Scorer, name)

        def method(self: Any, k: int) -> Any:
            taken[name] += 1
            return real(self, k)

        return method

    for name in taken:
        monkeypatch.setattr(impact_rank._Scorer, name, counted(name))
    with shipped_index(built, tmp_path_factory.getbasetemp(), "handbook", spec) as index, index.reading():
        for text in queries("handbook")[:80] + ["的是什么", "导出的文件是什么的"]:
            compiled = compile_query(index.tokenizer, text, "or")
            if compiled.expression is None or impact.fallback_reason(index, compiled) is not None:
                continue
            for limit in (1, 10, 100):
                chosen = impact.ranked(index, compiled, limit)
                assert chosen == impact.ranked(index, compiled, limit, prune=False)  # bit for bit
                assert_same(fts5_top(index, text, "or", limit), chosen)
    assert taken["maxscore"] > 0 and taken["everything"] > 0


def test_pruning_pays_only_for_a_leading_list(monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np

    def lists(*lengths: int) -> dict[str, impact.Postings]:
        return {str(n): impact.Postings(np.arange(1, n + 1), np.ones(n), 1.0) for n in lengths}

    monkeypatch.setattr(impact_rank, "PRUNE_MIN_POSTINGS", 1000)
    assert impact_rank._pays(lists(6000, 2000, 2000))  # 60%
    assert not impact_rank._pays(lists(5900, 2100, 2000))
    assert impact_rank._pays(lists(1000, 300, 200))
    assert not impact_rank._pays(lists(999, 300, 200))  # too short a list to pay for the bounds
    assert not impact_rank._pays(lists(6000))  # one list: nothing to skip


@pytest.mark.parametrize("spec", ["bigram", "unigram"])
def test_pruned_with_filters_grows_until_the_limit(
    built: dict[tuple[str, str], Path], tmp_path_factory: pytest.TempPathFactory, spec: str
) -> None:
    # Filters read candidates in rank order: the pruned top-k is asked again with a larger k until enough pass.
    with shipped_index(built, tmp_path_factory.getbasetemp(), "handbook", spec) as index:
        categories = [row[0] for row in index.db.execute("SELECT DISTINCT category FROM chunks ORDER BY category")]
        prefixes = [row[0].split("/")[0] for row in index.db.execute("SELECT DISTINCT path FROM chunks LIMIT 3")]
        for text in queries("handbook")[:25]:
            for chosen in [{"category": categories[-1]}, {"path_prefix": prefixes[0]}, {"as_of": "2026-10-07"}]:
                for limit in (1, 4, 30):
                    expected = fts5_top(index, text, "or", limit, **chosen)
                    for prune in (True, False, None):
                        impact_rank.PRUNE, default = prune, impact_rank.PRUNE
                        try:
                            assert_same(expected, impact_top(index, text, "or", limit, **chosen))
                        finally:
                            impact_rank.PRUNE = default


FREQUENT = st.text(st.sampled_from(list("的的的是是导出文件天")), max_size=8)


@settings(max_examples=60)
@given(
    corpus=st.lists(st.tuples(st.sampled_from(["题", "题 的", "导出"]), FREQUENT), min_size=2, max_size=30),
    text=st.text(st.sampled_from(list("的是导出文件天题")), min_size=1, max_size=8),
    limit=st.integers(1, 40),
    copies=st.integers(1, 3),
)
def test_pruning_on_random_corpora_with_ties_and_frequent_terms(
    corpus: list[tuple[str, str]], text: str, limit: int, copies: int
) -> None:
    # Copies of every section make heavy ties (the 10x benchmark's situation); limits exceed the matches.
    tokenizer_for("unigram")
    with tempfile.TemporaryDirectory() as folder:
        docs = [(f"{title} {n}", body) for n, (title, body) in enumerate(corpus * copies)]
        root = write_sections(Path(folder) / "docs", docs)
        path = Path(folder) / "index.sqlite"
        build(root, path, builder="sections", tokenizer="unigram", engine="impact")
        with Index.open(path) as index, index.reading():
            for mode in ("or", "and"):
                compiled = compile_query(index.tokenizer, text, mode)
                if compiled.expression is None:
                    continue
                full = impact.ranked(index, compiled, limit, prune=False)
                assert impact.ranked(index, compiled, limit, prune=True) == full
                assert_same(fts5_top(index, text, mode, limit), full)
                with pytest.MonkeyPatch.context() as patch:  # the cut before ranking, forced at this size
                    patch.setattr(impact_rank, "CUT_MIN_POSTINGS", 0)
                    patch.setattr(impact_rank, "POOL_POSTINGS", 1)
                    assert impact.ranked(index, compiled, limit, prune=False) == full


@pytest.mark.parametrize("spec", ["unigram", "bigram", "jieba"])
def test_the_cut_before_ranking_keeps_fts5_ranking(
    built: dict[tuple[str, str], Path],
    tmp_path_factory: pytest.TempPathFactory,
    spec: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Regression guard: only rows at or above the cut are ranked; a cut above the true k-th score would
    # drop hits or ties. Its size thresholds are for 135k rows, so it is forced on the handbook.
    monkeypatch.setattr(impact_rank, "CUT_MIN_POSTINGS", 0)
    monkeypatch.setattr(impact_rank, "POOL_POSTINGS", 1)
    cuts: list[float] = []
    real = impact_rank._Scorer._cut
    monkeypatch.setattr(
        impact_rank._Scorer, "_cut", lambda self, scores, k: cuts.append(real(self, scores, k)) or cuts[-1]
    )
    with shipped_index(built, tmp_path_factory.getbasetemp(), "handbook", spec) as index, index.reading():
        for text in queries("handbook")[:60] + ["的是什么"]:
            compiled = compile_query(index.tokenizer, text, "or")
            if compiled.expression is None:
                continue
            for limit in (1, 3, 10, 100):
                assert impact.ranked(index, compiled, limit, prune=False) == fts5_top(index, text, "or", limit)
    assert sum(cut > 0 for cut in cuts) > 10  # the cut was taken, not only the full ranking


def block_of(db: sqlite3.Connection, term: str) -> tuple[str, list[str], list[int], bytes, bytes, bytes]:
    first, terms, bounds, rowids, weights, peaks = db.execute(
        "SELECT first, terms, bounds, rowids, weights, peaks FROM impact_blocks WHERE first <= ? "
        "ORDER BY first DESC LIMIT 1",
        (term,),
    ).fetchone()
    listed = json.loads(terms)
    assert term in listed
    return (
        first,
        listed,
        [int.from_bytes(bounds[i : i + 8], "little") for i in range(0, len(bounds), 8)],
        rowids,
        weights,
        peaks,
    )


def replace_postings(db: sqlite3.Connection, term: str, rowids: bytes, weights: bytes) -> None:
    """Give ``term`` other postings in its block, the block's bounds kept consistent."""
    first, listed, bounds, old_ids, old_weights, peaks = block_of(db, term)
    number = listed.index(term)
    low, high = 8 * bounds[number], 8 * bounds[number + 1]
    ids = old_ids[:low] + rowids + old_ids[high:]
    values = old_weights[:low] + weights + old_weights[high:]
    shift = len(rowids) // 8 - (bounds[number + 1] - bounds[number])
    fixed = bounds[: number + 1] + [bound + shift for bound in bounds[number + 1 :]]
    packed = b"".join(bound.to_bytes(8, "little") for bound in fixed)
    db.execute(
        "UPDATE impact_blocks SET bounds = ?, rowids = ?, weights = ? WHERE first = ?", (packed, ids, values, first)
    )


def relist(db: sqlite3.Connection, change: Any) -> None:
    """Rewrite the terms of 导出's block (its first term kept: the block is still found) with ``change(terms)``."""
    first, listed = block_of(db, "导出")[:2]
    assert len(listed) >= 3 and listed[0] != "导出"
    db.execute("UPDATE impact_blocks SET terms = ? WHERE first = ?", (json.dumps(change(listed)), first))


def eight(value: int) -> bytes:
    return value.to_bytes(8, "little")


TAMPERED: dict[str, Any] = {
    "ids not ascending": lambda db: replace_postings(
        db, "导出", eight(2) + eight(1), b"\x00\x00\x00\x00\x00\x00\xf0\x3f" * 2
    ),
    "an id beyond the chunks (no huge allocation)": lambda db: replace_postings(
        db, "导出", eight(2**60), b"\x00\x00\x00\x00\x00\x00\xf0\x3f"
    ),
    "a zero impact": lambda db: replace_postings(db, "导出", eight(1), bytes(8)),
    "ids not whole int64s": lambda db: db.execute(
        "UPDATE impact_blocks SET rowids = substr(rowids, 1, length(rowids) - 1) WHERE first = ?",
        (block_of(db, "导出")[0],),
    ),
    "text instead of blobs": lambda db: db.execute(
        "UPDATE impact_blocks SET rowids = 'text', weights = 'text' WHERE first = ?", (block_of(db, "导出")[0],)
    ),
    "bounds past the postings": lambda db: db.execute(
        "UPDATE impact_blocks SET bounds = ? WHERE first = ?",
        (
            b"".join(eight(2**40) for _ in block_of(db, "导出")[2]),
            block_of(db, "导出")[0],
        ),
    ),
    "terms not a JSON list": lambda db: db.execute(
        "UPDATE impact_blocks SET terms = '{\"导出\": 1' WHERE first = ?", (block_of(db, "导出")[0],)
    ),
    "terms not all strings": lambda db: relist(db, lambda terms: [terms[0], 7, *terms[2:]]),
    "terms out of order": lambda db: relist(db, lambda terms: [terms[0], *reversed(terms[1:])]),
    "a term listed twice": lambda db: relist(db, lambda terms: [terms[0], terms[0], *terms[2:]]),
    "a peak below the largest impact": lambda db: db.execute(
        "UPDATE impact_blocks SET peaks = zeroblob(length(peaks)) WHERE first = ?", (block_of(db, "导出")[0],)
    ),
}


def tampered(folder: Path, docs: Path, tokenizer: str, change: Any) -> Path:
    """An index of ``docs`` built with impact postings, then changed by ``change(db)`` behind rag-eval's back."""
    path = folder / "docs.sqlite"
    build(docs, path, builder="sections", tokenizer=tokenizer, engine="impact")
    db = sqlite3.connect(path)
    change(db)
    db.commit()
    db.close()
    return path


@pytest.mark.parametrize("damage", sorted(TAMPERED))
def test_tampered_impacts_are_one_error(tmp_path: Path, docs: Path, damage: str) -> None:
    from rag_eval.errors import IndexFileError

    path = tampered(tmp_path, docs, "bigram", TAMPERED[damage])
    with Index.open(path) as index, pytest.raises(IndexFileError, match="impact postings of term '导出'"):
        search(index, "导出", engine="impact")


def test_a_hybrids_damaged_postings_name_the_term_and_field(tmp_path: Path, docs: Path) -> None:
    from rag_eval.errors import IndexFileError

    path = tampered(tmp_path, docs, "unigram+bigram", lambda db: db.execute("UPDATE impact_blocks SET terms = 'x'"))
    with Index.open(path) as index, pytest.raises(IndexFileError, match="postings of term '导' of field 0 are"):
        search(index, "导出", engine="impact")


def test_a_tampered_recorded_engine_is_one_error(tmp_path: Path, docs: Path) -> None:
    from rag_eval.errors import IndexFileError

    path = tampered(
        tmp_path, docs, "bigram", lambda db: db.execute("UPDATE meta SET value = 'warp' WHERE key = 'engine'")
    )
    with Index.open(path) as index, pytest.raises(IndexFileError, match="engine is 'warp'"):
        search(index, "导出")


@pytest.mark.parametrize("peaks", [True, False])
def test_peaks_are_stored_and_older_layouts_still_rank(tmp_path: Path, docs: Path, peaks: bool) -> None:
    """Blocks hold each term's exact peak; an index written before blocks (a row per term in ``impacts``),
    with or without peaks, ranks the same (peaks computed when a list is read)."""
    import numpy as np

    path = tmp_path / "docs.sqlite"
    build(docs, path, builder="sections", tokenizer="bigram", engine="impact")
    db = sqlite3.connect(path)
    stored = list(impact.stored_postings(db))
    assert len(stored) > impact.BLOCK_TERMS  # several blocks
    assert all(peak == np.frombuffer(weights, dtype="<f8").max() for _, _, weights, peak in stored)
    with Index.open(path) as index:
        texts = ("导出备份", "导出文件保留多久", "备份", "没有这个词")
        expected = {text: impact_top(index, text, "or", 20) for text in texts}
    columns = "term TEXT PRIMARY KEY, rowids BLOB NOT NULL, weights BLOB NOT NULL" + (
        ", peak REAL NOT NULL" if peaks else ""
    )
    db.execute(f"CREATE TABLE impacts ({columns}) WITHOUT ROWID")
    db.executemany(
        f"INSERT INTO impacts VALUES (?, ?, ?{', ?' if peaks else ''})", [row if peaks else row[:3] for row in stored]
    )
    db.execute("DROP TABLE impact_blocks")
    db.commit()
    db.close()
    with Index.open(path) as index:
        for text, hits in expected.items():
            assert impact_top(index, text, "or", 20) == hits
            compiled = compile_query(index.tokenizer, text, "or")
            assert impact.ranked(index, compiled, 5, prune=True) == hits[:5]


def test_the_postings_cache_counts_each_byte_once_and_starts_over_past_its_bound(
    tmp_path: Path, docs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A block's blobs are counted once (its terms' row ids are views of them), each list's scores once; past
    ``CACHE_BYTES`` the cache starts over, and rankings do not change."""
    path = tmp_path / "docs.sqlite"
    build(docs, path, builder="sections", tokenizer="bigram", engine="impact")
    texts = ("导出备份", "导出文件保留多久", "说明 确认", "备份")
    with Index.open(path) as index:
        expected = {text: impact_top(index, text, "or", 20) for text in texts}
        cache = index.postings
        blobs = sum(len(block.rowids) + len(block.weights) for block in cache.blocks.values())
        scores = sum(found.scores.nbytes for found in cache.lists.values() if found is not None)
        assert cache.bytes == blobs + scores + impact.ENTRY_BYTES * len(cache.lists) > 0
        impact.preload(index)  # blocks already held are read again: still counted once
        blobs = sum(len(block.rowids) + len(block.weights) for block in cache.blocks.values())
        assert cache.bytes == blobs + scores + impact.ENTRY_BYTES * len(cache.lists)
    monkeypatch.setattr(impact_read, "CACHE_BYTES", 1)
    with Index.open(path) as index:
        first = impact_top(index, texts[0], "or", 20)
        held = index.postings
        for text in texts:
            assert impact_top(index, text, "or", 20) == expected[text]
        assert first == expected[texts[0]] and index.postings is not held  # started over


def test_terms_no_row_holds_fill_the_postings_cache_too(
    tmp_path: Path, docs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each term asked for is cached, held or not, so a long stream of queries for absent words (a served
    index's agent making up identifiers) starts the cache over at its bound instead of growing it."""
    path = tmp_path / "docs.sqlite"
    build(docs, path, builder="sections", tokenizer="bigram", engine="impact")
    monkeypatch.setattr(impact_read, "CACHE_BYTES", 8_000)
    with Index.open(path) as index:
        largest = 0
        for number in range(200):
            assert impact_top(index, f"qzx{number:04d}", "or", 10) == []
            largest = max(largest, len(index.postings.lists))
        assert 0 < largest <= 8_000 // impact.ENTRY_BYTES + 1 < 200


@pytest.mark.parametrize("spec", ["bigram", "trigram", "unigram+bigram"])
def test_preloaded_postings_rank_the_same_without_reading_a_block(tmp_path: Path, docs: Path, spec: str) -> None:
    """Read whole, the postings answer every query (terms held, terms between blocks, terms beyond the last)
    with the rankings a cold index gives, and no query reads a block."""
    path = tmp_path / "docs.sqlite"
    build(docs, path, builder="sections", tokenizer=spec, engine="impact")
    texts = ["导出备份", "导出文件保留多久", "说明 确认", "备份", "一二三四五六七", "zzzz 鬱鬱", "的"]
    with Index.open(path) as cold:
        expected = {text: impact_top(cold, text, "or", 100) for text in texts}
    with Index.open(path) as index:
        assert impact.preload(index) and index.postings.complete
        held = len(index.postings.blocks)
        assert held == index.db.execute("SELECT count(*) FROM impact_blocks").fetchone()[0] > 1
        statements: list[str] = []
        index.db.set_trace_callback(statements.append)
        for text in texts:
            assert impact_top(index, text, "or", 100) == expected[text]
        index.db.set_trace_callback(None)
        assert not [sql for sql in statements if "impact_blocks" in sql], statements
        assert impact.preload(index) and len(index.postings.blocks) == held  # once


def test_postings_over_the_budget_or_in_an_older_table_are_read_as_queried(tmp_path: Path, docs: Path) -> None:
    path = tmp_path / "docs.sqlite"
    build(docs, path, builder="sections", tokenizer="bigram", engine="impact")
    with Index.open(path) as index:
        assert not impact.preload(index, budget=impact.postings_bytes(index.db) - 1)
        assert not index.postings.blocks and not index.postings.complete
        assert impact_top(index, "导出备份", "or", 10)
    with Index.open(path) as index:
        index.postings = impact_read._Cache(impact.LEGACY_TABLE)  # as an older build's cache
        assert not impact.preload(index) and not index.postings.blocks


READ_WHOLE_DAMAGE = {
    **{name: TAMPERED[name] for name in ("terms not a JSON list", "terms out of order", "bounds past the postings")},
    "a first term that is a number": lambda db: db.execute(
        "UPDATE impact_blocks SET first = 7 WHERE first = (SELECT min(first) FROM impact_blocks)"
    ),
}


@pytest.mark.parametrize("damage", sorted(READ_WHOLE_DAMAGE))
def test_a_damaged_block_is_one_error_when_read_whole(tmp_path: Path, docs: Path, damage: str) -> None:
    from rag_eval.errors import IndexFileError

    path = tampered(tmp_path, docs, "bigram", READ_WHOLE_DAMAGE[damage])
    with Index.open(path) as index, pytest.raises(IndexFileError, match="damaged index: the impact postings"):
        impact.preload(index)
