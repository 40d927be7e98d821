"""Judging with an oracle: replay a judging order with grades read from existing qrels, and measure how often
the pick equals the winner under the full qrels, over random samples of queries.

The winner is the system with the highest mean nDCG@10 (trec_eval: gain = grade, ideal ranking from every
judged passage of the query, unjudged = not relevant) over the sample's queries with a positive grade (the same
winner as over every judged query, as compare averages: a query without a relevant passage gives every system 0);
samples are drawn from the queries with a relevant passage. When several tie exactly, picking any of them counts
as correct. A pooled passage absent from the qrels gets grade 0.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import RagEvalError
from ...files.outputs import write_text_atomic
from ...files.textio import counted, shown
from ...records import Progress
from ..metrics.measures import ranked_ids, relevant_queries
from .selection import DECIDING, DEFAULT_SAMPLES, METHODS, Runs, SelectionError, Selector

CUT = 10
#: Judgment counts the study reports the correct-pick rate at.
CHECKPOINTS = (50, 100, 150)
#: Ties of mean nDCG@10 closer than this are exact ties (sums in another order differ in the last bits).
TIE = 1e-9
#: The phase a sampling study reports its progress under: samples done of the samples to run.
STUDY_PHASE = "samples"


def per_query_ndcg(runs: Runs, qrels: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, float]]:
    """nDCG@10 per system and judged query (a positive grade), trec_eval's definition; a missing query is 0."""
    out: dict[str, dict[str, float]] = {system: {} for system in runs}
    for query, grades in qrels.items():
        ideal = sorted((g for g in grades.values() if g > 0), reverse=True)[:CUT]
        idcg = sum(g / math.log2(r + 2) for r, g in enumerate(ideal))
        if idcg <= 0:
            continue
        for system, by_query in runs.items():
            docs = list(by_query.get(query, ()))[:CUT]
            dcg = sum(grades.get(d, 0) / math.log2(r + 2) for r, d in enumerate(docs))
            out[system][query] = dcg / idcg
    return out


def winners(per_query: Mapping[str, Mapping[str, float]], queries: Sequence[str]) -> frozenset[str]:
    """The systems with the highest mean nDCG@10 over ``queries`` (all of them when they tie exactly)."""
    means = {s: sum(v.get(q, 0.0) for q in queries) / max(len(queries), 1) for s, v in per_query.items()}
    best = max(means.values())
    return frozenset(s for s, m in means.items() if m >= best - TIE)


@dataclass(frozen=True)
class Step:
    """The state after one more judgment of a replay."""

    judged: int
    pick: str  # the selector's leader
    judged_pick: str  # the best system with unjudged passages counted as not relevant
    confidence: float
    settled: bool
    certain: bool


@dataclass(frozen=True)
class Replay:
    """One replay: the full-qrels winners of its queries and the state after each judgment."""

    queries: tuple[str, ...]
    winners: frozenset[str]
    #: the winners had every pooled passage been judged (the best any judging order can reach): they differ
    #: from ``winners`` when passages outside the pool are relevant, which changes the ideal DCG
    pool_winners: frozenset[str]
    steps: list[Step] = field(default_factory=list)


def replay(
    runs: Runs,
    qrels: Mapping[str, Mapping[str, int]],
    *,
    queries: Sequence[str] | None = None,
    method: str = METHODS[-1],
    budget: int = 150,
    until_settled: int = 0,
    target: float = 0.95,
    seed: int = 0,
    samples: int = DEFAULT_SAMPLES,
    decide: bool = True,
) -> Replay:
    """Judge ``budget`` pooled passages in the selector's order with grades from ``qrels`` (absent = 0),
    going on up to ``until_settled`` judgments while the decision is not yet settled."""
    chosen = sorted(queries) if queries is not None else sorted({q for r in runs.values() for q in r})
    wanted = set(chosen)
    restricted = {s: {q: list(d) for q, d in r.items() if q in wanted} for s, r in runs.items()}
    selector = Selector(restricted, method=method, target=target, seed=seed, samples=samples)
    judged_queries = [q for q in chosen if any(g > 0 for g in qrels.get(q, {}).values())]
    pooled = {q: {d: g for d, g in qrels.get(q, {}).items() if d in docs} for q, docs in selector.pool.items()}
    pool_judged = [q for q in chosen if any(g > 0 for g in pooled.get(q, {}).values())]
    out = Replay(
        tuple(chosen),
        winners(per_query_ndcg(restricted, qrels), judged_queries),
        winners(per_query_ndcg(restricted, pooled), pool_judged),
    )
    systems = selector.systems
    settled = False
    while len(out.steps) < max(budget, until_settled):
        if len(out.steps) >= budget and (settled or not decide):
            break
        pair = selector.next()
        if pair is None:
            break
        selector.record(pair[0], pair[1], int(qrels.get(pair[0], {}).get(pair[1], 0)))
        flat = selector.judged_scores()
        judged_pick = max(systems, key=lambda s: (flat[s], -systems.index(s)))
        if decide:
            decision = selector.decision()
            settled = decision.settled
            step = Step(
                len(out.steps) + 1, decision.leader, judged_pick, decision.confidence, settled, decision.certain
            )
        else:
            step = Step(len(out.steps) + 1, judged_pick, judged_pick, 0.0, False, False)
        out.steps.append(step)
    return out


