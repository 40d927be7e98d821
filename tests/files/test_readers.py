"""Hostile input files for every reader: one RagEvalError naming the file (and line), never a traceback or a hang.

Each reader of a file kind (lines manifest and sources, Markdown, passages, BEIR corpus/queries/qrels, TREC
topics/qrels/runs, SQuAD, the shipped manifest) gets the same corpus of bad files: a BOM (accepted), invalid
UTF-8, a FIFO, a directory, a symbolic link loop, a missing file; JSON readers also get deep nesting, a
5,000-digit integer, NaN/Infinity/1e999 and lone surrogate escapes.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from helpers import HANG_SECONDS, finishes, invoke, one_error

import rag_eval.eval.datasets.beir as beir
import rag_eval.eval.datasets.shipped as shipped
from rag_eval.builders import get_builder
from rag_eval.errors import CorpusError, DatasetError, RagEvalError
from rag_eval.eval.datasets.squad import convert_squad
from rag_eval.eval.datasets.trec import read_any_qrels, read_run, read_trec_qrels
from rag_eval.files.questions import read_topics
from rag_eval.files.textio import read_bytes
from rag_eval.index.writer import build

# rag_eval.files.textio's limits, spelled out so the behavioural tests below also run against code without it.
MAX_JSON_DEPTH = 64
MAX_JSON_INT_DIGITS = 100


def refused(call: Callable[[], Any], fifos: tuple[Path, ...] = ()) -> RagEvalError:
    """The RagEvalError ``call`` raised (within the hang guard); anything else fails the test."""
    outcome = finishes(call, fifos)
    error = outcome.get("error")
    assert isinstance(error, RagEvalError), f"expected a RagEvalError, got {outcome!r}"
    assert "\n" not in str(error), str(error)
    return error


# ---------------------------------------------------------------- the readers


def _lines_plan(root: Path) -> Any:
    return get_builder("lines").plan(root)[1]


def _lines_chunks(root: Path) -> Any:
    builder = get_builder("lines")
    return [(c.line, c.text, c.title) for f in builder.scan(root) for c in builder.chunks(f)]


def _sections(root: Path) -> Any:
    builder = get_builder("sections")
    return [(c.key, c.text) for f in builder.scan(root / "docs") for c in builder.chunks(f)]


def _passages(root: Path) -> Any:
    builder = get_builder("passages")
    return [(c.key, c.title, c.text) for f in builder.scan(root) for c in builder.chunks(f)]


def _squad(root: Path) -> Any:
    dataset, _summary = convert_squad([root / "squad.json"])
    return dataset.corpus, dataset.queries, dataset.qrels


def _shipped_manifest(root: Path) -> Any:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(shipped, "datasets_root", lambda: root)
        shipped.manifest.cache_clear()
        try:
            return shipped.manifest()
        finally:
            shipped.manifest.cache_clear()


def _manifest(first: str = '"c"', path: str = '"c.txt"') -> str:
    # A manifest entry has no free-text key (unknown keys are refused): the text under test is a file name.
    return (
        '[{"doc_id": "a", "revision": "r1", "status": "current", "expires": null, "path": "a.txt"},\n'
        '{"doc_id": "b", "revision": "r1", "status": "current", "expires": null, "path": "b.txt"},\n'
        f'{{"doc_id": {first}, "revision": "r1", "status": "current", "expires": null, "path": {path}}}]\n'
    )


def _jsonl(id_json: str = '"d2"', text_json: str = '"乙"') -> str:
    return f'{{"_id": "d1", "title": "标题", "text": "甲"}}\n{{"_id": {id_json}, "text": {text_json}}}\n'


def _squad_json(id_json: str = '"a1"', text_json: str = '"导出文件保留三十天。"') -> str:
    return (
        '{"version": "t", "data": [{"title": "手册",\n"paragraphs": [\n'
        f'{{"context": {text_json}, "qas": [{{"id": {id_json}, "question": "保留多久？"}}]}}]}}]}}\n'
    )


def _shipped_json(id_json: str = '"x"', text_json: str = '"a set"') -> str:
    return f'{{"x": {{"kind": "retrieval",\n"files": {{}},\n"licence": {id_json}, "description": {text_json}}}}}\n'


_LINES_FILES = {"a.txt": "第一行\n第二行\n", "b.txt": "乙\n", "c.txt": "丙\n", "\U0001f600 ok.txt": "丁\n"}


@dataclass(frozen=True)
class Reader:
    """One reader of one file kind: a valid fixture, the file under test, how to load, what it raises."""

    name: str
    target: str
    files: dict[str, str]
    load: Callable[[Path], Any]
    error: type[RagEvalError]
    by_line: bool  # messages carry path:line
    json: Callable[[str, str], str] | None = None  # fixture with (id, text) JSON fragments, hostile on line 2/3
    edge_text: str = '"\\ud83d\\ude00 ok"'  # a valid text fragment holding a surrogate pair escape
    skip: frozenset[str] = field(default_factory=frozenset)

    def make(self, root: Path, replace: str | bytes | None = None) -> Path:
        for name, text in self.files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text, encoding="utf-8")
        if replace is not None:
            data = replace.encode() if isinstance(replace, str) else replace
            (root / self.target).write_bytes(data)
        return root / self.target


READERS = [
    Reader(
        "lines-manifest",
        "manifest.json",
        {"manifest.json": _manifest(), **_LINES_FILES},
        _lines_plan,
        CorpusError,
        False,
        _manifest,
        edge_text='"\\ud83d\\ude00 ok.txt"',
    ),
    Reader("lines-source", "a.txt", {"manifest.json": _manifest(), **_LINES_FILES}, _lines_chunks, CorpusError, False),
    # A directory named doc.md is a folder of the tree, not a file: it is searched, not refused.
    Reader(
        "sections-markdown",
        "docs/doc.md",
        {"docs/doc.md": "# 标题\n\n正文。\n\n## 小节\n\n更多。\n"},
        _sections,
        CorpusError,
        False,
        skip=frozenset({"directory", "missing"}),
    ),
    Reader("passages-corpus", "corpus.jsonl", {"corpus.jsonl": _jsonl()}, _passages, CorpusError, True, _jsonl),
    Reader(
        "beir-corpus",
        "corpus.jsonl",
        {"corpus.jsonl": _jsonl()},
        lambda r: beir.read_corpus(r / "corpus.jsonl"),
        DatasetError,
        True,
        _jsonl,
    ),
    Reader(
        "beir-queries",
        "queries.jsonl",
        {"queries.jsonl": _jsonl()},
        lambda r: beir.read_queries(r / "queries.jsonl"),
        DatasetError,
        True,
        _jsonl,
    ),
    Reader(
        "beir-qrels",
        "test.tsv",
        {"test.tsv": "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t0\n"},
        lambda r: beir.read_qrels(r / "test.tsv"),
        DatasetError,
        True,
    ),
    Reader(
        "trec-topics-sgml",
        "topics.txt",
        {"topics.txt": "<top>\n<num> Number: 301\n<title> 数据 导出\n</top>\n"},
        lambda r: read_topics(r / "topics.txt"),
        DatasetError,
        False,
    ),
    Reader(
        "trec-topics-tsv",
        "topics.tsv",
        {"topics.tsv": "1\t导出\n2\t备份\n"},
        lambda r: read_topics(r / "topics.tsv"),
        DatasetError,
        True,
    ),
    Reader(
        "trec-qrels",
        "qrels.txt",
        {"qrels.txt": "q1 0 d1 1\nq1 0 d2 0\n"},
        lambda r: read_trec_qrels(r / "qrels.txt"),
        DatasetError,
        True,
    ),
    Reader(
        "any-qrels",
        "qrels.txt",
        {"qrels.txt": "q1 0 d1 1\nq1 0 d2 0\n"},
        lambda r: read_any_qrels(r / "qrels.txt"),
        DatasetError,
        True,
    ),
    Reader(
        "trec-run",
        "run.txt",
        {"run.txt": "q1 Q0 d1 1 2.5 x\nq1 Q0 d2 2 1.5 x\n"},
        lambda r: read_run(r / "run.txt"),
        DatasetError,
        True,
    ),
    Reader("squad", "squad.json", {"squad.json": _squad_json()}, _squad, DatasetError, False, _squad_json),
    Reader(
        "shipped-manifest",
        "manifest.json",
        {"manifest.json": _shipped_json()},
        _shipped_manifest,
        DatasetError,
        False,
        _shipped_json,
    ),
]
JSON_READERS = [reader for reader in READERS if reader.json is not None]


def _ids(readers: list[Reader]) -> list[str]:
    return [reader.name for reader in readers]


@pytest.mark.parametrize("reader", READERS, ids=_ids(READERS))
def test_a_bom_is_ignored(tmp_path: Path, reader: Reader) -> None:
    """Regression: a BOM hid the first Markdown heading and made a qrels header 'score 'score' is not an integer'."""
    plain = tmp_path / "plain"
    reader.make(plain)
    with_bom = tmp_path / "bom"
    reader.make(with_bom, b"\xef\xbb\xbf" + reader.files[reader.target].encode())
    assert reader.load(with_bom) == reader.load(plain)


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _directory(path: Path) -> None:
    path.unlink()
    path.mkdir()
    (path / "inside").write_text("x", encoding="utf-8")


def _loop(path: Path) -> None:
    path.unlink()
    partner = path.with_name(path.name + ".other")
    partner.symlink_to(path.name)
    path.symlink_to(partner.name)


HOSTILE_FILES: dict[str, tuple[Callable[[Path], None], str]] = {
    "fifo": (_fifo, "is a FIFO (named pipe)"),
    "directory": (_directory, "is a directory"),
    "symlink-loop": (_loop, "symbolic link loop"),
    "missing": (Path.unlink, "file not found"),
}


@pytest.mark.parametrize("kind", sorted(HOSTILE_FILES))
@pytest.mark.parametrize("reader", READERS, ids=_ids(READERS))
def test_a_file_that_is_not_a_regular_file_is_refused(tmp_path: Path, reader: Reader, kind: str) -> None:
    """Regression: reading a FIFO hung, and a FIFO was reported as 'is a directory'."""
    if kind in reader.skip:
        pytest.skip(f"{reader.name}: a {kind} is not an error for this reader")
    target = reader.make(tmp_path)
    make_hostile, words = HOSTILE_FILES[kind]
    make_hostile(target)
    error = refused(lambda: reader.load(tmp_path), fifos=(target,))
    assert isinstance(error, reader.error)
    assert Path(reader.target).name in str(error) and words in str(error)


@pytest.mark.parametrize("reader", READERS, ids=_ids(READERS))
def test_invalid_utf8_names_file_byte_and_line(tmp_path: Path, reader: Reader) -> None:
    data = reader.files[reader.target].encode()
    offset = data.index(b"\n") + 1
    reader.make(tmp_path, data[:offset] + b"\xff" + data[offset:])
    error = refused(lambda: reader.load(tmp_path))
    assert isinstance(error, reader.error)
    assert f"not valid UTF-8 at byte {offset}" in str(error) and Path(reader.target).name in str(error)
    # Line readers prefix path:line; whole-file readers add the line after the byte offset.
    assert f"{Path(reader.target).name}:2: " in str(error) or str(error).endswith(f"at byte {offset} (line 2)")


DEEP = "[" * 100_000 + "]" * 100_000
HOSTILE_JSON = {
    "nesting-100000": ('"x"', DEEP, f"nested deeper than {MAX_JSON_DEPTH} levels"),
    "integer-5000-digits": ('"x"', "1" * 5000, f"an integer of 5000 digits (the limit is {MAX_JSON_INT_DIGITS})"),
    "nan": ('"x"', "NaN", "NaN is not a JSON number"),
    "infinity": ('"x"', "Infinity", "Infinity is not a JSON number"),
    "minus-infinity": ('"x"', "-Infinity", "-Infinity is not a JSON number"),
    "1e999": ('"x"', "1e999", "the number 1e999 is out of range"),
    "lone-surrogate-id": ('"\\ud800"', '"x"', "a \\ud800 escape (a lone surrogate"),
    "lone-surrogate-text": ('"x"', '"a\\udc00b"', "a \\udc00 escape (a lone surrogate"),
    "lone-surrogate-before-pair": ('"x"', '"\\ud800\\ud83d\\ude00"', "a \\ud800 escape (a lone surrogate"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_JSON))
@pytest.mark.parametrize("reader", JSON_READERS, ids=_ids(JSON_READERS))
def test_untrusted_json_limits(tmp_path: Path, reader: Reader, case: str) -> None:
    """Regression: RecursionError, ValueError (int digits) and UnicodeEncodeError escaped from JSON readers."""
    id_json, text_json, words = HOSTILE_JSON[case]
    assert reader.json is not None
    reader.make(tmp_path, reader.json(id_json, text_json))
    error = refused(lambda: reader.load(tmp_path))
    assert isinstance(error, reader.error)
    name = Path(reader.target).name
    assert words in str(error) and name in str(error)
    assert f"{name}:2: " in str(error) if reader.by_line else "at line 3 column" in str(error)


@pytest.mark.parametrize("reader", JSON_READERS, ids=_ids(JSON_READERS))
def test_valid_json_edges_are_accepted(tmp_path: Path, reader: Reader) -> None:
    """The limits are limits: a surrogate pair, 64 levels and a 100-digit number still parse."""
    assert reader.json is not None
    reader.make(tmp_path, reader.json('"x"', reader.edge_text))
    assert "error" not in finishes(lambda: reader.load(tmp_path))
    from rag_eval.files.textio import parse_json

    value = parse_json("[" * MAX_JSON_DEPTH + "9" * MAX_JSON_INT_DIGITS + "]" * MAX_JSON_DEPTH, "x", DatasetError)
    for _level in range(MAX_JSON_DEPTH):
        value = value[0]
    assert value == int("9" * MAX_JSON_INT_DIGITS)


# ---------------------------------------------------------------- queries, grades, scores


@pytest.mark.parametrize(
    ("name", "content", "where"),
    [
        (
            "queries.jsonl",
            '{"_id": "q1", "text": "好"}\n{"_id": "q2", "text": "导出\\u0000保留"}\n',
            "queries.jsonl:2: ",
        ),
        ("topics.tsv", "1\t导出\n2\t导\x00出\n", "topics.tsv:2: "),
        ("topics.txt", "<top>\n<num> Number: 301\n<title> 导\x00出\n</top>\n", "topics.txt:1: "),
    ],
)
def test_a_nul_in_a_query_names_file_and_line(tmp_path: Path, name: str, content: str, where: str) -> None:
    """Regression: 'query contains a NUL character' came at search time, without file and line."""
    (tmp_path / name).write_text(content, encoding="utf-8")
    load = beir.read_queries if name.endswith(".jsonl") else read_topics
    with pytest.raises(DatasetError, match=f"^{re.escape(f'{tmp_path}/{where}')}query text contains a NUL character"):
        load(tmp_path / name)


def test_a_nul_in_a_squad_question_is_refused(tmp_path: Path) -> None:
    (tmp_path / "squad.json").write_text(_squad_json().replace("保留多久？", "保留\\u0000多久"), encoding="utf-8")
    with pytest.raises(
        DatasetError, match=r"squad.json: data\[0\].paragraphs\[0\].qas\[0\]: query text contains a NUL"
    ):
        convert_squad([tmp_path / "squad.json"])


GRADES = ["4294967296", "-1", "99999999999999999999", "1" * 5000, "101"]


@pytest.mark.parametrize("grade", GRADES, ids=lambda g: g[:24])
@pytest.mark.parametrize(
    ("name", "line", "load"),
    [
        ("test.tsv", "q1\td2\t{}\n", beir.read_qrels),
        ("test.tsv", "q1\td2\t{}\n", read_any_qrels),
        ("qrels.txt", "q1 0 d2 {}\n", read_trec_qrels),
        ("qrels.txt", "q1 0 d2 {}\n", read_any_qrels),
    ],
    ids=["beir", "any-beir", "trec", "any-trec"],
)
def test_grades_outside_the_bound_are_refused(tmp_path: Path, name: str, line: str, load: Callable, grade: str) -> None:
    """Regression: grades >= 2**32 gave R@10 = P@1 = MAP = 0, and 20 digits a SystemError in pytrec_eval."""
    first = line.replace("d2", "d1").format(0)
    (tmp_path / name).write_text(first + line.format(grade), encoding="utf-8")
    error = refused(lambda: load(tmp_path / name))
    assert isinstance(error, DatasetError)
    assert str(error).startswith(f"{tmp_path / name}:2: relevance grade ") and "is outside 0..100" in str(error)


@pytest.mark.parametrize("grade", ["0", "100", "007"])
def test_grades_inside_the_bound_are_read(tmp_path: Path, grade: str) -> None:
    (tmp_path / "qrels.txt").write_text(f"q1 0 d1 {grade}\n", encoding="utf-8")
    assert read_trec_qrels(tmp_path / "qrels.txt") == {"q1": {"d1": int(grade)}}


@pytest.mark.parametrize("score", ["nan", "NaN", "inf", "-inf", "Infinity", "1e999", "-1e999", "1_0", "٣"])
def test_run_scores_must_be_finite_numbers(tmp_path: Path, score: str) -> None:
    """Regression: nan and 1e999 run scores were accepted and sorted arbitrarily."""
    (tmp_path / "run.txt").write_text(f"q1 Q0 d1 1 2.5 x\nq1 Q0 d2 2 {score} x\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=rf"^{re.escape(str(tmp_path))}/run.txt:2: score .* is not a finite number"):
        read_run(tmp_path / "run.txt")


def test_run_scores_in_any_decimal_form_are_read(tmp_path: Path) -> None:
    (tmp_path / "run.txt").write_text("q1 Q0 d1 1 -2.5e-3 x\nq1 Q0 d2 2 .5 x\nq1 Q0 d3 3 +7 x\n", encoding="utf-8")
    assert [(d.doc_id, d.score) for d in read_run(tmp_path / "run.txt")] == [("d3", 7.0), ("d2", 0.5), ("d1", -0.0025)]


# ---------------------------------------------------------------- manifests and source file names


def _lines_corpus(root: Path, paths: list[str]) -> Path:
    root.mkdir()
    (root / "a.txt").write_text("导出 文件\n", encoding="utf-8")
    manifest = [
        {"doc_id": f"d{n}", "revision": "r1", "status": "current", "expires": None, "path": path}
        for n, path in enumerate(paths, start=1)
    ]
    (root / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return root


@pytest.mark.parametrize("second", ["a.txt", "./a.txt", "sub/../a.txt", "link.txt"])
def test_two_manifest_entries_naming_one_file_are_refused(tmp_path: Path, second: str) -> None:
    """Regression: two manifest entries with the same path ended in sqlite3.IntegrityError."""
    root = _lines_corpus(tmp_path / "corpus", ["a.txt", second])
    (root / "sub").mkdir()
    (root / "link.txt").symlink_to("a.txt")
    # A '..' is refused whatever it names (read and verify refuse it: tests/builders/test_lines.py).
    expected = "has a '..' component" if ".." in second else r"names the same file as entry 1 \('a.txt'\)"
    with pytest.raises(CorpusError, match=rf"manifest.json entry 2: path '{second}' {expected}"):
        build(root, tmp_path / "index.sqlite", builder="lines", tokenizer="bigram")
    assert not (tmp_path / "index.sqlite").exists()


UNSAFE_NAMES = [
    "new\nline.txt",
    "tab\there.txt",
    "bell\x07.txt",
    "del\x7f.txt",
    "c1\x85.txt",
    "csi\x9b.txt",
    "esc\x1b[31m.txt",
]


@pytest.mark.parametrize("name", UNSAFE_NAMES, ids=repr)
def test_control_characters_in_a_manifest_path_are_refused(tmp_path: Path, name: str) -> None:
    root = _lines_corpus(tmp_path / "corpus", [name])
    (root / name).write_text("导出\n", encoding="utf-8")
    with pytest.raises(CorpusError) as caught:
        build(root, tmp_path / "index.sqlite", builder="lines", tokenizer="bigram")
    assert str(caught.value) == (
        f"manifest.json entry 1: {name!r}: the file name contains a control character "
        f"(U+{ord(next(c for c in name if c in UNSAFE_CHARS)):04X}); rename the file"
    )


UNSAFE_CHARS = "\n\t\x07\x7f\x85\x9b\x1b"


@pytest.mark.parametrize("name", [n.replace(".txt", ".md") for n in UNSAFE_NAMES], ids=repr)
def test_control_characters_in_a_markdown_file_name_are_refused(tmp_path: Path, name: str) -> None:
    """Regression: a newline in a file name broke line-oriented output (search, list, runs)."""
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "good.md").write_text("# 好\n", encoding="utf-8")
    (docs / "sub" / name).write_text("# 坏\n", encoding="utf-8")
    with pytest.raises(CorpusError, match="the file name contains a control character") as caught:
        build(docs, tmp_path / "index.sqlite", builder="sections", tokenizer="bigram")
    assert str(caught.value).startswith(repr(f"sub/{name}"))


def test_a_file_name_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.md").write_text("# 好\n", encoding="utf-8")
    os.close(os.open(os.fsencode(docs) + b"/caf\xe9.md", os.O_WRONLY | os.O_CREAT, 0o644))
    with pytest.raises(CorpusError) as caught:
        build(docs, tmp_path / "index.sqlite", builder="sections", tokenizer="bigram")
    assert str(caught.value) == "b'caf\\xe9.md': the file name is not valid UTF-8; rename the file"


def test_bom_in_markdown_and_text_sources(tmp_path: Path) -> None:
    """Regression: '\\ufeff# 标题' became _preamble; the sha256 stays over the file's bytes."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_bytes("\ufeff# 标题\n\n正文\n".encode())
    builder = get_builder("sections")
    (file,) = builder.scan(docs)
    assert [c.anchor for c in builder.chunks(file)] == ["标题"]
    assert file.sha256 == hashlib.sha256("\ufeff# 标题\n\n正文\n".encode()).hexdigest()
    root = _lines_corpus(tmp_path / "corpus", ["a.txt"])
    (root / "a.txt").write_bytes(b"\xef\xbb\xbf\xe7\x94\xb2\n")
    lines = get_builder("lines")
    (source,) = lines.scan(root)
    assert [(c.line, c.text) for c in lines.chunks(source)] == [(1, "甲")]
    assert source.sha256 == hashlib.sha256(b"\xef\xbb\xbf\xe7\x94\xb2\n").hexdigest()


