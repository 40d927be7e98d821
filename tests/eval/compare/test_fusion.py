"""Fusion of systems as a system (issue #12): RRF, CombSUM and CombMNZ checked against ranx, fused rows in
compare, the [[fusion]] and --fuse declarations, and rag-eval fuse."""

from __future__ import annotations

import json
import math
import os
import struct
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import TESTS, invoke, one_error
from helpers.compare_calls import compare, run_compare

from rag_eval.cli import cli
from rag_eval.eval.compare.fusion import (
    METHODS,
    NORMALISATIONS,
    Fusion,
    FusionError,
    fuse,
    fuse_files,
    fuse_runs,
    fusion_from_table,
    normalised,
    parse_fusion,
    resolve_members,
)
from rag_eval.eval.compare.runner import System
from rag_eval.eval.datasets.formats import load_dataset
from rag_eval.eval.datasets.trec import read_run
from rag_eval.eval.metrics.measures import RankedDoc, evaluate

# Three small runs and ranx 0.3.21's fuse of them under every method, normalisation and k offered here;
# made once by tests/data/fusion/make_golden.py (the command is in its docstring; ranx is not a dependency).
GOLDEN = TESTS / "data" / "fusion"
CASES = json.loads((GOLDEN / "expected.json").read_text(encoding="utf-8"))


def _case_id(case: dict) -> str:
    option = f"k={case['k']}" if "k" in case else case["normalise"]
    weights = "-weighted" if "weights" in case else ""
    return f"{case['method']}-{option}{weights}-{'+'.join(case['members'])}"


@pytest.fixture(scope="module")
def golden_runs() -> dict[str, dict[str, list[tuple[str, float]]]]:
    runs: dict[str, dict[str, list[tuple[str, float]]]] = {}
    for name in "abc":
        for doc in read_run(GOLDEN / f"{name}.run"):
            runs.setdefault(name, {}).setdefault(doc.query_id, []).append((doc.doc_id, doc.score))
    return runs


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_fusion_matches_ranx(case: dict, golden_runs: dict) -> None:
    options = {key: case[key] for key in ("k", "normalise") if key in case}
    weights = tuple(case["weights"]) if "weights" in case else None
    fusion = Fusion(case["method"], tuple(case["members"]), weights, **options)
    assert case["run"].keys() == golden_runs["a"].keys()
    for query, expected in case["run"].items():
        ours = fuse([golden_runs[m][query] for m in case["members"]], fusion, depth=1000)
        assert {doc for doc, _ in ours} == set(expected)
        for doc, score in ours:
            assert score == pytest.approx(expected[doc], rel=1e-12, abs=1e-12)
        # Our order is ranx's scores, best first; only scores equal to 12 decimals may be ordered otherwise.
        theirs = [expected[doc] for doc, _ in ours]
        assert all(first >= second - 1e-12 for first, second in zip(theirs, theirs[1:], strict=False))


def test_every_method_and_normalisation_is_checked_against_ranx() -> None:
    checked = {(c["method"], c.get("normalise")) for c in CASES}
    assert {m for m, _ in checked} == set(METHODS)
    assert {n for m, n in checked if m != "rrf"} == set(NORMALISATIONS)


def test_rrf_by_hand() -> None:
    fused = fuse([[("x", 9.0), ("y", 8.0)], [("y", 0.5), ("z", 0.4)]], Fusion("rrf", ("a", "b")))
    assert fused == [("y", 1 / 62 + 1 / 61), ("x", 1 / 61), ("z", 1 / 62)]
    weighted = fuse([[("x", 1.0)], [("y", 1.0)]], Fusion("rrf", ("a", "b"), (1.0, 3.0), k=0))
    assert weighted == [("y", 3.0), ("x", 1.0)]


def test_normalisations_by_hand() -> None:
    assert normalised([3.0, 2.0, 1.0], "minmax") == [1.0, 0.5, 0.0]
    assert normalised([3.0, 2.0, 1.0], "sum") == pytest.approx([2 / 3, 1 / 3, 0.0])
    assert normalised([3.0, 2.0, 1.0], "zmuv") == pytest.approx([math.sqrt(1.5), 0.0, -math.sqrt(1.5)])
    # ranx floors a denominator at 1e-9: one document, or equal scores, normalise to 0.
    for how in NORMALISATIONS:
        assert normalised([7.5], how) == [0.0]
        assert normalised([], how) == []


