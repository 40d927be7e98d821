"""compare writes only where it may, refuses what it cannot score, caches by content, and prints every value."""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import io
import json
import os
import shutil
from pathlib import Path

import pytest
from helpers import ALL_SPECS, invoke, one_error
from helpers.compare_calls import compare
from rich.cells import cell_len
from rich.console import Console

from rag_eval.cli import cli
from rag_eval.eval.compare import compare as compare_module
from rag_eval.eval.compare.compare import default_systems
from rag_eval.eval.compare.gate import DEFAULT_TOLERANCE
from rag_eval.eval.compare.runner import System
from rag_eval.eval.compare.timing import run_system
from rag_eval.eval.datasets.formats import load_dataset
from rag_eval.search.query import MODES
from rag_eval.tokenizers import TOKENIZERS, get_tokenizer, tokenizer_class
from rag_eval.tokenizers.bigram import BigramTokenizer


def tree_hash(folder: Path) -> str:
    """Every path under ``folder`` with its type, bytes or link target: equal hashes mean nothing changed."""
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder).as_posix()
        if path.is_symlink():
            digest.update(f"L {relative} -> {os.readlink(path)}\n".encode())
        elif path.is_dir():
            digest.update(f"D {relative}\n".encode())
        else:
            digest.update(f"F {relative} {hashlib.sha256(path.read_bytes()).hexdigest()}\n".encode())
    return digest.hexdigest()


@pytest.fixture
def no_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Refusals must come before the comparison: any system run fails the test."""

    def refuse(*_args, **_kwargs):
        raise AssertionError("the comparison ran before the arguments were checked")

    monkeypatch.setattr(compare_module, "run_systems", refuse)


@pytest.fixture(scope="module")
def evidence():
    return load_dataset("evidence-mini")


@pytest.fixture(scope="module")
def report_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A report folder written by compare, to copy where a test needs a previous report."""
    out = tmp_path_factory.mktemp("previous") / "report"
    outcome = invoke("compare", "evidence-mini", "-t", "bigram", "-o", out)
    assert outcome.exit_code == 0, outcome.stderr
    return out


# --- -o: only a report folder rag-eval wrote is ever replaced ---------------------------------------------------


def _user_folder(target: Path) -> None:
    target.mkdir()
    (target / "notes.txt").write_text("x\n", encoding="utf-8")


def _foreign_report_json(target: Path) -> None:
    target.mkdir()
    (target / "report.json").write_text('{"schema": "someone-else/1", "systems": []}', encoding="utf-8")


def _report_plus_user_file(target: Path, previous: Path) -> None:
    shutil.copytree(previous, target)
    (target / "notes.txt").write_text("mine\n", encoding="utf-8")


def _report_plus_user_run_folder(target: Path, previous: Path) -> None:
    shutil.copytree(previous, target)
    (target / "runs" / "keep").mkdir()
    (target / "runs" / "keep" / "data.txt").write_text("mine\n", encoding="utf-8")


def _a_file(target: Path) -> None:
    target.write_text("not a folder\n", encoding="utf-8")


def _a_symlink(target: Path, previous: Path) -> None:
    shutil.copytree(previous, target.parent / "real")
    target.symlink_to(target.parent / "real")


@pytest.mark.parametrize(
    "make",
    [_user_folder, _foreign_report_json, _report_plus_user_file, _report_plus_user_run_folder, _a_file, _a_symlink],
)
def test_output_that_rag_eval_did_not_write_is_refused_untouched(
    make, tmp_path: Path, report_folder: Path, no_runs: None
) -> None:
    parent = tmp_path / "parent"
    parent.mkdir()
    target = parent / "proj"
    make(target, report_folder) if make.__code__.co_argcount == 2 else make(target)
    before = tree_hash(parent)
    error = one_error(invoke("compare", "evidence-mini", "-t", "bigram", "-o", target), alone=True)
    assert "refusing to replace it" in error and str(target) in error
    assert tree_hash(parent) == before


@pytest.mark.parametrize("target", [".", "..", "./", "sub/.."])
def test_output_cannot_be_the_working_folder_or_a_parent(
    target: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_runs: None
) -> None:
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    (work / "notes.txt").write_text("x\n", encoding="utf-8")
    monkeypatch.chdir(work)
    before = tree_hash(tmp_path)
    error = one_error(invoke("compare", "evidence-mini", "-t", "bigram", "-o", target), alone=True)
    assert "cannot be the current folder or one of its parents" in error
    assert tree_hash(tmp_path) == before