# ---------------------------------------------------------------- textio itself


def test_textio_limits_are_the_documented_ones() -> None:
    from rag_eval.files import textio

    assert (textio.MAX_JSON_DEPTH, textio.MAX_JSON_INT_DIGITS) == (MAX_JSON_DEPTH, MAX_JSON_INT_DIGITS)


def test_textio_readers_refuse_special_files(tmp_path: Path) -> None:
    from rag_eval.files.textio import iter_jsonl, iter_lines, read_bytes, read_json, read_text

    os.mkfifo(tmp_path / "fifo")
    readers: list[Callable[..., Any]] = [
        read_bytes,
        read_text,
        read_json,
        lambda p, e: list(iter_lines(p, e)),
        lambda p, e: list(iter_jsonl(p, e)),
    ]
    for read in readers:
        error = refused(lambda read=read: read(tmp_path / "fifo", CorpusError), fifos=(tmp_path / "fifo",))
        assert str(error) == f"{tmp_path}/fifo: is a FIFO (named pipe), not a regular file"
        error = refused(lambda read=read: read(Path("/dev/null"), DatasetError))
        assert str(error) == "/dev/null: is a character device, not a regular file"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(tmp_path / "sock"))
        assert str(refused(lambda: read_bytes(tmp_path / "sock", DatasetError))).endswith(
            "sock: is a socket, not a regular file"
        )


