"""``rag-eval compare``: every system on one dataset, side by side, with significance and costs."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
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
from ..datasets.records import SYNTHETIC_KIND, Dataset, Qrel
from ..datasets.shipped import read_from
from ..datasets.sources import check_judgments, check_trec_ids, source_dataset
from ..datasets.split_record import ALL_QUERIES, Evaluated, evaluated_queries, matching_split
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
from ..reporting.model import REPORT_SCHEMA, Comparison, TunedSplit
from ..reporting.report import check_output, write_outputs
from .agreement import label_free
from .fusion import Fusion, fuse_runs, fused_row, fused_systems, parse_fusion
from .gate import (
    DEFAULT_TOLERANCE,
    GateResult,
    check,
    check_baseline_target,
    check_tolerance,
    gate_section,
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


@dataclass
class _Scored:
    """What a comparison holds while it runs: each row's draft (report.json's shape) and run, the systems' own
    measurements, and the per-query values."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    runs: dict[str, list[RankedDoc]] = field(default_factory=dict)
    measured: dict[str, SystemRun] = field(default_factory=dict)
    per_query: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)

    def add(self, name: str, run: list[RankedDoc], values: dict[str, dict[str, float]], row: dict[str, Any]) -> None:
        self.runs[name] = run
        self.per_query[name] = values
        self.rows.append(row)


@dataclass(frozen=True)
class _Judged:
    """What the qrels allow: the metrics to compute (none without a relevant document), the recall curve, the
    judged query ids and the qrels."""

    metrics: list[str]
    curve: list[str]
    judged_ids: list[str]
    qrels: list[Qrel]


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
) -> tuple[Comparison, dict[str, list[RankedDoc]]]:
    """Run every system, score it, test it against the reference; returns the comparison and the runs.

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
    wanted = metrics_names(metrics)
    check_trec_ids(dataset)
    if not systems and not outside:
        raise RagEvalError("no systems to compare", hint="name tokenizers with -t SPEC, or install one")
    systems = _checked_systems(dataset, systems)
    fused = fused_systems(fusions or [], {s.name: s.tokenizer for s in systems}, [r.name for r in outside or []])
    _check_names([system.name for system in systems] + [run.name for run in outside or []] + [f[1] for f in fused])
    judged = _judgments(dataset, wanted)
    outside_docs = [(run, read_run(run.path)) for run in outside or []]
    scored = _Scored()
    with in_use_scope():  # each system's cached index, until its passages are counted: `cache clear` leaves it
        callback = (lambda system, phase, done, total: progress(system.name, phase, done, total)) if progress else None
        results = run_systems(dataset, systems, progress=callback, repeat=repeat)
        for system, result in zip(systems, results, strict=True):
            _score_system(scored, dataset, system, result, judged)
    for run, docs in outside_docs:
        _score_outside(scored, dataset, run, docs, judged)
    for fusion, name, members in fused:
        _score_fused(scored, dataset, fusion, name, members, judged)
    comparison = _comparison(dataset, systems, scored, judged, started_in, reference, skipped, no_text, repeat)
    return comparison, scored.runs


def _comparison(
    dataset: Dataset,
    systems: list[System],
    scored: _Scored,
    judged: _Judged,
    started_in: dict[str, Any],
    reference: str | None,
    skipped: list[Skipped] | None,
    no_text: bool,
    repeat: int,
) -> Comparison:
    """The scored rows compared: latency intervals and pairs, the reference and the tests against it, what needs
    no labels, the engines' agreement; assembled in report.json's shape and built into the model."""
    latency_pairs = intervals_and_pairs(scored.rows)
    started_in["load_average"]["end"] = load_average()
    reference_name = reference_system([row["name"] for row in scored.rows], systems, reference)
    judged_queries = _compared(scored, dataset, judged.metrics, reference_name, no_text)
    without_labels = label_free(scored.rows, scored.runs, dataset, scored.per_query, judged.metrics, no_text=no_text)
    draft = {
        "schema": REPORT_SCHEMA,
        "environment": started_in,
        "dataset": _dataset_json(dataset),
        "metrics": judged.metrics,
        "reference": reference_name,
        "significance": _significance_json(judged_queries),
        "judged_queries": judged_queries,
        "questions": len(dataset.queries),
        "latency": _latency_json(repeat, latency_pairs),
        "without_labels": without_labels,
        "skipped": [item.to_json() for item in skipped or []],
        "engines": engine_agreement(systems, scored.runs, scored.per_query),
        "systems": scored.rows,
        "per_query": scored.per_query,
    }
    return Comparison.from_json(draft)


def metrics_names(metrics: list[str] | None) -> list[str]:
    """The metrics asked for in their canonical spellings, each once (the default six without any)."""
    return metric_names(metrics or DEFAULT_METRICS)


def _checked_systems(dataset: Dataset, systems: list[System]) -> list[System]:
    """``systems`` with the dataset's builder and mode filled in and every spec in its written form, each checked
    (tokenizer available, builder able to read the dataset, mode, engine) before any index is built."""
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
        processing = QueryProcessing.parse(system.query) if system.query else None
        get_engine(system.engine).check(tokenizer, builder, system.mode, system.name, processing)
    return systems


def _check_names(names: list[str]) -> None:
    """Refuse a row name that would split per_query.tsv or the report's lines, and a name given twice."""
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


