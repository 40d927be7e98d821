"""Index files: never write into someone else's database, never answer from a stale tokenizer or a mixed
snapshot, never keep a lock or a worker alive after a killed build, never wait on readers."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import make_docs
from helpers.largecorpus import generate

from rag_eval.cli import cli
from rag_eval.errors import IndexFileError
from rag_eval.index.store import Index
from rag_eval.index.verify import verify_index
from rag_eval.index.writer import build
from rag_eval.search.searching import search
from rag_eval.tokenizers import get_tokenizer


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def foreign_database(path: Path) -> Path:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE users (name TEXT)")
    db.execute("CREATE TABLE search (x)")  # even a table named like rag-eval's
    db.execute("INSERT INTO users VALUES ('ada')")
    db.commit()
    db.close()
    return path


def rag_eval_lookalike(path: Path) -> Path:
    """A rag-eval index into which someone added a table of their own."""
    build(make_docs(path.parent / "lookalike-docs"), path, builder="sections", tokenizer="bigram")
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE notes (text TEXT)")
    db.commit()
    db.close()
    return path


FOREIGN = {
    "sqlite database": foreign_database,
    "text file": lambda path: (path.write_text("my notes\n", encoding="utf-8"), path)[1],
    "binary file": lambda path: (path.write_bytes(os.urandom(4096)), path)[1],
    "index with a user table": rag_eval_lookalike,
}


@pytest.mark.parametrize("kind", sorted(FOREIGN))
def test_build_refuses_a_file_rag_eval_did_not_write(kind: str, tmp_path: Path, docs: Path) -> None:
    target = FOREIGN[kind](tmp_path / "app.db")
    before = digest(target)
    with pytest.raises(IndexFileError, match=r"refusing to build into it: .*rag-eval only writes its own index files"):
        build(docs, target, builder="sections", tokenizer="bigram")
    assert digest(target) == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("app.db")) == ["app.db"]
    result = CliRunner().invoke(cli, ["index", "build", str(docs), "-b", "sections", "-o", str(target)])
    assert result.exit_code == 1 and result.stderr.startswith("error: ") and "Traceback" not in result.stderr
    assert digest(target) == before


def test_build_writes_into_new_empty_or_own_files(tmp_path: Path, docs: Path) -> None:
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    sqlite3.connect(tmp_path / "blank.sqlite").close()  # a SQLite file with no tables at all
    for path in (tmp_path / "new.sqlite", empty, tmp_path / "blank.sqlite"):
        build(docs, path, builder="sections", tokenizer="bigram")
        build(docs, path, builder="sections", tokenizer="jieba")  # and rebuilds its own index
        with Index.open(path) as index:
            assert index.tokenizer.name == "jieba" and index.count() == 15


def token_rows(path: Path) -> list[tuple[str, str, str]]:
    with Index.open(path) as index:
        return [
            (row["key"], row["text"], row["fts_body"])
            for row in index.db.execute("SELECT key, text, fts_body FROM chunks")
        ]


def test_sync_after_a_builder_option_change_retokenizes(tmp_path: Path, docs: Path) -> None:
    path = tmp_path / "index.sqlite"
    build(docs, path, builder="sections", tokenizer="bigram")
    report = build(docs, path, builder="sections:max_chars=60", tokenizer="bigram")
    assert report.chunks_tokenized == report.chunks and report.files_tokenized == report.files
    tokenizer = get_tokenizer("bigram")
    for key, text, body in token_rows(path):
        assert body == " ".join(tokenizer.terms(text)), key
    with Index.open(path) as index:
        for hit in search(index, "备份").hits:
            assert "备份" in hit.chunk.text or "备份" in hit.chunk.title, hit.chunk.key


def test_sync_reuses_tokens_only_of_unchanged_chunks(tmp_path: Path, docs: Path) -> None:
    path = tmp_path / "index.sqlite"
    build(docs, path, builder="sections", tokenizer="bigram")
    again = build(docs, path, builder="sections", tokenizer="bigram")
    assert again.chunks_tokenized == 0 and again.files_tokenized == 0
    (docs / "notes.md").write_text("没有标题的笔记：同步以后要核对。\n", encoding="utf-8")
    changed = build(docs, path, builder="sections", tokenizer="bigram")
    assert changed.chunks_tokenized == 1 and changed.files_tokenized == 1


def test_verify_notices_tokens_that_do_not_match_their_text(tmp_path: Path, docs: Path) -> None:
    path = tmp_path / "index.sqlite"
    build(docs, path, builder="sections", tokenizer="bigram")
    with Index.open(path) as index:
        assert {s.status for s in verify_index(index)} == {"ok"}
    db = sqlite3.connect(path)
    db.execute("UPDATE chunks SET fts_body = 'stale tokens' WHERE id = 3")
    db.commit()
    db.close()
    with Index.open(path) as index:
        problems = [s for s in verify_index(index) if s.status != "ok"]
    assert [(s.status, s.path) for s in problems] == [("stale", "guide/export.md")]
    assert "tokens" in problems[0].detail


def lines_corpus(folder: Path, word: str) -> Path:
    import json

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "doc.txt").write_text("".join(f"导出记录 {word}{n} 第{n}行\n" for n in range(30)), encoding="utf-8")
    (folder / "manifest.json").write_text(
        json.dumps([{"doc_id": "doc", "revision": "r1", "status": "current", "expires": None, "path": "doc.txt"}]),
        encoding="utf-8",
    )
    return folder


#: A statement each engine's search always issues while it ranks (FTS5's bm25 statement; the impact
#: engine's read of its hits' chunk rows: its postings may be cached): the rebuild starts right then.
RANKING_STATEMENT = {"fts5": "bm25(", "impact": "FROM json_each("}


@pytest.mark.parametrize("engine", sorted(RANKING_STATEMENT))
@pytest.mark.parametrize("spec", ["bigram", "trigram"])
def test_one_search_reads_one_snapshot_during_a_rebuild(spec: str, engine: str, tmp_path: Path) -> None:
    """Hits and snippets (a second statement for FTS5-style snippets) come from the same build."""
    old, new = lines_corpus(tmp_path / "old", "alpha"), lines_corpus(tmp_path / "new", "omega")
    path = tmp_path / "index.sqlite"
    build(old, path, builder="lines", tokenizer=spec, engine=engine)
    index = Index.open(path)
    rebuilt = []

    def rebuild_once(statement: str) -> None:
        if RANKING_STATEMENT[engine] in statement and not rebuilt:
            rebuilt.append(True)
            build(new, path, builder="lines", tokenizer=spec, engine=engine)

    index.db.set_trace_callback(rebuild_once)
    hits = search(index, "导出记录", limit=5).hits
    index.db.set_trace_callback(None)
    assert rebuilt and hits
    for hit in hits:
        plain = hit.snippet.replace("[", "").replace("]", "").replace(" … ", "")
        assert plain in hit.chunk.text, (hit.chunk.text, hit.snippet)
    index.close()


@pytest.mark.parametrize("engine", sorted(RANKING_STATEMENT))
@pytest.mark.parametrize("when", ["between searches", "while a search runs"])
def test_an_open_index_follows_a_rebuild_with_another_tokenizer(when: str, engine: str, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "birds.md").write_text("# 鸟类\n\n猫头鹰在夜里捕食。\n\n# 其他\n\n猫头鹰的眼睛很大。\n", encoding="utf-8")
    path = tmp_path / "index.sqlite"
    build(docs, path, builder="sections", tokenizer="bigram", engine=engine)
    index = Index.open(path)
    before = [(h.chunk.key, h.score) for h in search(index, "猫头鹰").hits]
    assert before
    if when == "between searches":
        build(docs, path, builder="sections", tokenizer="unicode61", engine=engine)
    else:
        index.db.set_trace_callback(
            lambda sql: (
                RANKING_STATEMENT[engine] in sql
                and index.tokenizer.name == "bigram"
                and not getattr(index, "_rebuilt", False)
                and (
                    setattr(index, "_rebuilt", True),
                    build(docs, path, builder="sections", tokenizer="unicode61", engine=engine),
                )
            )
        )
    found = [(h.chunk.key, h.score) for h in search(index, "猫头鹰").hits]
    index.db.set_trace_callback(None)
    if when == "while a search runs" and engine == "impact":
        # The impact engine ranks inside one read transaction: a rebuild that commits meanwhile is not
        # seen by that search (the old build answers it whole); the next search follows the rebuild.
        assert found == before
        found = [(h.chunk.key, h.score) for h in search(index, "猫头鹰").hits]
    assert index.tokenizer.name == "unicode61"
    with Index.open(path) as fresh:
        assert found == [(h.chunk.key, h.score) for h in search(fresh, "猫头鹰").hits] == []
    index.close()


def test_an_index_opened_for_one_tokenizer_fails_clearly_after_a_rebuild_with_another(
    tmp_path: Path, docs: Path
) -> None:
    path = tmp_path / "index.sqlite"
    build(docs, path, builder="sections", tokenizer="bigram")
    index = Index.open(path, tokenizer="bigram")
    build(docs, path, builder="sections", tokenizer="unicode61")
    with pytest.raises(IndexFileError, match="built with tokenizer unicode61"):
        search(index, "导出")
    index.close()


def test_a_build_does_not_wait_for_readers(tmp_path: Path, docs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import rag_eval.index.store as store

    monkeypatch.setattr(store, "BUSY_TIMEOUT_MS", 30_000)
    path = tmp_path / "index.sqlite"
    build(docs, path, builder="sections", tokenizer="bigram")
    reader = sqlite3.connect(path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM chunks").fetchone()  # holds a snapshot, which pins the WAL
    errors: list[BaseException] = []

    def rebuild() -> None:
        try:
            build(docs, path, builder="sections", tokenizer="jieba")
        except BaseException as exc:  # reported below
            errors.append(exc)

    worker = threading.Thread(target=rebuild)
    worker.start()
    worker.join(timeout=15)  # a hang guard: waiting on the reader would take the 30 s busy timeout
    stuck = worker.is_alive()
    reader.execute("COMMIT")
    reader.close()
    worker.join()
    assert not stuck and not errors
    with Index.open(path) as index:
        assert index.tokenizer.name == "jieba"


def children(pid: int) -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                found.add(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
@pytest.mark.kill
def test_a_killed_pooled_build_leaves_no_worker_and_no_lock(sig: int, tmp_path: Path) -> None:
    generate(tmp_path / "corpus", 3)  # ~3 MB: several seconds of jieba in two workers
    path = tmp_path / "index.sqlite"
    env = {**os.environ, "RAG_EVAL_WORKERS": "2"}
    code = (
        "import sys; from rag_eval.index.writer import build; "
        "build(sys.argv[1], sys.argv[2], builder='sections', tokenizer='jieba')"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path / "corpus"), str(path)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    workers: set[int] = set()
    deadline = time.monotonic() + 120
    while len(workers) < 2 and parent.poll() is None and time.monotonic() < deadline:
        workers |= children(parent.pid)
        time.sleep(0.05)
    assert len(workers) >= 2, "the build never started its workers"
    parent.send_signal(sig)
    parent.wait()
    deadline = time.monotonic() + 10  # a hang guard: before, workers lived on for 45 s and more
    while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    survivors = [pid for pid in workers if alive(pid)]
    for pid in survivors:
        os.kill(pid, signal.SIGKILL)
    out, _err = parent.communicate(timeout=10)  # returns only once no process holds the pipes open
    assert not survivors and out == b""
    report = build(tmp_path / "corpus", path, builder="sections", tokenizer="bigram")  # no stale lock
    assert report.chunks > 0


def test_verify_reports_files_added_since_the_build(tmp_path: Path, docs: Path) -> None:
    path = tmp_path / "index.sqlite"
    build(docs, path, builder="sections", tokenizer="bigram")
    (docs / "guide" / "added.md").write_text("# 新增\n\n后来加入的文件。\n", encoding="utf-8")
    with Index.open(path) as index:
        statuses = verify_index(index)
    assert [(s.path, s.status) for s in statuses if s.status != "ok"] == [("guide/added.md", "new")]
    assert len(statuses) == 5  # one line per file, not per section
    result = CliRunner().invoke(cli, ["index", "verify", str(path), "--problems"])
    assert result.exit_code == 1
    assert result.stdout.startswith("new\tguide/added.md\t0\t") and len(result.stdout.splitlines()) == 1
    assert "# files: 4 ok, 0 stale, 0 missing, 1 new" in result.stderr


def test_keys_of_files_whose_names_hold_a_hash_read_back(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    (docs / "c#").mkdir(parents=True)
    (docs / "c#" / "notes#1.md").write_text(
        "# 安装\n\n导出工具的安装步骤。\n\n## 配置\n\n导出目录的配置。\n", encoding="utf-8"
    )
    path = tmp_path / "index.sqlite"
    build(docs, path, builder="sections", tokenizer="bigram")
    runner = CliRunner()
    listed = runner.invoke(cli, ["index", "list", str(path)])
    keys = [line.split("\t")[0] for line in listed.stdout.splitlines()]
    assert keys == ["c#/notes#1.md#安装", "c#/notes#1.md#配置"]
    for key in keys:  # every key `index list` prints reads back
        read = runner.invoke(cli, ["read", str(path), key, "--json"])
        assert read.exit_code == 0, read.stderr
        assert json.loads(read.stdout)["key"] == key
    whole = runner.invoke(cli, ["read", str(path), "c#/notes#1.md#"])
    assert whole.exit_code == 0 and whole.stdout.startswith("# 安装")
    plain = runner.invoke(cli, ["read", str(path), "c#/notes#1.md"])
    assert plain.exit_code == 1 and "add a trailing '#'" in plain.stderr


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SIGPIPE semantics")
def test_a_closed_pipe_ends_a_listing_quietly(tmp_path: Path, docs: Path) -> None:
    path = tmp_path / "index.sqlite"
    build(docs, path, builder="sections", tokenizer="bigram")
    script = f"{sys.executable} -m rag_eval index list {path} | head -c 1 >/dev/null; exit ${{PIPESTATUS[0]}}"
    many = tmp_path / "many"
    for number in range(400):  # enough output to outlast the pipe buffer
        _write_doc(many, number)
    big = tmp_path / "big.sqlite"
    build(many, big, builder="sections", tokenizer="bigram")
    for index in (path, big):
        result = subprocess.run(["bash", "-c", script.replace(str(path), str(index))], capture_output=True, text=True)
        assert result.stderr == "", result.stderr
        assert result.returncode in (0, 141), result.returncode  # 141: killed by the closed pipe, as head leaves it
    datasets = subprocess.run(
        ["bash", "-c", f"{sys.executable} -m rag_eval datasets show handbook | head -n 1"],
        capture_output=True,
        text=True,
    )
    assert datasets.stderr == "" and datasets.stdout.strip()


def _write_doc(folder: Path, number: int) -> None:
    folder.mkdir(exist_ok=True)
    (folder / f"doc{number:03d}.md").write_text(
        "".join(f"## 第{n}节\n\n导出文件第{n}段。\n\n" for n in range(20)), encoding="utf-8"
    )


def _sections_corpus(folder: Path, word: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "doc.md").write_text(
        "".join(f"## 第{n}节\n\n导出记录 {word}{n} 第{n}行\n\n" for n in range(30)), encoding="utf-8"
    )
    return folder


@pytest.mark.parametrize("builder", ["lines", "sections"])
def test_readers_during_rebuilds_see_whole_snapshots(builder: str, tmp_path: Path) -> None:
    """Readers that never reopen their index, during rebuilds that also switch tokenizers: every result
    (hits, scores and snippets) equals the answer of one of the states the file went through."""
    make = lines_corpus if builder == "lines" else _sections_corpus
    versions = {"old": make(tmp_path / "old", "alpha"), "new": make(tmp_path / "new", "omega")}
    states = [(version, spec) for spec in ("bigram", "unicode61") for version in versions]
    queries = ["导出记录", "alpha3", "omega7", "记录 第5行"]
    expected: dict[str, set] = {q: set() for q in queries}
    for version, spec in states:
        static = tmp_path / f"{version}-{spec}.sqlite"
        build(versions[version], static, builder=builder, tokenizer=spec)
        with Index.open(static) as index:
            for query in queries:
                expected[query].add(
                    tuple((h.chunk.key, h.score, h.snippet) for h in search(index, query, limit=5).hits)
                )
    path = tmp_path / "index.sqlite"
    build(versions["old"], path, builder=builder, tokenizer="bigram")
    checked, wrong, errors = [0], [], []
    stop = threading.Event()

    def reader() -> None:
        index = Index.open(path, check_same_thread=False)
        try:
            while not stop.is_set():
                for query in queries:
                    got = tuple((h.chunk.key, h.score, h.snippet) for h in search(index, query, limit=5).hits)
                    checked[0] += 1
                    if got not in expected[query]:
                        wrong.append((query, got))
        except Exception as exc:  # any error fails the test below
            errors.append(exc)
        finally:
            index.close()

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for thread in threads:
        thread.start()
    try:
        for number in range(12):
            version, spec = states[number % len(states)]
            build(versions[version], path, builder=builder, tokenizer=spec)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert not errors and not wrong[:3]
    assert checked[0] > 100


def test_progress_reports_the_model_load_and_the_bytes_indexed(tmp_path: Path, docs: Path) -> None:
    seen: list[tuple[str, int, int]] = []
    build(
        docs,
        tmp_path / "index.sqlite",
        builder="sections",
        tokenizer="pkuseg:model=mini",
        progress=lambda phase, done, total: seen.append((phase, done, total)),
    )
    assert seen[:2] == [("loading pkuseg", 0, 1), ("loading pkuseg", 1, 1)]
    indexed = [(done, total) for phase, done, total in seen if phase == "index"]
    assert indexed[-1][0] == indexed[-1][1] > 0 and [d for d, _ in indexed] == sorted(d for d, _ in indexed)


def test_progress_bars_start_no_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """A display thread would make pooled builds spawn fresh workers that reload their models."""
    from rag_eval.cli.progress import Bars

    before = threading.active_count()
    with Bars(enabled=True) as progress:
        for done in range(0, 101, 10):
            progress("index", done, 100)
            assert threading.active_count() == before
