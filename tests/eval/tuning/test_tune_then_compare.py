"""tune, then compare --systems recommendation.toml: the split tune chose on is recorded in the file, compare
evaluates the held-back queries of the same data by default, and the two commands give the same figures."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers import one_error

from rag_eval.cli import cli
from rag_eval.eval.datasets.formats import load_dataset
from rag_eval.eval.datasets.shipped import export_shipped
from rag_eval.eval.datasets.split import split_ids
from rag_eval.eval.datasets.split_record import ids_digest
from rag_eval.eval.tuning.tune import TuneResult, tune

SPACES = {
    "evidence-mini": 'tokenizers = ["bigram", "unigram", "jieba:mode=precise"]\nhybrid_sizes = [2]\n'
    'processing = ["", "stopwords=zh"]\nfusion = ["rrf"]\n',
    "handbook": 'tokenizers = ["bigram", "unigram"]\nhybrid_sizes = [2]\nprocessing = ["", "stopwords=zh"]\n',
}


def _tune(folder: Path, dataset: str, fraction: float = 0.5) -> TuneResult:
    space = folder / "space.toml"
    folder.mkdir(parents=True, exist_ok=True)
    space.write_text(SPACES.get(dataset, SPACES["evidence-mini"]), encoding="utf-8")
    return tune(dataset, output=folder / "tune", space_file=space, budget=4, dev_fraction=fraction)


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> TuneResult:
    return _tune(tmp_path_factory.mktemp("tuned"), "evidence-mini")


def _compare(output: Path, dataset: str, systems: Path, *extra: str) -> tuple[Any, dict[str, Any]]:
    outcome = CliRunner().invoke(cli, ["compare", dataset, "--systems", str(systems), *extra, "-o", str(output)])
    assert outcome.exit_code == 0, outcome.output + outcome.stderr
    return outcome, json.loads((output / "report.json").read_text(encoding="utf-8"))


def _pick_row(report: dict[str, Any], result: TuneResult) -> dict[str, Any]:
    """The recommendation's row: the systems file's first system, or its fused row."""
    if result.recommendation.fusion is not None:
        return next(row for row in report["systems"] if row.get("fusion"))
    return report["systems"][0]


@pytest.mark.parametrize(("dataset", "fraction"), [("evidence-mini", 0.5), ("evidence-mini", 0.3), ("handbook", 0.5)])
def test_compare_on_the_tuned_data_gives_tunes_held_back_figures(tmp_path: Path, dataset: str, fraction: float) -> None:
    """The never-contradict test: the README's compare after tune evaluated all queries, half of them the dev
    queries the pick was chosen on, and called it significantly better where tune, on the held-back half, did
    not. Now compare evaluates tune's held-back queries: the same queries and systems give the same numbers."""
    result = _tune(tmp_path, dataset, fraction)
    tuned_on, test = result.report["split"], result.report["test"]
    metric = result.report["metric"]
    single = test["best_single"]
    rec = tmp_path / "tune" / "recommendation.toml"
    # Beside the best single tokenizer, tested against it, as tune tests the pick (unless the file holds it).
    listed = {result.recommendation.name} | {m.tokenizer for m in result.recommendation.members if not m.query}
    extra = ["--reference-system", single] if single in listed else ["-t", single, "--reference-system", single]
    outcome, report = _compare(tmp_path / "check", dataset, rec, *extra)
    assert report["questions"] == tuned_on["test_queries"] == test["queries"]
    assert report["judged_queries"] == test["judged_queries"]
    assert report["dataset"]["id"] == f"{result.report['dataset']['id']}[held-back]"
    assert report["tuned_split"]["queries"] == "held-back" and report["tuned_split"]["same_data"] is True
    note = f"evaluated on the {tuned_on['test_queries']} held-back queries tune did not choose on"
    assert f"note: {note}; --all-queries to include the {tuned_on['dev_queries']} dev queries" in outcome.stdout
    assert note in (tmp_path / "check" / "report.md").read_text(encoding="utf-8")
    assert note in (tmp_path / "check" / "report.html").read_text(encoding="utf-8")
    pick = _pick_row(report, result)
    found = next((item for item in test["front"] if item["candidate"] == result.recommendation.name), None)
    if found is None:  # the pick is the best single tokenizer itself
        assert pick["metrics"][metric] == test["best_single_quality"]
        return
    assert pick["metrics"][metric] == found[metric]
    reference = next(row for row in report["systems"] if row["name"] == report["reference"])
    assert reference is not pick and reference["metrics"][metric] == test["best_single_quality"]
    assert pick["significance"][metric]["p"] == found["p"]  # the same paired test on the same queries
    assert pick["significance"][metric]["delta"] == found["delta"]  # tune said +0.0322 where compare said +0.0323
    significant = "significantly better" if found["delta"] > 0 else "significantly worse"
    assert (found["p"] < 0.05) == (significant in result.paragraph)
    assert (found["p"] < 0.05) == pick["significance"][metric]["significant"]
    assert f"{found[metric]:.4f}" in result.paragraph


