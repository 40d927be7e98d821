"""Input audit 3: manifest keys that were silently ignored, verify reading a file of any size, evaluate --json's
``mean`` that held totals, outputs written over an index's SQLite side files, an input or a ``name/`` path, and
the oracle study reader's tracebacks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO, invoke, one_error
from helpers.studies import small_study
from make_corpus import make

from rag_eval.builders import get_builder
from rag_eval.builders.lines import MANIFEST_KEYS
from rag_eval.errors import CorpusError, DatasetError, QueryError, RagEvalError
from rag_eval.eval.datasets import shipped
from rag_eval.eval.judging.judgments import named_target
from rag_eval.eval.judging.oracle import main as oracle_main
from rag_eval.files.outputs import (
    SQLITE_SIDE_SUFFIXES,
    OutputError,
    check_file_target,
    checked_target,
    write_text_atomic,
)
from rag_eval.index.store import Index
from rag_eval.index.verify import VERIFY_MAX_BYTES, verify_chunk, verify_index, verify_source
from rag_eval.index.writer import build
from rag_eval.search.read import read_chunk
from rag_eval.search.searching import search


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    make(root)
    return root


def edit_manifest(root: Path, change: Any) -> None:
    path = root / "manifest.json"
    items = json.loads(path.read_text(encoding="utf-8"))
    change(items)
    path.write_text(json.dumps(items, ensure_ascii=False), encoding="utf-8")


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


def test_the_datasets_manifest_refuses_unknown_entry_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """datasets/manifest.json: a misspelt "as-of" would silently evaluate the set without its date."""
    entry = {"kind": "retrieval", "builder": "lines", "as-of": "2026-10-07", "files": {}}
    (tmp_path / "manifest.json").write_text(json.dumps({"mini": entry}), encoding="utf-8")
    monkeypatch.setattr(shipped, "datasets_root", lambda: tmp_path)
    shipped.manifest.cache_clear()
    try:
        with pytest.raises(DatasetError, match=r"entry 'mini': unknown key 'as-of' \(did you mean 'as_of'\?\)"):
            shipped.manifest()
    finally:
        shipped.manifest.cache_clear()


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


# -- 2. verify reads a bounded file -------------------------------------------------------------------------------


def _big_corpus(tmp_path: Path) -> tuple[Path, Path]:
    """A lines corpus whose one file is just over VERIFY_MAX_BYTES, built with a max_bytes that takes it."""
    root = tmp_path / "big"
    root.mkdir()
    body = "导出 文件 保留 三十 天\n" + "x" * (VERIFY_MAX_BYTES + 10) + "\n"
    (root / "big.txt").write_text(body, encoding="utf-8")
    manifest = [{"doc_id": "big", "revision": "r1", "status": "current", "expires": None, "path": "big.txt"}]
    (root / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    index = tmp_path / "big.sqlite"
    build(root, index, builder=f"lines:max_bytes={2 * VERIFY_MAX_BYTES}", tokenizer="unicode61")
    return root, index


def test_verify_source_does_not_read_a_file_over_its_limit(tmp_path: Path) -> None:
    """Bug: verify_source read a hit's file whole, whatever its size (a hostile or huge file at a hit's path)."""
    root, index = _big_corpus(tmp_path)
    with Index.open(index) as opened:
        hit = search(opened, "导出", as_of="2026-01-01").hits[0].as_dict()
    assert verify_source(root, hit) is False  # over the default limit: not read, so not verified
    assert verify_source(root, hit, max_bytes=2 * VERIFY_MAX_BYTES) is True  # the limit it was built with
    for bad in (0, -1, True, "1000", None):
        with pytest.raises(QueryError, match="max_bytes"):
            verify_source(root, hit, max_bytes=bad)  # type: ignore[arg-type]


def test_a_source_grown_past_the_builds_limit_is_stale_without_being_read(corpus: Path, tmp_path: Path) -> None:
    """serve's verify tool and index verify: a file larger than the build accepted cannot be what was indexed."""
    index = tmp_path / "small.sqlite"
    build(corpus, index, builder="lines:max_bytes=1000", tokenizer="unicode61")
    with (corpus / "handbook.txt").open("a", encoding="utf-8") as handle:
        handle.write("补充 " * 400 + "\n")
    with Index.open(index) as opened:
        chunk = read_chunk(opened, search(opened, "导出 保留", as_of="2026-01-01").hits[0].chunk.key)
        assert chunk is not None and chunk.path == "handbook.txt"
        status = verify_chunk(opened, chunk)
        files = {s.path: s for s in verify_index(opened)}
    for found in (status, files["handbook.txt"]):
        assert found.status == "stale"
        assert "over the limit of 1000" in found.detail and "lines:max_bytes=1000" in found.detail


