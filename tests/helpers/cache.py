"""The shipped evidence-mini set's cached index, its source and its lock file, as the cache tests find them."""

from __future__ import annotations

from pathlib import Path

from rag_eval.builders import get_builder
from rag_eval.eval.compare.runner import corpus_source, index_path
from rag_eval.eval.datasets.formats import load_dataset
from rag_eval.tokenizers import get_tokenizer


def _evidence_index() -> Path:
    source, builder = corpus_source(load_dataset("evidence-mini"))
    return index_path(source, get_builder(builder), get_tokenizer("bigram").spec)[0]


def _lock_file(index: Path) -> Path:
    return index.with_name(f".{index.stem}.lock")


def _evidence_source() -> tuple[Path, object]:
    source, builder = corpus_source(load_dataset("evidence-mini"))
    return source, get_builder(builder)