def test_a_previous_report_is_replaced_and_nothing_else_changes(tmp_path: Path, report_folder: Path) -> None:
    parent = tmp_path / "parent"
    parent.mkdir()
    (parent / "notes.txt").write_text("x\n", encoding="utf-8")
    target = parent / "report"
    shutil.copytree(report_folder, target)
    # a previous report that compared another system too: its report.json lists that system's run file
    (target / "runs" / "old_system.run").write_text("q Q0 d 1 1.0 old\n", encoding="utf-8")
    recorded = json.loads((target / "report.json").read_text(encoding="utf-8"))
    recorded["run_files"] = [*recorded["run_files"], "old_system.run"]
    (target / "report.json").write_text(json.dumps(recorded), encoding="utf-8")
    (parent / "empty").mkdir()
    outside = tree_hash(parent / "empty"), (parent / "notes.txt").read_bytes()
    outcome = invoke("compare", "evidence-mini", "-t", "unigram", "-o", target)
    assert outcome.exit_code == 0, outcome.stderr
    assert sorted(p.name for p in parent.iterdir()) == ["empty", "notes.txt", "report"]
    assert (tree_hash(parent / "empty"), (parent / "notes.txt").read_bytes()) == outside
    assert sorted(p.name for p in (target / "runs").iterdir()) == ["unigram_lines_and.run"]
    # An empty folder holds nothing to lose: it may be used as the output.
    again = invoke("compare", "evidence-mini", "-t", "unigram", "-o", parent / "empty")
    assert again.exit_code == 0, again.stderr
    assert (parent / "empty" / "report.json").is_file()


# --- --write-baseline: only a rag-eval baseline or report is ever replaced ------------------------------------


@pytest.mark.parametrize("content", ["my notes\n", '{"schema": "other/1", "systems": []}', "[1, 2]", "\ufeff{"])
def test_baseline_target_that_rag_eval_did_not_write_is_refused_untouched(
    content: str, tmp_path: Path, no_runs: None
) -> None:
    target = tmp_path / "baseline.json"
    target.write_text(content, encoding="utf-8")
    before = tree_hash(tmp_path)
    error = one_error(
        invoke("compare", "evidence-mini", "-t", "bigram", "--write-baseline", target, "-o", tmp_path / "out"),
        alone=True,
    )
    assert "refusing to replace it" in error
    assert tree_hash(tmp_path) == before


def test_baseline_target_that_is_a_folder_or_inside_the_report_is_refused(tmp_path: Path, no_runs: None) -> None:
    (tmp_path / "folder.json").mkdir()
    before = tree_hash(tmp_path)
    assert "refusing to replace it" in one_error(
        invoke(
            "compare",
            "evidence-mini",
            "-t",
            "bigram",
            "--write-baseline",
            tmp_path / "folder.json",
            "-o",
            tmp_path / "out",
        ),
        alone=True,
    )
    assert "inside the report folder" in one_error(
        invoke(
            "compare",
            "evidence-mini",
            "-t",
            "bigram",
            "--write-baseline",
            tmp_path / "out" / "b.json",
            "-o",
            tmp_path / "out",
        ),
        alone=True,
    )
    assert tree_hash(tmp_path) == before


def test_a_rag_eval_baseline_is_replaced(tmp_path: Path) -> None:
    target = tmp_path / "baseline.json"
    first = invoke("compare", "evidence-mini", "-t", "bigram", "--write-baseline", target, "-o", tmp_path / "a")
    assert first.exit_code == 0, first.stderr
    second = invoke("compare", "evidence-mini", "-t", "unigram", "--write-baseline", target, "-o", tmp_path / "b")
    assert second.exit_code == 0, second.stderr
    data = json.loads(target.read_text(encoding="utf-8"))
    assert data["schema"] == "rag-eval/baseline/1" and [row["name"] for row in data["systems"]] == [
        "unigram | lines | and"
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b", "baseline.json"]


# --- what cannot be scored is refused ------------------------------------------------------------------------


def test_a_builder_that_cannot_read_the_dataset_layout_is_refused(tmp_path: Path, no_runs: None) -> None:
    beir = tmp_path / "hb"
    assert invoke("datasets", "export", "handbook", beir).exit_code == 0
    (beir / "notes.md").write_text("# 导出\n\n不是语料。\n", encoding="utf-8")
    for dataset, builder, reader in [
        (beir, "sections", "passages"),
        (beir, "lines", "passages"),
        ("handbook", "passages", "sections"),
        ("evidence-mini", "sections", "lines"),
    ]:
        error = one_error(
            invoke("compare", dataset, "-t", "bigram", "--builder", builder, "-o", tmp_path / "out"), alone=True
        )
        assert f"builder {builder!r} cannot read dataset" in error and f"only the {reader} builder reads" in error
    assert not (tmp_path / "out").exists()


def test_options_of_the_right_builder_are_accepted(tmp_path: Path) -> None:
    outcome = invoke(
        "compare", "evidence-mini", "-t", "bigram", "-b", "lines:max_bytes=2000000", "-o", tmp_path / "out"
    )
    assert outcome.exit_code == 0, outcome.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text(encoding="utf-8"))
    assert report["systems"][0]["builder"] == "lines:max_bytes=2000000"