def test_textio_sizes_labels_and_boms(tmp_path: Path) -> None:
    from rag_eval.files.textio import decode_utf8, iter_jsonl, read_bytes, read_json, read_text

    (tmp_path / "f.json").write_bytes(b"\xef\xbb\xbf\xef\xbb\xbf[1]")
    with pytest.raises(DatasetError, match=r"^shown: 9 bytes is over the limit of 8$"):
        read_bytes(tmp_path / "f.json", DatasetError, max_bytes=8, label="shown")
    assert read_text(tmp_path / "f.json", DatasetError) == "\ufeff[1]"  # exactly one BOM is removed
    with pytest.raises(DatasetError, match="Unexpected UTF-8 BOM"):
        read_json(tmp_path / "f.json", DatasetError)
    assert decode_utf8(b"\xef\xbb\xbfa", "w", DatasetError) == "a"
    with pytest.raises(DatasetError, match=r"^w: not valid UTF-8 at byte 4 \(line 1\)$"):
        decode_utf8(b"\xef\xbb\xbfa\xff", "w", DatasetError)
    (tmp_path / "g.jsonl").write_bytes(b'\xef\xbb\xbf{"a": 1}\r\n\n\xef\xbb\xbf{"b": 2}\n')
    with pytest.raises(DatasetError, match=r"g.jsonl:3: invalid JSON at column 1: Unexpected UTF-8 BOM"):
        list(iter_jsonl(tmp_path / "g.jsonl", DatasetError))
    with pytest.raises(CorpusError, match=r"^'bad\\nname': file not found$"):
        read_bytes(tmp_path / "missing", CorpusError, label="bad\nname")


