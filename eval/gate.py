"""The quality gate: compare a report with a baseline report and call out regressions."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import RagEvalError

DEFAULT_TOLERANCE = 0.005


@dataclass
class GateResult:
    """Regressions, improvements, stale baselines and systems without a counterpart."""

    regressions: list[dict[str, Any]] = field(default_factory=list)
    improvements: list[dict[str, Any]] = field(default_factory=list)
    stale: list[dict[str, Any]] = field(default_factory=list)
    unmatched: list[str] = field(default_factory=list)
    compared: int = 0

    def lines(self) -> list[str]:
        """One human line per finding."""
        out = []
        for item in self.regressions:
            out.append(f"REGRESSION {item['system']}: {item['metric']} {item['old']:.4f} -> {item['new']:.4f} "
                       f"({item['new'] - item['old']:+.4f}, tolerance {item['tolerance']})")
        for item in self.improvements:
            out.append(f"improved {item['system']}: {item['metric']} {item['old']:.4f} -> {item['new']:.4f}")
        for item in self.stale:
            details = "; ".join(f"{k}: {v[0]} -> {v[1]}" for k, v in item["differences"].items())
            out.append(f"baseline stale {item['system']}: {details} (not compared; update the baseline)")
        out += self.unmatched
        return out


def load_baseline(path: str | Path) -> dict[str, Any]:
    """A report.json (or a baseline written by --write-baseline)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RagEvalError(f"{path}: no such baseline", hint="write one with --write-baseline FILE") from None
    except json.JSONDecodeError as exc:
        raise RagEvalError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, dict) or not isinstance(data.get("systems"), list):
        raise RagEvalError(f"{path}: not a rag-eval report (no 'systems' list)")
    return data


def check(report: dict[str, Any], baseline: dict[str, Any], *, tolerance: float = DEFAULT_TOLERANCE) -> GateResult:
    """Every system of ``report`` against the same-named system of ``baseline``.

    A system is compared only when its identity is unchanged: the same dataset checksum, tokenizer spec
    (options, model checksum, library versions) and builder spec; otherwise the baseline is stale and the
    differing fields are listed. A metric lower by more than ``tolerance`` is a regression; higher by
    more is an improvement.
    """
    result = GateResult()
    old_systems = {row["name"]: row for row in baseline["systems"]}
    dataset_changed = report["dataset"]["checksum"] != baseline.get("dataset", {}).get("checksum")
    for row in report["systems"]:
        old = old_systems.get(row["name"])
        if old is None:
            result.unmatched.append(f"new system {row['name']}: not in the baseline")
            continue
        differences = {key: (old.get(key), row.get(key)) for key in ("tokenizer", "builder") if old.get(key) != row.get(key)}
        if dataset_changed:
            differences["dataset checksum"] = (baseline.get("dataset", {}).get("checksum"), report["dataset"]["checksum"])
        if differences:
            result.stale.append({"system": row["name"], "differences": differences})
            continue
        result.compared += 1
        for metric, new in row["metrics"].items():
            if metric not in old.get("metrics", {}):
                continue
            before = old["metrics"][metric]
            item = {"system": row["name"], "metric": metric, "old": before, "new": new, "tolerance": tolerance}
            if new < before - tolerance:
                result.regressions.append(item)
            elif new > before + tolerance:
                result.improvements.append(item)
    names = {row["name"] for row in report["systems"]}
    result.unmatched += [f"baseline system {name}: not in this run" for name in old_systems if name not in names]
    return result


def baseline_of(report: dict[str, Any]) -> dict[str, Any]:
    """What a baseline keeps: identities and mean metrics, not per-query values or latencies."""
    keep = ("name", "tokenizer", "builder", "mode", "metrics")
    return {
        "schema": "rag-eval/baseline/1",
        "environment": {k: report["environment"][k] for k in ("rag_eval", "sqlite", "packages", "commit", "created_utc")},
        "dataset": report["dataset"],
        "metrics": report["metrics"],
        "systems": [{k: row[k] for k in keep if k in row} for row in report["systems"]],
    }