def test_combsum_and_combmnz_by_hand() -> None:
    rankings = [[("x", 10.0), ("y", 5.0), ("z", 0.0)], [("y", 0.9), ("w", 0.1)]]
    combsum = dict(fuse(rankings, Fusion("combsum", ("a", "b"))))
    assert combsum == {"x": 1.0, "y": 1.5, "z": 0.0, "w": 0.0}
    combmnz = fuse(rankings, Fusion("combmnz", ("a", "b")))
    assert combmnz[0] == ("y", 3.0)  # (0.5 + 1.0) * 2 members
    weighted = dict(fuse(rankings, Fusion("combmnz", ("a", "b"), (2.0, 1.0))))
    assert weighted["y"] == (2 * 0.5 + 1.0) * 2 and weighted["x"] == 2.0


def test_ties_are_ordered_by_the_members_ranks_first_member_first() -> None:
    a = [("a1", 3.0), ("a2", 2.0)]
    b = [("b1", 3.0), ("b2", 2.0)]
    assert [doc for doc, _ in fuse([a, b], Fusion("rrf", ("a", "b")))] == ["a1", "b1", "a2", "b2"]
    assert [doc for doc, _ in fuse([b, a], Fusion("rrf", ("b", "a")))] == ["b1", "a1", "b2", "a2"]
    # Three members: equal sums added in another order may differ in the last bit; still a tie.
    runs = [[("p", 1.0), ("q", 0.0)], [("q", 1.0), ("r", 0.0)], [("r", 1.0), ("p", 0.0)]]
    fused = fuse(runs, Fusion("rrf", ("a", "b", "c"), k=7))
    assert [doc for doc, _ in fused] == ["p", "q", "r"]


def test_depth_cuts_each_member_and_the_result() -> None:
    a = [(f"a{n}", 10.0 - n) for n in range(5)]
    b = [(f"b{n}", 10.0 - n) for n in range(5)]
    fused = fuse([a, b], Fusion("combsum", ("a", "b")), depth=2)
    assert [doc for doc, _ in fused] == ["a0", "b0"]
    # minmax over the top 2 only: a1 is the minimum there (0), not 0.75 of a 5-deep run.
    assert dict(fuse([a, b], Fusion("combsum", ("a", "b")), depth=3))["a1"] == 0.5


def test_fuse_runs_is_strict_and_a_member_without_a_query_adds_nothing() -> None:
    a = [RankedDoc("q1", "x", 1, 2.0), RankedDoc("q1", "y", 2, 1.0), RankedDoc("q2", "z", 1, 5.0)]
    b = [RankedDoc("q1", "y", 1, 0.5), RankedDoc("q1", "x", 2, 0.4)]
    fused = fuse_runs([a, b], Fusion("rrf", ("a", "b")))
    assert fused.queries == ["q1", "q2"] and len(fused.seconds) == 2
    assert [(d.query_id, d.doc_id, d.rank) for d in fused.run] == [("q1", "x", 1), ("q1", "y", 2), ("q2", "z", 1)]
    q1 = [d.score for d in fused.run if d.query_id == "q1"]
    assert round(1 / 61 + 1 / 62, 6) == 0.032522 and q1 == [0.032522, 0.032521]  # a tie, stepped 1e-6 apart
    ordered = fuse_runs([a, b], Fusion("rrf", ("a", "b")), queries=["q3", "q2"])
    assert ordered.queries == ["q3", "q2"] and [d.doc_id for d in ordered.run] == ["z"]


