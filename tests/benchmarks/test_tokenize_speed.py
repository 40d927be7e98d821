"""Tokenization throughput per strategy on the shipped ~200 KB benchmark text (pytest-benchmark).

Run with: pytest tests/benchmarks -o addopts="" --benchmark-only
"""

from __future__ import annotations

import pytest
from helpers import ALL_SPECS, REAL_PKUSEG_MODEL, tokenizer_for
from helpers.benchtext import bench_text

SPECS = ALL_SPECS + (["pkuseg:model=default-real"] if REAL_PKUSEG_MODEL else [])


def _tokenizer(spec: str):
    if spec == "pkuseg:model=default-real":
        return tokenizer_for(f"pkuseg:model={REAL_PKUSEG_MODEL}")
    return tokenizer_for(spec)


@pytest.mark.parametrize("spec", SPECS)
def test_tokenize_throughput(benchmark, spec: str) -> None:
    paragraphs = bench_text()
    tokenizer = _tokenizer(spec)
    characters = sum(map(len, paragraphs))
    benchmark.group = f"tokenize:{spec.split(':')[0]}"
    benchmark.extra_info.update({"spec": tokenizer.spec, "characters": characters, "paragraphs": len(paragraphs)})

    def run() -> int:
        return sum(len(tokenizer.tokenize(p)) for p in paragraphs)

    tokens = benchmark.pedantic(run, rounds=5, iterations=1, warmup_rounds=1)
    benchmark.extra_info["tokens"] = tokens
    benchmark.extra_info["chars_per_second_median"] = round(characters / benchmark.stats.stats.median)
    assert tokens > 0
