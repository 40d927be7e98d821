"""Outputs that would destroy or corrupt a user's data are refused before any work: a report folder holding a
run file compare did not write, a report inside the knowledge base it reports on, ids a TREC file cannot hold,
an output under a file."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import invoke, make_docs, one_error

from rag_eval.errors import RagEvalError
from rag_eval.eval.datasets.shipped import corpus_dir
from rag_eval.eval.judging.judgments import named_target
from rag_eval.files.outputs import (
    SQLITE_SIDE_SUFFIXES,
    OutputError,
    check_file_target,
    checked_target,
    publish_folder,
    write_text_atomic,
)
from rag_eval.index.writer import build

QUESTIONS = "如何导出团队的数据\n审计日志保留多久\n"


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    """A copy of the shipped handbook's Markdown files."""
    folder = tmp_path / "kb"
    shutil.copytree(corpus_dir("handbook"), folder)
    return folder


@pytest.fixture
def questions(tmp_path: Path) -> Path:
    path = tmp_path / "questions.txt"
    path.write_text(QUESTIONS, encoding="utf-8")
    return path


def test_a_run_file_the_report_did_not_write_is_refused_not_deleted(kb: Path, questions: Path, tmp_path: Path) -> None:
    report = tmp_path / "report"
    result = invoke("compare", str(kb), "--queries", str(questions), "-t", "bigram", "-o", str(report))
    assert result.exit_code == 0, result.output
    written = sorted(path.name for path in (report / "runs").iterdir())
    assert json.loads((report / "report.json").read_text(encoding="utf-8"))["run_files"] == written
    # compare replaces its own report, run files included
    result = invoke("compare", str(kb), "--queries", str(questions), "-t", "bigram", "-o", str(report))
    assert result.exit_code == 0, result.output
    mine = report / "runs" / "other-engine.run"
    shutil.copy(report / "runs" / written[0], mine)
    before = {path.name: path.read_bytes() for path in (report / "runs").iterdir()}
    args = ["compare", str(kb), "--queries", str(questions), "-t", "bigram", "-o", str(report)]
    for extra in ([], ["--run", f"other={mine}"]):
        result = invoke(*args, *extra)
        assert (
            result.exit_code != 0
            and "runs/other-engine.run, which is not part of a compare report folder" in one_error(result)
        )
        assert {path.name: path.read_bytes() for path in (report / "runs").iterdir()} == before


def test_a_report_written_before_run_files_were_recorded_is_still_replaced(
    kb: Path, questions: Path, tmp_path: Path
) -> None:
    report = tmp_path / "report"
    args = ["compare", str(kb), "--queries", str(questions), "-t", "bigram", "-t", "unigram", "-o", str(report)]
    assert invoke(*args).exit_code == 0
    data = json.loads((report / "report.json").read_text(encoding="utf-8"))
    del data["run_files"]  # as an older rag-eval wrote it: its systems name its run files
    (report / "report.json").write_text(json.dumps(data), encoding="utf-8")
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    (report / "runs" / "x.run").write_text("", encoding="utf-8")
    data = json.loads((report / "report.json").read_text(encoding="utf-8"))
    del data["run_files"]
    (report / "report.json").write_text(json.dumps(data), encoding="utf-8")
    result = invoke(*args)
    assert result.exit_code != 0 and "runs/x.run" in one_error(result)


@pytest.mark.parametrize("inside", ["report", "sub/report", "."])
def test_a_report_inside_the_knowledge_base_is_refused(kb: Path, questions: Path, inside: str) -> None:
    target = kb / inside if inside != "." else kb
    before = sorted(str(path.relative_to(kb)) for path in kb.rglob("*"))
    result = invoke("compare", str(kb), "--queries", str(questions), "-t", "bigram", "-o", str(target))
    assert result.exit_code != 0
    line = one_error(result)
    assert "cannot go inside the source folder" in line or "refusing to replace it" in line
    assert sorted(str(path.relative_to(kb)) for path in kb.rglob("*")) == before


