"""``rag-eval compare``: every system on one dataset, side by side, with significance and costs."""

from __future__ import annotations

import dataclasses
import math
import os
import platform
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from statistics import NormalDist
from typing import Any
from urllib.parse import quote

import numpy as np

from .. import __version__
from ..builders import get_builder
from ..errors import IndexFileError, RagEvalError
from ..outputs import inside, recorded_name
from ..processing import QueryProcessing
from ..query import MODES
from ..textio import control_character, read_text
from ..tokenizers import TOKENIZERS, get_tokenizer, tokenizer_class, written_spec
from ..tokenizers.base import library_version
from .agreement import label_free
from .engines import DEFAULT_ENGINE, get_engine, written_engine
from .formats import load_dataset
from .fusion import Fusion, fuse_runs, fused_row, fused_systems, fusion_from_table, parse_fusion
from .gate import (
    DEFAULT_TOLERANCE,
    GateResult,
    check,
    check_baseline_target,
    check_tolerance,
    load_baseline,
    stage_baseline,
)
from .metrics import (
    DEFAULT_METRICS,
    RankedDoc,
    check_qrels,
    evaluate,
    judged_queries,
    metric_names,
    parse_metric,
    relevant_queries,
)
from .records import NO_ANSWER, SYNTHETIC_KIND, Dataset, Qrel
from .report import check_output, write_outputs
from .runner import System, SystemRun, check_builder, latency_summary, run_system
from .sources import check_judgments, check_trec_ids, source_dataset
from .stats import PERMUTATIONS, SEED, holm, randomization_test, student_t_quantile, win_tie_loss
from .trec import read_any_qrels, read_run

DEFAULT_REFERENCE = "bigram"
RECALL_CURVE = (1, 2, 3, 5, 10, 20, 50, 100)
BOOTSTRAP = 1000
#: Largest --systems TOML file read, in bytes.
MAX_SYSTEMS_FILE_BYTES = 1_000_000

#: ``progress(system, phase, done, total)``: a comparison reports each system's build and queries.
SystemProgress = Callable[[str, str, int, int], None]


@dataclass(frozen=True)
class OutsideRun:
    """A run file from another engine, put in the same table (``--run NAME=FILE``)."""

    name: str
    path: Path


@dataclass(frozen=True)
class Skipped:
    """A tokenizer left out of a default comparison, why, and how to make it available."""

    tokenizer: str
    reason: str
    hint: str = ""

    def line(self) -> str:
        """``pkuseg: skipped, the pkuseg default model is not installed; run: rag-eval models install pkuseg``."""
        return f"{self.tokenizer}: skipped, {self.reason}" + (f"; {self.hint}" if self.hint else "")


def default_systems(dataset: Dataset, builder: str | None, mode: str | None) -> tuple[list[System], list[Skipped]]:
    """Every available tokenizer meant for default comparisons, with the dataset's builder and query mode,
    and the ones left out as unavailable (and why)."""
    chosen_builder = builder or dataset.meta.get("builder") or "passages"
    chosen_mode = mode or dataset.meta.get("mode") or "or"
    systems, skipped = [], []
    for name in TOKENIZERS:
        try:
            # A plug-in that fails to import, or breaks its declarations, is left out like a missing library.
            if not tokenizer_class(name).in_default_comparison:
                continue
            get_tokenizer(name).check_available()
        except RagEvalError as exc:
            skipped.append(Skipped(name, str(exc).removeprefix(f"tokenizer {name!r} is unavailable: "), exc.hint or ""))
            continue
        systems.append(System(name, chosen_builder, chosen_mode))
    return systems, skipped


def load_systems_file(path: Path) -> list[System]:
    """Systems from TOML: ``[[system]]`` tables with ``tokenizer``, optional ``builder``, ``mode``, ``query``
    and ``engine``."""
    return load_systems_toml(path)[0]


def one_system(path: Path) -> System:
    """The one ``[[system]]`` of a systems file (what ``index build --from`` builds)."""
    systems, fusions = load_systems_toml(path)
    if fusions:
        members = ", ".join(system.tokenizer for system in systems)
        raise RagEvalError(
            f"{path}: a fusion of several systems needs an index per system; build each: {members}",
            hint="rag-eval index build SOURCE --from FILE takes a file with one [[system]]",
        )
    if len(systems) != 1:
        raise RagEvalError(f"{path}: expected exactly one [[system]] table, found {len(systems)}")
    return systems[0]


