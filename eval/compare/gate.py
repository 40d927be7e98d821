"""The quality gate: compare a report with a baseline report and call out regressions."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import RagEvalError
from ...files.outputs import StagedFile, check_file_target, stage_text, write_text_atomic
from ...files.textio import read_json, shown
from ..metrics.measures import MetricError, canonical_metric, is_quality, value_range
from ..reporting.model import (
    BASELINE_SCHEMA,
    REPORT_SCHEMA,
    Comparison,
    Environment,
    GateChange,
    GateSection,
    StaleSystem,
    SystemResult,
    as_comparison,
)
from ..reporting.reader import MAX_REPORT_BYTES, read_report

DEFAULT_TOLERANCE = 0.005
BASELINE_WHAT = "baseline file"


@dataclass
class GateResult:
    """Regressions, improvements, stale baselines and systems without a counterpart."""

    regressions: list[dict[str, Any]] = field(default_factory=list)
    improvements: list[dict[str, Any]] = field(default_factory=list)
    stale: list[dict[str, Any]] = field(default_factory=list)
    unmatched: list[str] = field(default_factory=list)
    compared: int = 0
    baseline_systems: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        """One human line per finding."""
        out = []
        for item in self.regressions:
            out.append(
                f"REGRESSION {item['system']}: {item['metric']} {item['old']:.4f} -> {item['new']:.4f} "
                f"({item['new'] - item['old']:+.4f}, tolerance {item['tolerance']})"
            )
        for item in self.improvements:
            out.append(f"improved {item['system']}: {item['metric']} {item['old']:.4f} -> {item['new']:.4f}")
        for item in self.stale:
            details = "; ".join(f"{k}: {v[0]} -> {v[1]}" for k, v in item["differences"].items())
            out.append(f"baseline stale {item['system']}: {details} (not compared; update the baseline)")
        out += self.unmatched
        return out

    def failure(self, against: str | Path, tolerance: float) -> GateError | None:
        """Why a gate that must pass (``--fail-on-regression``) fails: a regression, or no system compared
        (a gate that compared nothing has checked nothing); None when it passes."""
        if self.regressions:
            return GateError(
                f"{len(self.regressions)} metric regressions against {against} (tolerance {tolerance}); "
                "see the REGRESSION lines above"
            )
        if self.compared:
            return None
        stale = f" ({len(self.stale)} with a changed identity, listed above as stale)" if self.stale else ""
        return GateError(
            f"the gate compared no system: no system of this run matches one of {against} with a metric in "
            f"common{stale}; the baseline has: {', '.join(self.baseline_systems) or 'no systems'}",
            hint="compare the baseline's systems (same tokenizer, builder, mode and engine), or write a new "
            "baseline with --write-baseline FILE",
        )


#: Largest baseline or report file read, in bytes (a report with per-query values of a large set is tens of MB).
MAX_BASELINE_BYTES = MAX_REPORT_BYTES


class GateError(RagEvalError, ValueError):
    """A baseline that cannot be used, or a tolerance that is not a finite non-negative number."""


def check_tolerance(tolerance: object) -> float:
    """``tolerance`` as a float; NaN, infinite and negative values are refused (NaN would pass every drop)."""
    if (
        not isinstance(tolerance, (int, float))
        or isinstance(tolerance, bool)
        or not math.isfinite(tolerance)
        or tolerance < 0
    ):
        raise GateError(
            f"tolerance must be a finite number of at least 0, not {tolerance!r}",
            hint=f"the default is {DEFAULT_TOLERANCE}",
        )
    return float(tolerance)


def load_baseline(path: str | Path) -> Comparison:
    """A report.json (or a baseline written by --write-baseline), checked to be one the gate can hold a run against
    (:func:`check_baseline`) and to follow the report schema, as the model."""
    if not os.path.lexists(path):
        raise GateError(f"{path}: no such baseline", hint="write one with --write-baseline FILE")
    return read_report(path, error=GateError, check=check_baseline, max_bytes=MAX_BASELINE_BYTES)


def check_baseline(data: Any, label: str = "baseline") -> None:
    """Refuse a baseline whose shape ``check`` cannot rely on: systems with names, specs and finite metrics."""
    if not isinstance(data, dict) or not isinstance(data.get("systems"), list):
        raise GateError(f"{label}: not a rag-eval report or baseline (no 'systems' list)")
    if not isinstance(data.get("schema"), str) or not data["schema"].startswith("rag-eval/"):
        raise GateError(f"{label}: not a rag-eval report or baseline (schema {data.get('schema')!r})")
    if data["schema"] not in (BASELINE_SCHEMA, REPORT_SCHEMA):
        # Another version's file may mean its values otherwise: holding this run against it would mislead.
        raise GateError(
            f"{label}: schema {shown(data['schema'])} is not one this rag-eval reads "
            f"({BASELINE_SCHEMA} or {REPORT_SCHEMA})",
            hint="write the baseline again with this version: --write-baseline FILE",
        )
    dataset = data.get("dataset")
    if not isinstance(dataset, dict) or not isinstance(dataset.get("checksum"), str):
        raise GateError(f"{label}: no dataset checksum")
    listed = data.get("metrics", [])
    if not isinstance(listed, list):
        raise GateError(f"{label}: 'metrics' must be a list of metric names")
    for metric in listed:
        _check_metric_name(metric, f"{label}: metrics")
    names: set[str] = set()
    for number, row in enumerate(data["systems"], start=1):
        where = f"{label}: system {number}"
        if not isinstance(row, dict) or not isinstance(row.get("name"), str):
            raise GateError(f"{where}: needs a name")
        if row["name"] in names:
            raise GateError(f"{where}: {row['name']!r} appears twice")
        names.add(row["name"])
        for key in ("tokenizer", "builder"):
            if not isinstance(row.get(key, ""), str):
                raise GateError(f"{where}: {key} must be text")
        metrics = row.get("metrics")
        if not isinstance(metrics, dict):
            raise GateError(f"{where}: needs a 'metrics' object")
        for metric, value in metrics.items():
            _check_metric_name(metric, where)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
                raise GateError(f"{where}: metric {metric} is {value!r}, not a finite number")
            low, high = value_range(metric)
            if not low <= value <= high:
                span = f"from {low:g} to {high:g}" if math.isfinite(high) else f"a count of at least {low:g}"
                raise GateError(f"{where}: metric {metric} is {shown(value)}, outside its values ({span})")


def _check_metric_name(metric: object, where: str) -> None:
    """Refuse a name that is not a metric rag-eval computes, or not as its reports write it: the gate matches
    metrics by name, so such a one would be left out without a word."""
    if not isinstance(metric, str):
        raise GateError(f"{where}: a metric name must be text, not {shown(metric)}")
    try:
        canonical = canonical_metric(metric)
    except MetricError as exc:
        raise GateError(f"{where}: {exc}") from None
    if canonical != metric:
        raise GateError(f"{where}: metric {shown(metric)} is written {canonical} in rag-eval's reports")


def baseline_owned(path: Path) -> str | None:
    """None when ``path`` is a file rag-eval wrote (JSON with a ``rag-eval/`` schema), else why not."""
    try:
        data = read_json(path, GateError, max_bytes=MAX_BASELINE_BYTES)
    except GateError as exc:
        return f"it is not a rag-eval file ({exc})"
    if (
        not isinstance(data, dict)
        or not isinstance(data.get("schema"), str)
        or not data["schema"].startswith("rag-eval/")
    ):
        return "it is not a rag-eval baseline or report (no rag-eval schema)"
    schema = data["schema"]
    if not schema.startswith(("rag-eval/baseline/", "rag-eval/compare/")):
        # tune.json, a judge replay, synthetic.json: rag-eval's, but another command's record, not a baseline
        return f"it is another command's output ({schema}), not a baseline"
    if schema.startswith("rag-eval/compare/") and path.name == "report.json":
        # the report.json of a report folder: replaced by a baseline, the folder is no longer a report
        return "it is the report.json of a compare report folder, not a baseline"
    return None


def check_baseline_target(path: str | Path) -> Path:
    """Refuse now a ``--write-baseline`` target that ``write_baseline`` would refuse later."""
    return check_file_target(path, owned=baseline_owned, what=BASELINE_WHAT)


def stage_baseline(report: Comparison, path: str | Path) -> StagedFile:
    """``baseline_of(report)`` written beside ``path``, put in place by ``commit()`` (see :func:`write_baseline`)."""
    return stage_text(path, _baseline_text(report), owned=baseline_owned, what=BASELINE_WHAT)


def write_baseline(report: Comparison, path: str | Path) -> Path:
    """Write ``baseline_of(report)`` atomically; an existing file is replaced only when rag-eval wrote it."""
    return write_text_atomic(path, _baseline_text(report), owned=baseline_owned, what=BASELINE_WHAT)


def _baseline_text(report: Comparison) -> str:
    return json.dumps(baseline_of(report), ensure_ascii=False, indent=2) + "\n"


def check(
    report: Comparison | Mapping[str, Any],
    baseline: Comparison | Mapping[str, Any],
    *,
    tolerance: float = DEFAULT_TOLERANCE,
) -> GateResult:
    """Every system of ``report`` against the same-named system of ``baseline`` (the model, or report.json's
    content, which is checked first as :func:`load_baseline` checks a file).

    A system is compared only when its identity is unchanged: the same dataset checksum, tokenizer spec
    (options, model checksum, library versions) and builder spec; otherwise the baseline is stale and the
    differing fields are listed. A metric lower by more than ``tolerance`` is a regression; higher by
    more is an improvement.
    """
    tolerance = check_tolerance(tolerance)
    if not isinstance(baseline, Comparison):
        check_baseline(baseline)
    run, base = as_comparison(report), as_comparison(baseline)
    result = GateResult(baseline_systems=[row.name for row in base.systems])
    old_systems = {row.name: row for row in base.systems}
    moved = None if run.dataset.checksum == base.dataset.checksum else (base.dataset.checksum, run.dataset.checksum)
    for row in run.systems:
        old = old_systems.get(row.name)
        if old is None:
            result.unmatched.append(f"new system {row.name}: not in the baseline")
            continue
        differences = _identity_changes(old, row)
        if moved is not None:
            differences["dataset checksum"] = moved
        if differences:
            result.stale.append({"system": row.name, "differences": differences})
            continue
        _hold(result, row, old, tolerance)
    names = {row.name for row in run.systems}
    result.unmatched += [f"baseline system {name}: not in this run" for name in old_systems if name not in names]
    return result


def _identity_changes(old: SystemResult, row: SystemResult) -> dict[str, tuple[Any, Any]]:
    """The identity fields (tokenizer and builder specs) that differ: the baseline's value and this run's."""
    pairs = {"tokenizer": (old.tokenizer, row.tokenizer), "builder": (old.builder, row.builder)}
    return {key: pair for key, pair in pairs.items() if pair[0] != pair[1]}


def _hold(result: GateResult, row: SystemResult, old: SystemResult, tolerance: float) -> None:
    """Hold ``row``'s quality metrics against ``old``'s: regressions and improvements beyond ``tolerance``."""
    # Quality measures only: fewer documents retrieved (NumRet) is not a regression.
    shared = [metric for metric in row.metrics if metric in old.metrics and is_quality(metric)]
    if not shared:
        # Nothing to hold against the baseline: counted as compared, the gate would pass having checked nothing.
        result.unmatched.append(
            f"system {row.name}: no metric in common with the baseline (baseline: "
            f"{', '.join(old.metrics) or 'none'}; this run: {', '.join(row.metrics) or 'none'})"
        )
        return
    result.compared += 1
    for metric in shared:
        new, before = row.metrics[metric], old.metrics[metric]
        item = {"system": row.name, "metric": metric, "old": before, "new": new, "tolerance": tolerance}
        if new < before - tolerance:
            result.regressions.append(item)
        elif new > before + tolerance:
            result.improvements.append(item)


def baseline_of(report: Comparison | Mapping[str, Any]) -> dict[str, Any]:
    """The baseline file's content: :func:`baseline_model` as JSON."""
    return baseline_model(report).to_json()


def baseline_model(report: Comparison | Mapping[str, Any]) -> Comparison:
    """What a baseline keeps: identities and mean metrics, not per-query values or latencies."""
    report = as_comparison(report)
    environment = report.environment
    kept = Environment(
        rag_eval=environment.rag_eval,
        sqlite=environment.sqlite,
        packages=environment.packages,
        commit=environment.commit,
        created_utc=environment.created_utc,
    )
    rows = tuple(
        SystemResult(row.name, row.tokenizer, row.builder, row.mode, metrics=row.metrics) for row in report.systems
    )
    return Comparison(BASELINE_SCHEMA, report.dataset, report.metrics, rows, kept)


def gate_section(gate: GateResult, against: str | None, tolerance: float) -> GateSection:
    """What report.json records of the gate's findings (its ``gate``)."""
    return GateSection(
        against,
        tolerance,
        gate.compared,
        tuple(GateChange(**item) for item in gate.regressions),
        tuple(GateChange(**item) for item in gate.improvements),
        tuple(StaleSystem(item["system"], item["differences"]) for item in gate.stale),
        tuple(gate.unmatched),
    )