@pytest.mark.parametrize(
    ("spec", "name"),
    [
        ("rrf(bigram, unigram)", "rrf(bigram, unigram)"),
        (" rrf : k=60 ( bigram ,  unigram ) ", "rrf(bigram, unigram)"),
        ("rrf:k=20(bigram, jieba:mode=precise,hmm=false)", "rrf:k=20(bigram, jieba:mode=precise,hmm=false)"),
        ("combsum(bigram, 2*unigram)", "combsum(bigram, 2*unigram)"),
        ("combmnz:normalise=zmuv(1*a, 0.5*b, c)", "combmnz:normalise=zmuv(a, 0.5*b, c)"),
        ("combsum:normalise=minmax(unigram^2+bigram, bigram)", "combsum(unigram^2+bigram, bigram)"),
        ("rrf(0.0000001*a, b)", "rrf(1e-07*a, b)"),
    ],
)
def test_spec_reads_back_from_its_name(spec: str, name: str) -> None:
    fusion = parse_fusion(spec)
    assert fusion.spec() == name
    assert parse_fusion(name) == fusion


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("rrf bigram unigram", "expected METHOD[:key=value,...](SYSTEM, SYSTEM, ...)"),
        ("rrf(bigram)", "at least two members"),
        ("rrf(bigram, bigram)", "names a member twice"),
        ("vote(bigram, unigram)", "unknown fusion method 'vote'; choose from: rrf, combsum, combmnz"),
        ("rrf:normalise=sum(bigram, unigram)", "rrf has no option 'normalise' (options: k)"),
        ("combsum:k=3(bigram, unigram)", "combsum has no option 'k' (options: normalise)"),
        ("combsum:normalise=l2(bigram, unigram)", "unknown normalisation 'l2'; choose from: minmax, sum, zmuv"),
        ("rrf:k=x(bigram, unigram)", "k must be a whole number"),
        ("rrf:k=-1(bigram, unigram)", "k must be a whole number"),
        ("rrf(0*bigram, unigram)", "weight must be a finite number above 0"),
        ("rrf(bigram, )", "members are named by non-empty text"),
    ],
)
def test_spec_errors(spec: str, message: str) -> None:
    with pytest.raises(FusionError, match=None) as caught:
        parse_fusion(spec)
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"systems": ["a", "b"]}, 'needs method = "rrf"'),
        ({"method": "rrf", "systems": "a, b"}, 'needs systems = ["SPEC", "SPEC", ...]'),
        ({"method": "rrf", "systems": ["a", "b"], "k": True}, "k must be a whole number"),
        ({"method": "rrf", "systems": ["a", "b"], "k": 1.5}, "k must be a whole number"),
        ({"method": "rrf", "systems": ["a", "b"], "weights": [1]}, "1 weights for 2 members"),
        ({"method": "rrf", "systems": ["a", "b"], "weights": [1, math.inf]}, "above 0"),
        ({"method": "rrf", "systems": ["a", "b"], "weights": [1, "2"]}, "above 0"),
        ({"method": "combsum", "systems": ["a", "b"], "normalise": 1}, "unknown normalisation"),
        ({"method": "rrf", "systems": ["a", "b"], "name": "x"}, "unknown keys: name"),
    ],
)
def test_table_errors(table: dict, message: str) -> None:
    with pytest.raises(FusionError) as caught:
        fusion_from_table(table, "s.toml: [[fusion]] number 1")
    assert str(caught.value).startswith("s.toml: [[fusion]] number 1") and message in str(caught.value)


def test_members_resolve_by_tokenizer_spec_full_name_or_run_name() -> None:
    systems = {"bigram | sections | or": "bigram", "jieba:mode=precise | sections | or": "jieba:mode=precise"}
    fusion = parse_fusion("rrf(jieba: mode = precise, bigram | sections | or, vectors)")
    assert resolve_members(fusion, systems, ["vectors"]) == [*reversed(list(systems)), "vectors"]
    with pytest.raises(FusionError, match="no system 'unigram' in this comparison; systems: bigram, jieba"):
        resolve_members(parse_fusion("rrf(bigram, unigram)"), systems, [])
    twice = {"bigram | sections | or": "bigram", "bigram | sections | and": "bigram"}
    with pytest.raises(FusionError, match="'bigram' names 2 systems"):
        resolve_members(parse_fusion("rrf(bigram, jieba)"), twice, [])


@pytest.fixture(scope="module")
def evidence():
    return load_dataset("evidence-mini")


@pytest.fixture(scope="module")
def fused_report(evidence):
    fusions = [parse_fusion("rrf(bigram, unigram)"), parse_fusion("combsum:normalise=zmuv(unigram, 2*bigram)")]
    return compare(evidence, [System("bigram", "", ""), System("unigram", "", "")], fusions=fusions)