def _beir(folder: Path, qrels: str) -> Path:
    folder.mkdir()
    (folder / "corpus.jsonl").write_text(
        '{"_id": "p1", "text": "导出文件"}\n{"_id": "p2", "text": "备份数据"}\n', encoding="utf-8"
    )
    (folder / "queries.jsonl").write_text(
        '{"_id": "q1", "text": "导出"}\n{"_id": "q2", "text": "备份"}\n', encoding="utf-8"
    )
    (folder / "qrels").mkdir()
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + qrels, encoding="utf-8")
    return folder


def test_a_dataset_without_a_relevant_document_is_refused(tmp_path: Path, no_runs: None) -> None:
    dataset = _beir(tmp_path / "zero", "q1\tp1\t0\nq2\tp2\t0\n")
    error = one_error(invoke("compare", dataset, "-t", "bigram", "-o", tmp_path / "out"), alone=True)
    assert "no relevant document" in error
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q1 0 p1 0\nq2 0 p2 0\n", encoding="utf-8")
    run = tmp_path / "run.txt"
    run.write_text("q1 Q0 p1 1 2.0 x\n", encoding="utf-8")
    assert "no relevant document" in one_error(invoke("evaluate", run, qrels), alone=True)
    assert not (tmp_path / "out").exists()


def test_a_run_in_another_id_style_is_an_error_naming_both(tmp_path: Path, report_folder: Path, evidence) -> None:
    run = report_folder / "runs" / "bigram_lines_and.run"
    foreign = tmp_path / "paths.run"
    foreign.write_text(
        "".join(
            f"{q} Q0 corpus/{d}.txt {r} {s} x\n"
            for q, _, d, r, s, _ in (line.split() for line in run.read_text(encoding="utf-8").splitlines())
        ),
        encoding="utf-8",
    )
    error = one_error(
        invoke("compare", "evidence-mini", "-t", "bigram", "--run", f"paths={foreign}", "-o", tmp_path / "out"),
        alone=True,
    )
    assert "are not ids of dataset 'evidence-mini'" in error and "e.g. 'corpus/" in error
    assert f"ids like {sorted(evidence.corpus)[0]!r}" in error
    assert not (tmp_path / "out").exists()


def test_a_system_that_finds_nothing_relevant_is_scored_zero(tmp_path: Path, evidence) -> None:
    relevant = {(q, d) for q, docs in evidence.qrels.items() for d, grade in docs.items() if grade > 0}
    wrong = [d for d in sorted(evidence.corpus) if not any(d == doc for _, doc in relevant)][:3]
    run = tmp_path / "wrong.run"
    run.write_text(
        "".join(f"{q} Q0 {d} {rank} {10 - rank} x\n" for q in evidence.qrels for rank, d in enumerate(wrong, start=1)),
        encoding="utf-8",
    )
    outcome = invoke("compare", "evidence-mini", "-t", "bigram", "--run", f"wrong={run}", "-o", tmp_path / "out")
    assert outcome.exit_code == 0, outcome.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text(encoding="utf-8"))
    assert set(report["systems"][1]["metrics"].values()) == {0.0}


# --- the index cache: content-addressed, verified on a hit, written atomically ---------------------------------