def test_a_passage_chunk_is_checked_by_its_hash_streamed(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"_id": "p1", "title": "", "text": "导出文件保留三十天"}\n', encoding="utf-8")
    index = tmp_path / "p.sqlite"
    build(corpus, index, builder="passages:max_bytes=200", tokenizer="bigram")
    with Index.open(index) as opened:
        chunk = read_chunk(opened, "p1")
        assert chunk is not None and verify_chunk(opened, chunk).status == "ok"
        corpus.write_text(corpus.read_text(encoding="utf-8") + " " * 300, encoding="utf-8")
        oversized = verify_chunk(opened, chunk)
        corpus.write_text('{"_id": "p1", "title": "", "text": "导出文件保留六十天"}\n', encoding="utf-8")
        changed = verify_chunk(opened, chunk)
        corpus.unlink()
        gone = verify_chunk(opened, chunk)
    assert oversized.status == "stale" and "over the limit of 200" in oversized.detail
    assert (changed.status, changed.detail) == ("stale", "the file changed since the build")
    assert gone.status == "missing"


# -- 3. evaluate --json names the all row honestly ---------------------------------------------------------------


def test_evaluate_json_calls_the_all_row_all_and_its_counts_are_totals(tmp_path: Path) -> None:
    """Bug: the all row was under "mean", though its NumQ, NumRel and NumRet are totals over the queries."""
    (tmp_path / "qrels.txt").write_text("q1 0 d1 1\nq1 0 d2 1\nq2 0 d3 1\n", encoding="utf-8")
    (tmp_path / "run.txt").write_text("q1 Q0 d1 1 2.0 x\nq1 Q0 d9 2 1.0 x\nq2 Q0 d3 1 1.0 x\n", encoding="utf-8")
    args = ["evaluate", tmp_path / "run.txt", tmp_path / "qrels.txt", "--json"]
    result = invoke(*args, "--metric", "NumRet", "--metric", "NumRel", "--metric", "P@1")
    assert result.exit_code == 0, result.output
    found = json.loads(result.output)
    assert "mean" not in found and found["num_q"] == 2
    assert found["all"] == {"NumRet": 3, "NumRel": 3, "P@1": 1.0}
    result = invoke("evaluate", "--help")
    assert "all (the all row: each metric's mean, the total" in " ".join(result.output.split())


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


# -- 5. python -m rag_eval.eval.judging.oracle: one error line ---------------------------------------------------------


@pytest.fixture(scope="module")
def study() -> dict[str, Any]:
    """test_render_escaping_audit's small study as the oracle writes it (without the records)."""
    found = small_study()
    found.pop("records")
    return found


def _oracle_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as caught:
        oracle_main(list(argv))
    err = capsys.readouterr().err
    assert caught.value.code == 1, err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


BAD_STUDIES = {
    "not UTF-8": (b'{"samples": "\xff"}', "not valid UTF-8 at byte 13"),
    "not JSON": (b'{"samples": 3,', "invalid JSON at line 1"),
    "a key twice": (None, "appears twice in one object"),
    "not a study": (b"[1, 2]", "not a judging study"),
    "a study without its summary": (b'{"samples": 3}', "not a judging study"),
}


@pytest.mark.parametrize("case", sorted(BAD_STUDIES))
def test_oracle_charts_reads_studies_with_the_projects_json_reader(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], study: dict[str, Any], case: str
) -> None:
    """Bug: --charts read study files with json.loads: a bad or non-UTF-8 file was a traceback, a key given twice
    was taken silently."""
    data, words = BAD_STUDIES[case]
    if data is None:
        text = json.dumps(study, indent=1)
        data = text.replace('{\n "samples"', '{\n "budget": 999,\n "samples"', 1).encode()
    bad = tmp_path / "bad.json"
    bad.write_bytes(data)
    good = tmp_path / "good.json"
    good.write_text(json.dumps(study), encoding="utf-8")
    (tmp_path / "charts").mkdir()
    line = _oracle_error(capsys, "--charts", str(tmp_path / "charts"), str(good), str(bad))
    assert str(bad) in line and words in line
    assert not any((tmp_path / "charts").iterdir())


def test_oracle_main_ends_in_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], study: dict[str, Any]
) -> None:
    good = tmp_path / "good.json"
    good.write_text(json.dumps(study), encoding="utf-8")
    assert "missing.json" in _oracle_error(capsys, "--charts", str(tmp_path), str(tmp_path / "missing.json"))
    assert "not a folder" in _oracle_error(capsys, "--charts", str(good), str(good))  # a file, not a folder
    run = tmp_path / "a.run"
    run.write_text("q1 Q0 d1 1 oops x\n", encoding="utf-8")
    qrels = tmp_path / "q.qrels"
    qrels.write_text("q1 0 d1 1\n", encoding="utf-8")
    assert "a.run" in _oracle_error(capsys, "--qrels", str(qrels), "--out", str(tmp_path / "s.json"), str(run))
    oracle_main(["--charts", str(tmp_path), str(good)])  # a study it wrote is still drawn
    assert {p.name for p in tmp_path.glob("*.svg")} == {"picks.svg", "settled.svg"}
    assert "| good |" in capsys.readouterr().out
