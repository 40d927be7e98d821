"""Writes the golden files of tests/eval/compare/test_fusion.py: three small TREC runs (a.run, b.run, c.run) and
expected.json, ranx's ``fuse`` of them under every method, normalisation and k rag-eval offers.

ranx is not a dependency of rag-eval (it pulls numba, ir_datasets and pandas, 700 MB); the files were made once with:

    python3 -m venv /tmp/ranx && /tmp/ranx/bin/pip install ranx==0.3.21
    cd tests/data/fusion && /tmp/ranx/bin/python make_golden.py
"""

from __future__ import annotations

import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED = 20261201
#: rag-eval's normalisations and methods under ranx's names.
NORMS = {"minmax": "min-max", "sum": "sum", "zmuv": "zmuv"}
METHODS = {"combsum": "sum", "combmnz": "mnz"}


def scores(rng: random.Random, count: int, low: float, high: float) -> list[float]:
    """``count`` distinct scores rounded to 6 decimals (as a TREC file holds them), best first."""
    values: set[float] = set()
    while len(values) < count:
        values.add(round(rng.uniform(low, high), 6))
    return sorted(values, reverse=True)


def make_runs() -> dict[str, dict[str, list[tuple[str, float]]]]:
    """Runs on three scales: bm25-like, a wider bm25-like, and cosine-like similarities."""
    rng = random.Random(SEED)
    scales = {"a": (2.0, 25.0), "b": (5.0, 40.0), "c": (0.2, 0.9)}
    runs: dict[str, dict[str, list[tuple[str, float]]]] = {name: {} for name in scales}
    pool = [f"d{n:03d}" for n in range(1, 151)]
    for query in ("q1", "q2", "q3"):
        for name, (low, high) in scales.items():
            docs = rng.sample(pool, rng.randint(5, 40))
            runs[name][query] = list(zip(docs, scores(rng, len(docs), low, high), strict=True))
    # One document in a run: min-max and sum denominators are 0 (ranx floors them at 1e-9).
    runs["a"]["e1"] = [("x1", 7.5)]
    runs["b"]["e1"] = [("x2", 30.0), ("x1", 20.0), ("x3", 10.0)]
    runs["c"]["e1"] = [("x3", 0.8), ("x4", 0.7)]
    # Disjoint runs: every RRF score is shared by one document of each run.
    runs["a"]["e2"] = [("a1", 9.0), ("a2", 8.0), ("a3", 7.0)]
    runs["b"]["e2"] = [("b1", 19.0), ("b2", 18.0), ("b3", 17.0)]
    runs["c"]["e2"] = [("c1", 0.9), ("c2", 0.8), ("c3", 0.7)]
    # One ranking in every run, scores on different scales.
    same = ["s1", "s2", "s3", "s4"]
    runs["a"]["e3"] = list(zip(same, [4.0, 3.0, 2.5, 1.0], strict=True))
    runs["b"]["e3"] = list(zip(same, [40.0, 20.0, 10.0, 5.0], strict=True))
    runs["c"]["e3"] = list(zip(same, [0.9, 0.85, 0.5, 0.1], strict=True))
    return runs


def write_run(path: Path, run: dict[str, list[tuple[str, float]]], tag: str) -> None:
    with path.open("w", encoding="utf-8") as out:
        for query, docs in run.items():
            for rank, (doc, score) in enumerate(docs, start=1):
                out.write(f"{query} Q0 {doc} {rank} {score:.6f} {tag}\n")


def main() -> None:
    from ranx import Run, fuse

    runs = make_runs()
    for name, run in runs.items():
        write_run(HERE / f"{name}.run", run, name)
    loaded = {name: Run.from_file(str(HERE / f"{name}.run"), kind="trec") for name in runs}
    cases = []
    for members in (["a", "b"], ["a", "b", "c"]):
        for k in (60, 10, 0):
            cases.append(
                {
                    "method": "rrf",
                    "k": k,
                    "members": members,
                    "ranx": {"norm": None, "method": "rrf", "params": {"k": k}},
                }
            )
        for method, ranx_method in METHODS.items():
            for norm, ranx_norm in NORMS.items():
                cases.append(
                    {
                        "method": method,
                        "normalise": norm,
                        "members": members,
                        "ranx": {"norm": ranx_norm, "method": ranx_method},
                    }
                )
        weights = [2.0, 1.0, 0.5][: len(members)]
        for norm, ranx_norm in NORMS.items():
            cases.append(
                {
                    "method": "combsum",
                    "normalise": norm,
                    "weights": weights,
                    "members": members,
                    "ranx": {"norm": ranx_norm, "method": "wsum", "params": {"weights": weights}},
                }
            )
    for case in cases:
        fused = fuse([loaded[m] for m in case["members"]], **case["ranx"])
        case["run"] = {q: dict(docs) for q, docs in sorted(fused.to_dict().items())}
    (HERE / "expected.json").write_text(json.dumps(cases) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
