"""bm25's k1 and b as the impact engine's options: scores equal the textbook formula FTS5 uses (recomputed here in
plain Python from the chunks' own tokens) at any pair, FTS5's own at 1.2 and 0.75 whichever way they are computed,
and every command that takes an engine spec takes them, or refuses a bad one with one error line."""

from __future__ import annotations

import json
import math
import random
import sqlite3
from pathlib import Path

import pytest
from helpers import invoke, one_error, tokenizer_for
from helpers.engines import fts5_top

from rag_eval.engines import impact
from rag_eval.engines.base import get_engine, written_engine
from rag_eval.errors import QueryError
from rag_eval.eval.compare.runner import System, _postings_layout
from rag_eval.eval.compare.statistics import engine_agreement
from rag_eval.index.store import Index
from rag_eval.index.writer import build
from rag_eval.search.query import compile_query
from rag_eval.search.searching import search
from rag_eval.serve.served import IndexSet

WORDS = ["导出", "备份", "文件", "保留", "的", "设置", "网络", "abc", "de", "数据", "的的", "多久"]
PAIRS = [(0.0, 0.0), (0.0, 1.0), (0.9, 0.4), (2.0, 1.0), (1.2, 0.3), (0.5, 0.75), (3.7, 0.05), (1000.0, 0.5)]


def corpus(folder: Path, seed: int = 7, rows: int = 80) -> Path:
    """A corpus.jsonl of ``rows`` passages over a small vocabulary: repeated terms (tf above 1), frequent ones (idf
    clamped), rows of very different lengths and empty titles."""
    rng = random.Random(seed)
    lines = []
    for n in range(rows):
        title = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(0, 3)))
        text = " ".join(rng.choice(WORDS[: rng.randrange(3, len(WORDS))]) for _ in range(rng.randrange(1, 25)))
        lines.append({"_id": f"p{n}", "title": title, "text": text})
    folder.mkdir(parents=True, exist_ok=True)
    source = folder / "corpus.jsonl"
    source.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    return source


def textbook(index: Index, text: str, mode: str, k1: float, b: float, title_weight: float) -> dict[int, float]:
    """Every matching row's bm25 score, from the chunks' title and text tokenized again with each field's tokenizer:
    weighted tf, |D| over every column, avgdl over every row, idf with FTS5's 1e-6 clamp; no FTS5 statistic and no
    numpy. A hybrid's field counts its own columns for tf and n."""
    fields = index.tokenizer.fields
    rows = index.db.execute("SELECT id, title, text FROM chunks ORDER BY id").fetchall()
    tokens: dict[int, list[tuple[list[str], list[str]]]] = {}
    for rowid, title, body in rows:
        tokens[rowid] = [(field.tokenizer.terms(title or ""), field.tokenizer.terms(body)) for field in fields]
    length = {rowid: sum(len(t) + len(d) for t, d in columns) for rowid, columns in tokens.items()}
    avgdl = sum(length.values()) / len(length)
    compiled = compile_query(index.tokenizer, text, mode)
    groups = [(number, compiled.fields[number]) for number in compiled.matching] if compiled.fields else []
    if not compiled.fields:
        groups = [(0, compiled.terms)]
    scores: dict[int, float] = {}
    for rowid, columns in tokens.items():
        score = 0.0
        matched = False
        for number, terms in groups:
            title, body = columns[number]
            weight = fields[number].weight
            frequency = {term: 0.0 for term in terms}
            for column, column_weight in ((title, title_weight * weight), (body, weight)):
                for token in column:
                    if token in frequency:
                        frequency[token] += column_weight
            if mode == "and" and not all(frequency[term] for term in terms):
                continue
            for term in terms:
                tf = frequency[term]
                if not tf:
                    continue
                matched = True
                holding = sum(1 for other in tokens.values() if term in other[number][0] + other[number][1])
                idf = math.log((len(rows) - holding + 0.5) / (holding + 0.5))
                idf = idf if idf > 0 else 1e-6
                score += idf * (tf * (k1 + 1)) / (tf + k1 * (1 - b + b * length[rowid] / avgdl))
        if matched:
            scores[rowid] = -score
    return scores


