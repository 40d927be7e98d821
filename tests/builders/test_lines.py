"""The lines builder: manifest validation, line numbering, provenance, as-of filtering."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from helpers import REPO, invoke, one_error
from make_corpus import make

from rag_eval.builders import get_builder
from rag_eval.builders.lines import MANIFEST_KEYS, split_lines
from rag_eval.errors import CorpusError, MissingSourceError, QueryError
from rag_eval.eval.datasets import shipped
from rag_eval.index.store import Index
from rag_eval.index.verify import verify_index, verify_source
from rag_eval.index.writer import build
from rag_eval.search.evidence import search_tool
from rag_eval.search.searching import search


def edit_manifest(root: Path, change) -> None:
    path = root / "manifest.json"
    items = json.loads(path.read_text(encoding="utf-8"))
    change(items)
    path.write_text(json.dumps(items, ensure_ascii=False), encoding="utf-8")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda m: m[0].update(doc_id="Bad_ID"), r"manifest.json entry 1: invalid doc_id 'Bad_ID'"),
        (lambda m: m[1].update(doc_id="handbook-v1"), r"entry 2: duplicate doc_id 'handbook-v1'"),
        (lambda m: m[0].update(revision="r" * 41), r"entry 1: invalid revision"),
        (lambda m: m[0].update(status="draft"), r"entry 1: unknown status 'draft'"),
        (lambda m: m[0].update(expires="2026-1-1"), r"entry 1: expires '2026-1-1': use YYYY-MM-DD"),
        (lambda m: m[0].update(expires="20261001"), r"use YYYY-MM-DD"),
        (lambda m: m[0].update(path="../outside.txt"), r"entry 1: \.\./outside.txt: resolves outside the corpus root"),
        (
            lambda m: m[0].update(path="/etc/hosts.txt"),
            r"entry 1: /etc/hosts.txt: relative paths with / separators only",
        ),
        (lambda m: m[0].update(path="notes.md"), r"entry 1: path 'notes.md' must be a relative path to a .txt file"),
        (lambda m: m.append("x"), r"entry 7: expected an object"),
    ],
)
def test_invalid_manifest_is_refused_before_writing(corpus: Path, tmp_path: Path, change, message: str) -> None:
    path = tmp_path / "index.sqlite"
    build(corpus, path, builder="lines", tokenizer="unicode61")
    edit_manifest(corpus, change)
    with pytest.raises(CorpusError, match=message):
        build(corpus, path, builder="lines", tokenizer="unicode61")
    with Index.open(path) as index:
        assert len(search(index, "导出 保留", as_of="2026-10-07").hits) == 2


def test_symlink_escape_is_refused(corpus: Path, tmp_path: Path) -> None:
    (tmp_path / "outside.txt").write_text("秘密\n", encoding="utf-8")
    os.symlink(tmp_path / "outside.txt", corpus / "link.txt")
    edit_manifest(corpus, lambda m: m[0].update(path="link.txt"))
    with pytest.raises(CorpusError, match="link.txt: resolves outside the corpus root"):
        build(corpus, tmp_path / "index.sqlite", builder="lines", tokenizer="unicode61")


def test_size_utf8_json_and_missing_file(corpus: Path, tmp_path: Path) -> None:
    target = tmp_path / "index.sqlite"
    (corpus / "garden.txt").write_text("很长\n" * 100, encoding="utf-8")
    with pytest.raises(CorpusError, match=r"garden.txt: 700 bytes is over the limit of 500 \(option max_bytes\)"):
        build(corpus, target, builder="lines:max_bytes=500", tokenizer="unicode61")
    (corpus / "garden.txt").write_bytes("薄荷".encode("gbk"))
    with pytest.raises(CorpusError, match="garden.txt: not valid UTF-8 at byte 0"):
        build(corpus, target, builder="lines", tokenizer="unicode61")
    (corpus / "garden.txt").unlink()
    with pytest.raises(MissingSourceError, match="garden.txt: file not found"):
        build(corpus, target, builder="lines", tokenizer="unicode61")
    (corpus / "manifest.json").write_text("[{]", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"manifest.json: invalid JSON at line 1 column 3"):
        build(corpus, target, builder="lines", tokenizer="unicode61")
    (corpus / "manifest.json").write_text("{}", encoding="utf-8")
    with pytest.raises(CorpusError, match="the manifest must be a JSON list"):
        build(corpus, target, builder="lines", tokenizer="unicode61")


def test_lines_split_only_on_newline() -> None:
    assert split_lines("a\r\nb\x0cc\u2028d\n\ne\n") == ["a", "b\x0cc\u2028d", "", "e"]


def test_line_numbers_match_an_editor(tmp_path: Path) -> None:
    root = tmp_path / "corpus"
    root.mkdir()
    (root / "doc.txt").write_bytes("第一行\r\n\r\n第三行\x0c仍是第三行\n导出在第四行\n".encode())
    (root / "manifest.json").write_text(
        json.dumps([{"doc_id": "doc", "revision": "r1", "status": "current", "expires": None, "path": "doc.txt"}]),
        encoding="utf-8",
    )
    build(root, tmp_path / "index.sqlite", builder="lines", tokenizer="bigram")
    with Index.open(tmp_path / "index.sqlite") as index:
        hit = search(index, "导出", as_of="2026-01-01").hits[0]
        assert hit.chunk.line == 4 and hit.chunk.key.endswith("#L4")
        assert verify_source(root, hit.as_dict())
        assert [s.status for s in verify_index(index, per_chunk=True)] == ["ok", "ok", "ok"]
        assert [(s.path, s.status, s.chunks) for s in verify_index(index)] == [("doc.txt", "ok", 3)]


def test_verify_reports_stale_and_missing(corpus: Path, tmp_path: Path) -> None:
    build(corpus, tmp_path / "index.sqlite", builder="lines", tokenizer="unicode61")
    (corpus / "garden.txt").write_text("改过了\n", encoding="utf-8")
    (corpus / "meeting.txt").unlink()
    with Index.open(tmp_path / "index.sqlite") as index:
        states = {(s.path, s.status) for s in verify_index(index)}
    assert ("garden.txt", "stale") in states and ("meeting.txt", "missing") in states
    assert ("handbook.txt", "ok") in states


def test_verify_source_never_raises(corpus: Path) -> None:
    for hit in (
        {},
        {"path": "../x", "line": 1, "sha256": "", "text": ""},
        {"path": "handbook.txt", "line": "2", "sha256": "x", "text": "x"},
        {"path": "handbook.txt", "line": 99, "sha256": "x", "text": "x"},
    ):
        assert verify_source(corpus, hit) is False


def test_search_contract(corpus: Path, tmp_path: Path) -> None:
    build(corpus, tmp_path / "index.sqlite", builder="lines", tokenizer="jieba")
    with Index.open(tmp_path / "index.sqlite") as index:
        for bad, message in [
            ("x" * 201, "201 characters; the limit is 200"),
            ("a\x00b", "NUL"),
            (" ".join("a" * 13), "13 whitespace-separated terms; the limit is 12"),
            ("a\ud800", "lone surrogate"),
        ]:
            with pytest.raises((QueryError, ValueError), match=message):
                search(index, bad, as_of="2026-10-07")
        with pytest.raises(QueryError, match="limit must be an integer from 1 to 20"):
            search(index, "导出", limit=21)
        with pytest.raises(QueryError, match="as-of date '2026-1-1': use YYYY-MM-DD"):
            search(index, "导出", as_of="2026-1-1")
        assert len(search(index, "导出", limit=200, deep=True).hits) == 8
        tool = search_tool(index, "导出 保留", as_of="2026-10-07")
        assert tool["action_authority"] is False and "answer" not in tool
        first = tool["hits"][0]
        assert {"source_id", "path", "line", "sha256", "title", "heading_path", "score", "snippet"} <= set(first)
        assert (first["path"], first["line"], first["title"]) == ("compact.txt", 1, "导出文件保留三十天")
        assert tool["hits"][1]["title"] == "星屿 项目 导出 手册"


def test_explain_shows_tokens_expression_and_counts(corpus: Path, tmp_path: Path) -> None:
    build(corpus, tmp_path / "index.sqlite", builder="lines", tokenizer="bigram")
    with Index.open(tmp_path / "index.sqlite") as index:
        info = search(index, "ＣＳＶ 导出文件", explain=True).explain
    assert info["normalised"] == "csv 导出文件"
    assert info["tokens"] == ["csv", "导出", "出文", "文件"]
    assert info["match"] == '"csv" AND "导出" AND "出文" AND "文件"'
    assert info["hits_per_term"]["导出"] == 8 and info["hits_per_term"]["csv"] == 0


def test_offsets_round_trip() -> None:
    from rag_eval.index.offsets import decode, encode
    from rag_eval.tokenizers import get_tokenizer

    text = "导出文件保留三十天，" * 30 + "C++ 与 Wi-Fi 3.11"
    tokens = get_tokenizer("jieba").tokenize(text)
    assert decode(encode(tokens), [t.text for t in tokens]) == tokens
    assert decode(encode([]), []) == []


@pytest.mark.parametrize("spec", ["jieba", "bigram", "pkuseg:model=mini"])
def test_stored_offsets_give_the_same_snippets_as_tokenizing(corpus: Path, tmp_path: Path, spec: str) -> None:
    path = tmp_path / "index.sqlite"
    build(corpus, path, builder="lines", tokenizer=spec)
    with Index.open(path) as index:
        assert index.db.execute("SELECT count(*) FROM chunks WHERE offsets IS NULL").fetchone()[0] == 0
        stored = [h.snippet for h in search(index, "导出 保留", as_of="2026-10-07").hits]
        index.db.execute("UPDATE chunks SET offsets = NULL")
        tokenized = [h.snippet for h in search(index, "导出 保留", as_of="2026-10-07").hits]
    assert stored == tokenized and "[导出]文件[保留]三十天" in stored


# -- 1. manifest keys -------------------------------------------------------------------------------------------


def test_a_misspelt_expires_is_refused_not_a_line_that_never_expires(corpus: Path, tmp_path: Path) -> None:
    """Bug: an entry with "expire" (for "expires") built, and its notice never expired."""
    edit_manifest(corpus, lambda m: m[4].update(expire=m[4].pop("expires")))
    result = invoke("index", "build", corpus, "-t", "bigram", "-o", tmp_path / "x.sqlite")
    line = one_error(result)
    assert result.exit_code == 1 and not (tmp_path / "x.sqlite").exists()
    assert "manifest.json entry 5: unknown key 'expire' (did you mean 'expires'?)" in line
    assert str(corpus / "manifest.json") in line
    assert "allowed keys: doc_id, expires, path, revision, status" in line


def _misspelt(key: str) -> str:
    return key[:-1] if len(key) > 4 else key + "s"


@pytest.mark.parametrize("key", MANIFEST_KEYS)
def test_every_manifest_key_misspelt_is_refused_with_the_key_meant(corpus: Path, key: str) -> None:
    """Every key the manifest fixes: a near miss is named, with the allowed key it is closest to."""
    wrong = _misspelt(key)
    edit_manifest(corpus, lambda m: m[0].update({wrong: m[0].get(key)}))
    with pytest.raises(CorpusError) as caught:
        get_builder("lines").plan(corpus)
    message = str(caught.value)
    assert f"entry 1: unknown key {wrong!r} (did you mean {key!r}?)" in message
    assert all(name in message for name in MANIFEST_KEYS)


def test_an_unknown_key_far_from_any_gets_no_guess(corpus: Path) -> None:
    edit_manifest(corpus, lambda m: m[2].update(notes="归档说明"))
    with pytest.raises(CorpusError, match=r"entry 3: unknown key 'notes'; allowed keys: doc_id, expires"):
        get_builder("lines").plan(corpus)


def test_every_manifest_the_project_ships_still_loads_and_a_misspelt_copy_does_not(tmp_path: Path) -> None:
    """The key check holds for what rag-eval ships (datasets/, tests/data/, docs/examples/, seed 000's corpus):
    each loads as it is, and the same manifest with one key misspelt is refused."""
    shipped.manifest.cache_clear()
    assert set(shipped.manifest()) >= {"evidence-mini", "handbook"}
    found = [
        p for folder in ("datasets", "tests/data", "docs/examples") for p in (REPO / folder).rglob("manifest.json")
    ]
    corpora = [path.parent for path in found if path != REPO / "datasets" / "manifest.json"]
    make(tmp_path / "seed")  # seed 000's own corpus
    corpora.append(tmp_path / "seed")
    assert len(corpora) >= 2
    for number, corpus in enumerate(corpora):
        copy = tmp_path / f"copy{number}"
        shutil.copytree(corpus, copy)
        assert get_builder("lines").plan(copy)[1]
        edit_manifest(copy, lambda m: m[-1].update(Status=m[-1].pop("status")))
        with pytest.raises(CorpusError, match=r"unknown key 'Status' \(did you mean 'status'\?\)"):
            get_builder("lines").plan(copy)


TODAY = "2026-10-07"


def one_document(root: Path, relative: str) -> Path:
    (root / "sub").mkdir(parents=True, exist_ok=True)
    (root / "a.txt").write_text("导出 文件\n", encoding="utf-8")
    (root / "sub" / "b.txt").write_text("导出 文件\n", encoding="utf-8")
    entry = {"doc_id": "a", "revision": "r1", "status": "current", "expires": None, "path": relative}
    (root / "manifest.json").write_text(json.dumps([entry]), encoding="utf-8")
    return root


@pytest.mark.parametrize("relative", ["a.txt", "./a.txt", "sub/b.txt", "sub//b.txt", "sub/./b.txt", "link/b.txt"])
def test_every_manifest_path_the_build_takes_verifies_on_the_fresh_index(tmp_path: Path, relative: str) -> None:
    root = one_document(tmp_path / "corpus", relative)
    os.symlink("sub", root / "link")  # a symlinked folder inside the root
    build(root, tmp_path / "index.sqlite", builder="lines", tokenizer="unicode61")
    with Index.open(tmp_path / "index.sqlite") as index:
        hit = search(index, "导出", as_of=TODAY).hits[0]
        assert verify_source(root, hit.as_dict())
        assert [status.status for status in verify_index(index)] == ["ok"]


@pytest.mark.parametrize("relative", ["sub/../a.txt", "./sub/../sub/b.txt", "sub/b.txt/../b.txt"])
def test_a_dotdot_path_that_stays_inside_is_refused_as_verify_refuses_it(tmp_path: Path, relative: str) -> None:
    """Bug: 'sub/../a.txt' was indexed, then every verify of its evidence said 'missing'."""
    root = one_document(tmp_path / "corpus", "a.txt")
    build(root, tmp_path / "index.sqlite", builder="lines", tokenizer="unicode61")
    one_document(root, relative)
    with pytest.raises(CorpusError, match=r"manifest.json entry 1: .*'\.\.'"):
        build(root, tmp_path / "index.sqlite", builder="lines", tokenizer="unicode61")
    with Index.open(tmp_path / "index.sqlite") as index:  # the previous index is kept
        assert [hit.chunk.path for hit in search(index, "导出", as_of=TODAY).hits] == ["a.txt"]


def test_a_dotdot_path_out_of_the_root_keeps_its_own_message(tmp_path: Path) -> None:
    root = one_document(tmp_path / "corpus", "../outside.txt")
    with pytest.raises(CorpusError, match="resolves outside the corpus root"):
        build(root, tmp_path / "index.sqlite", builder="lines", tokenizer="unicode61")
