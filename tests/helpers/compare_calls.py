"""The comparison's library calls as the tests make them: ``compare`` with its result as report.json's content
(the shape the tests read and users see), ``run_compare`` with the request's fields given as keywords."""

from __future__ import annotations

from typing import Any

from rag_eval.eval.compare import compare as module
from rag_eval.eval.compare.compare import CompareResult
from rag_eval.eval.metrics.measures import RankedDoc


def compare(*args: Any, **kwargs: Any) -> tuple[dict[str, Any], dict[str, list[RankedDoc]]]:
    """``compare(...)``, the comparison as its ``to_json()``."""
    comparison, runs = module.compare(*args, **kwargs)
    return comparison.to_json(), runs


def run_compare(dataset: str, **options: Any) -> CompareResult:
    """``run_compare(CompareRequest(dataset, **options))``."""
    return module.run_compare(module.CompareRequest(dataset, **options))