@pytest.mark.parametrize("what", ["passage", "question"])
def test_ids_a_trec_file_cannot_hold_are_refused(tmp_path: Path, what: str) -> None:
    """A passage _id or a question id with a space would break a run's columns; refused before any work."""
    folder = tmp_path / "kb"
    folder.mkdir()
    passage_id = "a b" if what == "passage" else "ab"
    record = {"_id": passage_id, "title": "导出", "text": "导出文件保留三十天。"}
    (folder / "corpus.jsonl").write_text(json.dumps(record, ensure_ascii=False) + "\n", encoding="utf-8")
    if what == "question":
        questions = tmp_path / "q.jsonl"
        questions.write_text(json.dumps({"_id": "q 1", "text": "导出"}, ensure_ascii=False) + "\n", encoding="utf-8")
    else:
        questions = tmp_path / "q.txt"
        questions.write_text("导出\n", encoding="utf-8")
    result = invoke("compare", str(folder), "--queries", str(questions), "-t", "bigram", "-o", str(tmp_path / "o"))
    assert result.exit_code != 0 and f"{what} id" in one_error(result) and "TREC" in one_error(result)
    assert not (tmp_path / "o").exists()
    if what == "passage":
        result = invoke("queries", "synth", str(folder), "-n", "1", "-o", str(tmp_path / "synth"))
        assert result.exit_code != 0 and "passage id" in one_error(result)
        assert not (tmp_path / "synth").exists()


#: File and folder names a TREC column cannot hold: an ASCII space, an ideographic space, an em space, a no-break
#: space, a folder with a space; and a name with a '%', kept as it is. (A control character in a name is
#: refused when the source is read.)
AWKWARD_NAMES = ["my notes.md", "全角\u3000空格.md", "em\u2003space.md", "nb\u00a0sp.md", "sub dir/文档.md", "100%.md"]


def test_markdown_names_with_whitespace_are_compared_judged_and_read(tmp_path: Path) -> None:
    """Keys write a path's whitespace percent-encoded, so a knowledge base whose file names hold spaces is
    compared, judged and evaluated with TREC files, and ``read`` takes the key or the name as it is."""
    from rag_eval.builders.keys import key_path
    from rag_eval.eval.datasets.sources import question_id
    from rag_eval.files.textio import fits_trec_column
    from rag_eval.index.writer import build

    folder = tmp_path / "kb"
    for number, name in enumerate(AWKWARD_NAMES):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(f"# 导出{number}\n\n第{number}个导出文件保留三十天。\n", encoding="utf-8")
    questions = tmp_path / "q.txt"
    questions.write_text("第0个导出文件保留多久\n第2个导出文件\n", encoding="utf-8")
    keys = {name: f"{key_path(name)}#导出{number}" for number, name in enumerate(AWKWARD_NAMES)}
    assert keys["my notes.md"] == "my%20notes.md#导出0" and keys["100%.md"] == "100%.md#导出5"
    assert (
        keys["全角\u3000空格.md"] == "全角%E3%80%80空格.md#导出1"
        and keys["em\u2003space.md"] == "em%E2%80%83space.md#导出2"
    )
    assert all(fits_trec_column(key) for key in keys.values())
    # Judgments for the encoded ids, as rag-eval judge writes them.
    qrels = tmp_path / "judged.qrels"
    q0, q2 = (question_id(text) for text in ("第0个导出文件保留多久", "第2个导出文件"))
    spaced, em_spaced = keys["my notes.md"], keys["em\u2003space.md"]
    qrels.write_text(f"{q0} 0 {spaced} 2\n{q2} 0 {em_spaced} 2\n", encoding="utf-8")
    out = tmp_path / "report"
    result = invoke(
        "compare", str(folder), "--queries", str(questions), "--qrels", str(qrels), "-t", "bigram", "-o", str(out)
    )
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    bigram = next(row for row in report["systems"] if row["name"].startswith("bigram"))
    assert bigram["metrics"]["nDCG@10"] == pytest.approx(1.0)
    run_file = next((out / "runs").iterdir())
    lines = run_file.read_text(encoding="utf-8").splitlines()
    assert lines and all(len(line.split()) == 6 for line in lines)
    assert {line.split()[2] for line in lines} <= set(keys.values())
    result = invoke("evaluate", str(run_file), str(qrels), "--metric", "nDCG@10")
    assert result.exit_code == 0 and "1.0000" in result.output, result.output
    index = tmp_path / "kb.sqlite"
    build(folder, index, builder="sections", tokenizer="bigram")
    for number, name in enumerate(AWKWARD_NAMES):
        for target in (keys[name], f"{name}#导出{number}", key_path(name), name):  # a section, or the whole file
            result = invoke("read", str(index), target)
            assert result.exit_code == 0 and f"第{number}个导出文件" in result.output, (target, result.output)
    result = invoke("queries", "synth", str(folder), "-n", "6", "--kinds", "heading", "-o", str(tmp_path / "synth"))
    assert result.exit_code == 0, result.output
    labels = (tmp_path / "synth" / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()[1:]
    assert {line.split("\t")[1] for line in labels} == set(keys.values())


@pytest.mark.parametrize(
    "command",
    [
        ["queries", "synth", "handbook", "-n", "5", "-o", "{file}/out"],
        ["compare", "handbook", "-t", "bigram", "-o", "{file}/out"],
        ["datasets", "export", "handbook", "{file}/deeper/out"],
    ],
)
def test_an_output_under_a_file_is_refused_up_front(tmp_path: Path, command: list[str]) -> None:
    blocker = tmp_path / "notes.txt"
    blocker.write_text("mine\n", encoding="utf-8")
    result = invoke(*(part.replace("{file}", str(blocker)) for part in command))
    assert result.exit_code != 0 and "is not a folder" in one_error(result)
    assert blocker.read_text(encoding="utf-8") == "mine\n"


def test_synth_into_an_existing_folder_says_it_writes_only_new_ones(tmp_path: Path) -> None:
    existing = tmp_path / "synth"
    existing.mkdir()
    (existing / "keep.txt").write_text("mine\n", encoding="utf-8")
    result = invoke("queries", "synth", "handbook", "-n", "5", "-o", str(existing))
    assert result.exit_code != 0 and "only to a new path" in one_error(result)
    assert (existing / "keep.txt").read_text(encoding="utf-8") == "mine\n"


def test_written_files_and_folders_get_the_umasks_modes(tmp_path: Path) -> None:
    from rag_eval.files.outputs import publish_folder, write_text_atomic

    previous = os.umask(0o022)
    try:
        written = write_text_atomic(tmp_path / "x.run", "q Q0 d 1 1.0 t\n", owned=None, what="run file")
        with publish_folder(tmp_path / "report", owned=lambda _path: None, what="report folder") as staging:
            (staging / "a.txt").write_text("a", encoding="utf-8")
    finally:
        os.umask(previous)
    assert stat.S_IMODE(written.stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "report").stat().st_mode) == 0o755


