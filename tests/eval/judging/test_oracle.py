"""Judging with an oracle (rag_eval.eval.judging.oracle): replay, winners, the sampling study, the shipped handbook."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers import REPO
from helpers.studies import small_study

from rag_eval.cli import cli
from rag_eval.errors import RagEvalError
from rag_eval.eval.compare.runner import System
from rag_eval.eval.compare.timing import run_system
from rag_eval.eval.datasets.formats import load_dataset
from rag_eval.eval.datasets.records import Qrel
from rag_eval.eval.judging.oracle import main as oracle_main
from rag_eval.eval.judging.oracle import per_query_ndcg, read_runs, replay, sampling_study, summarise, winners
from rag_eval.eval.judging.selection import Selector
from rag_eval.eval.metrics.measures import evaluate

RUNS = {
    "a": {"q1": ["x", "y", "n1"], "q2": ["z", "n2"]},
    "b": {"q1": ["y", "x", "n3"], "q2": ["n2", "z"]},
    "c": {"q1": ["n1", "n3"], "q2": ["n4"]},
}
QRELS = {"q1": {"x": 2, "y": 1, "outside": 1}, "q2": {"z": 1}, "q3": {"w": 0}}


def test_per_query_ndcg_is_trec_evals_with_unjudged_as_not_relevant() -> None:
    values = per_query_ndcg(RUNS, QRELS)
    d2, d3 = 1 / math.log2(3), 1 / math.log2(4)
    ideal = 2 + d2 + d3  # x (2), y (1) and the passage no system returned (1)
    assert values["a"] == pytest.approx({"q1": (2 + d2) / ideal, "q2": 1.0})
    assert values["b"] == pytest.approx({"q1": (1 + 2 * d2) / ideal, "q2": d2})
    assert values["c"] == pytest.approx({"q1": 0.0, "q2": 0.0})  # q3 has no positive grade: not a judged query
    assert winners(values, ["q1", "q2"]) == {"a"}
    assert winners({"a": {"q": 0.5}, "b": {"q": 0.5}}, ["q"]) == {"a", "b"}  # exact ties: either is right


def test_replay_reads_grades_from_the_qrels_and_absent_pairs_are_zero() -> None:
    result = replay(RUNS, QRELS, method="naive", budget=20, samples=50)
    assert result.winners == {"a"}
    assert len(result.steps) == 7  # the whole pool (x, y, n1, n3; z, n2, n4), then nothing is left
    last = result.steps[-1]
    assert last.pick == last.judged_pick == "a" and last.certain and last.settled


def test_the_study_samples_judged_queries_with_a_seed_and_summarises() -> None:
    study = sampling_study(RUNS, QRELS, samples=3, sample_queries=2, budget=4, until_settled=4, mc_samples=50)
    again = sampling_study(RUNS, QRELS, samples=3, sample_queries=2, budget=4, until_settled=4, mc_samples=50)
    assert study == again and study["judged_queries"] == 2
    summary = summarise(study, checkpoints=(2, 4))
    for method, figures in summary.items():
        assert figures["samples"] == 3 and len(figures["curve"]) == 4
        assert figures["correct"]["4"] == figures["curve"][3]
        assert 0 <= figures["correct_judged_pick"]["2"] <= 1, method
    with pytest.raises(RagEvalError, match="fewer than"):
        sampling_study(RUNS, QRELS, samples=1, sample_queries=3)
    with pytest.raises(RagEvalError, match="unknown judging order"):
        sampling_study(RUNS, QRELS, samples=1, sample_queries=1, methods=["bogus"])


def test_read_runs_names_systems_by_file_without_their_shared_suffix(tmp_path: Path) -> None:
    for name in ("bigram_sections_or", "unigram_sections_or"):
        (tmp_path / f"{name}.run").write_text("q1 Q0 d2 1 2.0 t\nq1 Q0 d1 2 3.0 t\n", encoding="utf-8")
    runs = read_runs(sorted(tmp_path.glob("*.run")))
    assert runs == {"bigram": {"q1": ["d1", "d2"]}, "unigram": {"q1": ["d1", "d2"]}}  # score order, as trec_eval


@pytest.fixture(scope="module")
def handbook_runs() -> tuple[dict[str, dict[str, list[str]]], dict[str, dict[str, int]]]:
    """Two cheap strategies' runs on the shipped handbook, and its qrels."""
    data = load_dataset("handbook")
    runs: dict[str, dict[str, list[str]]] = {}
    for name in ("bigram", "unigram"):
        ranked: dict[str, list[str]] = {}
        for doc in run_system(data, System(name, "", ""), depth=10).run:
            ranked.setdefault(doc.query_id, []).append(doc.doc_id)
        runs[name] = ranked
    return runs, data.qrels