def sampling_study(
    runs: Runs,
    qrels: Mapping[str, Mapping[str, int]],
    *,
    samples: int = 200,
    sample_queries: int = 50,
    methods: Sequence[str] = METHODS,
    budget: int = 150,
    until_settled: int = 300,
    target: float = 0.95,
    seed: int = 0,
    mc_samples: int = DEFAULT_SAMPLES,
    first: int = 0,
    count: int | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Replay every method on ``samples`` seeded random samples of ``sample_queries`` judged queries; summarise
    how often the pick equals the full-qrels winner, and how calibrated the settled signal is.

    ``progress("samples", done, total)`` is called before the first sample and after each one (every method
    replayed), since a study of the default 200 samples runs for minutes; it only observes, so the study is the
    same with or without it."""
    judged = _study_queries(qrels, samples, sample_queries, methods)
    rng = random.Random(seed)
    draws = [sorted(rng.sample(judged, sample_queries)) for _ in range(samples)]
    chosen = range(first, samples if count is None else min(samples, first + count))
    records: dict[str, list[dict[str, Any]]] = {m: [] for m in methods}
    if progress is not None:
        progress(STUDY_PHASE, 0, len(chosen))
    for done, number in enumerate(chosen, start=1):
        for method in methods:
            result = replay(
                runs,
                qrels,
                queries=draws[number],
                method=method,
                budget=budget,
                until_settled=until_settled,
                target=target,
                seed=seed + number,
                samples=mc_samples,
                decide=method in DECIDING,  # the baseline picks by the judged passages only
            )
            records[method].append(_sample_record(number, result))
        if progress is not None:
            progress(STUDY_PHASE, done, len(chosen))
    return {
        "samples": samples,
        "sample_queries": sample_queries,
        "budget": budget,
        "until_settled": until_settled,
        "target": target,
        "seed": seed,
        "mc_samples": mc_samples,
        "judged_queries": len(judged),
        "records": records,
    }


def _study_queries(
    qrels: Mapping[str, Mapping[str, int]], samples: int, sample_queries: int, methods: Sequence[str]
) -> list[str]:
    """The judged queries a study draws its samples from, its options refused before any replay."""
    if type(samples) is not int or samples < 1 or type(sample_queries) is not int or sample_queries < 1:
        raise RagEvalError("samples and sample queries must be whole numbers of at least 1")
    for method in methods:
        if method not in METHODS:
            raise SelectionError(f"unknown judging order {shown(method)}; choose from: {', '.join(METHODS)}")
    judged = relevant_queries(qrels)
    if len(judged) < sample_queries:
        raise RagEvalError(
            f"{counted(len(judged), 'judged query', 'judged queries')}, fewer than the {sample_queries} a sample needs"
        )
    return judged


def _sample_record(number: int, result: Replay) -> dict[str, Any]:
    """One sample's replay as the study records it: its winners and, per judgment, the step as a compact row
    (judged, pick, judged pick, confidence, settled, certain) that :func:`summarise` reads."""
    return {
        "sample": number,
        "winners": sorted(result.winners),
        "pool_winners": sorted(result.pool_winners),
        "steps": [
            [s.judged, s.pick, s.judged_pick, round(s.confidence, 4), s.settled, s.certain] for s in result.steps
        ],
    }


def _share(hits: Sequence[bool]) -> float | None:
    return sum(hits) / len(hits) if hits else None


def summarise(study: Mapping[str, Any], checkpoints: Sequence[int] = CHECKPOINTS) -> dict[str, Any]:
    """Correct-pick rates at the checkpoints and per judgment, and the settled signal's calibration."""
    out: dict[str, Any] = {}
    budget = study["budget"]
    for method, records in study["records"].items():
        pick: list[list[bool]] = [[] for _ in range(budget)]
        judged_pick: list[list[bool]] = [[] for _ in range(budget)]
        pool_pick: list[list[bool]] = [[] for _ in range(budget)]
        saying: list[list[bool]] = [[] for _ in range(budget)]  # per judgment: right, where it says settled
        first: list[tuple[int, float, bool, bool]] = []
        claims: list[tuple[float, bool]] = []
        for record in records:
            win, pool_win, steps = set(record["winners"]), set(record["pool_winners"]), record["steps"]
            for k in range(budget):
                step = steps[min(k, len(steps) - 1)]  # a pool judged completely keeps its last state
                pick[k].append(step[1] in win)
                judged_pick[k].append(step[2] in win)
                pool_pick[k].append(step[1] in pool_win)
                if step[4]:
                    saying[k].append(step[1] in win)
            claims += [(step[3], step[1] in win) for step in steps if step[4]]
            hit = next((step for step in steps if step[4]), None)
            if hit is not None:
                first.append((hit[0], hit[3], hit[1] in win, hit[5]))
        n = len(records)
        bins = {}
        for low, high in ((0.0, 0.97), (0.97, 0.99), (0.99, 1.0), (1.0, 1.01)):
            inside = [(c, r) for c, r in claims if low <= c < high]
            if inside:
                bins[f"{low:.2f}-{min(high, 1.0):.2f}"] = {
                    "claims": len(inside),
                    "claimed": statistics.mean(c for c, _ in inside),
                    "right": _share([r for _, r in inside]),
                }
        settled_at = sorted(f[0] for f in first) + [math.inf] * (n - len(first))
        median = statistics.median(settled_at) if settled_at else math.inf
        out[method] = {
            "samples": n,
            "correct": {str(c): _share(pick[c - 1]) for c in checkpoints if c <= budget},
            "correct_judged_pick": {str(c): _share(judged_pick[c - 1]) for c in checkpoints if c <= budget},
            "correct_pool_winner": {str(c): _share(pool_pick[c - 1]) for c in checkpoints if c <= budget},
            "pool_winner_is_winner": _share([bool(set(r["winners"]) & set(r["pool_winners"])) for r in records]),
            "curve": [_share(v) for v in pick],
            "curve_judged_pick": [_share(v) for v in judged_pick],
            "settled_share_curve": [len(v) / n if n else 0.0 for v in saying],
            "settled_right_curve": [_share(v) for v in saying],
            "settled_samples": len(first),
            "settled_by": {str(c): sum(f[0] <= c for f in first) / n for c in checkpoints},
            "settled_median_judgments": None if math.isinf(median) else median,
            "first_settled_right": _share([f[2] for f in first]),
            "first_settled_claimed": statistics.mean(f[1] for f in first) if first else None,
            "first_settled_certain": sum(f[3] for f in first),
            "settled_steps": len(claims),
            "settled_steps_right": _share([r for _, r in claims]),
            "settled_steps_claimed": statistics.mean(c for c, _ in claims) if claims else None,
            "calibration": bins,
        }
    return out


def read_runs(paths: Sequence[str | Path]) -> dict[str, dict[str, list[str]]]:
    """Runs from TREC run files, named by file stem without the suffix every stem shares (``_sections_or``)."""
    from ..datasets.trec import read_run

    stems = [Path(p).stem for p in paths]
    if len(set(stems)) != len(stems):
        raise RagEvalError("two run files have the same name")
    common = ""
    if len(stems) > 1:
        reversed_stems = [s[::-1] for s in stems]
        while all(
            len(s) > len(common) + 1 and s[len(common)] == reversed_stems[0][len(common)] for s in reversed_stems
        ):
            common += reversed_stems[0][len(common)]
        common = common[: common.rfind("_") + 1] if "_" in common else ""
    runs: dict[str, dict[str, list[str]]] = {}
    for path, stem in zip(paths, stems, strict=True):
        name = stem[: len(stem) - len(common)] if common else stem
        runs[name] = ranked_ids(read_run(path))
    return runs


def _a_study(path: Path) -> str | None:
    """None (may be replaced) when ``path`` holds a study or records this module wrote."""
    try:
        head = path.read_text(encoding="utf-8")[:200]
    except (OSError, UnicodeDecodeError):
        return "it cannot be read"
    return None if head.startswith(('{\n "samples"', '{"naive"', '{"decisive"')) else "it is not a judging study"


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m rag_eval.eval.judging.oracle --qrels Q --out F RUN...``: the sampling study as JSON."""
    parser = _parser()
    args = parser.parse_args(argv)
    if not args.charts and (not args.qrels or not args.out):
        parser.error("--qrels and --out are needed to run a study")
    # Bad input (a study file that is not UTF-8 or not JSON, a run, qrels, an output refused) ends in one line.
    try:
        if args.charts:
            print(_draw_studies(args.runs, args.charts), end="")
        else:
            _write_study(args, argv if argv is not None else sys.argv[1:])
    except RagEvalError as exc:
        parser.exit(1, f"error: {exc}\n" + (f"hint: {exc.hint}\n" if exc.hint else ""))
    except OSError as exc:  # a file system problem not anticipated (a charts folder that does not exist)
        where = f": {exc.filename}" if exc.filename else ""
        parser.exit(1, f"error: {exc.strerror or exc}{where}\n")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("runs", nargs="+", help="run files; with --charts, study JSON files")
    parser.add_argument("--charts", help="draw the studies given as arguments into this folder, print tables")
    parser.add_argument("--qrels")
    parser.add_argument("--out", help="the study's settings and summary (JSON)")
    parser.add_argument("--records", help="also every replay, judgment by judgment (JSON, large)")
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--sample-queries", type=int, default=50)
    parser.add_argument("--budget", type=int, default=150)
    parser.add_argument("--until-settled", type=int, default=300)
    parser.add_argument("--mc-samples", type=int, default=DEFAULT_SAMPLES)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--count", type=int, default=None)
    parser.add_argument("--methods", default=",".join(METHODS))
    return parser


def _write_study(args: argparse.Namespace, argv: Sequence[str]) -> None:
    """Run the study the arguments describe; write its settings and summary to ``--out`` (and every replay to
    ``--records``)."""
    from ..datasets.trec import read_any_qrels

    study = sampling_study(
        read_runs(args.runs),
        read_any_qrels(args.qrels),
        samples=args.samples,
        sample_queries=args.sample_queries,
        methods=args.methods.split(","),
        budget=args.budget,
        until_settled=args.until_settled,
        seed=args.seed,
        mc_samples=args.mc_samples,
        first=args.first,
        count=args.count,
    )
    records = study.pop("records")
    study["summary"] = summarise({**study, "records": records})
    study["command"] = "python -m rag_eval.eval.judging.oracle " + " ".join(argv)
    write_text_atomic(args.out, json.dumps(study, indent=1) + "\n", owned=_a_study, what="study")
    if args.records:
        write_text_atomic(args.records, json.dumps(records, separators=(",", ":")), owned=_a_study, what="records")


def _draw_studies(names: Sequence[str], folder: str) -> str:
    """Draw the studies in the files ``names`` into ``folder``; their tables as Markdown."""
    from ...files.textio import read_json
    from .oracle_report import render_tables, write_charts

    studies = {}
    for name in names:
        # The project's JSON reader: not UTF-8, bad JSON, a key given twice, limits: one error naming the file.
        study = read_json(name, RagEvalError)
        try:
            render_tables({Path(name).stem: study})  # what the tables and charts read is there
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise RagEvalError(
                f"{name}: not a judging study ({type(exc).__name__}: {exc})",
                hint="give the JSON files this module writes with --out",
            ) from None
        studies[Path(name).stem] = study
    try:
        write_charts(studies, folder)
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise RagEvalError(f"the studies cannot be drawn ({type(exc).__name__}: {exc})") from None
    return render_tables(studies)


if __name__ == "__main__":
    main()
