"""rag-eval judge: grade the systems' pooled results in a local page, in the order that decides fastest."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from . import cli
from .params import TEXT, builder_option, questions_option, refuse_given, tokenizers_option
from .progress import Bars

if TYPE_CHECKING:
    from ..eval.judging.judge import OracleResult

#: Options of the judging page that a replay (--oracle) has no use for, and the replay's own.
PAGE_ONLY = ("port", "idle_timeout", "assessor")
REPLAY_ONLY = ("samples", "sample_queries", "seed", "as_json")


@cli.command("judge")
@click.argument("source", metavar="SOURCE", type=TEXT)
@questions_option("The questions: a UTF-8 text file with one per line, or queries.jsonl (_id, text).", required=True)
@tokenizers_option("A system's tokenizer (repeat). Default: every available tokenizer.")
@builder_option()
@click.option(
    "--depth", type=int, default=10, show_default=True, help="Results pooled per system and question (at most 1000)."
)
@click.option(
    "-o",
    "--output",
    type=click.Path(),  # a str: pathlib would drop a trailing '/', which the library refuses for a file
    help="The judgments file (TREC qrels; its log JUDGMENTS.jsonl beside it); an existing one of the same "
    "pool is resumed; outside SOURCE's folder. With --oracle: a new JSON file for the replay (optional).",
)
@click.option(
    "--assessor", type=TEXT, help="Your name or id, recorded with every grade in the log (not with --oracle)."
)
@click.option(
    "--port",
    type=int,
    default=0,
    help="Port of the judging page on 127.0.0.1 (not with --oracle). Default: a free one.",
)
@click.option(
    "--idle-timeout",
    type=float,
    default=240.0,
    show_default=True,
    help="Stop after this many minutes without a request from the page; 0 never stops (not with --oracle).",
)
@click.option(
    "--method",
    metavar="NAME",
    type=TEXT,
    help="Judging order: decisive (default: what can most change the winner first) or naive (every "
    "system's rank 1, then rank 2, ...; the baseline). An unknown name lists the known ones.",
)
@click.option(
    "--oracle",
    "oracle_qrels",
    type=click.Path(path_type=Path),
    help="Replay the order with grades read from these qrels instead of a person, and report when the "
    "pick equals the full qrels' winner.",
)
@click.option("--samples", type=int, default=200, show_default=True, help="--oracle: random samples of questions.")
@click.option(
    "--sample-queries", type=int, default=50, show_default=True, help="--oracle: judged questions per sample."
)
@click.option("--seed", type=int, default=0, show_default=True, help="--oracle: seed of the samples (0 or more).")
@click.option("--json", "as_json", is_flag=True, help="--oracle: print the replay as JSON.")
def judge_cmd(
    source: str,
    questions: Path,
    tokenizers: tuple[str, ...],
    builder: str | None,
    depth: int,
    output: str | None,
    assessor: str | None,
    port: int,
    idle_timeout: float,
    method: str | None,
    oracle_qrels: Path | None,
    samples: int,
    sample_queries: int,
    seed: int,
    as_json: bool,
) -> None:
    """Pool every system's top results for your questions and grade them 0/1/2 in a local web page.

    Builds (or reuses) one index per system, pools each system's top --depth results per question and
    serves a judging page on 127.0.0.1 (the printed URL holds a token made for this run). Passages come in the
    order that most helps decide which system is best; the page says when the decision is settled.
    Every grade is appended to the judgments file at once (TREC qrels: compare --qrels and evaluate read
    it); running the same command again resumes. Keys: 0/1/2 grade, j/k forward/back, u undo, s skip,
    m a Markdown passage's source. Ctrl-C stops the server.

    \b
    Examples:
      rag-eval judge handbook --queries questions.txt -o handbook.qrels
      rag-eval judge docs/ --queries questions.txt -t bigram -t jieba --assessor ana -o mine.qrels
      rag-eval compare docs/ --queries questions.txt --qrels mine.qrels -o out/mine
      rag-eval judge handbook --queries docs/examples/handbook-questions.txt -t bigram -t unigram \\
          --oracle docs/examples/handbook-questions.qrels --sample-queries 25 -o replay.json
    """
    ctx = click.get_current_context()
    if oracle_qrels is not None:
        # A replay serves no page and records no grade: these would be silently ignored.
        refuse_given(ctx, PAGE_ONLY, "only to a judging page, not to --oracle")
        _replay(
            source,
            questions,
            oracle_qrels,
            tokenizers,
            builder,
            depth,
            method,
            samples,
            sample_queries,
            seed,
            output=output,
            as_json=as_json,
        )
        return
    refuse_given(ctx, REPLAY_ONLY, "only with --oracle")
    if output is None:
        raise click.UsageError("missing option '-o' / '--output' (the judgments file)")
    _serve_page(source, questions, output, tokenizers, builder, depth, method, assessor, port, idle_timeout)


def _serve_page(
    source: str,
    questions: Path,
    output: str,
    tokenizers: tuple[str, ...],
    builder: str | None,
    depth: int,
    method: str | None,
    assessor: str | None,
    port: int,
    idle_timeout: float,
) -> None:
    """Judge on the page until it stops; the progress bars give way to the page's address once it is served."""
    from ..eval.judging.judge import judge

    bars = Bars()
    progress = lambda system, phase, done, total: bars(f"{system[:40]} {phase}", done, total)  # noqa: E731

    def announce(url: str) -> None:
        bars.__exit__()
        click.echo(f"Judging page (Ctrl-C to stop): {url}")

    with bars:
        result = judge(
            source,
            questions,
            output=output,
            tokenizers=tokenizers,
            builder=builder,
            depth=depth,
            method=method,
            assessor=assessor,
            port=port,
            idle_timeout=idle_timeout * 60,
            announce=announce,
            progress=progress,
        )
    click.echo(f"{result.decision}", err=True)
    click.echo(f"stopped ({result.stopped}); {result.judged} of {result.pooled} judged in {result.path}", err=True)