def test_a_fused_system_is_a_row_like_any_other(fused_report, evidence) -> None:
    report, runs = fused_report
    rows = {row["name"]: row for row in report["systems"]}
    assert list(rows) == [
        "bigram | lines | and",
        "unigram | lines | and",
        "rrf(bigram, unigram)",
        "combsum:normalise=zmuv(unigram, 2*bigram)",
    ]
    row = rows["rrf(bigram, unigram)"]
    bigram, unigram = rows["bigram | lines | and"], rows["unigram | lines | and"]
    assert row["fusion"]["members"] == ["bigram | lines | and", "unigram | lines | and"]
    assert (
        row["fusion"]["k"] == 60 and row["fusion"]["depth"] == 100 and "one after another" in row["fusion"]["latency"]
    )
    assert row["tokenizer"] == f"rrf({bigram['tokenizer']}, {unigram['tokenizer']})"
    # Quality: the metrics of the fused run itself, tested against the reference like any system.
    means, _ = evaluate(evidence.qrel_list(), runs["rrf(bigram, unigram)"], ["nDCG@10"])
    assert row["metrics"]["nDCG@10"] == round(means["nDCG@10"], 4)
    assert set(row["significance"]) == set(report["metrics"]) and row["by_kind"].keys() == bigram["by_kind"].keys()
    assert set(report["per_query"]["rrf(bigram, unigram)"]) == set(report["per_query"]["bigram | lines | and"])
    # The same fused run as fusing the members' runs directly, strictly ordered.
    direct = fuse_runs(
        [runs["bigram | lines | and"], runs["unigram | lines | and"]],
        parse_fusion("rrf(a, b)"),
        queries=evidence.queries,
    )
    assert runs["rrf(bigram, unigram)"] == direct.run
    # Costs: members' indexes, no build; per query the members' times added plus the fusion's own.
    assert row["build"] == {"index_bytes": bigram["build"]["index_bytes"] + unigram["build"]["index_bytes"]}
    samples = zip(
        row["latency_samples_ms"]["search"],
        bigram["latency_samples_ms"]["search"],
        unigram["latency_samples_ms"]["search"],
        strict=True,
    )
    assert all(fused >= b + u - 2e-4 for fused, b, u in samples)
    assert set(row["latency_ms"]) == {"tokenize", "search", "fusion"}
    assert row["no_answer_false_hit_rate"] == 0.0 and row["tokens_per_passage"] is None


def test_the_gate_compares_a_fused_system_and_sees_a_changed_member(fused_report) -> None:
    from rag_eval.eval.compare.gate import baseline_of, check

    report, _ = fused_report
    same = check(report, baseline_of(report))
    assert same.compared == 4 and not same.regressions and not same.stale
    baseline = baseline_of(report)
    fused = next(row for row in baseline["systems"] if row["name"] == "rrf(bigram, unigram)")
    fused["tokenizer"] = fused["tokenizer"].replace("unigram:t2s=false", "unigram:t2s=true")
    assert [item["system"] for item in check(report, baseline).stale] == ["rrf(bigram, unigram)"]


def test_fused_rows_render_without_a_build(fused_report, tmp_path: Path) -> None:
    from rag_eval.eval.reporting.report import render_markdown, write_outputs

    report, runs = fused_report
    markdown = render_markdown(report)
    cost = next(line for line in markdown.splitlines() if line.startswith("| `rrf(bigram, unigram) (members"))
    assert "members' indexes, no build" in cost and cost.split(" | ")[1:3] == ["-", "-"]
    assert "`rrf(bigram, unigram) (members one after another + fusion)`" in markdown
    out = write_outputs(report, runs, tmp_path / "report")
    assert (out / "runs" / "rrf_bigram_unigram.run").is_file()


def test_compare_command_fuses_from_a_systems_file_and_the_command_line(tmp_path: Path) -> None:
    systems = tmp_path / "systems.toml"
    systems.write_text(
        '[[system]]\ntokenizer = "bigram"\n\n[[system]]\ntokenizer = "unigram"\n\n'
        '[[fusion]]\nmethod = "combmnz"\nnormalise = "sum"\nsystems = ["unigram", "bigram | lines | and"]\n'
        "weights = [1.0, 0.5]\n",
        encoding="utf-8",
    )
    out = tmp_path / "out"
    args = ["compare", "evidence-mini", "--systems", str(systems), "--fuse", "rrf:k=10(bigram, unigram)"]
    outcome = CliRunner().invoke(cli, [*args, "--reference-system", "rrf:k=10(bigram, unigram)", "-o", str(out)])
    assert outcome.exit_code == 0, outcome.output + outcome.stderr
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    names = [row["name"] for row in report["systems"]]
    assert names[2:] == ["combmnz:normalise=sum(unigram, 0.5*bigram)", "rrf:k=10(bigram, unigram)"]
    assert report["reference"] == "rrf:k=10(bigram, unigram)"
    assert "rrf:k=10(bigram, unigram)" in outcome.stdout and "reference rrf:k=10(bigram, unigram)" in outcome.stdout


