"""The passages builder streams corpus.jsonl: a build holds a line and a batch of chunks, never the file.

CI: a 10 MB corpus.jsonl (11,184 passages) built with bigram in a subprocess, peak RSS under 60 MB
(measured 42 MB; the builder that held the file, its text and every chunk peaked at 67 MB on the same
corpus). The 200 MB figures for every builder are in reports/builds.md, measured by hand.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.largecorpus import generate_passages

from rag_eval.builders import get_builder
from rag_eval.builders.base import SourceFile
from rag_eval.errors import CorpusError, RagEvalError
from rag_eval.index.store import Index
from rag_eval.index.writer import build

# Peak RSS from /proc/self/status VmHWM (as tests/index/test_large.py measures it).
CHILD = """
import json, sys
from rag_eval.index.writer import build
report = build(sys.argv[1], sys.argv[2], builder=sys.argv[3], tokenizer=sys.argv[4])
peak = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"chunks": report.chunks, "peak_rss_mb": peak / 1024, "index_mb": report.index_bytes / 1e6}))
"""


def build_in_child(source: Path, index: Path, builder: str = "passages", tokenizer: str = "bigram") -> dict:
    """Build in a fresh interpreter and return its chunk count, peak RSS and index size."""
    result = subprocess.run(
        [sys.executable, "-c", CHILD, str(source), str(index), builder, tokenizer], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.large
def test_10_mb_corpus_jsonl_builds_in_bounded_memory(tmp_path: Path) -> None:
    passages = generate_passages(tmp_path / "beir" / "corpus.jsonl", 10)
    figures = build_in_child(tmp_path / "beir", tmp_path / "index.sqlite")
    assert figures["chunks"] == passages > 10_000
    assert figures["peak_rss_mb"] < 60, figures


def _corpus(path: Path, lines: list[str], *, bom: bool = False, newline: str = "\n") -> Path:
    path.write_bytes(("\ufeff" if bom else "").encode() + "".join(line + newline for line in lines).encode("utf-8"))
    return path


RECORDS = [
    json.dumps({"_id": "d1", "title": "标题", "text": "导出文件保留三十天"}, ensure_ascii=False),
    "",
    "   ",
    json.dumps({"_id": "d2", "text": "备份策略"}, ensure_ascii=False),
    json.dumps({"_id": "d3", "title": None, "text": "第三段\u2028同一行"}, ensure_ascii=False),
]


@pytest.mark.parametrize(("bom", "newline"), [(False, "\n"), (True, "\n"), (False, "\r\n")])
def test_streamed_chunks_equal_the_in_memory_reading(tmp_path: Path, bom: bool, newline: str) -> None:
    corpus = _corpus(tmp_path / "corpus.jsonl", RECORDS, bom=bom, newline=newline)
    builder = get_builder("passages")
    (streamed,) = builder.scan(tmp_path)
    data = corpus.read_bytes()
    in_memory = SourceFile.read(tmp_path, "corpus.jsonl", max_bytes=len(data))
    assert streamed.sha256 == in_memory.sha256 and streamed.size == len(data)
    assert list(builder.chunks(streamed)) == list(builder.chunks(in_memory))
    assert [c.key for c in builder.chunks(streamed)] == ["d1", "d2", "d3"]
    assert streamed.text() == in_memory.text()


def test_chunks_come_before_the_rest_of_the_file_is_read(tmp_path: Path) -> None:
    """The builder yields a passage as soon as its line is read: a bad line 3 fails after two chunks."""
    _corpus(tmp_path / "corpus.jsonl", [*RECORDS[:1], RECORDS[3], "not json"])
    builder = get_builder("passages")
    (file,) = builder.scan(tmp_path)
    chunks = iter(builder.chunks(file))
    assert [next(chunks).key, next(chunks).key] == ["d1", "d2"]
    with pytest.raises(CorpusError, match=r"^corpus.jsonl:3: invalid JSON at column 1"):
        next(chunks)


def test_invalid_utf8_is_refused_before_the_index_is_touched(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "corpus.jsonl", RECORDS[:1] * 1)
    corpus.write_bytes(corpus.read_bytes() + b'{"_id": "d2", "text": "\xff"}\n')
    offset = corpus.read_bytes().index(b"\xff")
    with pytest.raises(CorpusError, match=rf"^corpus.jsonl: not valid UTF-8 at byte {offset} \(line 2\)$"):
        get_builder("passages").scan(tmp_path)


def test_a_corpus_changed_during_the_build_rolls_back(tmp_path: Path) -> None:
    """The bytes hashed are the bytes indexed: a file edited between the check and the reading is an error."""
    corpus = _corpus(tmp_path / "corpus.jsonl", [RECORDS[0], RECORDS[3]])
    index = tmp_path / "index.sqlite"
    build(corpus, index, builder="passages", tokenizer="bigram")
    builder = get_builder("passages")
    (file,) = builder.scan(tmp_path)
    _corpus(corpus, [RECORDS[0], RECORDS[3].replace("备份", "恢复")])
    with pytest.raises(CorpusError, match=r"^corpus.jsonl: changed while it was being read"):
        list(builder.chunks(file))
    with pytest.raises(CorpusError, match=r"changed while it was being read"):
        file.text()

    class Editing(type(builder)):  # type: ignore[misc]
        """Edits the corpus after checking it, as a concurrent writer would."""

        def read(self, root: Path, ref):  # type: ignore[no-untyped-def]
            checked = super().read(root, ref)
            _corpus(corpus, [RECORDS[0], RECORDS[3].replace("备份", "归档")])
            return checked

    with pytest.raises(CorpusError, match=r"changed while it was being read"):
        build(corpus, index, builder=Editing(), tokenizer="bigram")
    with Index.open(index) as opened:
        assert [row[0] for row in opened.db.execute("SELECT text FROM chunks ORDER BY id")] == [
            "导出文件保留三十天",
            "备份策略",
        ]


@pytest.mark.parametrize("flush", [1, 1000])
def test_a_duplicate_chunk_key_is_refused_across_and_within_batches(
    tmp_path: Path, flush: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite's UNIQUE key finds duplicates now (the writer's set of every key held 140 MB for 807k lines)."""
    import rag_eval.index.chunk_writer as chunk_writer

    _corpus(tmp_path / "corpus.jsonl", [RECORDS[0], RECORDS[3]])
    passages = type(get_builder("passages"))

    class Doubling(passages):  # type: ignore[misc, valid-type]
        """Yields every chunk twice, as a buggy plug-in might."""

        def chunks(self, file):  # type: ignore[no-untyped-def]
            for chunk in super().chunks(file):
                yield chunk
                yield chunk

    monkeypatch.setattr(chunk_writer, "FLUSH_CHUNKS", flush)
    with pytest.raises(RagEvalError, match=r"^duplicate chunk key 'd1' \(from 'corpus.jsonl'\)$"):
        build(tmp_path, tmp_path / "index.sqlite", builder=Doubling(), tokenizer="bigram")
    assert not (tmp_path / "index.sqlite").exists()