def test_the_exported_handbook_never_reuses_the_shipped_index(tmp_path: Path, own_cache: Path) -> None:
    """The export's Dataset.checksum equals the shipped set's; its files and layout do not."""
    shipped = load_dataset("handbook")
    warm = run_system(shipped, System("bigram", "sections", "or"))
    folder = tmp_path / "hb"
    assert invoke("datasets", "export", "handbook", folder).exit_code == 0
    exported = load_dataset(str(folder))
    assert exported.checksum() == shipped.checksum()
    error = one_error(
        invoke("compare", folder, "-t", "bigram", "--builder", "sections", "-o", tmp_path / "out"), alone=True
    )
    assert "only the passages builder reads" in error and not (tmp_path / "out").exists()
    result = run_system(exported, System("bigram", "", "or"))
    assert result.build["cached"] is False and result.index_path != warm.index_path


def test_a_cache_hit_never_changes_a_number(tmp_path: Path, own_cache: Path) -> None:
    """Same dataset checksum, different source files: the index is rebuilt from what is on disk."""
    shipped = load_dataset("handbook")
    system = System("bigram", "sections", "or")
    warm = run_system(shipped, system)
    edited = tmp_path / "corpus"
    shutil.copytree(shipped.meta["corpus_dir"], edited)
    for path in sorted(edited.rglob("*.md")):
        path.write_text(path.read_text(encoding="utf-8") + "\n导出 导出 导出 文件 文件\n", encoding="utf-8")
    moved = dataclasses.replace(shipped, meta={**shipped.meta, "corpus_dir": str(edited)})
    assert moved.checksum() == shipped.checksum()
    result = run_system(moved, system)
    assert result.build["cached"] is False and result.index_path != warm.index_path
    assert result.run != warm.run
    again = run_system(moved, system)
    assert again.build["cached"] is True and again.run == result.run


def test_a_cached_index_that_does_not_match_its_key_is_rebuilt(evidence, own_cache: Path) -> None:
    bigram = run_system(evidence, System("bigram", "", ""))
    unigram = run_system(evidence, System("unigram", "", ""))
    assert unigram.run != bigram.run
    shutil.copyfile(unigram.index_path, bigram.index_path)  # the cache entry now holds another system's index
    again = run_system(evidence, System("bigram", "", ""))
    assert again.build["cached"] is False and again.run == bigram.run


@pytest.mark.parametrize("content", ["{", "", "[]", '{"chunks": NaN}', "\x00"])
def test_a_damaged_build_report_in_the_cache_is_not_trusted(content: str, evidence, own_cache: Path) -> None:
    first = run_system(evidence, System("bigram", "", ""))
    report = Path(first.index_path).with_suffix(".build.json")
    report.write_text(content, encoding="utf-8")
    again = run_system(evidence, System("bigram", "", ""))
    assert again.build["cached"] is False and again.run == first.run
    assert json.loads(report.read_text(encoding="utf-8"))["chunks"] == first.build["chunks"]
    assert [p.name for p in report.parent.iterdir() if "partial" in p.name] == []


# --- skipped systems, the table at 80 and 120 columns, and --json --------------------------------------------


class Unavailable(BigramTokenizer):
    """A strategy whose model is not installed."""

    name = "needsmodel"
    install_hint = "run: rag-eval models install needsmodel"

    @classmethod
    def availability(cls) -> str | None:
        return "model not installed"


@pytest.fixture
def unavailable_tokenizer():
    TOKENIZERS.register(Unavailable)
    try:
        yield Unavailable.name
    finally:
        TOKENIZERS.unregister(Unavailable.name)