def test_a_fusion_with_an_outside_run_has_quality_but_no_costs(tmp_path: Path, fused_report) -> None:
    from rag_eval.eval.compare.compare import OutsideRun
    from rag_eval.eval.reporting.report import write_outputs

    report, runs = fused_report
    first = write_outputs(report, runs, tmp_path / "first")
    result = run_compare(
        "evidence-mini",
        output=tmp_path / "second",
        tokenizers=["bigram"],
        outside=[OutsideRun("prior", first / "runs" / "unigram_lines_and.run")],
        fuse=["rrf(bigram, prior)"],
    )
    row = next(row for row in result.report.to_json()["systems"] if row["name"] == "rrf(bigram, prior)")
    assert "latency_ms" not in row and "build" not in row
    previous = next(row for row in report["systems"] if row["name"] == "rrf(bigram, unigram)")
    assert row["metrics"] == previous["metrics"]  # the same two runs, one of them read back from its file


@pytest.mark.parametrize(
    ("extra", "toml", "message"),
    [
        (["--fuse", "rrf(bigram, jieba)"], "", "error: fusion 'rrf(bigram, jieba)': no system 'jieba'"),
        (["--fuse", "rrf(bigram)"], "", "error: fusion 'rrf(bigram)': a fusion needs at least two members"),
        (["--fuse", "rrf(bigram,unigram)"], "", "error: fusion 'rrf(bigram,unigram)': a fusion needs at least two"),
        ([], '[[system]]\ntokenizer = "bigram"\n[[fussion]]\nmethod = "rrf"\n', "unknown tables fussion"),
        (
            [],
            '[[system]]\ntokenizer = "bigram"\n[[fusion]]\nmethod = "rrf"\nsystems = ["bigram", "x"]\n',
            "no system 'x'",
        ),
        (
            ["--fuse", "rrf(bigram, unigram)", "--fuse", "rrf:k=60(bigram, unigram)"],
            "",
            "error: system 'rrf(bigram, unigram)' is given twice",
        ),
    ],
)
def test_fusion_errors_come_before_anything_is_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: list[str], toml: str, message: str
) -> None:
    monkeypatch.setenv("RAG_EVAL_CACHE", str(tmp_path / "cache"))
    args = ["compare", "evidence-mini", "-t", "bigram", "-t", "unigram", *extra, "-o", str(tmp_path / "x")]
    if toml:
        (tmp_path / "s.toml").write_text(toml, encoding="utf-8")
        args = ["compare", "evidence-mini", "--systems", str(tmp_path / "s.toml"), "-o", str(tmp_path / "x")]
    outcome = CliRunner().invoke(cli, args)
    assert outcome.exit_code == 1
    assert message in outcome.stderr.splitlines()[0] and "Traceback" not in outcome.stderr
    assert not (tmp_path / "x").exists() and not (tmp_path / "cache" / "indexes").exists()


