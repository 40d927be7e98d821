"""Small oracle studies for the tests of the study's tables and charts."""

from __future__ import annotations

from typing import Any

from rag_eval.eval.judging.oracle import sampling_study, summarise


def small_study() -> dict[str, Any]:
    """A judging study of two systems on two queries, with its summary."""
    runs = {"a": {"q1": ["x", "y", "n1"], "q2": ["z", "n2"]}, "b": {"q1": ["y", "x", "n3"], "q2": ["n2", "z"]}}
    qrels = {"q1": {"x": 2, "y": 1}, "q2": {"z": 1}}
    found = sampling_study(runs, qrels, samples=3, sample_queries=2, budget=4, until_settled=4, mc_samples=50)
    found["summary"] = summarise(found)
    return found