def _replay(
    source: str,
    questions: Path,
    qrels: Path,
    tokenizers: tuple[str, ...],
    builder: str | None,
    depth: int,
    method: str | None,
    samples: int,
    sample_queries: int,
    seed: int,
    *,
    output: str | None,
    as_json: bool,
) -> None:
    """Replay the judging order with the grades of ``qrels`` (--oracle), with progress bars, and print it."""
    from ..eval.judging.judge import oracle

    with Bars() as bars:
        result = oracle(
            source,
            questions,
            qrels,
            tokenizers=tokenizers,
            builder=builder,
            depth=depth,
            method=method,
            samples=samples,
            sample_queries=sample_queries,
            seed=seed,
            progress=lambda system, phase, done, total: bars(f"{system[:40]} {phase}", done, total),
            output=output,
        )
    _print_replay(result, output, as_json)


def _print_replay(result: OracleResult, output: str | None, as_json: bool) -> None:
    """The replay as JSON, or as a line per judgment (the pick, whether it is the winner, how sure) and the
    study's correct-pick rates."""
    import dataclasses
    import json

    from ..files.textio import counted

    if output is not None:
        click.echo(f"wrote {output}", err=True)
    if as_json:
        click.echo(json.dumps(dataclasses.asdict(result), ensure_ascii=False, indent=2))
        return
    winners = " and ".join(result.winners)
    click.echo(
        f"Oracle replay ({result.method} order): {counted(result.questions, 'question')} ({result.judged_questions} "
        f"with a relevant passage), {counted(len(result.systems), 'system')}, "
        f"{counted(result.pooled, 'pooled passage')}; the full qrels' winner: {winners}"
    )
    click.echo(f"{'judged':>6}  {'pick':<24} {'= winner':<8}  {'confidence':>10}  state")
    for step in result.steps:
        state = "certain" if step["certain"] else "settled" if step["settled"] else ""
        click.echo(
            f"{step['judged']:>6}  {step['pick'][:24]:<24} {'yes' if step['right'] else 'no':<8}  "
            f"{step['confidence']:>10.2f}  {state}"
        )
    if result.study is not None:
        study = result.study
        rates = "; ".join(f"after {n}: {rate:.0%}" for n, rate in study["correct"].items())
        click.echo(
            f"Over {counted(study['samples'], 'random sample')} of {counted(study['sample_queries'], 'question')} "
            f"(seed {study['seed']}), "
            f"the pick equals the winner {rates}"
        )