def test_the_recommendation_records_the_split_and_older_readers_see_only_systems(tuned: TuneResult) -> None:
    """Versions that know only [[system]] and [[fusion]] refuse any other table: the record is a comment block
    (PEP 723's form), and holds what identifies the split exactly."""
    text = (tuned.output / "recommendation.toml").read_text(encoding="utf-8")
    assert set(tomllib.loads(text)) <= {"system", "fusion"}  # what every earlier rag-eval checks
    block = text.split("# /// tuned-on\n", 1)[1].split("# ///\n", 1)[0]
    record = tomllib.loads("\n".join(line.removeprefix("# ") for line in block.splitlines()))
    data = load_dataset("evidence-mini")
    dev, held = split_ids(list(data.queries), 0.5)
    assert record == {
        "dataset": "evidence-mini",
        "checksum": data.checksum(),
        "salt": "rag-eval/split/1",
        "dev_fraction": 0.5,
        "dev_queries": len(dev),
        "held_back_queries": len(held),
        "held_back_sha256": ids_digest(held),
    }
    assert text.startswith(f"# Written by rag-eval tune. Chosen on the {len(dev)} dev queries")


def test_all_queries_evaluates_every_query_with_a_warning_as_a_file_without_the_record_does(
    tuned: TuneResult, tmp_path: Path
) -> None:
    rec = tuned.output / "recommendation.toml"
    outcome, everything = _compare(tmp_path / "all", "evidence-mini", rec, "--all-queries")
    dev = everything["tuned_split"]["dev_queries"]
    assert everything["questions"] == 24 and everything["dataset"]["id"] == "evidence-mini"
    warning = f"all 24 queries are evaluated, {dev} of them the dev queries tune chose the recommendation on"
    assert f"warning: {warning}" in outcome.stdout.replace("\n", " ")
    assert warning in (tmp_path / "all" / "report.md").read_text(encoding="utf-8")
    summary = json.loads(
        CliRunner()
        .invoke(cli, ["compare", "evidence-mini", "--systems", str(rec), "--json", "-o", str(tmp_path / "j")])
        .stdout
    )
    assert summary["tuned_split"]["queries"] == "held-back" and summary["dataset"]["id"] == "evidence-mini[held-back]"
    # The same file without the block is a plain systems file, read exactly as before: every query, no note.
    plain = tmp_path / "plain.toml"
    plain.write_text(
        "".join(line for line in rec.read_text(encoding="utf-8").splitlines(True) if not line.startswith("#")),
        encoding="utf-8",
    )
    outcome, before = _compare(tmp_path / "plain", "evidence-mini", plain)
    assert "tuned_split" not in before and "note:" not in outcome.stdout and "warning: all" not in outcome.stdout
    assert [row["metrics"] for row in before["systems"]] == [row["metrics"] for row in everything["systems"]]
    refused = CliRunner().invoke(
        cli, ["compare", "evidence-mini", "--systems", str(plain), "--all-queries", "-o", str(tmp_path / "x")]
    )
    assert "--all-queries applies to a --systems file tune wrote" in one_error(refused, alone=True)
    alone = CliRunner().invoke(
        cli, ["compare", "evidence-mini", "-t", "bigram", "--all-queries", "-o", str(tmp_path / "y")]
    )
    assert "--all-queries applies to a --systems file tune wrote" in one_error(alone, alone=True)
    assert not (tmp_path / "x").exists()