def test_read_takes_every_builders_keys_and_refuses_a_root_that_is_not_a_folder(tmp_path: Path) -> None:
    (tmp_path / "set").mkdir()
    corpus = tmp_path / "set" / "corpus.jsonl"  # the index beside its folder: not inside what it indexes
    rows = [
        {"_id": "doc2", "title": "导出", "text": "导出文件保留三十天。"},
        {"_id": "a#b", "title": "", "text": "审计日志"},
    ]
    corpus.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    index = tmp_path / "p.sqlite"
    assert invoke("index", "build", str(corpus), "-b", "passages", "-o", str(index)).exit_code == 0
    result = invoke("read", str(index), "doc2")
    assert (result.exit_code, result.output) == (0, "导出文件保留三十天。\n")
    result = invoke("read", str(index), "a#b", "--json")
    assert result.exit_code == 0 and json.loads(result.output)["key"] == "a#b"
    result = invoke("read", str(index), "doc3")
    assert result.exit_code != 0 and one_error(result)
    for command in (["read", str(index), "doc2"], ["index", "verify", str(index)]):
        for root in (tmp_path / "nowhere", corpus):
            result = invoke(*command, "--root", str(root))
            assert result.exit_code != 0 and "--root" in one_error(result, code=2)


@pytest.mark.parametrize("query", ["", "   ", "\u3000"])
def test_an_empty_query_is_an_error_not_no_hits(tmp_path: Path, query: str) -> None:
    index = tmp_path / "h.sqlite"
    handbook = str(corpus_dir("handbook"))
    result = invoke("index", "build", handbook, "-b", "sections", "-t", "bigram", "-o", str(index))
    assert result.exit_code == 0, result.output
    result = invoke("search", str(index), query)
    assert result.exit_code != 0 and "error: the query is empty" in one_error(result, code=2)