def test_fuse_command_writes_the_fused_run_compare_ranks(fused_report, tmp_path: Path) -> None:
    from rag_eval.eval.reporting.report import write_outputs

    report, runs = fused_report
    folder = write_outputs(report, runs, tmp_path / "report")
    members = [str(folder / "runs" / f"{name}_lines_and.run") for name in ("bigram", "unigram")]
    out = tmp_path / "fused.run"
    outcome = CliRunner().invoke(cli, ["fuse", *members, "-o", str(out)])
    assert outcome.exit_code == 0, outcome.stderr
    assert outcome.stderr.startswith(f"wrote {out}: ")
    lines = [line.split() for line in out.read_text(encoding="utf-8").splitlines()]
    compared = [line.split() for line in (folder / "runs" / "rrf_bigram_unigram.run").read_text("utf-8").splitlines()]
    # Queries no member answered have no lines: the same ranking, line for line. fuse writes each score in full,
    # compare's run file to 6 decimals (each lowered at most a few 1e-6 to stay strictly decreasing).
    assert [line[:4] for line in lines] == [line[:4] for line in compared]
    assert all(abs(float(a[4]) - float(b[4])) < 1e-5 for a, b in zip(lines, compared, strict=True))
    again = CliRunner().invoke(cli, ["fuse", *members, "-o", str(out)])
    assert again.exit_code == 1 and "refusing to replace it: it already exists" in again.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{a}"], "a fusion needs at least two members"),
        (["{a}", "{a}"], "is given twice"),
        (["{a}", "{b}", "--method", "vote"], "unknown fusion method 'vote'; choose from: rrf, combsum, combmnz"),
        (["{a}", "{b}", "--k", "5", "--method", "combsum"], "combsum has no option 'k'"),
        (["{a}", "{b}", "--weight", "2"], "1 weights for 2 members"),
        (["{a}", "{b}", "--depth", "0"], "depth must be a whole number from 1 to 10000"),
        (["{a}", "{tmp}/missing.run"], "missing.run"),
    ],
)
def test_fuse_command_errors(tmp_path: Path, args: list[str], message: str) -> None:
    paths = {"{a}": str(GOLDEN / "a.run"), "{b}": str(GOLDEN / "b.run")}
    argv = [paths.get(a, a.replace("{tmp}", str(tmp_path))) for a in args]
    outcome = CliRunner().invoke(cli, ["fuse", *argv, "-o", str(tmp_path / "out.run")])
    assert outcome.exit_code == 1
    assert outcome.stderr.startswith("error: ") and message in outcome.stderr.splitlines()[0]
    assert not (tmp_path / "out.run").exists()


def test_help_names_every_method_and_normalisation() -> None:
    """The help texts list the choices by hand (importing the fusion module would slow every command)."""
    for command in (["fuse"], ["compare"]):
        text = " ".join(CliRunner().invoke(cli, [*command, "--help"]).output.split())
        assert all(name in text for name in (*METHODS, *NORMALISATIONS)), command


def test_a_fusion_counts_its_members_and_says_how_to_separate_them() -> None:
    """Regression: rrf() said "not 1", and rrf(bigram,jieba) said "not 1" without saying why."""
    with pytest.raises(FusionError) as empty:
        parse_fusion("rrf()")
    assert "at least two members (systems or runs), not 0" in str(empty.value)
    with pytest.raises(FusionError) as bare:
        parse_fusion("rrf(bigram,jieba)")
    assert "not 1" in str(bare.value) and bare.value.hint is not None
    assert "separate members with a comma and a space" in bare.value.hint and "rrf(bigram, jieba)" in bare.value.hint
    with pytest.raises(FusionError) as options:
        parse_fusion("rrf(jieba:mode=precise,hmm=false)")
    assert options.value.hint is not None and "a comma and a space" in options.value.hint


def test_a_fusion_with_a_bare_comma_is_one_error_line_and_a_hint_through_compare(tmp_path: Path) -> None:
    args = ["compare", "evidence-mini", "-t", "bigram", "-t", "jieba", "--fuse", "rrf(bigram,jieba)"]
    outcome = CliRunner().invoke(cli, [*args, "-o", str(tmp_path / "x")])
    assert outcome.exit_code == 1
    assert outcome.stderr.splitlines() == [
        "error: fusion 'rrf(bigram,jieba)': a fusion needs at least two members (systems or runs), not 1",
        "hint: separate members with a comma and a space (a bare comma separates a tokenizer's options), "
        "e.g. rrf(bigram, jieba)",
    ]


# -- 9. fused scores written in full ------------------------------------------------------------------------------


def _float32(value: float) -> float:
    return struct.unpack("f", struct.pack("f", value))[0]


