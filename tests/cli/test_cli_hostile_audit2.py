"""A second hostile-input audit of evaluate, fuse, segeval, datasets, queries synth and cache: inputs that gave a
traceback, a silently wrong number or a misleading result. Each test failed before its fix.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import ir_measures
import pytest
from helpers import invoke, one_error

from rag_eval.eval.compare.fusion import NORMALISATIONS, normalised
from rag_eval.eval.datasets.shipped import datasheet, shipped_ids

QRELS = "q1 0 d1 1\nq1 0 d2 0\nq1 0 d4 2\nq2 0 d3 2\nq3 0 d5 1\n"
RUN = "q1 Q0 d1 1 3.0 t\nq1 Q0 d2 2 2.0 t\nq1 Q0 d9 3 1.0 t\nq2 Q0 d3 1 1.0 t\nq3 Q0 d8 1 4.0 t\nq3 Q0 d5 2 3.5 t\n"


def _trec(text: str) -> dict[str, dict[str, float]]:
    found: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        parts = line.split()
        found.setdefault(parts[0], {})[parts[2]] = float(parts[4]) if len(parts) == 6 else int(parts[3])
    return found


# --- evaluate: trec_eval's "all" row sums the counts (num_q, num_rel, num_ret, num_rel_ret); it averaged them.

COUNTS_AND_MEANS = ["NumQ", "NumRet", "NumRel", "NumRet(rel=1)", "NumRet(rel=2)", "P@1", "nDCG@10", "AP", "R@2"]


@pytest.mark.parametrize("metric", COUNTS_AND_MEANS)
def test_evaluate_aggregates_every_measure_as_trec_eval(tmp_path: Path, metric: str) -> None:
    (tmp_path / "run.txt").write_text(RUN, encoding="utf-8")
    (tmp_path / "qrels.txt").write_text(QRELS, encoding="utf-8")
    result = invoke("evaluate", tmp_path / "run.txt", tmp_path / "qrels.txt", "--metric", metric, "--json")
    assert result.exit_code == 0, result.output
    measure = ir_measures.parse_measure(metric)
    qrels = {q: {d: int(g) for d, g in docs.items()} for q, docs in _trec(QRELS).items()}
    # ir-measures aggregates as trec_eval's all row: a sum for the counts, a mean for the rest
    expected = ir_measures.calc_aggregate([measure], qrels, _trec(RUN))[measure]
    assert json.loads(result.output)["all"][metric] == pytest.approx(expected)


def test_evaluate_counts_are_totals_over_the_judged_queries(tmp_path: Path) -> None:
    (tmp_path / "run.txt").write_text(RUN, encoding="utf-8")
    (tmp_path / "qrels.txt").write_text(QRELS, encoding="utf-8")
    result = invoke("evaluate", tmp_path / "run.txt", tmp_path / "qrels.txt", "--metric", "NumQ", "--metric", "NumRet")
    assert result.exit_code == 0, result.output
    assert "NumQ\tall\t3.0000" in result.output.splitlines()  # three judged queries, as num_q
    assert "NumRet\tall\t6.0000" in result.output.splitlines()  # six lines retrieved in all


# --- fuse: scores near the float limit made combsum/combmnz write nan (minmax, sum) or crash (zmuv).

HUGE = [1.7e308, -1.7e308, 1e308, 0.0, -5e307]


@pytest.mark.parametrize("how", sorted(NORMALISATIONS))
@pytest.mark.parametrize("scale", [2.0**600, 2.0**1000, 1e-300])
def test_normalisation_is_unchanged_by_the_scores_scale(how: str, scale: float) -> None:
    base = [1.0, -0.75, 0.5, 0.0, 0.25]
    scaled = normalised([score * scale for score in base], how)
    assert all(math.isfinite(value) for value in scaled)
    if scale >= 1:
        assert scaled == pytest.approx(normalised(base, how), rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("how", sorted(NORMALISATIONS))
def test_normalisation_of_close_huge_scores_is_not_blown_up(how: str) -> None:
    # Two scores one float step apart: far above the denominator's floor, so the top one normalises to 1 (minmax,
    # sum), not to the step over the floor (1e144 when the sum's denominator cancelled to 0).
    for base in (2.0**600, 1e300, 1e100):
        close = [base, math.nextafter(base, math.inf), base]
        values = normalised(close, how)
        assert all(math.isfinite(v) for v in values) and max(values) <= 2, values
        if how != "zmuv":
            assert values == pytest.approx([0.0, 1.0, 0.0])


@pytest.mark.parametrize("how", sorted(NORMALISATIONS))
@pytest.mark.parametrize("method", ["combsum", "combmnz"])
def test_fuse_writes_finite_scores_for_huge_input_scores(tmp_path: Path, method: str, how: str) -> None:
    huge = "".join(f"q1 Q0 d{n} {n} {score!r} t\n" for n, score in enumerate(HUGE, start=1))
    small = "".join(f"q1 Q0 d{n} {n} {score / 2.0**1000!r} t\n" for n, score in enumerate(HUGE, start=1))
    other = "q1 Q0 d3 1 2.0 t\nq1 Q0 d1 2 1.0 t\n"
    for name, text in (("huge.run", huge), ("small.run", small), ("other.run", other)):
        (tmp_path / name).write_text(text, encoding="utf-8")
    fused = {}
    for name in ("huge", "small"):
        out = tmp_path / f"{name}-fused.run"
        result = invoke(
            "fuse", tmp_path / f"{name}.run", tmp_path / "other.run", "--method", method, "--normalise", how, "-o", out
        )
        assert result.exit_code == 0 and "Traceback" not in result.output, result.output
        lines = out.read_text(encoding="utf-8").splitlines()
        assert all(math.isfinite(float(line.split()[4])) for line in lines), lines
        fused[name] = [line.split()[:5] for line in lines]
    assert fused["huge"] == fused["small"]  # the same ranking and scores, whatever the scale


# --- datasets show: a folder named like a shipped id printed the shipped datasheet over the folder's statistics.


def _beir(folder: Path) -> None:
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text('{"_id": "p1", "title": "", "text": "本地的一段文字"}\n', encoding="utf-8")
    (folder / "queries.jsonl").write_text('{"_id": "q1", "text": "文字"}\n', encoding="utf-8")
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\tp1\t1\n", encoding="utf-8")


@pytest.mark.parametrize("dataset_id", shipped_ids())
def test_show_describes_a_local_folder_named_like_a_shipped_set_as_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dataset_id: str
) -> None:
    _beir(tmp_path / dataset_id)
    monkeypatch.chdir(tmp_path)
    result = invoke("datasets", "show", dataset_id)
    assert result.exit_code == 0, result.output
    assert "passages: 1" in result.output.splitlines()
    sheet = [line for line in datasheet(dataset_id).splitlines() if line.strip()]
    assert not any(line in result.output.splitlines() for line in sheet[:3]), result.output


@pytest.mark.parametrize("dataset_id", shipped_ids())
def test_show_of_a_shipped_id_still_prints_its_datasheet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dataset_id: str
) -> None:
    monkeypatch.chdir(tmp_path)
    result = invoke("datasets", "show", dataset_id)
    assert result.exit_code == 0, result.output
    first = next(line for line in datasheet(dataset_id).splitlines() if line.strip())
    assert first in result.output.splitlines()


# --- datasets convert: a file with no question wrote an empty retrieval set and succeeded.

NO_QUESTIONS = {
    "no articles": {"data": []},
    "no paragraphs": {"data": [{"title": "T", "paragraphs": []}]},
    "no qas key": {"data": [{"title": "T", "paragraphs": [{"context": "一段上下文。"}]}]},
    "empty qas": {"data": [{"title": "T", "paragraphs": [{"context": "一段上下文。", "qas": []}]}]},
}


@pytest.mark.parametrize("case", sorted(NO_QUESTIONS))
def test_convert_refuses_input_without_a_question(tmp_path: Path, case: str) -> None:
    source = tmp_path / "in.json"
    source.write_text(json.dumps(NO_QUESTIONS[case], ensure_ascii=False), encoding="utf-8")
    line = one_error(invoke("datasets", "convert", "squad", source, "-o", tmp_path / "out"))
    assert "no question" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.json"]


# --- segeval: an empty or blank gold file was "0 gold words", nothing scored, exit 0.


@pytest.mark.parametrize("gold", [b"", b"\n\n", b"\xef\xbb\xbf", b" \r\n\t\r\n", "\u3000\n".encode()])
def test_segeval_refuses_a_gold_file_without_words(tmp_path: Path, gold: bytes) -> None:
    data = tmp_path / "seg"
    data.mkdir()
    (data / "x_test_gold.utf8").write_bytes(gold)
    (data / "x_test.utf8").write_bytes(b"")
    (data / "x_training_words.utf8").write_text("我们\n", encoding="utf-8")
    line = one_error(invoke("segeval", "--data", data, "-t", "unigram"))
    assert "x_test_gold.utf8" in line and "no gold word" in line


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