def assert_textbook(hits: list[tuple[int, float]], expected: dict[int, float], limit: int) -> None:
    """``hits`` are a top ``limit`` of ``expected`` (scores to 1e-12 relative; order by score, then id)."""
    assert len(hits) == min(limit, len(expected))
    for rowid, score in hits:
        assert rowid in expected and abs(score - expected[rowid]) <= 1e-12 * abs(expected[rowid]), (rowid, score)
    if hits:
        last = hits[-1][1]
        returned = {rowid for rowid, _ in hits}
        assert all(score >= last - 1e-12 * abs(last) for rowid, score in expected.items() if rowid not in returned)
        assert [score for _, score in hits] == sorted(score for _, score in hits)


@pytest.mark.parametrize("spec", ["unigram", "bigram", "unigram+bigram^0.5"])
@pytest.mark.parametrize("title_weight", [1.0, 0.3])
def test_scores_equal_the_textbook_formula_at_any_k1_and_b(tmp_path: Path, spec: str, title_weight: float) -> None:
    path = tmp_path / "index.sqlite"
    build(corpus(tmp_path / "src"), path, builder=f"passages:title_weight={title_weight}", tokenizer=spec)
    rng = random.Random(f"{spec}{title_weight}")
    modes = ["or"] if "+" in spec else ["or", "and"]  # a hybrid's 'and' matches per field: textbook() sums 'or'
    with Index.open(path) as index:
        for k1, b in [*PAIRS, (rng.uniform(0, 3), rng.random()), (1.2, 0.75)]:
            engine = f"impact:k1={k1!r},b={b!r}"
            for _ in range(6):
                text = "".join(rng.choice(WORDS) for _ in range(rng.randrange(1, 4)))
                for mode in modes:
                    found = search(index, text, mode=mode, limit=12, deep=True, snippets=False, engine=engine)
                    hits = [(hit.id, hit.score) for hit in found.hits]
                    assert_textbook(hits, textbook(index, text, mode, k1, b, title_weight), 12)


@pytest.mark.parametrize("spec", ["bigram", "unicode61", "unigram+bigram^0.5"])
@pytest.mark.parametrize("title_weight", [1.0, 0.3, 2.5])
def test_the_stored_tf_at_fts5s_k1_and_b_gives_fts5s_scores_bit_for_bit(
    tmp_path: Path, spec: str, title_weight: float
) -> None:
    """The tf path (the one any other pair takes) at 1.2 and 0.75 equals FTS5's bm25 and the stored impacts exactly:
    the stored tf is the exact float FTS5 sums, |D| and avgdl are FTS5's."""
    path = tmp_path / "index.sqlite"
    build(corpus(tmp_path / "src", seed=3), path, builder=f"passages:title_weight={title_weight}", tokenizer=spec)
    tokenizer_for(spec)
    with Index.open(path) as index:
        for text in ["导出备份", "的的 文件", "abc de 数据", "网络设置 多久 保留"]:
            compiled = compile_query(index.tokenizer, text, "or")
            through_tf = impact.ranked(index, compiled, 30, parameters=(impact.K1, impact.B))
            assert through_tf == fts5_top(index, text, "or", 30)
            assert through_tf == impact.ranked(index, compiled, 30)


def test_pruning_stays_rank_safe_with_the_pairs_own_peaks(tmp_path: Path) -> None:
    """MaxScore's bounds at another pair are that pair's peaks: pruned and unpruned rankings are the same, bit for
    bit, where a frequent term's list leads."""
    path = tmp_path / "index.sqlite"
    build(corpus(tmp_path / "src", seed=11, rows=400), path, builder="passages", tokenizer="unigram")
    with Index.open(path) as index:
        for k1, b in PAIRS:
            for text in ["的数据", "导出的备份的文件", "abc 的 网络", "多久保留"]:
                compiled = compile_query(index.tokenizer, text, "or")
                for limit in (1, 3, 10):
                    pruned = impact.ranked(index, compiled, limit, prune=True, parameters=(k1, b))
                    assert pruned == impact.ranked(index, compiled, limit, prune=False, parameters=(k1, b))


def test_fts5s_pair_written_out_is_the_default_system() -> None:
    for spec in ("impact", "impact:k1=1.2,b=0.75", "impact:b=0.750,k1=1.20", "impact:k1=1.2"):
        engine = get_engine(spec)
        assert written_engine(spec) == "impact" and engine.spec == "impact" and engine.exact
        assert System("bigram", "", "or", engine=written_engine(spec)).name == "bigram |  | or"
    other = get_engine("impact:b=0.40,k1=0.90")
    assert written_engine("impact:b=0.40,k1=0.90") == other.spec == "impact:b=0.4,k1=0.9"
    assert not other.exact and get_engine("impact:k1=-0").system == "impact:k1=0.0"
    assert get_engine("impact:k1=0.9").build_engine == "impact"  # the same cached index as the default's


