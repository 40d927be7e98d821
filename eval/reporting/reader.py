"""The one reader of a saved report.json (or a baseline): read as JSON with the project's limits, checked against
the JSON Schema shipped beside this module (``report.schema.json``), and built into the model
(:class:`.model.Comparison`). Every failure is one error naming the file and, for a value the schema refuses, the
key that holds it (``systems[0].metrics.P@1``)."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from importlib.resources import files
from pathlib import Path
from typing import Any

from ...errors import RagEvalError
from ...files.textio import read_json, shown
from .model import Comparison

SCHEMA_FILE = "report.schema.json"
#: Largest report or baseline file read, in bytes (a report with per-query values of a large set is tens of MB).
MAX_REPORT_BYTES = 1_000_000_000


@functools.cache
def report_schema() -> dict[str, Any]:
    """The JSON Schema of report.json and of a baseline (``rag-eval/compare/1``, ``rag-eval/baseline/1``)."""
    text = (files("rag_eval.eval.reporting") / SCHEMA_FILE).read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def where(path: Any) -> str:
    """A key path as an error names it: ``systems[0].metrics.P@1``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "the top level"


def validate(data: Any, label: str, error: type[RagEvalError] = RagEvalError) -> None:
    """Refuse ``data`` that does not follow the report schema: one error naming ``label`` and the key."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(report_schema())
    found = jsonschema.exceptions.best_match(validator.iter_errors(data))
    if found is None:
        return
    raise error(f"{label}: {where(found.absolute_path)}: {_reason(found)}", hint="write it again with this rag-eval")


def _reason(found: Any) -> str:
    """What is wrong with the value, short: the value shown at most 60 characters, never the whole of it."""
    if found.validator == "type":
        expected = found.validator_value
        kinds = " or ".join(expected) if isinstance(expected, list) else expected
        return f"must be {kinds}, not {shown(found.instance)}"
    if found.validator in ("enum", "const"):
        return f"{shown(found.instance)} is not one of {shown(found.validator_value)}"
    if found.validator == "required":
        missing = next((key for key in found.validator_value if key not in found.instance), "?")
        return f"needs {missing!r}"
    message: str = found.message
    return message if len(message) <= 200 else message[:197] + "..."


def read_report(
    path: str | Path,
    *,
    error: type[RagEvalError] = RagEvalError,
    check: Callable[[Any, str], None] | None = None,
    max_bytes: int = MAX_REPORT_BYTES,
) -> Comparison:
    """A report.json or baseline file as the model. ``check(data, label)`` runs first (the gate's own checks, whose
    messages say what the gate needs), then the schema; each failure is one ``error`` naming ``path``."""
    data = read_json(path, error, max_bytes=max_bytes)
    label = str(path)
    if check is not None:
        check(data, label)
    validate(data, label, error)
    return Comparison.from_json(data)