def load_systems_toml(path: Path) -> tuple[list[System], list[Fusion]]:
    """Systems and fused systems from TOML: ``[[system]]`` tables (``tokenizer``, optional ``builder``, ``mode``,
    ``query`` and ``engine``) and ``[[fusion]]`` tables (``method``, ``systems``, optional ``k``, ``normalise``,
    ``weights``)."""
    import tomllib

    text = read_text(path, RagEvalError, max_bytes=MAX_SYSTEMS_FILE_BYTES)
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError) as exc:  # arrays nested thousands deep exhaust the stack
        raise RagEvalError(f"{path}: invalid TOML: {exc}") from None
    tables = sorted(set(data) - {"system", "fusion"})
    if tables:  # a misspelt [[fusion]] would otherwise be left out without a word
        raise RagEvalError(f"{path}: unknown tables {', '.join(tables)}; expected [[system]] and [[fusion]]")
    entries, fused = data.get("system", []), data.get("fusion", [])
    if not isinstance(entries, list) or not isinstance(fused, list) or not (entries or fused):
        raise RagEvalError(f"{path}: expected one or more [[system]] tables (and optional [[fusion]] tables)")
    systems = []
    for number, entry in enumerate(entries, start=1):
        if not isinstance(entry, dict) or not isinstance(entry.get("tokenizer"), str):
            raise RagEvalError(f'{path}: [[system]] number {number} needs tokenizer = "SPEC"')
        unknown = set(entry) - {"tokenizer", "builder", "mode", "query", "engine"}
        if unknown:
            raise RagEvalError(f"{path}: [[system]] number {number} has unknown keys: {', '.join(sorted(unknown))}")
        for key in ("builder", "mode", "query", "engine"):
            if not isinstance(entry.get(key, ""), str):
                raise RagEvalError(f"{path}: [[system]] number {number}: {key} must be a string")
        systems.append(
            System(
                entry["tokenizer"],
                entry.get("builder", ""),
                entry.get("mode", ""),
                entry.get("query", ""),
                entry.get("engine", "") or DEFAULT_ENGINE,
            )
        )
    fusions = [fusion_from_table(entry, f"{path}: [[fusion]] number {n}") for n, entry in enumerate(fused, start=1)]
    return systems, fusions


def _bootstrap_ci(values: list[float], seed: int = SEED) -> list[float]:
    """95% interval of the mean of ``values``: Hesterberg's expanded percentile bootstrap (The American
    Statistician 69(4), 2015), the bootstrap means' quantiles at Phi(-+sqrt(n / (n - 1)) t_{0.975, n-1}) instead
    of 2.5% and 97.5%, which widens them as a t interval is wider than a normal one (the plain percentile
    interval covered about 88% at 10 queries). Seeded; [0, 0] without values, [v, v] when all are v."""
    if not values:
        return [0.0, 0.0]
    data = np.asarray(values, dtype=float)
    n = len(data)
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, n, size=(BOOTSTRAP, n))].mean(axis=1)
    if n == 1:
        return [round(float(means[0]), 4)] * 2
    tail = NormalDist().cdf(-math.sqrt(n / (n - 1)) * student_t_quantile(0.975, n - 1))
    return [round(float(np.quantile(means, tail)), 4), round(float(np.quantile(means, 1 - tail)), 4)]


def _tokens_per_passage(index_path: str) -> float:
    # mode=rw: never create a file under the cached index's name (``cache clear`` may have removed it meanwhile).
    try:
        db = sqlite3.connect(f"file:{quote(os.path.abspath(index_path))}?mode=rw", uri=True)
    except sqlite3.Error as exc:
        raise IndexFileError(f"{index_path}: the cached index went while compare ran ({exc}); run again") from None
    try:
        db.execute("CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, 'search', 'row')")
        tokens = db.execute("SELECT coalesce(sum(cnt), 0) FROM temp.vocab").fetchone()[0]
        chunks = db.execute("SELECT count(*) FROM chunks").fetchone()[0]
        return round(tokens / chunks, 1) if chunks else 0.0
    finally:
        db.close()


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=Path(__file__).parent, timeout=5
        )
        return out.stdout.strip() if out.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def environment() -> dict[str, Any]:
    """Machine, versions and commit, recorded in every report."""
    packages = ["rag-eval", "jieba", "spacy-pkuseg", "opencc", "ir-measures", "pytrec-eval-terrier", "numpy"]
    return {
        "rag_eval": __version__,
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "packages": {name: library_version(name) for name in packages},
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(),
        },
        "commit": _commit(),
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": command_line(),
    }