def test_an_empty_database_left_by_a_stopped_first_build_says_so(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "fresh.sqlite"
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version = 1")  # a database file with no table, as a killed first build leaves it
    db.commit()
    db.close()
    result = invoke("index", "info", str(path))
    assert result.exit_code != 0 and "a first build into it may have been stopped" in one_error(result)
    assert f"index build SOURCE -o {path}" in result.output


def test_a_first_build_killed_leaves_no_index_and_the_next_build_clears_what_it_left(tmp_path: Path) -> None:
    import time

    path = tmp_path / "out" / "new.sqlite"
    ready = tmp_path / "ready"
    script = (
        "import sys, time, pathlib\n"
        "from rag_eval.index.writer import build\n"
        "def progress(label, done, total):\n"
        "    if 'writing' in label or 'tokeniz' in label:\n"
        "        pathlib.Path(sys.argv[3]).write_text('x')\n"
        "        time.sleep(60)\n"
        "build(sys.argv[1], sys.argv[2], builder='sections', tokenizer='bigram', progress=progress)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", script, str(corpus_dir("handbook")), str(path), str(ready)])
    try:
        deadline = time.monotonic() + 60
        while not ready.exists() and time.monotonic() < deadline and child.poll() is None:
            time.sleep(0.05)
        assert ready.exists(), "the build never reached its write"
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
    assert not path.exists()  # nothing under the index's name: as before the build
    left = [p.name for p in path.parent.iterdir()]
    assert left and all(name.startswith(".new.sqlite.") for name in left)
    result = invoke("index", "build", str(corpus_dir("handbook")), "-b", "sections", "-t", "bigram", "-o", str(path))
    assert result.exit_code == 0, result.output
    assert [p.name for p in path.parent.iterdir()] == ["new.sqlite"]


def test_a_first_build_never_replaces_an_index_another_build_created_meanwhile(tmp_path: Path) -> None:
    from rag_eval.errors import IndexFileError
    from rag_eval.index.writer import build

    path = tmp_path / "new.sqlite"

    def other_build_finishes_first(label: str, done: int, total: int) -> None:
        if not label.startswith("loading") and not path.exists():  # once this build is under way
            path.write_text("someone else's", encoding="utf-8")

    with pytest.raises(IndexFileError, match="another build created this index"):
        build(corpus_dir("handbook"), path, builder="sections", tokenizer="bigram", progress=other_build_finishes_first)
    assert path.read_text(encoding="utf-8") == "someone else's"
    assert [p.name for p in tmp_path.iterdir()] == ["new.sqlite"]


def test_a_new_index_never_takes_the_log_of_a_deleted_one(tmp_path: Path) -> None:
    """An index deleted while a connection held it leaves its -wal and -shm: SQLite replays a log it finds
    beside a database of that name, so the new index under the name would read the old one's pages."""
    import sqlite3

    from rag_eval.index.store import Index
    from rag_eval.index.writer import build

    path = tmp_path / "live.sqlite"
    build(corpus_dir("handbook"), path, builder="sections", tokenizer="bigram")
    holder = sqlite3.connect(path)
    try:
        holder.execute("PRAGMA wal_autocheckpoint = 0")
        holder.execute("UPDATE chunks SET text = 'STALE'")
        holder.commit()
        assert Path(f"{path}-wal").stat().st_size > 0
        path.unlink()  # its log stays beside the name while the connection is open
        corpus = tmp_path / "corpus.jsonl"
        corpus.write_text(json.dumps({"_id": "a", "title": "", "text": "导出记录"}) + "\n", encoding="utf-8")
        build(corpus, path, builder="passages", tokenizer="bigram")
    finally:
        holder.close()
    with Index.open(path) as index:
        texts = [row[0] for row in index.db.execute("SELECT text FROM chunks")]
    assert texts == ["导出记录"]


def test_a_folder_of_another_command_is_refused_by_name(tmp_path: Path) -> None:
    """tune into a compare report folder: refused, saying the file is not part of a tune output folder (it said
    rag-eval did not write it, which was false)."""
    out = tmp_path / "report"
    result = invoke("compare", "evidence-mini", "-t", "bigram", "-o", str(out))
    assert result.exit_code == 0, result.output
    before = sorted(path.name for path in out.rglob("*"))
    result = invoke("tune", "evidence-mini", "--budget", "2", "-o", str(out))
    assert result.exit_code != 0 and "which is not part of a tune output folder" in one_error(result)
    assert sorted(path.name for path in out.rglob("*")) == before


# -- 4. outputs over an index's side files, an input, or a name ending in '/' -----------------------------------


@pytest.fixture
def workspace(tmp_path: Path, corpus: Path) -> dict[str, Path]:
    index = tmp_path / "idx.sqlite"
    build(corpus, index, builder="lines", tokenizer="unicode61")
    questions = tmp_path / "q.txt"
    questions.write_text("导出 保留\n薄荷\n", encoding="utf-8")
    runs = []
    for name in ("a.run", "b.run"):
        runs.append(tmp_path / name)
        runs[-1].write_text("q1 Q0 d1 1 2.0 x\nq1 Q0 d2 2 1.0 x\n", encoding="utf-8")
    return {"root": tmp_path, "corpus": corpus, "index": index, "questions": questions, "a": runs[0], "b": runs[1]}