def test_iter_lines_numbers_lines_as_an_editor_does(tmp_path: Path) -> None:
    from rag_eval.files.textio import iter_lines

    (tmp_path / "t.txt").write_bytes("\ufeffa\r\nb\x0cc\u2028d\n\ne".encode())
    assert list(iter_lines(tmp_path / "t.txt", DatasetError)) == [(1, "a"), (2, "b\x0cc\u2028d"), (3, ""), (4, "e")]


# ---------------------------------------------------------------- through the command line


def _beir_folder(
    root: Path,
    corpus: str = _jsonl(),
    queries: str = '{"_id": "q1", "text": "甲"}\n',
    qrels: str = "query-id\tcorpus-id\tscore\nq1\td1\t1\n",
) -> Path:
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text(corpus, encoding="utf-8")
    (root / "queries.jsonl").write_text(queries, encoding="utf-8")
    (root / "qrels" / "test.tsv").write_bytes(qrels.encode())
    return root


@pytest.mark.parametrize(
    ("folder", "words"),
    [
        ({"corpus": _jsonl(text_json=DEEP)}, ("corpus.jsonl:2: JSON nested deeper than 64",)),
        ({"corpus": _jsonl(text_json="1" * 5000)}, ("corpus.jsonl:2: an integer of 5000 digits",)),
        ({"corpus": _jsonl(id_json='"\\ud800"')}, ("corpus.jsonl:2: a \\ud800 escape",)),
        (
            {"queries": '{"_id": "q1", "text": "甲\\u0000"}\n'},
            ("queries.jsonl:1: query text contains a NUL character",),
        ),
        ({"qrels": "q1\td1\t4294967296\n"}, ("test.tsv:1: relevance grade 4294967296 is outside 0..100",)),
    ],
    ids=["deep", "digits", "surrogate", "nul-query", "grade"],
)
def test_datasets_show_reports_one_error(tmp_path: Path, folder: dict[str, str], words: tuple[str, ...]) -> None:
    root = _beir_folder(tmp_path / "set", **folder)
    one_error(invoke("datasets", "show", root, hang=HANG_SECONDS), *words, alone=True)