def test_only_exact_engines_are_held_to_fts5s_ranking() -> None:
    systems = [System("bigram", "", "or", engine=spec) for spec in ("impact", "fts5", "impact:b=0.4,k1=0.9")]
    runs = {system.name: [] for system in systems}
    per_query = {system.name: {} for system in systems}
    (agreement,) = engine_agreement(systems, runs, per_query)  # type: ignore[arg-type]
    assert agreement["engines"] == ["impact", "fts5"]


BAD_ENGINES = {
    "impact:k1=-1": "k1",
    "impact:b=1.5": "b",
    "impact:k1=nan": "k1",
    "impact:k1=abc": "k1",
    "impact:k1=inf": "k1",
    "impact:b=-0.1": "b",
    "impact:q=1": "q",
    "fts5:k1=0.9": "impact",
    "fts5:b=0.4": "impact",
}


def engine_commands(tmp_path: Path, docs: Path, spec: str) -> dict[str, list[object]]:
    """Every command that takes an engine spec, given ``spec``."""
    index = tmp_path / "built.sqlite"
    if not index.exists():
        build(docs, index, builder="sections", tokenizer="bigram")
    systems = tmp_path / "systems.toml"
    systems.write_text(f'[[system]]\ntokenizer = "bigram"\nengine = "{spec}"\n', encoding="utf-8")
    questions = tmp_path / "questions.jsonl"
    questions.write_text('{"_id": "q1", "text": "导出"}\n', encoding="utf-8")
    space = tmp_path / "space.toml"
    space.write_text(f'tokenizers = ["bigram"]\nengines = ["{spec}"]\n', encoding="utf-8")
    return {
        "index build --engine": ["index", "build", docs, "-o", tmp_path / "new.sqlite", "--engine", spec],
        "index build --from": ["index", "build", docs, "-o", tmp_path / "new.sqlite", "--from", systems],
        "search --engine": ["search", index, "导出", "--engine", spec],
        "search --queries --engine": [
            "search",
            index,
            "--queries",
            questions,
            "--run",
            tmp_path / "run",
            "--engine",
            spec,
        ],
        "compare --engine": ["compare", "handbook", "-t", "bigram", "--engine", spec, "-o", tmp_path / "cmp"],
        "compare --systems": ["compare", "handbook", "--systems", systems, "-o", tmp_path / "cmp"],
        "tune --space": ["tune", "handbook", "--space", space, "-o", tmp_path / "tune"],
    }


@pytest.mark.parametrize("spec", sorted(BAD_ENGINES))
def test_a_bad_k1_or_b_is_one_error_in_every_command_taking_an_engine(tmp_path: Path, docs: Path, spec: str) -> None:
    for command, args in engine_commands(tmp_path, docs, spec).items():
        line = one_error(invoke(*args), code=None)
        assert BAD_ENGINES[spec] in line, (command, line)
        assert not any((tmp_path / name).exists() for name in ("new.sqlite", "cmp", "run", "tune")), command


def test_index_build_records_the_pair_and_search_ranks_with_it(tmp_path: Path, docs: Path) -> None:
    """``index build --engine`` and ``--from`` record the engine with its k1 and b; a search naming no engine (as
    the MCP server's) ranks with them, and the same postings still rank at FTS5's pair."""
    path = tmp_path / "index.sqlite"
    result = invoke("index", "build", docs, "-o", path, "--engine", "impact:k1=0.9,b=0.4", "-t", "bigram")
    assert result.exit_code == 0, result.output
    systems = tmp_path / "systems.toml"
    systems.write_text('[[system]]\ntokenizer = "bigram"\nengine = "impact:b=0.4,k1=0.9"\n', encoding="utf-8")
    other = tmp_path / "from.sqlite"
    assert invoke("index", "build", docs, "-o", other, "--from", systems).exit_code == 0
    for built in (path, other):
        with Index.open(built) as index:
            assert index.meta["engine"] == "impact:b=0.4,k1=0.9"
            recorded = [(hit.id, hit.score) for hit in search(index, "导出备份", snippets=False).hits]
            named = search(index, "导出备份", snippets=False, engine="impact:k1=0.90,b=0.40").hits
            default = search(index, "导出备份", snippets=False, engine="impact").hits
            assert recorded == [(hit.id, hit.score) for hit in named] != [(hit.id, hit.score) for hit in default]
            assert [(hit.id, hit.score) for hit in default] == fts5_top(index, "导出备份", "or", 10)
    shown = invoke("search", path, "导出备份", "--engine", "impact:b=0.4,k1=0.9", "--json")
    assert shown.exit_code == 0 and json.loads(shown.output)["hits"][0]["score"] == recorded[0][1]
    served = IndexSet([path])  # the MCP server's search tool: the engine the index records
    try:
        keys = [hit["key"] for hit in served.search("说明 确认")["hits"]]
    finally:
        served.close()
    with Index.open(path) as index:
        ranked = {
            engine: [hit.chunk.key for hit in search(index, "说明 确认", snippets=False, engine=engine).hits]
            for engine in ("impact:b=0.4,k1=0.9", "impact")
        }
    assert keys == ranked["impact:b=0.4,k1=0.9"] != ranked["impact"]  # the pair reorders this query's hits