#: Every command that writes a file, with FILE where its output goes.
FILE_WRITERS = {
    "search --run": ["search", "{index}", "--queries", "{questions}", "--run", "FILE"],
    "fuse -o": ["fuse", "{a}", "{b}", "-o", "FILE"],
    "index build -o": ["index", "build", "{corpus}", "-t", "unicode61", "-o", "FILE"],
    "compare --write-baseline": [
        "compare",
        "evidence-mini",
        "-t",
        "unicode61",
        "--write-baseline",
        "FILE",
        "-o",
        "{root}/r",
    ],
}


#: Hostile outputs: a side file SQLite keeps beside the index, and a file name that ends in a separator.
HOSTILE = [f"{{index}}{suffix}" for suffix in SQLITE_SIDE_SUFFIXES] + ["{root}/out.run/", "{root}/out.run/."]


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("target", HOSTILE)
@pytest.mark.parametrize("command", sorted(FILE_WRITERS))
def test_no_command_writes_a_file_over_an_index_side_file_or_to_a_folder_name(
    workspace: dict[str, Path], command: str, target: str
) -> None:
    """Bug: --run INDEX-wal (or -shm, -journal) wrote a file SQLite then took for the index's journal, and
    --run o.run/ wrote a file o.run; the same held for fuse -o, index build -o and compare --write-baseline."""
    names = {key: str(value) for key, value in workspace.items()}
    output = target.format(**names)
    args = [arg.format(**names) if arg != "FILE" else output for arg in FILE_WRITERS[command]]
    before = _snapshot(workspace["root"])
    result = invoke(*args)
    line = one_error(result)
    assert result.exit_code == 1
    assert ("ends in '/" in line) if target.startswith("{root}") else ("SQLite would take it for the -" in line)
    assert _snapshot(workspace["root"]) == before  # nothing written, the index as it was


@pytest.mark.parametrize("given", ["index", "questions"])
def test_batch_search_names_the_input_it_would_write_over(workspace: dict[str, Path], given: str) -> None:
    result = invoke(
        "search",
        workspace["index"],
        "--queries",
        workspace["questions"],
        "--run",
        f"{workspace[given].parent}/./{workspace[given].name}",
    )
    kind = "index" if given == "index" else "queries file"
    assert result.exit_code == 1 and f"the run file cannot be written over the {kind} it reads" in one_error(result)


def test_fuse_names_the_run_it_would_write_over(workspace: dict[str, Path]) -> None:
    link = workspace["root"] / "link.run"
    link.symlink_to(workspace["b"])
    result = invoke("fuse", workspace["a"], workspace["b"], "-o", link)
    assert result.exit_code == 1 and "the fused run cannot be written over the run it reads" in one_error(result)


#: Every writer of the shared output module, and the index build, given a target path.
WRITERS = {
    "checked_target (a folder)": lambda path, _corpus: checked_target(path, what="report folder"),
    "check_file_target": lambda path, _corpus: check_file_target(path, owned=None, what="x"),
    "write_text_atomic": lambda path, _corpus: write_text_atomic(path, "x", owned=None, what="x"),
    "judge's named_target": lambda path, _corpus: named_target(path, what="judgments file", example="out/kb.qrels"),
    "writer.build": lambda path, corpus: build(corpus, path, builder="lines", tokenizer="unicode61"),
}


@pytest.mark.parametrize("suffix", SQLITE_SIDE_SUFFIXES)
@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_the_shared_output_check_refuses_side_files_for_every_writer(
    workspace: dict[str, Path], writer: str, suffix: str
) -> None:
    side = f"{workspace['index']}{suffix}"
    with pytest.raises(RagEvalError, match=f"SQLite would take it for the {suffix} file"):
        WRITERS[writer](side, workspace["corpus"])
    assert not Path(side).exists()