def test_datasets_show_accepts_boms(tmp_path: Path) -> None:
    bom = "\ufeff"
    root = _beir_folder(
        tmp_path / "set",
        bom + _jsonl(),
        bom + '{"_id": "q1", "text": "甲"}\n',
        bom + "query-id\tcorpus-id\tscore\nq1\td1\t1\n",
    )
    result = invoke("datasets", "show", root, "--json", hang=HANG_SECONDS)
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.output)["qrels"] == 1


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (_squad_json(text_json='"a\\ud800"'), ("squad.json: a \\ud800 escape", "line 3")),
        (_squad_json(text_json=DEEP), ("squad.json: JSON nested deeper than 64",)),
        (_squad_json(id_json="NaN"), ("squad.json: NaN is not a JSON number",)),
        (None, ("squad.json: is a FIFO (named pipe)",)),
    ],
    ids=["surrogate", "deep", "nan", "fifo"],
)
def test_datasets_convert_reports_one_error_and_writes_nothing(
    tmp_path: Path, content: str | None, words: tuple[str, ...]
) -> None:
    source = tmp_path / "in" / "squad.json"
    source.parent.mkdir()
    if content is None:
        os.mkfifo(source)
    else:
        source.write_text(content, encoding="utf-8")
    out = tmp_path / "out"
    (tmp_path / ".out.partial").mkdir()  # the user's own folder, which rag-eval must not touch
    (tmp_path / ".out.partial" / "mine.txt").write_text("keep", encoding="utf-8")
    before = tree(tmp_path)
    one_error(
        invoke("datasets", "convert", "squad", source, "-o", out, hang=HANG_SECONDS, fifos=(source,)),
        *words,
        alone=True,
    )
    assert tree(tmp_path) == before


