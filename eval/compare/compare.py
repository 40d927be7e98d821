"""``rag-eval compare``: every system on one dataset, side by side, with significance and costs."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ...builders import get_builder
from ...engines.base import DEFAULT_ENGINE, get_engine, written_engine
from ...errors import RagEvalError
from ...files.outputs import recorded_name, refuse_inside_source
from ...files.textio import control_character
from ...index.locks import in_use_scope
from ...index.processing import QueryProcessing
from ...tokenizers import get_tokenizer, written_spec
from ..datasets.formats import dataset_builder, load_dataset
from ..datasets.records import SYNTHETIC_KIND, Dataset
from ..datasets.shipped import read_from
from ..datasets.sources import check_judgments, check_trec_ids, source_dataset
from ..datasets.split_record import ALL_QUERIES, evaluated_queries
from ..datasets.trec import read_any_qrels, read_run
from ..metrics.measures import (
    DEFAULT_METRICS,
    RankedDoc,
    check_qrels,
    is_quality,
    judged_queries,
    metric_names,
    parse_metric,
    relevant_queries,
)
from ..metrics.significance import PERMUTATIONS, SEED
from ..reporting.report import check_output, write_outputs
from .agreement import label_free
from .fusion import Fusion, fuse_runs, fused_row, fused_systems, parse_fusion
from .gate import (
    DEFAULT_TOLERANCE,
    REPORT_SCHEMA,
    GateResult,
    check,
    check_baseline_target,
    check_tolerance,
    load_baseline,
    stage_baseline,
)
from .latency import DEFAULT_REPEAT, RESAMPLES, check_repeat, intervals_and_pairs, load_average
from .provenance import command_line as command_line
from .provenance import environment
from .rows import check_units, count_tokens_per_passage, scored_run, system_row
from .runner import WARMUP, System, SystemRun, check_builder, corpus_source
from .statistics import BOOTSTRAP as BOOTSTRAP
from .statistics import DEFAULT_REFERENCE as DEFAULT_REFERENCE
from .statistics import bootstrap_ci, by_query_kind, engine_agreement, gains_table, reference_system, significance
from .systems import MAX_SYSTEMS_FILE_BYTES as MAX_SYSTEMS_FILE_BYTES
from .systems import OutsideRun, Skipped, check_mode, default_systems, read_systems_file
from .systems import load_systems_file as load_systems_file
from .systems import load_systems_toml as load_systems_toml
from .systems import one_system as one_system
from .timing import run_systems

RECALL_CURVE = (1, 2, 3, 5, 10, 20, 50, 100)

#: ``progress(system, phase, done, total)``: a comparison reports each system's build and queries.
SystemProgress = Callable[[str, str, int, int], None]


def compare(
    dataset: Dataset,
    systems: list[System],
    *,
    metrics: list[str] | None = None,
    reference: str | None = None,
    outside: list[OutsideRun] | None = None,
    no_text: bool = False,
    progress: SystemProgress | None = None,
    skipped: list[Skipped] | None = None,
    fusions: list[Fusion] | None = None,
    repeat: int = DEFAULT_REPEAT,
) -> tuple[dict[str, Any], dict[str, list[RankedDoc]]]:
    """Run every system, score it, test it against the reference; returns the report and the runs.

    Each question runs ``repeat`` times per system and its time is the fastest (:mod:`.latency`); the search
    p50 and p95 get 95% intervals, every pair of systems a statement whether their latencies can be told apart,
    and the environment the machine's load average at the start and the end.

    Everything that can be refused is refused before the first index is built: metric names, tokenizers,
    a builder that cannot read the dataset's layout, qrels with invalid grades or no judged query,
    unreadable outside runs and fusions of systems that are not compared. A system that returns ids the
    dataset's corpus does not have (a unit mismatch) is an error rather than a row of zeros. A fused
    system (``fusions``) is a row like any other, made from its members' runs after they have run.
    """
    started_in = environment()  # the commit and time the run started from, not where the tree is at its end
    started_in["load_average"] = {"start": load_average()}
    repeat = check_repeat(repeat)
    metrics = metric_names(metrics or DEFAULT_METRICS)  # canonical spellings, each once
    check_trec_ids(dataset)
    if not systems and not outside:
        raise RagEvalError("no systems to compare", hint="name tokenizers with -t SPEC, or install one")
    default_builder = dataset_builder(dataset)
    default_mode = dataset.meta.get("mode") or "or"
    systems = [
        System(
            written_spec(s.tokenizer),
            s.builder or default_builder,
            s.mode or default_mode,
            QueryProcessing.parse(s.query).written if s.query else "",
            written_engine(s.engine or DEFAULT_ENGINE),
        )
        for s in systems
    ]
    for system in systems:
        tokenizer = get_tokenizer(system.tokenizer)
        tokenizer.check_available()
        builder = get_builder(system.builder)
        check_builder(dataset, builder)
        check_mode(system.mode)
        get_engine(system.engine).check(tokenizer, builder, system.mode, system.name)
    fused = fused_systems(fusions or [], {s.name: s.tokenizer for s in systems}, [r.name for r in outside or []])
    names = [system.name for system in systems] + [run.name for run in outside or []] + [f[1] for f in fused]
    for name in names:
        # A name is a column of per_query.tsv and a line of the reports: a tab or line break would split them.
        bad = control_character(name)
        if bad is not None or not name.strip():
            raise RagEvalError(
                f"system name {name!r} is empty or holds a control character (a tab or line break would split "
                "per_query.tsv's columns and the report's lines)",
                hint="give --run and [[system]] names of visible characters",
            )
    repeated = sorted(name for name, times in Counter(names).items() if times > 1)  # count() per name: quadratic
    if repeated:
        # Rows, runs and per-query values are keyed by name: a second one would silently replace the first.
        raise RagEvalError(f"system {repeated[0]!r} is given twice", hint="give each system and --run a distinct name")
    qrels = dataset.qrel_list()
    checked = check_qrels(qrels)
    judged_ids = judged_queries(checked)
    relevant = bool(relevant_queries(checked))
    if not relevant and dataset.meta.get("format") != "source":
        raise RagEvalError(
            f"dataset {dataset.id!r} has no relevant document (no qrel with a positive grade): every metric would be 0",
            hint="check the dataset's qrels",
        )
    if not relevant:  # a knowledge base and questions without judgments: what needs no labels
        metrics, judged_ids = [], []
    outside_docs = [(run, read_run(run.path)) for run in outside or []]
    corpus_ids = set(dataset.corpus)
    curve = [f"R@{k}" for k in RECALL_CURVE] if metrics else []
    runs: dict[str, list[RankedDoc]] = {}
    measured: dict[str, SystemRun] = {}
    rows: list[dict[str, Any]] = []
    per_query: dict[str, dict[str, dict[str, float]]] = {}
    with in_use_scope():  # each system's cached index, until its passages are counted: `cache clear` leaves it
        callback = (lambda system, phase, done, total: progress(system.name, phase, done, total)) if progress else None
        results = run_systems(dataset, systems, progress=callback, repeat=repeat)
        for system, result in zip(systems, results, strict=True):
            tokens_per_passage = count_tokens_per_passage(result.index_path)
            check_units(result.run, corpus_ids, system.name, dataset)
            means, values = scored_run(qrels, result.run, metrics + curve, judged_ids)
            runs[system.name] = result.run
            measured[system.name] = result
            per_query[system.name] = values
            rows.append(system_row(dataset, system, result, means, values, metrics, curve, tokens_per_passage))
    for run, docs in outside_docs:
        check_units(docs, corpus_ids, run.name, dataset)
        means, values = scored_run(qrels, docs, metrics + curve, judged_ids)
        runs[run.name] = docs
        per_query[run.name] = values
        rows.append(
            {
                "name": run.name,
                "tokenizer": f"outside run {run.path.name}",
                "builder": "",
                "mode": "",
                "metrics": {m: round(means[m], 4) for m in metrics},
                "ci95": {m: bootstrap_ci([values[q][m] for q in values]) for m in metrics},
                "recall_curve": {m: round(means[m], 4) for m in curve},
            }
        )
    for fusion, name, members in fused:
        fused_run = fuse_runs([runs[m] for m in members], fusion, queries=list(dataset.queries))
        means, values = scored_run(qrels, fused_run.run, metrics + curve, judged_ids)
        runs[name] = fused_run.run
        per_query[name] = values
        rows.append(
            {
                **fused_row(fusion, name, members, fused_run, rows, measured, dataset),
                "metrics": {m: round(means[m], 4) for m in metrics},
                "ci95": {m: bootstrap_ci([values[q][m] for q in values]) for m in metrics},
                "recall_curve": {m: round(means[m], 4) for m in curve},
            }
        )
    latency_pairs = intervals_and_pairs(rows)
    started_in["load_average"]["end"] = load_average()
    names = [row["name"] for row in rows]
    reference_name = reference_system(names, systems, reference)
    judged = sorted(next(iter(per_query.values())).keys()) if per_query else []
    by_kind = by_query_kind(dataset, per_query, metrics)
    for row in rows:
        row["by_kind"] = by_kind[row["name"]]
    significance(rows, per_query, judged, metrics, reference_name)
    if metrics and is_quality(metrics[0]):  # the largest gains and losses in a count would be neither
        gains_table(rows, per_query, dataset, metrics[0], reference_name, no_text)
    without_labels = label_free(rows, runs, dataset, per_query, metrics, no_text=no_text)
    engines = engine_agreement(systems, runs, per_query)
    report = {
        "schema": REPORT_SCHEMA,
        "environment": started_in,
        "dataset": {
            "id": dataset.id,
            "checksum": dataset.checksum(),
            "stats": dataset.stats(),
            # What a passage is: an index's chunk count differs where its builder splits a unit (a long section).
            "units": get_builder(corpus_source(dataset)[1]).unit_words,
            "as_of": dataset.meta.get("as_of"),
            "synthetic": any(q.kind.startswith(SYNTHETIC_KIND) for q in dataset.queries.values()),
        },
        "metrics": metrics,
        "reference": reference_name,
        "significance": {
            "test": "paired randomization (sign flips), two-sided",
            "permutations": PERMUTATIONS,
            # With 2**n <= PERMUTATIONS sign vectors for n judged queries, all of them are tried (an exact test).
            "exact": 2 ** len(judged) <= PERMUTATIONS,
            "sign_vectors": min(2 ** min(len(judged), 64), PERMUTATIONS),
            "seed": SEED,
            "correction": "Holm over the systems compared with the reference",
            "alpha": 0.05,
        },
        "judged_queries": len(judged),
        "questions": len(dataset.queries),
        "latency": {
            "repeat": repeat,
            "warmup_questions": WARMUP,
            "per_question": "fastest of the repeats",
            "interval": f"95% percentile bootstrap over the questions, {RESAMPLES} resamples, seed {SEED}; pairs "
            "on the same resamples",
            "pairs": latency_pairs,
        },
        "without_labels": without_labels,
        "skipped": [asdict(item) for item in skipped or []],
        "engines": engines,
        "systems": rows,
        "per_query": per_query,
    }
    return report, runs


@dataclass
class CompareResult:
    """What ``run_compare`` did: the report and runs, where they were written, and the gate's findings."""

    report: dict[str, Any]
    runs: dict[str, list[RankedDoc]]
    output: Path
    baseline_written: Path | None = None
    gate: GateResult | None = None
    #: Whether ``output`` held a report before, which this one replaced.
    replaced: bool = False


