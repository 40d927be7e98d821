"""The benchmark text shipped in the package (datasets/bench-zh), verified against the manifest's checksums.

Only tests and benchmarks read it, so the loader lives with them; the text ships as package data.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from importlib.resources import files

from rag_eval.errors import RagEvalError


def _manifest() -> dict:
    return json.loads((files("rag_eval.datasets") / "manifest.json").read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def bench_text() -> list[str]:
    """The paragraphs of bench-zh (about 200 KB of our own Chinese prose), in file order."""
    entry = _manifest()["bench-zh"]
    folder = files("rag_eval.datasets") / "bench-zh"
    paragraphs: list[str] = []
    for name, expected in entry["files"].items():
        data = (folder / name).read_bytes()
        if hashlib.sha256(data).hexdigest() != expected:
            raise RagEvalError(f"datasets/bench-zh/{name} does not match its checksum in datasets/manifest.json")
        paragraphs += [p.strip() for p in data.decode("utf-8").split("\n\n") if p.strip()]
    return paragraphs