def test_on_other_data_every_query_is_evaluated_and_compare_says_where_it_was_tuned(
    tuned: TuneResult, tmp_path: Path
) -> None:
    rec = tuned.output / "recommendation.toml"
    # An export of the same data under another name is the same data (its checksum): held back as before.
    same = export_shipped("evidence-mini", tmp_path / "copy")
    _outcome, report = _compare(tmp_path / "copy-check", str(same), rec)
    assert report["tuned_split"]["queries"] == "held-back" and report["dataset"]["id"] == "copy[held-back]"
    # Other questions: nothing of them was held back.
    other = export_shipped("evidence-mini", tmp_path / "other")
    rows = [json.loads(line) for line in (other / "queries.jsonl").read_text(encoding="utf-8").splitlines()]
    (other / "queries.jsonl").write_text(
        "".join(json.dumps({**row, "text": row["text"] + " 请说明"}, ensure_ascii=False) + "\n" for row in rows),
        encoding="utf-8",
    )
    outcome, report = _compare(tmp_path / "other-check", str(other), rec)
    assert report["questions"] == 24 and report["tuned_split"]["same_data"] is False
    assert "note: the recommendation was tuned on evidence-mini, not on other: nothing of other was held back" in (
        outcome.stdout.replace("\n", " ")
    )
    # The data tune chose on, changed since (a judgement removed): every query, and a warning that dev ones favour it.
    changed_rec = _tune(tmp_path / "changed", str(same))
    qrels = same / "qrels" / "test.tsv"
    qrels.write_text("".join(qrels.read_text(encoding="utf-8").splitlines(True)[:-1]), encoding="utf-8")
    outcome, report = _compare(tmp_path / "changed-check", str(same), changed_rec.output / "recommendation.toml")
    assert report["questions"] == 24 and "tuned_split" in report
    assert "warning: copy is not the data tune chose on (its checksum differs" in outcome.stdout.replace("\n", " ")


def _with_block(tmp_path: Path, source: Path, change: Any) -> Path:
    text = source.read_text(encoding="utf-8")
    path = tmp_path / "rec.toml"
    path.write_text(change(text), encoding="utf-8")
    return path


def _set(key: str, value: str) -> Any:
    def change(text: str) -> str:
        lines = text.splitlines(True)
        return "".join(f"# {key} = {value}\n" if line.startswith(f"# {key} = ") else line for line in lines)

    return change


