"""rag-eval segeval: segmentation accuracy against SIGHAN 2005 gold."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ..eval.segeval import DEFAULT_RULE, UNCOVERED_RULES, WORDS, SegEvalReport
from . import cli
from .params import TEXT, tokenizers_option
from .progress import Bars

DEFAULT_DATA = Path("..") / "shared" / "datasets" / "segmentation"


def _default_data() -> Path:
    """``../shared/datasets/segmentation`` from the current folder, else from the project's own folder (a
    checkout: the README's ``rag-eval segeval`` works from anywhere)."""
    if DEFAULT_DATA.is_dir():
        return DEFAULT_DATA
    import rag_eval

    beside = Path(rag_eval.__file__).resolve().parents[1] / DEFAULT_DATA
    return beside if beside.is_dir() else DEFAULT_DATA


@cli.command("segeval")
@tokenizers_option(
    "A strategy to score (repeat). Default: every registered one, with its segmentation options "
    "(jieba:mode=precise); strategies whose tokens are not a segmentation are listed, not scored.",
    name="specs",
)
@click.option(
    "--data",
    type=click.Path(path_type=Path),
    help="Folder with NAME_test.utf8, NAME_test_gold.utf8 and NAME_training_words.utf8 per test set. Default: "
    f"{DEFAULT_DATA} from the current folder, else from the project's folder.",
)
@click.option("-s", "--set", "sets", multiple=True, metavar="NAME", type=TEXT, help="Only this test set (repeat).")
@click.option(
    "--uncovered",
    type=click.Choice(list(UNCOVERED_RULES)),
    default=DEFAULT_RULE,
    show_default=True,
    help="How characters no token covers (dropped punctuation) count: one word each (as the official scorer "
    "counts punctuation), one word per run, or left out of gold and output. The table shows F1 under the others too.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON: every rule's scores, timings, checksums.")
def segeval_cmd(
    specs: tuple[str, ...], data: Path | None, sets: tuple[str, ...], uncovered: str, as_json: bool
) -> None:
    """Score word segmentation against SIGHAN 2005 gold: word precision, recall, F1, OOV and IV recall.

    A word is correct when its character span equals a gold word's (the bakeoff's definitions, micro-averaged
    over each test file); a gold word is OOV when the set's training word list lacks it. unigram, one word per
    Han character, is scored as a baseline.

    \b
    Examples:
      rag-eval segeval
      rag-eval segeval -t jieba:mode=precise -t pkuseg --set pku
      rag-eval segeval --data ~/icwb2-data/flat --uncovered skip --json
    """
    from ..eval.segeval import evaluate_segmentation

    with Bars() as progress:
        report = evaluate_segmentation(data or _default_data(), specs, sets=sets, rule=uncovered, progress=progress)
    if as_json:
        click.echo(json.dumps(report.as_dict(), ensure_ascii=False, indent=2))
        return
    print_report(report)


def print_report(report: SegEvalReport) -> None:
    """One table per test set, the strategies not scored under it, then model load times."""
    others = [rule for rule in UNCOVERED_RULES if rule != report.rule]
    headers = ["strategy", "kind", "P", "R", "F1", "OOV-R", "IV-R", *(f"F1 {rule}" for rule in others), "seconds"]
    for number, result in enumerate(report.sets):
        if number:
            click.echo()
        oov_rate = result.oov_words / result.gold_words if result.gold_words else 0.0
        click.echo(
            f"{result.name.upper()}: {result.lines} lines, {result.characters} characters, {result.gold_words} gold "
            f"words, OOV rate {oov_rate:.3f}; uncovered characters: {UNCOVERED_RULES[report.rule]}"
        )
        rows = []
        for scored in result.scored:
            main = scored.scores[report.rule]
            rows.append(
                [
                    scored.label,
                    "words" if scored.kind == WORDS else "baseline",
                    *(
                        _ratio(value)
                        for value in (main.precision, main.recall, main.f1, main.oov_recall, main.iv_recall)
                    ),
                    *(_ratio(scored.scores[rule].f1) for rule in others),
                    f"{scored.tokenize_seconds:.1f}",
                ]
            )
        widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=True)]
        for row in [headers, *rows] if rows else []:
            cells = [f"{row[0]:<{widths[0]}}", f"{row[1]:<{widths[1]}}"]
            cells += [f"{cell:>{width}}" for cell, width in zip(row[2:], widths[2:], strict=True)]
            click.echo("  ".join(cells))
        for item in result.not_scored:
            click.echo(f"{item.label}: not scored, {item.reason}" + (f"; {item.hint}" if item.hint else ""))
    for item in report.skipped:
        click.echo(f"{item.label}: skipped, {item.reason}" + (f"; {item.hint}" if item.hint else ""))
    loads = [f"{label} {seconds:.1f} s" for label, seconds in report.load_seconds.items() if seconds >= 0.05]
    if report.sets and report.sets[0].scored:
        click.echo("\nseconds: tokenizing the set line by line" + (f"; loading: {', '.join(loads)}" if loads else ""))


def _ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"