def _judgments(dataset: Dataset, metrics: list[str]) -> _Judged:
    """The metrics and judged queries the dataset's qrels allow: a knowledge base's questions without a relevant
    judgment get what needs no labels only; a dataset of another format without one is refused."""
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
    curve = [f"R@{k}" for k in RECALL_CURVE] if metrics else []
    return _Judged(metrics, curve, judged_ids, qrels)


def _quality(means: dict[str, float], values: dict[str, dict[str, float]], judged: _Judged) -> dict[str, Any]:
    """A row's quality: mean metrics, their 95% intervals and the recall curve."""
    return {
        "metrics": {m: round(means[m], 4) for m in judged.metrics},
        "ci95": {m: bootstrap_ci([values[q][m] for q in values]) for m in judged.metrics},
        "recall_curve": {m: round(means[m], 4) for m in judged.curve},
    }


def _score_system(scored: _Scored, dataset: Dataset, system: System, result: SystemRun, judged: _Judged) -> None:
    tokens_per_passage = count_tokens_per_passage(result.index_path)
    check_units(result.run, set(dataset.corpus), system.name, dataset)
    means, values = scored_run(judged.qrels, result.run, judged.metrics + judged.curve, judged.judged_ids)
    scored.measured[system.name] = result
    row = system_row(dataset, system, result, means, values, judged.metrics, judged.curve, tokens_per_passage)
    scored.add(system.name, result.run, values, row)


def _score_outside(scored: _Scored, dataset: Dataset, run: OutsideRun, docs: list[RankedDoc], judged: _Judged) -> None:
    check_units(docs, set(dataset.corpus), run.name, dataset)
    means, values = scored_run(judged.qrels, docs, judged.metrics + judged.curve, judged.judged_ids)
    identity = {"name": run.name, "tokenizer": f"outside run {run.path.name}", "builder": "", "mode": ""}
    scored.add(run.name, docs, values, identity | _quality(means, values, judged))


def _score_fused(
    scored: _Scored, dataset: Dataset, fusion: Fusion, name: str, members: list[str], judged: _Judged
) -> None:
    fused_run = fuse_runs([scored.runs[m] for m in members], fusion, queries=list(dataset.queries))
    means, values = scored_run(judged.qrels, fused_run.run, judged.metrics + judged.curve, judged.judged_ids)
    row = fused_row(fusion, name, members, fused_run, scored.rows, scored.measured, dataset)
    scored.add(name, fused_run.run, values, row | _quality(means, values, judged))


def _compared(scored: _Scored, dataset: Dataset, metrics: list[str], reference: str | None, no_text: bool) -> int:
    """Give each row its means by query kind, its significance against the reference and its largest gains and
    losses; the number of judged queries."""
    judged = sorted(next(iter(scored.per_query.values())).keys()) if scored.per_query else []
    by_kind = by_query_kind(dataset, scored.per_query, metrics)
    for row in scored.rows:
        row["by_kind"] = by_kind[row["name"]]
    significance(scored.rows, scored.per_query, judged, metrics, reference)
    if metrics and is_quality(metrics[0]):  # the largest gains and losses in a count would be neither
        gains_table(scored.rows, scored.per_query, dataset, metrics[0], reference, no_text)
    return len(judged)


def _dataset_json(dataset: Dataset) -> dict[str, Any]:
    return {
        "id": dataset.id,
        "checksum": dataset.checksum(),
        "stats": dataset.stats(),
        # What a passage is: an index's chunk count differs where its builder splits a unit (a long section).
        "units": get_builder(corpus_source(dataset)[1]).unit_words,
        "as_of": dataset.meta.get("as_of"),
        "synthetic": any(q.kind.startswith(SYNTHETIC_KIND) for q in dataset.queries.values()),
    }