@pytest.mark.parametrize("k", ["60", "1000000"])
def test_fused_scores_keep_their_value_and_stay_strictly_decreasing(tmp_path: Path, k: str) -> None:
    """Bug: fuse wrote 6 fixed decimals: with --k 1000000 the scores read 0.000002, 0.000001, 0.000000,
    -0.000001 ..., and fusing that run again (combsum) used them."""
    docs = [f"d{n:02d}" for n in range(30)]
    (tmp_path / "a.run").write_text("".join(f"q1 Q0 {d} {n + 1} {30 - n} a\n" for n, d in enumerate(docs)), "utf-8")
    (tmp_path / "b.run").write_text(
        "".join(f"q1 Q0 {d} {n + 1} {30 - n} b\n" for n, d in enumerate(reversed(docs))), "utf-8"
    )
    result = invoke("fuse", tmp_path / "a.run", tmp_path / "b.run", "--k", k, "-o", tmp_path / "f.run")
    assert result.exit_code == 0, result.output
    fused = read_run(tmp_path / "f.run")
    scores = [doc.score for doc in fused]
    assert len(scores) == 30 and all(score > 0 for score in scores)  # every document was returned: all above 0
    # each pair d_n, d_(29-n) ties: 1/(k+n+1) + 1/(k+30-n); the first of a tie is written as it is
    top = 1 / (int(k) + 1) + 1 / (int(k) + 30)
    assert scores[0] == pytest.approx(top, rel=1e-12)
    assert all(_float32(a) > _float32(b) for a, b in zip(scores, scores[1:], strict=False))  # trec_eval's floats
    result = invoke("fuse", tmp_path / "f.run", tmp_path / "a.run", "--method", "combsum", "-o", tmp_path / "g")
    assert result.exit_code == 0, result.output


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


TWO_LINE_RUN = "q1 Q0 d1 1 2.0 x\nq1 Q0 d2 2 1.0 x\n"


def test_fuse_refuses_one_run_file_named_twice_by_another_path(tmp_path: Path) -> None:
    """fuse compared the arguments as text: a run named by a relative and an absolute path, or through a link,
    was fused with itself, silently doubling its weight."""
    first = tmp_path / "a.run"
    first.write_text(TWO_LINE_RUN, encoding="utf-8")
    (tmp_path / "link.run").symlink_to(first)
    os.link(first, tmp_path / "hard.run")
    for other in (tmp_path / "link.run", tmp_path / "hard.run", tmp_path / "sub" / ".." / "a.run"):
        (tmp_path / "sub").mkdir(exist_ok=True)
        line = one_error(invoke("fuse", str(first), str(other), "-o", str(tmp_path / "out.run")))
        assert "given twice" in line
    assert not (tmp_path / "out.run").exists()


@pytest.mark.parametrize("weights", [(1e308, 1e308), (1001.0, 1.0)])
def test_fusion_weights_are_bounded(weights: tuple[float, float]) -> None:
    """Two members weighted 1e308 fused to a score of inf, written into a run that evaluate then refuses."""
    with pytest.raises(FusionError, match="fusion weight must be at most 1000"):
        Fusion("combsum", ("a", "b"), weights)


@pytest.mark.parametrize("scale", [1e-12, 1e-10])
def test_weights_scaled_alike_rank_alike(scale: float) -> None:
    """Tiny weights rounded every fused score to 0 at 12 decimals: the first member's ranks alone ordered them."""
    rankings = [[("x", 3.0), ("y", 2.0), ("z", 1.0)], [("y", 3.0), ("z", 2.0), ("x", 1.0)]]
    plain = [doc for doc, _ in fuse(rankings, Fusion("rrf", ("a", "b")))]
    scaled = [doc for doc, _ in fuse(rankings, Fusion("rrf", ("a", "b"), (scale, scale)))]
    assert plain == ["y", "x", "z"] and scaled == plain


def test_fuse_refuses_huge_weights_and_writes_nothing(tmp_path: Path) -> None:
    a, b = tmp_path / "a.run", tmp_path / "b.run"
    a.write_text("q Q0 d1 1 3.0 a\nq Q0 d2 2 1.0 a\n", encoding="utf-8")
    b.write_text("q Q0 d1 1 2.0 b\nq Q0 d2 2 1.0 b\n", encoding="utf-8")
    with pytest.raises(FusionError, match="at most 1000"):
        fuse_files([a, b], tmp_path / "out.run", method="combsum", weights=[1e308, 1e308])
    assert not (tmp_path / "out.run").exists()
    _written, fused = fuse_files([a, b], tmp_path / "ok.run", method="combsum", weights=[1000, 0.001])
    assert all(doc.score == doc.score and abs(doc.score) < float("inf") for doc in fused.run)