def without_tfs(path: Path) -> None:
    """The index as a build before 2026-12-04 left it: blocks without their tfs."""
    db = sqlite3.connect(path)
    db.execute("ALTER TABLE impact_blocks DROP COLUMN tfs")
    db.commit()
    db.close()


def test_an_index_built_before_tfs_ranks_at_the_defaults_and_names_the_rebuild_otherwise(
    tmp_path: Path, docs: Path
) -> None:
    path = tmp_path / "index.sqlite"
    build(docs, path, builder="sections", tokenizer="bigram")
    with Index.open(path) as index:
        before = [(hit.id, hit.score) for hit in search(index, "导出备份", snippets=False).hits]
    without_tfs(path)
    with Index.open(path) as index:
        assert [(hit.id, hit.score) for hit in search(index, "导出备份", snippets=False).hits] == before
        with pytest.raises(QueryError, match="no term frequencies") as raised:
            search(index, "导出备份", snippets=False, engine="impact:k1=0.9")
        assert "rag-eval index build" in (raised.value.hint or "")
        # compare's cache never hands it to a k1/b system: it is not in the layout this version writes
        assert _postings_layout(index.db) == {"postings_layout": "older"}
    line = one_error(invoke("search", path, "导出备份", "--engine", "impact:b=0.4"), "no term frequencies")
    assert "k1 = 1.2, b = 0.4" in line


def test_tf_blobs_take_the_narrowest_exact_type() -> None:
    import numpy as np

    cases = {
        1: [1.0, 3.0, 255.0],
        2: [1.0, 256.0, 65535.0],
        4: [65536.0, 0.5, 1.25],
        8: [0.3, 0.6000000000000001],
    }
    for width, values in cases.items():
        tf = np.array(values)
        blob = impact.write.tf_blob(tf)
        assert len(blob) == width * len(values)
        assert impact.write.tf_values(blob, len(values)).tolist() == values
    assert impact.write.tf_values(b"\x00" * 3, 1) is None and impact.write.tf_values(b"\x00" * 5, 2) is None


def tfs_of(path: Path, change: object) -> None:
    db = sqlite3.connect(path)
    first, tfs, rowids = db.execute("SELECT first, tfs, rowids FROM impact_blocks ORDER BY first LIMIT 1").fetchone()
    db.execute("UPDATE impact_blocks SET tfs = ? WHERE first = ?", (change(tfs, len(rowids) // 8), first))  # type: ignore[operator]
    db.commit()
    db.close()


TF_DAMAGE = {
    "a width no type has": lambda tfs, n: tfs + b"\x00" * n * 2,  # 3 bytes a posting
    "a zero tf": lambda tfs, n: bytes(len(tfs)),
    "a tf that is not the impact's": lambda tfs, n: bytes([tfs[0] + 1]) + tfs[1:] if len(tfs) == n else b"",
    "text": lambda tfs, n: "text",
}


@pytest.mark.parametrize("damage", sorted(TF_DAMAGE))
def test_index_verify_checks_the_tfs(tmp_path: Path, docs: Path, damage: str) -> None:
    path = tmp_path / "index.sqlite"
    build(docs, path, builder="sections", tokenizer="bigram")
    assert invoke("index", "verify", path, "--root", docs).exit_code == 0
    tfs_of(path, TF_DAMAGE[damage])
    result = invoke("index", "verify", path, "--root", docs)
    assert result.exit_code != 0 and "impact_blocks" in result.output and "tf" in result.output, result.output