def _significance_json(judged: int) -> dict[str, Any]:
    return {
        "test": "paired randomization (sign flips), two-sided",
        "permutations": PERMUTATIONS,
        # With 2**n <= PERMUTATIONS sign vectors for n judged queries, all of them are tried (an exact test).
        "exact": 2**judged <= PERMUTATIONS,
        "sign_vectors": min(2 ** min(judged, 64), PERMUTATIONS),
        "seed": SEED,
        "correction": "Holm over the systems compared with the reference",
        "alpha": 0.05,
    }


def _latency_json(repeat: int, pairs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "repeat": repeat,
        "warmup_questions": WARMUP,
        "per_question": "fastest of the repeats",
        "interval": f"95% percentile bootstrap over the questions, {RESAMPLES} resamples, seed {SEED}; pairs "
        "on the same resamples",
        "pairs": pairs,
    }


@dataclass(frozen=True)
class CompareRequest:
    """What ``rag-eval compare`` is asked: the data, the systems, the measures, the gate and where to write.

    ``dataset`` is a shipped id or a dataset folder; with ``queries`` (a questions file) a knowledge base (anything
    ``index build`` reads, or a shipped id) whose builder's units are the passages, ``builder`` may name any builder,
    and ``qrels`` (judgments, e.g. from ``rag-eval judge``) are optional; without ``queries``, ``qrels`` replaces the
    dataset's own judgments. The systems are ``tokenizers`` (or every default strategy) with ``builder``, ``mode``,
    ``processing`` and each of ``engines``, after those of ``systems_file``; ``fuse`` adds fused systems by spec
    (``rrf(bigram, unigram)``), ``outside`` runs from other engines. ``against`` is a baseline for the gate,
    ``write_baseline`` a baseline to write; ``all_queries`` evaluates the dev queries of a systems file tune wrote
    too.
    """

    dataset: str
    output: str | Path
    tokenizers: tuple[str, ...] = ()
    builder: str | None = None
    mode: str | None = None
    systems_file: Path | None = None
    metrics: tuple[str, ...] = ()
    reference: str | None = None
    outside: tuple[OutsideRun, ...] = ()
    no_text: bool = False
    against: str | Path | None = None
    tolerance: float = DEFAULT_TOLERANCE
    write_baseline: str | Path | None = None
    processing: str | None = None
    engines: tuple[str, ...] = ()
    fuse: tuple[str, ...] = ()
    queries: str | Path | None = None
    qrels: str | Path | None = None
    repeat: int = DEFAULT_REPEAT
    all_queries: bool = False

    def __post_init__(self) -> None:
        for name in ("tokenizers", "metrics", "outside", "engines", "fuse"):  # lists given by a caller, held as tuples
            object.__setattr__(self, name, tuple(getattr(self, name) or ()))


@dataclass
class CompareResult:
    """What ``run_compare`` did: the comparison and runs, where they were written, and the gate's findings."""

    report: Comparison
    runs: dict[str, list[RankedDoc]]
    output: Path
    baseline_written: Path | None = None
    gate: GateResult | None = None
    #: Whether ``output`` held a report before, which this one replaced.
    replaced: bool = False


@dataclass(frozen=True)
class _Checked:
    """A request's outputs and inputs, checked before anything runs."""

    folder: Path
    baseline_path: Path | None
    tolerance: float
    repeat: int
    fusions: list[Fusion]
    baseline: Comparison | None


def run_compare(request: CompareRequest, *, progress: SystemProgress | None = None) -> CompareResult:
    """``rag-eval compare``: check every argument and output path, compare, gate, and write the report folder
    (and a baseline). A refusal (an output folder rag-eval did not write, a NaN tolerance, an unknown
    metric, ...) happens before any index is built, so it costs nothing and touches nothing.

    A systems file tune wrote records the split it chose on: on that data only its held-back queries are
    evaluated (``all_queries`` evaluates every one, with a warning), on other data every query, and the
    comparison's ``tuned_split`` says which."""
    checked = _check_request(request)
    data = _load_data(request)
    if (checked.baseline is not None or checked.baseline_path is not None) and not relevant_queries(data.qrels):
        raise RagEvalError(
            "a baseline or a gate needs judged queries: these questions have no judgments",
            hint="judge them first (rag-eval judge), then add --qrels FILE",
        )
    systems, fusions, skipped, evaluated = _systems_of(request, data)
    report, runs = compare(
        data if evaluated is None else evaluated.dataset,
        systems,
        metrics=list(request.metrics) or None,
        reference=request.reference,
        outside=list(request.outside) or None,
        no_text=request.no_text,
        progress=progress,
        skipped=skipped,
        fusions=fusions + checked.fusions,
        repeat=checked.repeat,
    )
    if evaluated is not None:
        report = dataclasses.replace(report, tuned_split=TunedSplit.from_json(evaluated.record))
    gate = check(report, checked.baseline, tolerance=checked.tolerance) if checked.baseline is not None else None
    if gate is not None:
        against = recorded_name(request.against) if request.against is not None else None
        report = dataclasses.replace(report, gate=gate_section(gate, against, checked.tolerance))
    replaced = (checked.folder / "report.json").is_file()  # write_outputs replaces only a report compare wrote
    written, baseline_written = _write(report, runs, checked)
    return CompareResult(report, runs, written, baseline_written, gate, replaced)