def test_unavailable_tokenizers_are_reported_as_skipped(tmp_path: Path, evidence, unavailable_tokenizer: str) -> None:
    systems, skipped = default_systems(evidence, None, None)
    assert unavailable_tokenizer not in {s.tokenizer for s in systems}
    assert [(s.tokenizer, s.reason, s.hint) for s in skipped if s.tokenizer == unavailable_tokenizer] == [
        (unavailable_tokenizer, "model not installed", "run: rag-eval models install needsmodel")
    ]
    outcome = invoke("compare", "evidence-mini", "-o", tmp_path / "out")
    assert outcome.exit_code == 0, outcome.stderr
    line = "needsmodel: skipped, model not installed; run: rag-eval models install needsmodel"
    assert line in outcome.stdout
    report = json.loads((tmp_path / "out" / "report.json").read_text(encoding="utf-8"))
    assert {
        "tokenizer": "needsmodel",
        "reason": "model not installed",
        "hint": "run: rag-eval models install needsmodel",
    } in report["skipped"]
    assert "`needsmodel`, model not installed" in (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    summary = json.loads(invoke("compare", "evidence-mini", "--json", "-o", tmp_path / "out").stdout)
    assert any(item["tokenizer"] == "needsmodel" for item in summary["skipped"])


@pytest.fixture(scope="module")
def every_strategy(evidence):
    """Every registered strategy (pkuseg with its shipped mini model), one row each."""
    report, _ = compare(evidence, [System(spec, "", "") for spec in ALL_SPECS])
    return report


@pytest.fixture(scope="module")
def mixed_settings(evidence):
    """Systems that differ in mode, so rows carry their full names."""
    report, _ = compare(
        evidence, [System("pkuseg:model=mini", "", "or"), System("bigram", "", "and"), System("trigram", "", "or")]
    )
    return report


@pytest.mark.parametrize("width", [80, 120])
@pytest.mark.parametrize("which", ["every_strategy", "mixed_settings"])
def test_the_table_keeps_every_value_and_arrow(which: str, width: int, request: pytest.FixtureRequest) -> None:
    from rag_eval.cli.compare import print_comparison
    from rag_eval.eval.reporting.report import arrow

    report = request.getfixturevalue(which)
    assert any(arrow(row, m) for row in report["systems"] for m in report["metrics"])  # arrows are there to lose
    console = Console(width=width, file=io.StringIO(), record=True, color_system=None)
    print_comparison(report, console)
    text = console.export_text()
    assert max(cell_len(line) for line in text.splitlines()) <= width
    shared = len({(row["builder"], row["mode"]) for row in report["systems"]}) == 1
    for row in report["systems"]:
        label = row["name"].split(" | ")[0] if shared else row["name"]
        lines = [line.strip() for line in text.splitlines() if line.strip().startswith(label + " ")]
        assert lines, (label, text)
        cells = " ".join(lines).split()
        for metric in report["metrics"]:
            assert f"{row['metrics'][metric]:.4f}{arrow(row, metric)}" in cells, (label, metric, text)
        assert f"{row['latency_ms']['search']['median']:.3f}" in cells
    assert "…" not in text


def test_json_summary_instead_of_the_table(tmp_path: Path) -> None:
    from rag_eval.eval.reporting.report import arrow

    out = tmp_path / "out"
    outcome = invoke(
        "compare",
        "evidence-mini",
        "-t",
        "bigram",
        "-t",
        "trigram",
        "-b",
        "lines:max_bytes=2000000",
        "--json",
        "--write-baseline",
        tmp_path / "b.json",
        "-o",
        out,
    )
    assert outcome.exit_code == 0, outcome.stderr
    summary = json.loads(outcome.stdout)
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert [s["name"] for s in summary["systems"]] == [row["name"] for row in report["systems"]]
    for item, row in zip(summary["systems"], report["systems"], strict=False):
        assert (item["tokenizer"], item["builder"], item["mode"], item["metrics"]) == (
            row["tokenizer"],
            row["builder"],
            row["mode"],
            row["metrics"],
        )
        assert item["significance"] == {m: arrow(row, m) for m in report["metrics"]}
        assert item["search_ms"] == {
            "p50": row["latency_ms"]["search"]["median"],
            "p95": row["latency_ms"]["search"]["p95"],
        }
    assert summary["systems"][1]["significance"]["nDCG@10"] == "↓"
    assert summary["skipped"] == [] and summary["reference"] == "bigram | lines:max_bytes=2000000 | and"
    paths = summary["outputs"]
    assert Path(paths["report_json"]).is_file() and Path(paths["baseline"]) == tmp_path / "b.json"
    assert [Path(p).name for p in paths["runs"]] == [
        "bigram_lines_max_bytes=2000000_and.run",
        "trigram_lines_max_bytes=2000000_and.run",
    ]


def test_mode_choices_and_tolerance_default_come_from_the_library() -> None:
    params = {param.name: param for param in cli.commands["compare"].params}
    assert list(params["mode"].type.choices) == list(MODES)
    assert params["tolerance"].default == DEFAULT_TOLERANCE
    assert "-b" in params["builder_spec"].opts


def test_systems_with_one_name_are_refused_and_run_files_never_collide(
    tmp_path: Path, report_folder: Path, no_runs: None
) -> None:
    from rag_eval.eval.reporting.report import run_file_names

    error = one_error(
        invoke("compare", "evidence-mini", "-t", "bigram", "-t", "bigram", "-o", tmp_path / "out"), alone=True
    )
    assert "'bigram | lines | and' is given twice" in error
    run = report_folder / "runs" / "bigram_lines_and.run"
    error = one_error(
        invoke("compare", "evidence-mini", "--run", f"x={run}", "--run", f"x={run}", "-o", tmp_path / "out"), alone=True
    )
    assert "'x' is given twice" in error
    assert run_file_names(["a/b", "a b", "a_b"]) == {"a/b": "a_b", "a b": "a_b-2", "a_b": "a_b-3"}


def test_a_strategy_declared_out_of_default_comparisons_is_left_out_but_can_be_named(evidence) -> None:
    systems, skipped = default_systems(evidence, None, None)
    names = {s.tokenizer for s in systems} | {s.tokenizer for s in skipped}
    declared_out = {name for name in TOKENIZERS if not tokenizer_class(name).in_default_comparison}
    assert declared_out and not names & declared_out  # rjieba, which ranks like jieba
    assert {"unicode61", "trigram", "jieba", "pkuseg", "bigram", "unigram"} <= names
    for name in declared_out:
        get_tokenizer(name)  # still registered and nameable with -t


def test_a_query_judged_all_zero_counts_in_compares_means(tmp_path: Path) -> None:
    """As trec_eval -c: q2's one judgment is 0, so it counts as a judged query scoring 0 (it was left out)."""
    dataset = _beir(tmp_path / "half", "q1\tp1\t1\nq2\tp1\t0\n")
    outcome = invoke("compare", dataset, "-t", "bigram", "--metric", "P@1", "-o", tmp_path / "out")
    assert outcome.exit_code == 0, outcome.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text(encoding="utf-8"))
    assert report["judged_queries"] == 2
    assert report["systems"][0]["metrics"]["P@1"] == 0.5