def command_line() -> str:
    """The ``rag-eval ...`` command that runs, as the outputs record it ("" when not run as rag-eval). An argument
    holding bytes that are not UTF-8 (a file name) shows them as ``\\xff``: recorded as they came (lone
    surrogates), they made every JSON output unwritable after the whole run."""
    if not sys.argv or "rag-eval" not in Path(sys.argv[0]).name:
        return ""
    words = ["rag-eval", *sys.argv[1:]]
    return " ".join(recorded_name(word) for word in words)


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
) -> tuple[dict[str, Any], dict[str, list[RankedDoc]]]:
    """Run every system, score it, test it against the reference; returns the report and the runs.

    Everything that can be refused is refused before the first index is built: metric names, tokenizers,
    a builder that cannot read the dataset's layout, qrels with invalid grades or no judged query,
    unreadable outside runs and fusions of systems that are not compared. A system that returns ids the
    dataset's corpus does not have (a unit mismatch) is an error rather than a row of zeros. A fused
    system (``fusions``) is a row like any other, made from its members' runs after they have run.
    """
    started_in = environment()  # the commit and time the run started from, not where the tree is at its end
    metrics = metric_names(metrics or DEFAULT_METRICS)  # canonical spellings, each once
    check_trec_ids(dataset)
    if not systems and not outside:
        raise RagEvalError("no systems to compare", hint="name tokenizers with -t SPEC, or install one")
    default_builder = dataset.meta.get("builder") or "passages"
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
    for system in systems:
        callback = (
            (lambda phase, done, total, name=system.name: progress(name, phase, done, total)) if progress else None
        )
        result: SystemRun = run_system(dataset, system, progress=callback)
        # At once, not after the metrics: `cache clear` keeps an index only while a command has it open.
        tokens_per_passage = _tokens_per_passage(result.index_path)
        check_units(result.run, corpus_ids, system.name, dataset)
        means, values = _evaluate(qrels, result.run, metrics + curve, judged_ids)
        runs[system.name] = result.run
        measured[system.name] = result
        per_query[system.name] = values
        no_answer = [q for q in dataset.queries.values() if q.kind == NO_ANSWER]
        false_hit = sum(1 for q in no_answer if result.false_hits.get(q.id, 0) > 0)
        build = result.build
        engine = get_engine(system.engine)
        seconds = sum(result.tokenize_seconds) + sum(result.search_seconds)
        rows.append(
            {
                "name": system.name,
                "tokenizer": result.tokenizer_spec,
                "builder": result.builder_spec,
                "mode": system.mode,
                "engine": {
                    "name": engine.name,
                    "spec": result.engine_spec,
                    "exact": engine.exact,
                    "build": engine.build_engine,
                    **result.engine_stats,
                },
                "metrics": {m: round(means[m], 4) for m in metrics},
                "ci95": {m: _bootstrap_ci([values[q][m] for q in values]) for m in metrics},
                "recall_curve": {m: round(means[m], 4) for m in curve},
                "latency_ms": {
                    "tokenize": latency_summary(result.tokenize_seconds),
                    "search": latency_summary(result.search_seconds),
                },
                "latency_samples_ms": {"search": [round(v * 1000, 4) for v in result.search_seconds]},
                # queries answered per second, one after another: tokenize and search, as a caller waits
                "qps": round(len(result.search_seconds) / seconds, 1) if seconds > 0 else None,
                "build": {
                    **{
                        k: build.get(k)
                        for k in (
                            "seconds",
                            "tokenizer_load_seconds",
                            "tokenize_seconds",
                            "write_seconds",
                            "index_bytes",
                            "chunks",
                            "cached",
                        )
                    },
                    # the process pool: workers, how they started, their model-load times, CPU/wall speed-up
                    **{
                        k: (build.get("extra") or {}).get(k)
                        for k in ("workers", "start_method", "worker_load_seconds", "tokenize_speedup")
                    },
                },
                # A native strategy tokenizes inside FTS5, during the write: no tokenization of its own to time.
                "tokenize_chars_per_second": (
                    round(sum(len(p.title) + len(p.text) for p in dataset.corpus.values()) / build["tokenize_seconds"])
                    if build.get("tokenize_seconds") and not get_tokenizer(system.tokenizer).native
                    else None
                ),
                "tokens_per_passage": tokens_per_passage,
                "zero_hit_queries": len(result.zero_hit_queries),
                "no_answer_queries": len(no_answer),
                "no_answer_false_hit_rate": round(false_hit / len(no_answer), 4) if no_answer else None,
            }
        )
    for run, docs in outside_docs:
        check_units(docs, corpus_ids, run.name, dataset)
        means, values = _evaluate(qrels, docs, metrics + curve, judged_ids)
        runs[run.name] = docs
        per_query[run.name] = values
        rows.append(
            {
                "name": run.name,
                "tokenizer": f"outside run {run.path.name}",
                "builder": "",
                "mode": "",
                "metrics": {m: round(means[m], 4) for m in metrics},
                "ci95": {m: _bootstrap_ci([values[q][m] for q in values]) for m in metrics},
                "recall_curve": {m: round(means[m], 4) for m in curve},
            }
        )
    for fusion, name, members in fused:
        fused_run = fuse_runs([runs[m] for m in members], fusion, queries=list(dataset.queries))
        means, values = _evaluate(qrels, fused_run.run, metrics + curve, judged_ids)
        runs[name] = fused_run.run
        per_query[name] = values
        rows.append(
            {
                **fused_row(fusion, name, members, fused_run, rows, measured, dataset),
                "metrics": {m: round(means[m], 4) for m in metrics},
                "ci95": {m: _bootstrap_ci([values[q][m] for q in values]) for m in metrics},
                "recall_curve": {m: round(means[m], 4) for m in curve},
            }
        )
    names = [row["name"] for row in rows]
    reference_name = _reference(names, systems, reference)
    judged = sorted(next(iter(per_query.values())).keys()) if per_query else []
    by_kind = _by_kind(dataset, per_query, metrics)
    for row in rows:
        row["by_kind"] = by_kind[row["name"]]
    _significance(rows, per_query, judged, metrics, reference_name)
    if metrics:
        _gains(rows, per_query, dataset, metrics[0], reference_name, no_text)
    without_labels = label_free(rows, runs, dataset, per_query, metrics, no_text=no_text)
    engines = engine_agreement(systems, runs, per_query)
    report = {
        "schema": "rag-eval/compare/1",
        "environment": started_in,
        "dataset": {
            "id": dataset.id,
            "checksum": dataset.checksum(),
            "stats": dataset.stats(),
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
        "without_labels": without_labels,
        "skipped": [asdict(item) for item in skipped or []],
        "engines": engines,
        "systems": rows,
        "per_query": per_query,
    }
    return report, runs


def engine_agreement(
    systems: list[System], runs: dict[str, list[RankedDoc]], per_query: dict[str, dict[str, dict[str, float]]]
) -> list[dict[str, Any]]:
    """For each system run under several exact engines (fts5 and impact): whether their runs (ids, ranks and
    written scores) and per-query metrics are identical, as an exact engine promises."""
    groups: dict[System, list[System]] = {}
    for system in systems:
        groups.setdefault(dataclasses.replace(system, engine=DEFAULT_ENGINE), []).append(system)
    found = []
    for base, members in groups.items():
        exact = [m for m in members if get_engine(m.engine).exact]
        if len(exact) < 2:
            continue
        first = exact[0]
        by_query: dict[str, list[RankedDoc]] = {}
        for doc in runs[first.name]:
            by_query.setdefault(doc.query_id, []).append(doc)
        for other in exact[1:]:
            theirs: dict[str, list[RankedDoc]] = {}
            for doc in runs[other.name]:
                theirs.setdefault(doc.query_id, []).append(doc)
            differing = sorted(q for q in set(by_query) | set(theirs) if by_query.get(q) != theirs.get(q))
            found.append(
                {
                    "system": base.name,
                    "engines": [first.engine, other.engine],
                    "names": [first.name, other.name],
                    "queries_with_hits": len(set(by_query) | set(theirs)),
                    "queries_differing": len(differing),
                    "first_differing": differing[:5],
                    "same_metrics": per_query.get(first.name) == per_query.get(other.name),
                }
            )
    return found


def _evaluate(
    qrels: list[Qrel], run: list[RankedDoc], metrics: list[str], judged: list[str]
) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """Means and per-query values over the judged queries; nothing to evaluate without judgments."""
    if not judged:
        return {}, {}
    return evaluate(qrels, run, metrics)


def check_units(run: list[RankedDoc], corpus_ids: set[str], name: str, dataset: Dataset) -> None:
    """Refuse a run that returns ids the dataset's corpus does not have.

    Every id a system returns must be a corpus id (the ids qrels use): that is exact, and a system that
    finds nothing relevant still passes. Ids of another unit (a file path where the qrels name sections,
    a chunk where they name passages) would otherwise score 0 without a word.
    """
    unknown = sorted({doc.doc_id for doc in run} - corpus_ids)
    if not unknown:
        return
    returned = len({doc.doc_id for doc in run})
    example = next(iter(sorted(corpus_ids)), "")
    raise RagEvalError(
        f"{name}: {len(unknown)} of the {returned} ids it returns are not ids of dataset "
        f"{dataset.id!r}, e.g. {unknown[0]!r}, where the corpus and qrels use ids like {example!r}",
        hint="the system's units do not match the dataset's (another builder, another corpus or another id scheme)",
    )


def check_mode(mode: str) -> None:
    """Refuse a query mode the search does not know, before any index is built."""
    if mode not in MODES:
        raise RagEvalError(f"unknown query mode {mode!r}; choose from: {', '.join(MODES)}")


def _reference(names: list[str], systems: list[System], reference: str | None) -> str | None:
    wanted = reference or DEFAULT_REFERENCE
    for name in names:
        if name == wanted or name.split(" | ")[0] == wanted or name.split(" | ")[0].split(":")[0] == wanted:
            return name
    if reference:
        raise RagEvalError(f"reference system {reference!r} is not among the systems compared: {', '.join(names)}")
    return names[0] if names else None


def _by_kind(dataset: Dataset, per_query: dict[str, dict[str, dict[str, float]]], metrics: list[str]) -> dict[str, Any]:
    kinds: dict[str, list[str]] = {}
    for query in dataset.queries.values():
        kinds.setdefault(query.kind or "-", []).append(query.id)
    out: dict[str, Any] = {}
    for name, values in per_query.items():
        table = {}
        for kind, ids in sorted(kinds.items()):
            judged = [q for q in ids if q in values]
            if judged:
                table[kind] = {
                    "queries": len(judged),
                    **{m: round(sum(values[q][m] for q in judged) / len(judged), 4) for m in metrics},
                }
        out[name] = table
    return out


def _significance(
    rows: list[dict[str, Any]], per_query: dict[str, Any], judged: list[str], metrics: list[str], reference: str | None
) -> None:
    if reference is None:
        return
    others = [row for row in rows if row["name"] != reference]
    for metric in metrics:
        base = [per_query[reference][q][metric] for q in judged]
        p_values = [randomization_test([per_query[row["name"]][q][metric] for q in judged], base) for row in others]
        for row, p, adjusted in zip(others, p_values, holm(p_values), strict=False):
            values = [per_query[row["name"]][q][metric] for q in judged]
            wins, ties, losses = win_tie_loss(values, base)
            row.setdefault("significance", {})[metric] = {
                "delta": round(float(np.mean(values) - np.mean(base)) if judged else 0.0, 4),
                "p": round(p, 5),
                "p_holm": round(adjusted, 5),
                "significant": adjusted < 0.05,
                "wins": wins,
                "ties": ties,
                "losses": losses,
            }


def _gains(
    rows: list[dict[str, Any]],
    per_query: dict[str, Any],
    dataset: Dataset,
    metric: str,
    reference: str | None,
    no_text: bool,
    count: int = 5,
) -> None:
    if reference is None:
        return
    for row in rows:
        if row["name"] == reference:
            continue
        deltas = sorted(
            ((per_query[row["name"]][q][metric] - per_query[reference][q][metric], q) for q in per_query[reference]),
            key=lambda d: (d[0], d[1]),
        )

        def entry(delta: float, query_id: str) -> dict[str, Any]:
            item: dict[str, Any] = {"query": query_id, "delta": round(delta, 4), "kind": dataset.queries[query_id].kind}
            if not no_text:
                item["text"] = dataset.queries[query_id].text
            return item

        row["largest_gains"] = [entry(d, q) for d, q in reversed(deltas[-count:]) if d > 0]
        row["largest_losses"] = [entry(d, q) for d, q in deltas[:count] if d < 0]


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
    both exact engines side by side; a systems file names its own."""
    tolerance = check_tolerance(tolerance)
    folder = check_output(output)
    if inside(folder, dataset):  # a knowledge base, or a dataset folder (an export's corpus/ is one too)
        raise RagEvalError(
            f"{folder}: the report folder cannot go inside the knowledge base {dataset}: its report.md "
            "would be read as part of the corpus the next time",
            hint="write it beside the knowledge base, e.g. -o out/report",
        )
    baseline_path = check_baseline_target(write_baseline) if write_baseline is not None else None
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
    if systems_file is not None:
        listed, declared = load_systems_toml(Path(systems_file))
        fusions = declared + fusions
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
    )
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