def _check_request(request: CompareRequest) -> _Checked:
    """Every output path, the tolerance, repeats, metric names, fusions and the baseline, checked before any run."""
    tolerance = check_tolerance(request.tolerance)
    repeat = check_repeat(request.repeat)
    folder = check_output(request.output)
    # A knowledge base, or a dataset folder (an export's corpus/ is one too): nothing goes into what is read.
    read = read_from(request.dataset)
    refuse_inside_source(folder, [read], what="report folder")
    target = request.write_baseline
    baseline_path = check_baseline_target(target) if target is not None else None
    if baseline_path is not None:
        refuse_inside_source(baseline_path, [read], what="baseline")
    if baseline_path is not None and (baseline_path == folder or folder in baseline_path.parents):
        raise RagEvalError(
            f"{baseline_path}: the baseline cannot go inside the report folder {folder}, which is replaced whole",
            hint="write the baseline next to it, e.g. reports/baseline/NAME.json",
        )
    for name in request.metrics:
        parse_metric(name)
    fusions = [parse_fusion(spec) for spec in request.fuse]
    baseline = load_baseline(request.against) if request.against is not None else None
    return _Checked(folder, baseline_path, tolerance, repeat, fusions, baseline)


def _load_data(request: CompareRequest) -> Dataset:
    """The dataset, or the knowledge base with its questions, and the judgments given instead of its own."""
    if request.queries is not None:
        return source_dataset(request.dataset, request.queries, builder=request.builder, qrels=request.qrels)
    data = load_dataset(request.dataset)
    if request.qrels is not None:
        data.qrels = check_judgments(read_any_qrels(request.qrels), data.corpus, data.queries, request.qrels)
    return data


def _systems_of(
    request: CompareRequest, data: Dataset
) -> tuple[list[System], list[Fusion], list[Skipped], Evaluated | None]:
    """The systems to compare (a systems file's, then -t's or the defaults), the systems file's fusions, the
    default strategies left out, and, for a file tune wrote, the queries to evaluate."""
    skipped: list[Skipped] = []
    listed: list[System] = []
    fusions: list[Fusion] = []
    evaluated = None
    if request.systems_file is not None:
        found = read_systems_file(Path(request.systems_file))
        listed, fusions = found.systems, found.fusions
        split = matching_split(found.splits, data)
        if split is not None:  # tune's recommendation: the queries it did not choose on, on its data
            where = recorded_name(request.systems_file)
            evaluated = evaluated_queries(data, split, where, all_queries=request.all_queries)
    if request.all_queries and evaluated is None:
        raise RagEvalError(
            f"{ALL_QUERIES} applies to a --systems file tune wrote (it records the dev queries tune chose on)"
            + (f"; {request.systems_file} records none" if request.systems_file is not None else ""),
            hint=f"leave out {ALL_QUERIES}: every query is evaluated",
        )
    if request.tokenizers:
        named = [System(spec, request.builder or "", request.mode or "") for spec in request.tokenizers]
    elif request.systems_file is None:
        named, skipped = default_systems(
            data if evaluated is None else evaluated.dataset, request.builder, request.mode
        )
    else:
        named = []
    if request.processing:  # query processing for the systems named by -t or by default (a file has its own)
        query = QueryProcessing.parse(request.processing).written
        named = [dataclasses.replace(system, query=query) for system in named]
    if request.engines:  # every -t (or default) system under each engine, in the order given
        specs = list(dict.fromkeys(written_engine(spec) for spec in request.engines))
        named = [dataclasses.replace(system, engine=spec) for system in named for spec in specs]
    return listed + named, fusions, skipped, evaluated  # a systems file's, then -t's: e.g. tune's pick beside bigram


def _write(report: Comparison, runs: dict[str, list[RankedDoc]], checked: _Checked) -> tuple[Path, Path | None]:
    """Write the report folder and the baseline. The baseline is written in full before the report folder is
    replaced, and put in place after it: a failure writing either (a full disk) leaves both as they were."""
    staged = stage_baseline(report, checked.baseline_path) if checked.baseline_path is not None else None
    try:
        written = write_outputs(report, runs, checked.folder)
    except BaseException:
        if staged is not None:
            staged.discard()
        raise
    return written, staged.commit() if staged is not None else None