# -- a failure writing one output leaves every output as it was ----------------------------------------------------


def test_a_baseline_that_cannot_be_written_leaves_the_previous_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = tmp_path / "report"
    result = invoke("compare", "evidence-mini", "-t", "bigram", "-o", str(report))
    assert result.exit_code == 0, result.output
    before = {name: (report / name).read_bytes() for name in ("report.json", "report.md")}
    real_fsync = os.fsync

    def full_disk_for_the_baseline(fd: int) -> None:
        if "base.json" in os.readlink(f"/proc/self/fd/{fd}"):
            raise OSError(errno.ENOSPC, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", full_disk_for_the_baseline)
    args = ["compare", "evidence-mini", "-t", "bigram", "-t", "unigram", "-o", str(report)]
    result = invoke(*args, "--write-baseline", str(tmp_path / "base.json"))
    assert "No space left" in one_error(result)
    assert {name: (report / name).read_bytes() for name in before} == before
    assert sorted(path.name for path in tmp_path.iterdir()) == ["report"]


def test_write_baseline_never_replaces_another_commands_record(tmp_path: Path) -> None:
    """--write-baseline replaced any JSON with a rag-eval/ schema: a report folder's report.json (the folder then
    refused as no longer a report) or tune's tune.json, each lost for a 1 KB baseline."""
    result = invoke("compare", "evidence-mini", "-t", "bigram", "-o", str(tmp_path / "r1"))
    assert result.exit_code == 0, result.output
    result = invoke("compare", "evidence-mini", "-t", "bigram", "-o", str(tmp_path / "r0"))
    assert result.exit_code == 0, result.output
    tune = tmp_path / "tune.json"  # tune's own record, as it writes it
    tune.write_text(json.dumps({"schema": "rag-eval/tune/1", "trials": []}), encoding="utf-8")
    for target in (tmp_path / "r1" / "report.json", tune):
        before = target.read_bytes()
        args = ["compare", "evidence-mini", "-t", "bigram", "-o", str(tmp_path / "r2")]
        assert "refusing to replace it" in one_error(invoke(*args, "--write-baseline", str(target)))
        assert target.read_bytes() == before
    # a report's JSON kept as a file of its own, and a baseline, are still replaced
    kept = tmp_path / "kept.json"
    shutil.copy(tmp_path / "r0" / "report.json", kept)
    for _ in range(2):
        args = ["compare", "evidence-mini", "-t", "bigram", "-o", str(tmp_path / "r2"), "--write-baseline", str(kept)]
        result = invoke(*args)
        assert result.exit_code == 0, result.output
    assert json.loads(kept.read_text(encoding="utf-8"))["schema"].startswith("rag-eval/baseline/")