def test_on_the_handbook_nDCG_matches_trec_eval_and_a_fully_judged_pool_gives_the_exact_scores(
    handbook_runs: tuple[dict[str, dict[str, list[str]]], dict[str, dict[str, int]]],
) -> None:
    runs, qrels = handbook_runs
    qrel_list = [Qrel(q, d, g) for q, docs in qrels.items() for d, g in docs.items()]
    mine = per_query_ndcg(runs, qrels)
    for system, ranked in runs.items():
        from rag_eval.eval.metrics.measures import RankedDoc

        run = [RankedDoc(q, d, r, -float(r)) for q, docs in ranked.items() for r, d in enumerate(docs, start=1)]
        means, per_query = evaluate(qrel_list, run, ["nDCG@10"])
        assert sum(mine[system].values()) / len(mine[system]) == pytest.approx(means["nDCG@10"], abs=1e-9)
        assert mine[system] == pytest.approx({q: v["nDCG@10"] for q, v in per_query.items()}, abs=1e-9)

    # judge a sample of queries' whole pool: the selector's scores are then the pool's exact mean nDCG@10
    queries = sorted(q for q, d in qrels.items() if any(g > 0 for g in d.values()))[:12]
    small = {s: {q: r[q] for q in queries if q in r} for s, r in runs.items()}
    selector = Selector(small, samples=50)
    for query, docs in selector.pool.items():
        for doc in docs:
            selector.record(query, doc, qrels[query].get(doc, 0))
    pooled = {q: {d: g for d, g in qrels[q].items() if d in selector.pool[q]} for q in queries}
    judged = [q for q in queries if any(g > 0 for g in pooled[q].values())]
    exact = per_query_ndcg(small, pooled)
    decision = selector.decision()
    assert decision.certain and decision.judged == decision.pooled
    for system in small:
        assert decision.scores[system] == pytest.approx(sum(exact[system][q] for q in judged) / len(judged))


def test_on_the_handbook_the_decisive_order_replays_and_reports_every_step(
    handbook_runs: tuple[dict[str, dict[str, list[str]]], dict[str, dict[str, int]]],
) -> None:
    runs, qrels = handbook_runs
    queries = sorted(q for q, d in qrels.items() if any(g > 0 for g in d.values()))[:20]
    result = replay(runs, qrels, queries=queries, budget=15, samples=100)
    assert [s.judged for s in result.steps] == list(range(1, 16))
    assert all(s.pick in runs and 0 <= s.confidence <= 1 for s in result.steps)
    assert result.winners <= set(runs)


# -- 5. python -m rag_eval.eval.judging.oracle: one error line ---------------------------------------------------------


@pytest.fixture(scope="module")
def study() -> dict[str, Any]:
    """helpers.studies' small study as the oracle writes it (without the records)."""
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


ROOT = REPO


STUDY_RUNS = {
    "a": {"q1": ["x", "y", "n1"], "q2": ["z", "n2"], "q3": ["w", "v"]},
    "b": {"q1": ["y", "x", "n3"], "q2": ["n2", "z"], "q3": ["v", "w"]},
}


STUDY_QRELS = {"q1": {"x": 2, "y": 1}, "q2": {"z": 1}, "q3": {"v": 1}}


STUDY = {"samples": 4, "sample_queries": 2, "budget": 4, "until_settled": 4, "mc_samples": 50}


# -- judge --oracle: progress of the sampling study ------------------------------------------------------------


def test_the_sampling_study_reports_samples_done_and_computes_the_same() -> None:
    """Regression: a study of 200 samples showed nothing for minutes."""
    calls: list[tuple[str, int, int]] = []
    watched = sampling_study(STUDY_RUNS, STUDY_QRELS, **STUDY, progress=lambda *call: calls.append(call))
    plain = sampling_study(STUDY_RUNS, STUDY_QRELS, **STUDY)
    assert calls == [("samples", done, 4) for done in range(5)]
    assert json.dumps(watched) == json.dumps(plain)  # progress observes only: same records, same random draws
    calls.clear()
    sampling_study(STUDY_RUNS, STUDY_QRELS, **STUDY, first=1, count=2, progress=lambda *call: calls.append(call))
    assert calls == [("samples", 0, 2), ("samples", 1, 2), ("samples", 2, 2)]  # the samples this call runs


def test_judge_oracle_shows_the_sampling_studys_progress(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: `judge --oracle` showed the query bars, then nothing while its samples ran."""
    import rag_eval.cli.judge as judge_cli
    from rag_eval.cli.progress import Bars
    from rag_eval.eval.datasets.sources import question_id

    shown: list[tuple[str, float, int]] = []

    class Recording(Bars):
        def __call__(self, phase: str, done: float, total: int) -> None:
            shown.append((phase, done, total))

    monkeypatch.setattr(judge_cli, "Bars", Recording)
    questions = (ROOT / "docs" / "examples" / "handbook-questions.txt").read_text(encoding="utf-8").splitlines()[:12]
    ids = {question_id(q) for q in questions}
    qrels = (ROOT / "docs" / "examples" / "handbook-questions.qrels").read_text(encoding="utf-8").splitlines()
    (tmp_path / "q.txt").write_text("\n".join(questions) + "\n", encoding="utf-8")
    (tmp_path / "q.qrels").write_text("".join(f"{line}\n" for line in qrels if line.split()[0] in ids), "utf-8")
    result = CliRunner().invoke(
        cli,
        ["judge", "handbook", "--queries", str(tmp_path / "q.txt"), "-t", "bigram", "-t", "unigram"]
        + ["--oracle", str(tmp_path / "q.qrels"), "--samples", "2", "--sample-queries", "6"],
    )
    assert result.exit_code == 0, result.output + result.stderr
    samples = [(done, total) for phase, done, total in shown if phase.endswith("samples")]
    assert samples and samples[-1] == (2, 2)