def tree(folder: Path) -> dict[str, str]:
    """Every entry under ``folder`` (hidden ones included) with its type and content hash."""
    found = {}
    for entry in sorted(folder.rglob("*")):
        relative = str(entry.relative_to(folder))
        if entry.is_symlink():
            found[relative] = f"link:{os.readlink(entry)}"
        elif entry.is_file():
            found[relative] = hashlib.sha256(entry.read_bytes()).hexdigest()
        elif entry.is_dir():
            found[relative] = "dir"
        else:
            found[relative] = "special"
    return found


def _failing_write(real: Callable[..., Path]) -> Callable[..., Path]:
    def write(dataset: Any, folder: Any, **options: Any) -> Path:
        real(dataset, folder, **options)  # a half-written folder, then a failure
        raise RagEvalError("writing failed (simulated)")

    return write


def test_a_failing_convert_leaves_no_half_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: convert wrote straight into the output folder, so a failure left half a folder."""
    import rag_eval.eval.datasets.squad as squad

    failing = _failing_write(beir.write_beir)
    monkeypatch.setattr(beir, "write_beir", failing)
    monkeypatch.setattr(squad, "write_beir", failing, raising=False)  # imported by name in the new code
    (tmp_path / "squad.json").write_text(_squad_json(), encoding="utf-8")
    (tmp_path / ".out.partial").mkdir()
    (tmp_path / ".out.partial" / "mine.txt").write_text("keep", encoding="utf-8")
    before = tree(tmp_path)
    one_error(
        invoke("datasets", "convert", "squad", tmp_path / "squad.json", "-o", tmp_path / "out", hang=HANG_SECONDS),
        "writing failed (simulated)",
        alone=True,
    )
    assert tree(tmp_path) == before


def test_export_never_touches_anything_outside_its_new_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: export removed a folder named .NAME.partial next to the target, whoever owned it."""
    (tmp_path / ".out.partial").mkdir()
    (tmp_path / ".out.partial" / "mine.txt").write_text("keep", encoding="utf-8")
    (tmp_path / "existing").mkdir()
    before = tree(tmp_path)
    one_error(
        invoke("datasets", "export", "evidence-mini", tmp_path / "existing", hang=HANG_SECONDS),
        "already exists",
        alone=True,
    )
    assert tree(tmp_path) == before
    monkeypatch.setattr(shipped, "write_beir", _failing_write(beir.write_beir))
    one_error(
        invoke("datasets", "export", "evidence-mini", tmp_path / "out", hang=HANG_SECONDS),
        "writing failed (simulated)",
        alone=True,
    )
    assert tree(tmp_path) == before
    monkeypatch.undo()
    assert invoke("datasets", "export", "evidence-mini", tmp_path / "out", hang=HANG_SECONDS).exit_code == 0
    assert (tmp_path / ".out.partial" / "mine.txt").read_text(encoding="utf-8") == "keep"
    assert (tmp_path / "out" / "corpus" / "manifest.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == [".out.partial", "existing", "out"]


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ("duplicate", ("manifest.json entry 2: path './a.txt' names the same file as entry 1 ('a.txt')",)),
        ("fifo", ("manifest.json entry 1: a.txt: is a FIFO (named pipe), not a regular file",)),
        ("control", ("manifest.json entry 1: 'a\\nb.txt': the file name contains a control character (U+000A)",)),
        ("deep", ("manifest.json: JSON nested deeper than 64 levels at line 1",)),
        ("bom", ()),
    ],
)
def test_index_build_lines_reports_one_error(tmp_path: Path, change: str, words: tuple[str, ...]) -> None:
    paths = {"duplicate": ["a.txt", "./a.txt"], "control": ["a\nb.txt"]}.get(change, ["a.txt"])
    root = _lines_corpus(tmp_path / "corpus", paths)
    if change == "fifo":
        (root / "a.txt").unlink()
        os.mkfifo(root / "a.txt")
    elif change == "deep":
        (root / "manifest.json").write_text(DEEP, encoding="utf-8")
    elif change == "bom":
        (root / "manifest.json").write_bytes(b"\xef\xbb\xbf" + (root / "manifest.json").read_bytes())
    result = invoke(
        "index",
        "build",
        root,
        "-b",
        "lines",
        "-t",
        "bigram",
        "-o",
        tmp_path / "x.sqlite",
        hang=HANG_SECONDS,
        fifos=(root / "a.txt",),
    )
    if change == "bom":
        assert result.exit_code == 0, result.stderr
        return
    one_error(result, *words, alone=True)
    assert not (tmp_path / "x.sqlite").exists()


