"""Terms longer than FTS5 keeps (32,768 bytes, FTS5_MAX_TOKEN_SIZE): the impact engine and bm25s read what FTS5
holds, and rank as FTS5 does."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import regex
from helpers.engines import assert_same, fts5_top, impact_top

from rag_eval.engines import impact
from rag_eval.engines.impact import write as impact_write
from rag_eval.index.store import Index
from rag_eval.index.writer import build
from rag_eval.search.query import compile_query
from rag_eval.search.searching import search
from rag_eval.tokenizers import TOKENIZERS, Token, Tokenizer

WORDS = ["导出", "备份", "文件", "保留", "的", "Wi-Fi", "设置", "三十天"]
QUERIES = ("导出备份", "的 文件", "wi-fi 设置", "设置的设置 保留保留保留", "Wi-Fi")


def write_corpus(path: Path, lines: int = 60, extra: str = "") -> Path:
    rows = [
        {
            "_id": f"p{n}",
            "title": WORDS[n % 8] * (n % 3),
            "text": " ".join(WORDS[(n * k) % 8] for k in range(n % 11 + 1)) + extra,
        }
        for n in range(lines)
    ]
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return path


class SpaceWords(Tokenizer):
    """A plug-in whose tokens are the text's runs between spaces and Chinese commas and stops."""

    name = "long-terms-words"

    def _tokenize(self, text: str) -> list[Token]:
        return [Token(m.group(), m.start(), m.end()) for m in regex.finditer(r"[^\s，。]+", text)]


@pytest.fixture
def words() -> Iterator[str]:
    TOKENIZERS.register(SpaceWords)
    yield SpaceWords.name
    TOKENIZERS.unregister(SpaceWords.name)


def assert_exact(path: Path, queries: tuple[str, ...] = QUERIES) -> None:
    """The impact engine ranks as FTS5 for every query it answers (a term with capitals falls back)."""
    answered = 0
    with Index.open(path) as index:
        for text in queries:
            if impact.fallback_reason(index, compile_query(index.tokenizer, text, "or")) is None:
                assert_same(fts5_top(index, text, "or", 100), impact_top(index, text, "or", 100))
                answered += 1
    assert answered >= 2


@pytest.mark.parametrize(
    ("spec", "long_word"),
    [
        ("words", "长" * 11_000),  # 33,000 bytes in UTF-8: cut inside a character
        ("words", "b" * 40_000),  # cut between characters: valid text, but not the term asked for
        ("unicode61", "长" * 11_000),  # unicode61 indexes a run of Han characters as one token
    ],
)
def test_a_term_fts5_cuts_short_gets_no_postings_and_its_queries_go_to_fts5(
    tmp_path: Path, words: str, spec: str, long_word: str
) -> None:
    """FTS5 keeps 32,768 bytes of a token (FTS5_MAX_TOKEN_SIZE), cut even inside a character: an impact build
    of such a term failed ("Could not decode to UTF-8"), and a query for it would have looked up a term FTS5
    does not hold. Now the term gets no postings and its queries are answered by FTS5."""
    source = write_corpus(tmp_path / "corpus.jsonl", lines=8, extra=f" {long_word}")
    build(source, tmp_path / "index.sqlite", builder="passages", tokenizer=words if spec == "words" else spec)
    with Index.open(tmp_path / "index.sqlite") as index:
        longest = max(len(term.encode()) for term, *_ in impact.stored_postings(index.db))
        assert longest < impact.FTS5_TOKEN_BYTES
        compiled = compile_query(index.tokenizer, long_word, "or")
        assert "keeps only the first 32,768 bytes" in (impact.fallback_reason(index, compiled) or "")
        found = search(index, long_word, limit=20, deep=True, snippets=False, engine="impact", explain=True)
        assert found.explain["engine"] == "fts5" and len(found.hits) == 8
    assert_exact(tmp_path / "index.sqlite", ("导出 设置", "备份 文件", "的"))


def test_bm25s_reads_a_term_fts5_cut_inside_a_character(tmp_path: Path) -> None:
    """bm25s reads FTS5's instances too: the cut term, not valid UTF-8, is a term of its own (named by its
    bytes) instead of an error, and every row keeps FTS5's number of tokens."""
    pytest.importorskip("bm25s")
    from rag_eval.engines.bm25s import index_tokens

    source = write_corpus(tmp_path / "corpus.jsonl", lines=4, extra=" " + "长" * 11_000)
    build(source, tmp_path / "index.sqlite", builder="passages", tokenizer="unicode61", engine="fts5")
    with Index.open(tmp_path / "index.sqlite") as index:
        rows, documents, vocabulary = index_tokens(index)
        sizes = dict(index.db.execute("SELECT id, sz FROM search_docsize").fetchall())
    cut = [name for name in vocabulary if name.startswith("\0")]
    assert len(cut) == 1 and len(bytes.fromhex(cut[0][1:])) == impact.FTS5_TOKEN_BYTES
    for rowid, document in zip(rows, documents, strict=True):
        assert len(document) == sum(impact_write._varints(sizes[rowid]))
        assert vocabulary[cut[0]] in document