def run_compare(
    dataset: str,
    *,
    output: str | Path,
    tokenizers: tuple[str, ...] | list[str] = (),
    builder: str | None = None,
    mode: str | None = None,
    systems_file: Path | None = None,
    metrics: tuple[str, ...] | list[str] = (),
    reference: str | None = None,
    outside: list[OutsideRun] | None = None,
    no_text: bool = False,
    against: str | Path | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
    write_baseline: str | Path | None = None,
    processing: str | None = None,
    engines: tuple[str, ...] | list[str] = (),
    progress: SystemProgress | None = None,
    fuse: tuple[str, ...] | list[str] = (),
    queries: str | Path | None = None,
    qrels: str | Path | None = None,
    repeat: int = DEFAULT_REPEAT,
    all_queries: bool = False,
) -> CompareResult:
    """``rag-eval compare``: check every argument and output path, compare, gate, and write the report folder
    (and a baseline). A refusal (an output folder rag-eval did not write, a NaN tolerance, an unknown
    metric, ...) happens before any index is built, so it costs nothing and touches nothing. ``fuse`` adds
    fused systems by spec (``rrf(bigram, unigram)``) to a systems file's ``[[fusion]]`` tables.

    With ``queries`` (a questions file), ``dataset`` is a knowledge base (anything ``index build`` reads, or
    a shipped id): its builder's units are the passages, ``builder`` may name any builder, and ``qrels``
    (judgments, e.g. from ``rag-eval judge``) are optional; without them the report shows what needs no
    labels. Without ``queries``, ``qrels`` replaces the dataset's own judgments. ``engines`` runs each system
    named by ``tokenizers`` (or by default) under each engine spec (``fts5``, ``impact``, ``bm25s``), e.g.
    both exact engines side by side; a systems file names its own.

    A systems file tune wrote records the split it chose on: on that data only its held-back queries are
    evaluated (``all_queries`` evaluates every one, with a warning), on other data every query, and
    ``report["tuned_split"]`` says which."""
    tolerance = check_tolerance(tolerance)
    repeat = check_repeat(repeat)
    folder = check_output(output)
    # A knowledge base, or a dataset folder (an export's corpus/ is one too): nothing goes into what is read.
    read = read_from(dataset)
    refuse_inside_source(folder, [read], what="report folder")
    baseline_path = check_baseline_target(write_baseline) if write_baseline is not None else None
    if baseline_path is not None:
        refuse_inside_source(baseline_path, [read], what="baseline")
    if baseline_path is not None and (baseline_path == folder or folder in baseline_path.parents):
        raise RagEvalError(
            f"{baseline_path}: the baseline cannot go inside the report folder {folder}, which is replaced whole",
            hint="write the baseline next to it, e.g. reports/baseline/NAME.json",
        )
    for name in metrics:
        parse_metric(name)
    fusions = [parse_fusion(spec) for spec in fuse]
    baseline = load_baseline(against) if against is not None else None
    if queries is not None:
        data = source_dataset(dataset, queries, builder=builder, qrels=qrels)
    else:
        data = load_dataset(dataset)
        if qrels is not None:
            data.qrels = check_judgments(read_any_qrels(qrels), data.corpus, data.queries, qrels)
    if (baseline is not None or baseline_path is not None) and not relevant_queries(data.qrels):
        raise RagEvalError(
            "a baseline or a gate needs judged queries: these questions have no judgments",
            hint="judge them first (rag-eval judge), then add --qrels FILE",
        )
    skipped: list[Skipped] = []
    listed: list[System] = []
    evaluated = None
    if systems_file is not None:
        found = read_systems_file(Path(systems_file))
        listed, fusions = found.systems, found.fusions + fusions
        if found.split is not None:  # tune's recommendation: the queries it did not choose on, on its data
            evaluated = evaluated_queries(data, found.split, recorded_name(systems_file), all_queries=all_queries)
            data = evaluated.dataset
    if all_queries and evaluated is None:
        raise RagEvalError(
            f"{ALL_QUERIES} applies to a --systems file tune wrote (it records the dev queries tune chose on)"
            + (f"; {systems_file} records none" if systems_file is not None else ""),
            hint=f"leave out {ALL_QUERIES}: every query is evaluated",
        )
    if tokenizers:
        named = [System(spec, builder or "", mode or "") for spec in tokenizers]
    elif systems_file is None:
        named, skipped = default_systems(data, builder, mode)
    else:
        named = []
    if processing:  # query processing for the systems named by -t or by default (a systems file has its own)
        query = QueryProcessing.parse(processing).written
        named = [dataclasses.replace(system, query=query) for system in named]
    if engines:  # every -t (or default) system under each engine, in the order given
        specs = list(dict.fromkeys(written_engine(spec) for spec in engines))
        named = [dataclasses.replace(system, engine=spec) for system in named for spec in specs]
    systems = listed + named  # a systems file's, then -t's: e.g. tune's recommendation beside bigram
    report, runs = compare(
        data,
        systems,
        metrics=list(metrics) or None,
        reference=reference,
        outside=outside,
        no_text=no_text,
        progress=progress,
        skipped=skipped,
        fusions=fusions,
        repeat=repeat,
    )
    if evaluated is not None:
        report["tuned_split"] = evaluated.record
    gate = check(report, baseline, tolerance=tolerance) if baseline is not None else None
    if gate is not None:
        report["gate"] = {
            "against": recorded_name(against) if against is not None else None,
            "tolerance": tolerance,
            "compared": gate.compared,
            "regressions": gate.regressions,
            "improvements": gate.improvements,
            "stale": gate.stale,
            "unmatched": gate.unmatched,
        }
    replaced = (Path(folder) / "report.json").is_file()  # write_outputs replaces only a report compare wrote
    # The baseline is written in full before the report folder is replaced, and put in place after it: a
    # failure writing either (a full disk) leaves both as they were.
    staged = stage_baseline(report, baseline_path) if baseline_path is not None else None
    try:
        written = write_outputs(report, runs, folder)
    except BaseException:
        if staged is not None:
            staged.discard()
        raise
    baseline_written = staged.commit() if staged is not None else None
    return CompareResult(report, runs, written, baseline_written, gate, replaced)
