"""Batch search (rag-eval search --queries FILE --run OUT): the run, its topic formats, bad input, interruption."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import REPO, invoke, one_error
from helpers.paths import NOT_REGULAR, _not_regular

from rag_eval.cli import cli
from rag_eval.eval.compare.runner import System
from rag_eval.eval.compare.timing import run_system
from rag_eval.eval.datasets.shipped import corpus_dir, datasets_root, load_shipped
from rag_eval.eval.datasets.sources import question_id
from rag_eval.eval.datasets.trec import read_run
from rag_eval.eval.metrics.measures import evaluate
from rag_eval.eval.metrics.run_files import evaluate_files
from rag_eval.files.runs import strict_run, trec_run_text
from rag_eval.index.store import Index
from rag_eval.index.writer import build
from rag_eval.search.batch import MAX_LIMIT, batch_search, read_topics_file
from rag_eval.search.searching import search

HANDBOOK_QUERIES = datasets_root() / "handbook" / "queries.jsonl"
HANDBOOK_QRELS = datasets_root() / "handbook" / "qrels" / "test.tsv"


@pytest.fixture(scope="module")
def handbook_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("batch") / "handbook.sqlite"
    # Without impact postings: one bad-input case asks this index for the impact engine.
    build(corpus_dir("handbook"), path, builder="sections", tokenizer="bigram", engine="fts5")
    return path


def _looped_run(index_path: Path, queries: list[tuple[str, str]], *, limit: int = 100, **options: object) -> str:
    """The run as single searches make it, one search() call per query."""
    with Index.open(index_path) as index:
        unit = index.builder.unit
        text = ""
        for query_id, query in queries:
            hits = search(index, query, limit=limit, deep=True, snippets=False, **options).hits  # type: ignore[arg-type]
            text += trec_run_text(strict_run(query_id, [(unit(h.chunk.key), h.score) for h in hits]), "rag-eval")
    return text


def test_the_run_is_the_single_searches(handbook_index: Path, tmp_path: Path) -> None:
    report = batch_search(handbook_index, HANDBOOK_QUERIES, tmp_path / "hb.run", limit=30)
    queries = [(q.id, q.text) for q in load_shipped("handbook").queries.values()]
    written = (tmp_path / "hb.run").read_text(encoding="utf-8")
    assert written == _looped_run(handbook_index, queries, limit=30)
    assert report.queries == len(queries) == 324 and report.lines == written.count("\n") > 324
    assert report.zero_hit_queries == len({q for q, _ in queries} - {line.split()[0] for line in written.splitlines()})


def test_the_run_is_what_compare_ranks_and_evaluate_reads_it(handbook_index: Path, tmp_path: Path) -> None:
    compared = run_system(load_shipped("handbook"), System("bigram", "sections", "or"))
    result = CliRunner().invoke(
        cli, ["search", str(handbook_index), "--queries", str(HANDBOOK_QUERIES), "--run", str(tmp_path / "hb.run")]
    )
    assert result.exit_code == 0, result.stderr
    assert "searched 324 queries in " in result.stderr and " queries/s" in result.stderr
    assert read_run(tmp_path / "hb.run") == compared.run
    means, _ = evaluate_files(tmp_path / "hb.run", HANDBOOK_QRELS)
    assert means == evaluate(load_shipped("handbook").qrel_list(), compared.run)[0]
    scored = CliRunner().invoke(cli, ["evaluate", str(tmp_path / "hb.run"), str(HANDBOOK_QRELS)])
    assert scored.exit_code == 0 and f"nDCG@10\tall\t{means['nDCG@10']:.4f}" in scored.output


def test_filters_and_mode_reach_every_query(tmp_path: Path) -> None:
    index = tmp_path / "evidence.sqlite"
    build(corpus_dir("evidence-mini"), index, builder="lines", tokenizer="bigram")
    queries_file = datasets_root() / "evidence-mini" / "queries.jsonl"
    batch_search(index, queries_file, tmp_path / "e.run", mode="or", as_of="2026-10-07", limit=5)
    queries = [(q.id, q.text) for q in load_shipped("evidence-mini").queries.values()]
    expected = _looped_run(index, queries, limit=5, mode="or", as_of="2026-10-07")
    assert (tmp_path / "e.run").read_text(encoding="utf-8") == expected
    assert expected != _looped_run(index, queries, limit=5, mode="or")  # the filter changed something


def _formats(folder: Path, queries: list[tuple[str, str]]) -> dict[str, Path]:
    files = {
        "jsonl": folder / "queries.jsonl",
        "sgml": folder / "topics.txt",
        "tsv": folder / "topics.tsv",
        "lines": folder / "questions.txt",
    }
    files["jsonl"].write_text(
        "".join(json.dumps({"_id": i, "text": t}, ensure_ascii=False) + "\n" for i, t in queries), encoding="utf-8"
    )
    files["sgml"].write_text(
        "".join(f"<top>\n<num> Number: {i}\n<title> {t}\n<desc> Description:\nignored\n</top>\n\n" for i, t in queries),
        encoding="utf-8",
    )
    files["tsv"].write_text("".join(f"{i}\t{t}\n" for i, t in queries), encoding="utf-8")
    files["lines"].write_text("".join(f"{t}\n" for _, t in queries), encoding="utf-8")
    return files


def test_three_topic_formats_give_one_run(handbook_index: Path, tmp_path: Path) -> None:
    queries = [(q.id, q.text) for q in list(load_shipped("handbook").queries.values())[:12]]
    expected = _looped_run(handbook_index, queries)
    runs = {}
    for kind, path in _formats(tmp_path, queries).items():
        assert [q.text for q in read_topics_file(path).values()] == [t for _, t in queries], kind
        batch_search(handbook_index, path, tmp_path / f"{kind}.run")
        runs[kind] = (tmp_path / f"{kind}.run").read_text(encoding="utf-8")
    assert runs["jsonl"] == runs["sgml"] == runs["tsv"] == expected
    # one question per line: ids as compare --queries gives them (a hash of the text)
    renamed = {question_id(text): query_id for query_id, text in queries}
    lines = [line.split(" ") for line in runs["lines"].splitlines()]
    assert "".join(f"{renamed[q]} {' '.join(rest)}\n" for q, *rest in lines) == expected


@pytest.fixture(scope="module")
def bad(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("bad-batch")
    files = {
        "empty.txt": "",
        "blank.txt": "\n \n",
        "empty.jsonl": "",
        "empty.tsv": "",
        "notopics.txt": "<top>\n</top>\n",
        "dup.txt": "导出\n导出\n",
        "dup.jsonl": '{"_id": "q1", "text": "导出"}\n{"_id": "q1", "text": "备份"}\n',
        "dup.tsv": "q1\t导出\nq1\t备份\n",
        "dup-topics.txt": "<top><num>1</num><title>导出</title></top>\n<top><num>1</num><title>备份</title></top>\n",
        "space-id.jsonl": '{"_id": "q 1", "text": "导出"}\n',
        "space-id.tsv": "q 1\t导出\n",
        "nul.txt": "导出\x00\n",
        "good.txt": "导出文件保留多久\n",
        "notes.txt": "keep me\n",
    }
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    (folder / "latin1.txt").write_bytes("café\n".encode("latin-1"))
    (folder / "latin1.jsonl").write_bytes('{"_id": "q1", "text": "café"}\n'.encode("latin-1"))
    (folder / "folder").mkdir()
    os.mkfifo(folder / "fifo.txt")
    return folder


BAD_CASES = {
    "missing topics": ["--queries", "{bad}/missing.txt", "--run", "{out}"],
    "topics are a folder": ["--queries", "{bad}/folder", "--run", "{out}"],
    "topics are a FIFO": ["--queries", "{bad}/fifo.txt", "--run", "{out}"],
    "empty questions": ["--queries", "{bad}/empty.txt", "--run", "{out}"],
    "blank questions": ["--queries", "{bad}/blank.txt", "--run", "{out}"],
    "empty jsonl": ["--queries", "{bad}/empty.jsonl", "--run", "{out}"],
    "empty tsv": ["--queries", "{bad}/empty.tsv", "--run", "{out}"],
    "topic without title": ["--queries", "{bad}/notopics.txt", "--run", "{out}"],
    "duplicate question": ["--queries", "{bad}/dup.txt", "--run", "{out}"],
    "duplicate jsonl id": ["--queries", "{bad}/dup.jsonl", "--run", "{out}"],
    "duplicate tsv id": ["--queries", "{bad}/dup.tsv", "--run", "{out}"],
    "duplicate topic": ["--queries", "{bad}/dup-topics.txt", "--run", "{out}"],
    "id with a space (jsonl)": ["--queries", "{bad}/space-id.jsonl", "--run", "{out}"],
    "id with a space (tsv)": ["--queries", "{bad}/space-id.tsv", "--run", "{out}"],
    "NUL in a question": ["--queries", "{bad}/nul.txt", "--run", "{out}"],
    "not UTF-8": ["--queries", "{bad}/latin1.txt", "--run", "{out}"],
    "not UTF-8 jsonl": ["--queries", "{bad}/latin1.jsonl", "--run", "{out}"],
    "limit 0": ["--queries", "{bad}/good.txt", "--run", "{out}", "--limit", "0"],
    "limit over the maximum": ["--queries", "{bad}/good.txt", "--run", "{out}", "--limit", str(MAX_LIMIT + 1)],
    "limit negative": ["--queries", "{bad}/good.txt", "--run", "{out}", "--limit", "-3"],
    "limit not a number": ["--queries", "{bad}/good.txt", "--run", "{out}", "--limit", "ten"],
    "tag with a space": ["--queries", "{bad}/good.txt", "--run", "{out}", "--run-tag", "my run"],
    "empty tag": ["--queries", "{bad}/good.txt", "--run", "{out}", "--run-tag", ""],
    "tag with a control character": ["--queries", "{bad}/good.txt", "--run", "{out}", "--run-tag", "a\x01b"],
    "output is a folder": ["--queries", "{bad}/good.txt", "--run", "{bad}/folder"],
    "output exists": ["--queries", "{bad}/good.txt", "--run", "{bad}/notes.txt"],
    "output is a FIFO": ["--queries", "{bad}/good.txt", "--run", "{bad}/fifo.txt"],
    "run without queries": ["--run", "{out}"],
    "queries without run": ["--queries", "{bad}/good.txt"],
    "query and queries": ["导出", "--queries", "{bad}/good.txt", "--run", "{out}"],
    "json with queries": ["--queries", "{bad}/good.txt", "--run", "{out}", "--json"],
    "bad mode": ["--queries", "{bad}/good.txt", "--run", "{out}", "--mode", "near"],
    "bad as-of": ["--queries", "{bad}/good.txt", "--run", "{out}", "--as-of", "tomorrow"],
    "impact engine on an index without its postings": ["--queries", "{bad}/good.txt", "--run", "{out}"]
    + ["--engine", "impact"],
}


@pytest.mark.parametrize("args", list(BAD_CASES.values()), ids=list(BAD_CASES))
def test_bad_input_is_one_error_line(handbook_index: Path, bad: Path, tmp_path: Path, args: list[str]) -> None:
    out = tmp_path / "out.run"
    before = {p.name: p.read_bytes() for p in bad.iterdir() if p.is_file() and p.name != "fifo.txt"}
    argv = ["search", str(handbook_index), *(a.replace("{bad}", str(bad)).replace("{out}", str(out)) for a in args)]
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code in (1, 2), (result.exit_code, result.stderr)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert not out.exists() and list(tmp_path.iterdir()) == []
    assert {p.name: p.read_bytes() for p in bad.iterdir() if p.is_file() and p.name != "fifo.txt"} == before


def test_bad_index_is_one_error_line(bad: Path, tmp_path: Path) -> None:
    for index in (bad / "notes.txt", bad / "missing.sqlite", bad / "folder"):
        result = CliRunner().invoke(
            cli, ["search", str(index), "--queries", str(bad / "good.txt"), "--run", str(tmp_path / "out.run")]
        )
        assert result.exit_code == 1 and result.stderr.count("error:") == 1, result.stderr
    assert list(tmp_path.iterdir()) == []


def test_single_query_search_is_unchanged(handbook_index: Path) -> None:
    """Regression guard: QUERY became optional for --queries; without either it is still a usage error."""
    result = CliRunner().invoke(cli, ["search", str(handbook_index), "导出文件保留多久", "--limit", "3"])
    assert result.exit_code == 0
    assert [line.split("\t")[0] for line in result.output.splitlines() if "\t" in line] == ["1", "2", "3"]
    missing = CliRunner().invoke(cli, ["search", str(handbook_index)])
    assert missing.exit_code == 2 and "error: missing argument 'QUERY'" in missing.stderr


def test_a_failed_batch_leaves_no_file(handbook_index: Path, tmp_path: Path) -> None:
    def stop(_phase: str, done: int, _total: int) -> None:
        if done == 50:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        batch_search(handbook_index, HANDBOOK_QUERIES, tmp_path / "hb.run", progress=stop)
    assert list(tmp_path.iterdir()) == []


def test_a_killed_batch_leaves_no_file(handbook_index: Path, tmp_path: Path) -> None:
    """The process is killed (SIGKILL, no clean-up runs) halfway through its queries."""
    script = (
        "import os, signal, sys\n"
        "from rag_eval.search.batch import batch_search\n"
        "def kill(_phase, done, total):\n"
        "    if done == total // 2:\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
        "batch_search(sys.argv[1], sys.argv[2], sys.argv[3], progress=kill)\n"
    )
    out = tmp_path / "runs" / "hb.run"
    out.parent.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", script, str(handbook_index), str(HANDBOOK_QUERIES), str(out)], capture_output=True
    )
    assert done.returncode == -9, done.stderr
    assert list(out.parent.iterdir()) == []


def test_a_document_id_with_whitespace_is_refused(tmp_path: Path) -> None:
    """A run line is six whitespace-separated columns: a passage _id 'my notes' must not make seven; a
    Markdown file named 'my notes.md' has its space percent-encoded in its keys, so its run is written."""
    corpus = tmp_path / "beir"
    corpus.mkdir()
    record = {"_id": "my notes", "title": "导出", "text": "导出文件保留三十天。"}
    (corpus / "corpus.jsonl").write_text(json.dumps(record, ensure_ascii=False) + "\n", encoding="utf-8")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "my notes.md").write_text("# 导出\n\n导出文件保留三十天。\n", encoding="utf-8")
    questions = tmp_path / "questions.txt"
    questions.write_text("导出文件保留多久\n", encoding="utf-8")
    passages, sections = tmp_path / "passages.sqlite", tmp_path / "sections.sqlite"
    build(corpus, passages, builder="passages", tokenizer="bigram")
    build(docs, sections, builder="sections", tokenizer="bigram")
    result = CliRunner().invoke(
        cli, ["search", str(passages), "--queries", str(questions), "--run", str(tmp_path / "r")]
    )
    assert result.exit_code == 1 and "'my notes' holds whitespace" in result.stderr, result.stderr
    assert not (tmp_path / "r").exists()
    result = CliRunner().invoke(
        cli, ["search", str(sections), "--queries", str(questions), "--run", str(tmp_path / "r")]
    )
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "r").read_text(encoding="utf-8").split()[2] == "my%20notes.md#导出"


def test_the_impact_engine_gives_the_same_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rag_eval.engines import impact as impact_module

    index = tmp_path / "impact.sqlite"
    build(corpus_dir("handbook"), index, builder="sections", tokenizer="bigram", engine="impact")
    preloaded: list[bool] = []
    real = impact_module.preload
    monkeypatch.setattr(impact_module, "preload", lambda opened: preloaded.append(real(opened)) or preloaded[-1])
    batch_search(index, HANDBOOK_QUERIES, tmp_path / "fts5.run", engine="fts5")
    assert preloaded == []  # FTS5's statement reads no postings
    result = CliRunner().invoke(
        cli,
        ["search", str(index), "--queries", str(HANDBOOK_QUERIES), "--run", str(tmp_path / "impact.run")]
        + ["--engine", "impact"],
    )
    assert result.exit_code == 0, result.stderr
    impact = (tmp_path / "impact.run").read_text(encoding="utf-8")
    assert impact == (tmp_path / "fts5.run").read_text(encoding="utf-8") and impact.count("\n") > 324
    assert preloaded == [True]  # the whole batch answered warm


ROOT = REPO


EVIDENCE = ROOT / "datasets" / "evidence-mini" / "corpus"


@pytest.fixture(scope="module")
def indexes(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two small lines indexes (evidence-mini, bigram), named ``kb`` and ``kb2``; read only."""
    folder = tmp_path_factory.mktemp("indexes")
    for name in ("kb", "kb2"):
        build(EVIDENCE, folder / f"{name}.sqlite", builder="lines", tokenizer="bigram")
    return folder / "kb.sqlite", folder / "kb2.sqlite"