BAD = [
    (_set("dev_fraction", '"0.5"'), "tuned-on: dev_fraction must be a number above 0 and below 1"),
    (_set("dev_fraction", "1.0"), "dev_fraction must be a number above 0 and below 1 (such as 0.5), not 1.0"),
    (_set("dev_queries", "true"), "tuned-on: dev_queries must be a whole number, 0 or more, not true"),
    (_set("dev_queries", "-1"), "tuned-on: dev_queries must be a whole number, 0 or more, not -1"),
    (_set("held_back_queries", "[1]"), "tuned-on: held_back_queries must be a whole number"),
    (_set("checksum", '"abc"'), 'tuned-on: checksum must be a sha256 (64 lowercase hex digits), not "abc"'),
    (_set("held_back_sha256", "1"), "tuned-on: held_back_sha256 must be a sha256"),
    (_set("salt", '""'), "tuned-on: salt must be a non-empty string"),
    (_set("dataset", "{ a = 1 }"), "tuned-on: dataset must be a dataset id"),
    (lambda t: t.replace("# salt = ", "# extra = 1\n# salt = "), "tuned-on: unknown key extra; expected dataset"),
    (lambda t: "".join(x for x in t.splitlines(True) if "held_back_sha256" not in x), "missing held_back_sha256"),
    (lambda t: t.replace("# salt = ", "# salt = = "), "tuned-on: invalid TOML"),
    (lambda t: t.replace("# ///\n", "", 1), "is not closed"),
    (lambda t: t.replace("# salt = ", "\n# salt = "), "is not closed by a line '# ///'"),
    (lambda t: t + "\n# /// tuned-on\n# ///\n", "tuned-on: missing dataset"),
    (lambda t: t + "\n" + _block(t), "record the same data; expected one block per dataset"),
]


def _block(text: str) -> str:
    """The file's tuned-on block, from its opening line to its closing one."""
    start = text.index("# /// tuned-on\n")
    return text[start : text.index("# ///\n", start + 1) + len("# ///\n")]


@pytest.mark.parametrize(("change", "message"), BAD)
def test_a_malformed_record_is_one_error_naming_the_file_and_key(
    tuned: TuneResult, tmp_path: Path, change: Any, message: str
) -> None:
    rec = _with_block(tmp_path, tuned.output / "recommendation.toml", change)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# 标题\n\n正文。\n", encoding="utf-8")
    for args in (
        ["compare", "evidence-mini", "--systems", str(rec), "-o", str(tmp_path / "out")],
        ["index", "build", str(tmp_path / "docs"), "--from", str(rec), "-o", str(tmp_path / "x.sqlite")],
    ):
        if args[0] == "index" and tuned.recommendation.system is None:
            continue  # index build --from takes one system
        line = one_error(CliRunner().invoke(cli, args), alone=True)
        assert line.startswith(f"error: {rec}: ") and message in line, line
    assert not (tmp_path / "out").exists() and not (tmp_path / "x.sqlite").exists()


@pytest.mark.parametrize(
    ("key", "value"),
    [("dev_queries", "1"), ("held_back_queries", "23"), ("held_back_sha256", '"' + "0" * 64 + '"')],
)
def test_a_record_that_does_not_describe_the_data_is_one_error(
    tuned: TuneResult, tmp_path: Path, key: str, value: str
) -> None:
    """The checksum matches, but the counts or the ids the split gives do not: edited, or another split rule."""
    rec = _with_block(tmp_path, tuned.output / "recommendation.toml", _set(key, value))
    line = one_error(
        CliRunner().invoke(cli, ["compare", "evidence-mini", "--systems", str(rec), "-o", str(tmp_path / "out")]),
        alone=True,
    )
    assert f"{rec}: tuned-on: {key} is " in line and "the block does not describe this data" in line
    assert not (tmp_path / "out").exists()


def test_nothing_held_back_is_an_error_naming_all_queries(tuned: TuneResult, tmp_path: Path) -> None:
    """A split with every query in dev (possible with tune --eval-on): nothing unseen to evaluate on that data."""
    data = load_dataset("evidence-mini")
    assert split_ids(list(data.queries), 0.9999)[1] == []
    rec = _with_block(
        tmp_path,
        tuned.output / "recommendation.toml",
        lambda t: _set("held_back_sha256", json.dumps(ids_digest([])))(
            _set("held_back_queries", "0")(
                _set("dev_queries", str(len(data.queries)))(_set("dev_fraction", "0.9999")(t))
            )
        ),
    )
    refused = CliRunner().invoke(cli, ["compare", "evidence-mini", "--systems", str(rec), "-o", str(tmp_path / "o")])
    assert "tune held back none of evidence-mini's 24 queries" in one_error(refused, alone=True)
    assert "--all-queries" in refused.stderr