def test_index_build_sections_refuses_a_newline_in_a_file_name(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a\nb.md").write_text("# 标题\n", encoding="utf-8")
    one_error(
        invoke("index", "build", docs, "-b", "sections", "-o", tmp_path / "x.sqlite", hang=HANG_SECONDS),
        "'a\\nb.md': the file name contains a control character (U+000A)",
        alone=True,
    )


@pytest.mark.parametrize(
    ("run", "qrels", "words"),
    [
        ("q1 Q0 d1 1 nan x\n", "q1 0 d1 1\n", ("run.txt:1: score 'nan' is not a finite number",)),
        ("q1 Q0 d1 1 1e999 x\n", "q1 0 d1 1\n", ("run.txt:1: score '1e999' is not a finite number",)),
        ("q1 Q0 d1 1 2 x\n", "q1 0 d1 4294967296\n", ("qrels.txt:1: relevance grade 4294967296 is outside 0..100",)),
        ("q1 Q0 d1 1 2 x\n", "q1\td1\t-1\n", ("qrels.txt:1: relevance grade -1 is outside 0..100",)),
        (
            "q1 Q0 d1 1 2 x\n",
            "\ufeffquery-id\tcorpus-id\tscore\nq1\td1\t99999999999999999999\n",
            ("qrels.txt:2: relevance grade 99999999999999999999 is outside 0..100",),
        ),
    ],
    ids=["nan", "1e999", "2**32", "-1", "20-digits-after-bom"],
)
def test_evaluate_reports_one_error(tmp_path: Path, run: str, qrels: str, words: tuple[str, ...]) -> None:
    (tmp_path / "run.txt").write_text(run, encoding="utf-8")
    (tmp_path / "qrels.txt").write_text(qrels, encoding="utf-8")
    one_error(invoke("evaluate", tmp_path / "run.txt", tmp_path / "qrels.txt", hang=HANG_SECONDS), *words, alone=True)


# -- 7. a document listed twice in a run --------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["evaluate", "fuse"])
def test_a_document_listed_twice_names_the_file_and_both_lines(tmp_path: Path, command: str) -> None:
    """Bug: `evaluate` said "run: query 'h001' returns document 'd1' twice", naming neither file nor line (and
    fuse took the run)."""
    run = tmp_path / "dup.run"
    run.write_text("q1 Q0 d1 1 3.0 t\nq1 Q0 d2 2 2.0 t\nq1 Q0 d1 3 1.0 t\n", encoding="utf-8")
    other = tmp_path / "other.run"
    other.write_text("q1 Q0 d2 1 1.0 t\n", encoding="utf-8")
    (tmp_path / "q.qrels").write_text("q1 0 d1 1\n", encoding="utf-8")
    if command == "evaluate":
        result = invoke("evaluate", run, tmp_path / "q.qrels")
    else:
        result = invoke("fuse", run, other, "-o", tmp_path / "out.run")
    line = one_error(result)
    assert result.exit_code == 1 and f"{run}:3: query 'q1' returns document 'd1' twice (first on line 1)" in line, line
    assert not (tmp_path / "out.run").exists()


QRELS = "q1 0 d1 1\nq1 0 d2 0\nq1 0 d4 2\nq2 0 d3 2\nq3 0 d5 1\n"


RUN = "q1 Q0 d1 1 3.0 t\nq1 Q0 d2 2 2.0 t\nq1 Q0 d9 3 1.0 t\nq2 Q0 d3 1 1.0 t\nq3 Q0 d8 1 4.0 t\nq3 Q0 d5 2 3.5 t\n"


@pytest.mark.parametrize(
    "args",
    [
        ["evaluate", "-", "{dir}/q.txt"],
        ["evaluate", "{dir}/a.run", "-"],
        ["datasets", "convert", "squad", "-", "-o", "o"],
    ],
    ids=["evaluate-run", "evaluate-qrels", "convert"],
)
def test_dash_as_input_says_a_file_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]) -> None:
    (tmp_path / "a.run").write_text(RUN, encoding="utf-8")
    (tmp_path / "q.txt").write_text(QRELS, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    line = one_error(invoke(*[arg.format(dir=tmp_path) for arg in args]))
    assert "not from standard input" in line


TWO_LINE_RUN = "q1 Q0 d1 1 2.0 x\nq1 Q0 d2 2 1.0 x\n"


# -- an empty run file is not a run: never a row of zeros -----------------------------------------------------------


@pytest.mark.parametrize("command", ["evaluate", "fuse", "compare"])
def test_an_empty_run_file_is_one_error_not_zeros(tmp_path: Path, command: str) -> None:
    empty = tmp_path / "empty.run"
    empty.write_text("\n \n", encoding="utf-8")
    good = tmp_path / "good.run"
    good.write_text(TWO_LINE_RUN, encoding="utf-8")
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q1 0 d1 1\n", encoding="utf-8")
    out = tmp_path / "out"
    args = {
        "evaluate": ["evaluate", str(empty), str(qrels)],
        "fuse": ["fuse", str(empty), str(good), "-o", str(out)],
        "compare": ["compare", "evidence-mini", "-t", "bigram", "--run", f"mine={empty}", "-o", str(out)],
    }[command]
    assert "empty.run: no results" in one_error(invoke(*args))
    assert not out.exists()


def test_read_bytes_under_a_huge_limit_reads_the_file(tmp_path: Path) -> None:
    path = tmp_path / "a.md"
    path.write_bytes(b"x" * 100)
    # a limit of 1e12 once meant a 1 TB allocation before the first byte was read
    assert read_bytes(path, CorpusError, max_bytes=10**12) == b"x" * 100
    with pytest.raises(CorpusError, match="over the limit"):
        read_bytes(path, CorpusError, max_bytes=99)


def test_read_bytes_reads_on_when_the_file_grew_after_its_size_was_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    path = tmp_path / "a.md"
    path.write_bytes(b"x" * 10)
    real_fstat = os.fstat
    calls = []

    def stale_fstat(descriptor: int) -> os.stat_result:
        found = real_fstat(descriptor)
        calls.append(found.st_size)
        if len(calls) == 2:  # the size read_bytes reads by is taken; then the file grows before it is read
            with open(path, "ab") as out:
                out.write(b"y" * 40)
        return found

    monkeypatch.setattr(os, "fstat", stale_fstat)
    assert read_bytes(path, CorpusError, max_bytes=1000) == b"x" * 10 + b"y" * 40
    assert calls == [10, 10]
    calls.clear()
    path.write_bytes(b"x" * 10)
    with pytest.raises(CorpusError, match="over the limit"):
        read_bytes(path, CorpusError, max_bytes=30)