@pytest.mark.parametrize("kind", NOT_REGULAR)
def test_search_run_over_something_not_a_file_does_not_claim_it_replaces_runs(
    indexes: tuple[Path, Path], tmp_path: Path, kind: str
) -> None:
    """Bug: `search --run DIR` said "rag-eval only replaces a run file it wrote"; it never replaces one."""
    (tmp_path / "q.txt").write_text("退款\n", encoding="utf-8")
    target = _not_regular(tmp_path, kind)
    result = invoke("search", indexes[0], "--queries", tmp_path / "q.txt", "--run", target)
    line = one_error(result)
    assert result.exit_code == 1 and "it wrote" not in line, line


# -- 10. batch search in a category no chunk has ----------------------------------------------------------------


def test_batch_search_in_an_unknown_category_gives_the_single_search_hint(
    indexes: tuple[Path, Path], tmp_path: Path
) -> None:
    """Bug: `search --queries Q --run OUT --category nosuch` wrote an empty run with no hint; single search says
    "no chunk has category 'nosuch'"."""
    (tmp_path / "q.txt").write_text("退款\n发票\n", encoding="utf-8")
    hint = "hint: no chunk has category 'nosuch'; see the categories with: rag-eval index list INDEX"
    result = CliRunner().invoke(
        cli,
        ["search", str(indexes[0]), "--queries", str(tmp_path / "q.txt"), "--run", str(tmp_path / "o.run")]
        + ["--category", "nosuch"],
    )
    assert result.exit_code == 0 and hint in result.stderr.splitlines(), result.stderr
    single = CliRunner().invoke(cli, ["search", str(indexes[0]), "退款", "--category", "nosuch"])
    assert hint in single.stderr.splitlines()
    known = CliRunner().invoke(
        cli, ["search", str(indexes[0]), "--queries", str(tmp_path / "q.txt"), "--run", str(tmp_path / "p.run")]
    )
    assert known.exit_code == 0 and "hint:" not in known.stderr