def test_the_shared_output_check_refuses_a_file_named_as_a_folder(workspace: dict[str, Path]) -> None:
    for path in ("out.txt/", "out.txt/."):
        with pytest.raises(OutputError, match="which names a folder"):
            write_text_atomic(str(workspace["root"]) + "/" + path, "x", owned=None, what="x")
        with pytest.raises(OutputError, match="which names a folder"):
            named_target(str(workspace["root"]) + "/" + path, what="judgments file", example="out/kb.qrels")
    assert not (workspace["root"] / "out.txt").exists()
    # A folder output may end in '/', and a name that only looks like a side file is fine.
    assert checked_target(str(workspace["root"]) + "/report/", what="report folder").name == "report"
    assert checked_target(str(workspace["root"]) + "/notes-wal", what="x", file=True).name == "notes-wal"


# -- 1. refusals that name the rule that refused ----------------------------------------------------------------


@pytest.mark.parametrize("kind", ["file", "folder", "fifo", "symbolic link"])
def test_a_never_replaced_output_says_it_is_never_replaced(tmp_path: Path, kind: str) -> None:
    """Bug: a replay rag-eval wrote was refused with "rag-eval only replaces a replay it wrote"."""
    target = tmp_path / "replay.json"
    if kind == "file":
        write_text_atomic(target, "{}\n", owned=None, what="replay")  # rag-eval wrote it
    elif kind == "folder":
        target.mkdir()
    elif kind == "fifo":
        os.mkfifo(target)
    else:
        target.symlink_to(tmp_path / "nowhere")
    with pytest.raises(OutputError) as raised:
        check_file_target(target, owned=None, what="replay")
    message = str(raised.value)
    assert "refusing to replace it" in message and "it wrote" not in message
    assert "rag-eval never replaces a replay: it writes one only to a new path" in message
    with pytest.raises(OutputError, match="it wrote"):  # outputs rag-eval does replace keep their rule
        check_file_target(target, owned=lambda _path: "it is not a study", what="study")


def test_a_folder_written_only_to_a_new_path_says_so(tmp_path: Path) -> None:
    """Bug: a new-only folder found in place was refused as "rag-eval only replaces a dataset folder it wrote"."""
    (tmp_path / "out").mkdir()
    with pytest.raises(OutputError) as raised, publish_folder(tmp_path / "out", owned=None, what="dataset folder"):
        pass
    assert "it already exists; rag-eval never replaces a dataset folder" in str(raised.value)


RUN = "q1 Q0 d1 1 3.0 t\nq1 Q0 d2 2 2.0 t\nq1 Q0 d9 3 1.0 t\nq2 Q0 d3 1 1.0 t\nq3 Q0 d8 1 4.0 t\nq3 Q0 d5 2 3.5 t\n"


# --- "-" names standard output to most tools: -o - wrote a file (or folder) named "-" in the working folder.


@pytest.mark.parametrize(
    "args",
    [
        ["fuse", "{dir}/a.run", "{dir}/b.run", "-o", "-"],
        ["datasets", "export", "evidence-mini", "-"],
        ["datasets", "convert", "squad", "{dir}/in.json", "-o", "-"],
        ["queries", "synth", "{dir}/docs", "-n", "1", "--kinds", "heading", "-o", "-"],
    ],
    ids=["fuse", "export", "convert", "synth"],
)
def test_dash_as_output_is_refused_not_written_as_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    (tmp_path / "a.run").write_text(RUN, encoding="utf-8")
    (tmp_path / "b.run").write_text("q1 Q0 d2 1 1.0 t\n", encoding="utf-8")
    squad = {"data": [{"title": "T", "paragraphs": [{"context": "上下文。", "qas": [{"id": "1", "question": "问?"}]}]}]}
    (tmp_path / "in.json").write_text(json.dumps(squad, ensure_ascii=False), encoding="utf-8")
    (tmp_path / "docs").mkdir()
    for n in (1, 2):
        (tmp_path / "docs" / f"d{n}.md").write_text(f"# 标题{n}\n\n第{n}篇的正文。\n", encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    line = one_error(invoke(*[arg.format(dir=tmp_path) for arg in args]))
    assert "standard output" in line
    assert list(work.iterdir()) == []


def tree(folder: Path) -> list[str]:
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*"))


def test_an_index_path_ending_in_dotdot_is_refused_and_creates_nothing(tmp_path: Path, monkeypatch) -> None:
    docs = make_docs(tmp_path / "docs")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    (tmp_path / "other").mkdir()
    for target in ("a/../..", str(tmp_path / "other" / "new" / "..")):
        one_error(invoke("index", "build", str(docs), "-t", "bigram", "-o", target))
    assert tree(work) == [] and tree(tmp_path / "other") == []
    assert sorted(path.name for path in tmp_path.iterdir()) == ["docs", "other", "work"]
