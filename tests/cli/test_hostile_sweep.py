"""A corpus of hostile files and arguments against every command.

For every case: exit status 0 or 1 (never a crash, a traceback or a usage error for a bad file), exactly
one ``error:`` line when it fails, and nothing in the folder changed except the command's own output
(the whole tree is hashed before and after). Each command runs under a hang guard: a FIFO must never
block a command.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import sqlite3
import stat
from pathlib import Path

import pytest
from helpers import invoke, make_docs

from rag_eval.index.writer import build

NOT_UTF8 = "caf\udce9"  # what Python makes of the bytes b"caf\xe9" in argv


def _write(path: Path, data: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return path


def _fifo(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    return path


def _loop(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(path.name, path)
    return path


def _beir(folder: Path, corpus: str | None = None, queries: str | None = None, qrels: str | None = None) -> Path:
    _write(
        folder / "corpus.jsonl",
        corpus
        if corpus is not None
        else '{"_id": "d1", "title": "", "text": "导出文件保留三十天"}\n'
        '{"_id": "d2", "title": "", "text": "备份策略"}\n',
    )
    _write(folder / "queries.jsonl", queries if queries is not None else '{"_id": "q1", "text": "导出"}\n')
    _write(folder / "qrels" / "test.tsv", qrels if qrels is not None else "query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    return folder


def _manifest(folder: Path, manifest: str) -> Path:
    _write(folder / "a.txt", "导出文件保留三十天\n")
    _write(folder / "manifest.json", manifest)
    return folder


ENTRY = '{"doc_id": "a", "revision": "r1", "status": "current", "expires": null, "path": "a.txt"}'
DEEP = "[" * 100_000 + "]" * 100_000


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile")
    docs = make_docs(root / "good" / "docs")
    # FTS5 alone: corrupt.sqlite's damaged bytes must fall in pages searches read (with impact postings the
    # file doubles and its middle is postings of terms the sweep's queries never read).
    build(docs, root / "good" / "index.sqlite", builder="sections", tokenizer="bigram", engine="fts5")
    _beir(root / "good" / "beir")
    # index files that are not (whole) rag-eval indexes
    data = bytearray((root / "good" / "index.sqlite").read_bytes())
    rng = random.Random(3)
    middle = len(data) // 2
    data[middle : middle + 4096] = rng.randbytes(4096)  # chunk rows' pages (long texts' overflow pages here)
    # and the FTS5 index's root page, which every search reads: a keys-only batch search reads no chunk
    # text, so the middle alone would leave it (correctly) untouched
    db = sqlite3.connect(root / "good" / "index.sqlite")
    page_size = db.execute("PRAGMA page_size").fetchone()[0]
    root_page = db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'search_data'").fetchone()[0]
    db.close()
    start = (root_page - 1) * page_size + 100 * (root_page == 1)
    data[start + 8 : start + page_size] = rng.randbytes(page_size - 8)
    _write(root / "bad" / "corrupt.sqlite", bytes(data))
    db = sqlite3.connect(root / "bad" / "foreign.db")
    db.execute("CREATE TABLE users (name TEXT)")
    db.commit()
    db.close()
    _write(root / "bad" / "notes.txt", "my own notes\n")
    _write(root / "bad" / "empty.sqlite", b"")
    _write(root / "bad" / "junk.sqlite", rng.randbytes(5000))
    _fifo(root / "bad" / "fifo.sqlite")
    _loop(root / "bad" / "loop.sqlite")
    (root / "bad" / "dir.sqlite").mkdir()
    with open(os.fsencode(root / "bad") + b"/\xff.sqlite", "wb") as handle:
        handle.write(b"x")
    # Markdown sources
    _write(root / "md" / "fifo" / "b.md", "# 标题\n\n正文\n")
    _fifo(root / "md" / "fifo" / "a.md")
    _write(root / "md" / "bom" / "a.md", "\ufeff# 标题\n\n正文\n")
    _write(root / "md" / "loop" / "b.md", "# 标题\n")
    _loop(root / "md" / "loop" / "a.md")
    _write(root / "md" / "control" / "a\nb.md", "# 标题\n")
    _write(root / "md" / "binary" / "a.md", b"\x00\xff\xfe" * 100)
    (root / "md" / "nonutf8").mkdir(parents=True)
    with open(os.fsencode(root / "md" / "nonutf8") + b"/caf\xe9.md", "wb") as handle:
        handle.write("# 标题\n".encode())
    # lines manifests
    _manifest(root / "lines" / "bomb", DEEP)
    _manifest(root / "lines" / "surrogate", "[" + ENTRY.replace('"a"', '"\\ud800"', 1) + "]")
    _manifest(root / "lines" / "bigint", "[" + ENTRY.replace("null", "1" * 5000) + "]")
    _manifest(root / "lines" / "duplicate", "[" + ENTRY + ", " + ENTRY.replace('"a"', '"b"', 1) + "]")
    _manifest(root / "lines" / "bom", "\ufeff[" + ENTRY + "]")
    _manifest(root / "lines" / "nan", "[" + ENTRY.replace("null", "NaN") + "]")
    _fifo(root / "lines" / "fifo" / "manifest.json")
    # BEIR datasets
    _beir(root / "beir" / "bomb", corpus=DEEP + "\n")
    _beir(root / "beir" / "nul", queries='{"_id": "q1", "text": "导\\u0000出"}\n')
    _beir(root / "beir" / "surrogate", queries='{"_id": "q1", "text": "\\ud800"}\n')
    _beir(root / "beir" / "grade", qrels="q1\td1\t4294967296\n")
    _beir(root / "beir" / "hugegrade", qrels="q1\td1\t99999999999999999999\n")
    _beir(
        root / "beir" / "bom",
        corpus="\ufeff" + '{"_id": "d1", "title": "", "text": "导出"}\n',
        queries='\ufeff{"_id": "q1", "text": "导出"}\n',
        qrels="\ufeffquery-id\tcorpus-id\tscore\nq1\td1\t1\n",
    )
    _beir(root / "beir" / "empty-qrels", qrels="")
    _beir(root / "beir" / "unknown-id", qrels="q1\tnope\t1\n")
    (root / "beir" / "fifo").mkdir(parents=True)
    _fifo(root / "beir" / "fifo" / "corpus.jsonl")
    _write(root / "beir" / "fifo" / "queries.jsonl", '{"_id": "q1", "text": "导出"}\n')
    # SQuAD files
    _write(root / "squad" / "bomb.json", DEEP)
    _write(
        root / "squad" / "surrogate.json",
        json.dumps(
            {"data": [{"title": "t", "paragraphs": [{"context": "x", "qas": [{"id": "1", "question": "q"}]}]}]}
        ).replace('"x"', '"\\ud800"'),
    )
    _write(root / "squad" / "bigint.json", '{"data": ' + "1" * 5000 + "}")
    _fifo(root / "squad" / "fifo.json")
    # runs and qrels
    _write(root / "trec" / "nan.run", "q1 Q0 d1 1 nan x\n")
    _write(root / "trec" / "inf.run", "q1 Q0 d1 1 1e999 x\n")
    _write(root / "trec" / "good.run", "q1 Q0 d1 1 2.0 x\n")
    _write(root / "trec" / "big.qrels", "q1 0 d1 4294967296\n")
    _write(root / "trec" / "good.qrels", "q1 0 d1 1\n")
    _fifo(root / "trec" / "fifo.run")
    # questions files (compare --queries)
    _write(root / "q" / "good.txt", "导出文件保留多久\n备份策略是什么\n")
    _write(root / "q" / "empty.txt", "")
    _write(root / "q" / "blank.txt", "\n  \n\r\n")
    _write(root / "q" / "nul.txt", "导出\x00\n")
    _write(root / "q" / "binary.txt", b"\x00\xff\xfe" * 100)
    _write(root / "q" / "dup.txt", "导出\n导出\n")
    _write(root / "q" / "bomb.jsonl", DEEP + "\n")
    _write(root / "q" / "surrogate.jsonl", '{"_id": "q1", "text": "\\ud800"}\n')
    _write(root / "q" / "long.txt", "导" * 100_000 + "\n")
    _fifo(root / "q" / "fifo.txt")
    # outputs that already exist and are not rag-eval's
    _write(root / "out" / "project" / "notes.txt", "keep me\n")
    _fifo(root / "out" / "fifo-out")
    os.symlink("project", root / "out" / "link-out")
    return root


def snapshot(root: Path, skip: Path | None) -> dict[str, str]:
    """Type and content of everything under ``root`` (symlinks and FIFOs not followed), ``skip`` left out."""
    found = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            if skip is not None and (path == skip or skip in path.parents):
                continue
            info = path.lstat()
            key = os.fsencode(path.relative_to(root)).hex()
            if stat.S_ISLNK(info.st_mode):
                found[key] = "link:" + os.readlink(path)
            elif stat.S_ISREG(info.st_mode):
                found[key] = "file:" + hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                found[key] = f"mode:{stat.S_IFMT(info.st_mode)}"
    return found


IDX = [
    "corrupt.sqlite",
    "foreign.db",
    "notes.txt",
    "empty.sqlite",
    "junk.sqlite",
    "fifo.sqlite",
    "loop.sqlite",
    "dir.sqlite",
    "\udcff.sqlite",
    "missing.sqlite",
]
INDEX_COMMANDS = [
    ["index", "info", "{i}"],
    ["index", "list", "{i}"],
    ["index", "verify", "{i}"],
    ["search", "{i}", "导出"],
    ["search", "{i}", "--queries", "{root}/q/good.txt", "--run", "{root}/out/never.run"],
    ["read", "{i}", "guide/export.md#导出指南"],
]
SOURCES = [
    ("md/fifo", "sections"),
    ("md/bom", "sections"),
    ("md/loop", "sections"),
    ("md/control", "sections"),
    ("md/binary", "sections"),
    ("md/nonutf8", "sections"),
    ("md/fifo/a.md", "sections"),
    ("bad/fifo.sqlite", "passages"),
    ("beir/bomb", "passages"),
    ("beir/fifo", "passages"),
    *[(f"lines/{name}", "lines") for name in ("bomb", "surrogate", "bigint", "duplicate", "bom", "nan", "fifo")],
]
DATASETS = [
    "beir/bomb",
    "beir/nul",
    "beir/surrogate",
    "beir/grade",
    "beir/hugegrade",
    "beir/bom",
    "beir/empty-qrels",
    "beir/unknown-id",
    "beir/fifo",
    "bad/notes.txt",
    "bad/fifo.sqlite",
    "nowhere",
]
CASES: list[tuple[list[str], str | None]] = [
    *[
        ([a.replace("{i}", f"{{root}}/bad/{name}") for a in command], None)
        for name in IDX
        for command in INDEX_COMMANDS
    ],
    *[
        (["index", "build", f"{{root}}/{source}", "-b", builder, "-o", "{out}"], "out/new.sqlite")
        for source, builder in SOURCES
    ],
    *[(["datasets", "show", f"{{root}}/{name}"], None) for name in DATASETS],
    *[(["compare", f"{{root}}/{name}", "-t", "bigram", "-o", "{out}"], "out/report") for name in DATASETS],
    # a knowledge base and questions: hostile questions files, sources and judgments
    *[
        (["compare", "{root}/good/docs", "--queries", f"{{root}}/{name}", "-t", "bigram", "-o", "{out}"], "out/report")
        for name in (
            "q/empty.txt",
            "q/blank.txt",
            "q/nul.txt",
            "q/binary.txt",
            "q/dup.txt",
            "q/bomb.jsonl",
            "q/surrogate.jsonl",
            "q/long.txt",
            "q/fifo.txt",
            "q",
            "q/missing.txt",
            "bad/fifo.sqlite",
            "bad/loop.sqlite",
        )
    ],
    *[
        (
            ["compare", f"{{root}}/{source}", "--queries", "{root}/q/good.txt", "-t", "bigram", "-o", "{out}"],
            "out/report",
        )
        for source, _ in SOURCES
    ],
    *[
        (
            ["compare", "{root}/good/docs", "--queries", "{root}/q/good.txt", "--qrels", f"{{root}}/{name}"]
            + ["-t", "bigram", "-o", "{out}"],
            "out/report",
        )
        for name in ("trec/big.qrels", "trec/good.qrels", "trec/fifo.run", "trec/nan.run", "q/binary.txt", "q")
    ],
    # batch search: hostile questions files, and run outputs that exist and are not rag-eval's
    *[
        (["search", "{root}/good/index.sqlite", "--queries", f"{{root}}/{name}", "--run", "{out}"], "out/new.run")
        for name in (
            "q/good.txt",
            "q/empty.txt",
            "q/nul.txt",
            "q/binary.txt",
            "q/dup.txt",
            "q/bomb.jsonl",
            "q/fifo.txt",
            "q",
        )
    ],
    *[
        (["search", "{root}/good/index.sqlite", "--queries", "{root}/q/good.txt", "--run", f"{{root}}/{target}"], None)
        for target in ("out/project", "out/fifo-out", "out/link-out", "bad/notes.txt")
    ],
    *[
        (["datasets", "convert", "squad", f"{{root}}/squad/{name}", "-o", "{out}"], "out/converted")
        for name in ("bomb.json", "surrogate.json", "bigint.json", "fifo.json", "missing.json")
    ],
    *[
        (["evaluate", f"{{root}}/trec/{run}", f"{{root}}/trec/{qrels}"], None)
        for run, qrels in (
            ("nan.run", "good.qrels"),
            ("inf.run", "good.qrels"),
            ("good.run", "big.qrels"),
            ("fifo.run", "good.qrels"),
            ("good.run", "fifo.run"),
        )
    ],
    # arguments that are not UTF-8
    (["search", "{root}/good/index.sqlite", NOT_UTF8], None),
    (["search", "{root}/good/index.sqlite", "导出", "--category", NOT_UTF8], None),
    (["search", "{root}/good/index.sqlite", "导出", "--path-prefix", NOT_UTF8], None),
    (["search", "{root}/good/index.sqlite", "导出", "--as-of", NOT_UTF8], None),
    (["read", "{root}/good/index.sqlite", f"guide/{NOT_UTF8}.md#x"], None),
    (["read", "{root}/good/index.sqlite", f"guide/{NOT_UTF8}.md"], None),
    (["index", "list", "{root}/good/index.sqlite", "--category", NOT_UTF8], None),
    (["tokenize", NOT_UTF8], None),
    (["tokenize", "-t", NOT_UTF8, "导出"], None),
    (["datasets", "show", NOT_UTF8], None),
    (["compare", "{root}/good/beir", "-t", "bigram", "--metric", NOT_UTF8, "-o", "{out}"], "out/report"),
    (["index", "build", "{root}/good/docs", "-b", NOT_UTF8, "-o", "{out}"], "out/new.sqlite"),
    # outputs that exist and are not rag-eval's
    *[
        (["compare", "{root}/good/beir", "-t", "bigram", "-o", f"{{root}}/{target}"], None)
        for target in ("out/project", "out/fifo-out", "out/link-out", "bad/notes.txt", "bad/foreign.db")
    ],
    (["compare", "{root}/good/beir", "-t", "bigram", "-o", "{out}", "--write-baseline", "{root}/bad/notes.txt"], None),
    *[
        (["index", "build", "{root}/good/docs", "-b", "sections", "-o", f"{{root}}/{target}"], None)
        for target in (
            "bad/foreign.db",
            "bad/notes.txt",
            "bad/fifo.sqlite",
            "bad/dir.sqlite",
            "bad/junk.sqlite",
            "bad/corrupt.sqlite",
            "out/link-out",
        )
    ],
    (["datasets", "export", "evidence-mini", "{root}/out/project"], None),
    (["datasets", "convert", "squad", "{root}/squad/bomb.json", "-o", "{root}/out/project"], None),
    (["models", "train-pkuseg", "-o", "{root}/out/project"], None),
]


@pytest.mark.parametrize(("args", "output"), CASES, ids=[" ".join(a[:4]).replace("{root}/", "") for a, _ in CASES])
def test_hostile_input(hostile: Path, args: list[str], output: str | None) -> None:
    out = hostile / output if output else None
    if out is not None:  # what an earlier successful case wrote
        shutil.rmtree(out, ignore_errors=True) if out.is_dir() else out.unlink(missing_ok=True)
    args = [a.replace("{root}", str(hostile)).replace("{out}", str(out)) for a in args]
    before = snapshot(hostile, out)
    result = invoke(*args, hang=120)
    assert result.exit_code in (0, 1), (result.exit_code, result.stderr)
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    if result.exit_code == 1 and args[:2] != ["index", "verify"]:
        errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1, result.stderr
    assert snapshot(hostile, out) == before
    if result.exit_code == 1 and out is not None:
        assert not out.exists() and not any(p.name.startswith(f".{out.name}.") for p in out.parent.iterdir())
