"""Dataset formats: a registry (entry-point group ``rag_eval.datasets``) that turns a reference into a Dataset."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from ...errors import DatasetError, RagEvalError
from ...registry import Registry
from .beir import load_beir
from .records import Dataset
from .shipped import datasheet, load_shipped, shipped_ids


class DatasetFormat:
    """Base of a dataset format: ``detect`` says whether a reference is in this format, ``load`` reads it."""

    name: ClassVar[str]
    summary: ClassVar[str] = ""

    def detect(self, reference: str) -> bool:
        raise NotImplementedError

    def load(self, reference: str) -> Dataset:
        raise NotImplementedError


class ShippedFormat(DatasetFormat):
    """An id from datasets/manifest.json, e.g. ``handbook``."""

    name = "shipped"
    summary = "a dataset shipped with rag-eval, by id"

    def detect(self, reference: str) -> bool:
        return reference in shipped_ids()

    def load(self, reference: str) -> Dataset:
        return load_shipped(reference)


class BeirFormat(DatasetFormat):
    """A folder with corpus.jsonl, queries.jsonl and qrels/test.tsv."""

    name = "beir"
    summary = "a BEIR folder (corpus.jsonl, queries.jsonl, qrels/test.tsv)"

    def detect(self, reference: str) -> bool:
        return (Path(reference) / "corpus.jsonl").is_file()

    def load(self, reference: str) -> Dataset:
        return load_beir(reference)


#: Every dataset format, built-in or plug-in, keyed by name.
DATASET_FORMATS: Registry[DatasetFormat] = Registry("rag_eval.datasets", "dataset format")


def load_dataset(reference: str) -> Dataset:
    """A shipped id or any folder a registered format recognises."""
    for name in DATASET_FORMATS:
        try:
            fmt = DATASET_FORMATS[name]()
        except RagEvalError:
            continue
        if fmt.detect(reference):
            return fmt.load(reference)
    # A knowledge base without questions (a Markdown folder, a lines corpus) exists but is no dataset yet.
    hint = (
        "a knowledge base needs questions: compare SOURCE --queries FILE takes a file of them (one per line); "
        "rag-eval queries synth SOURCE -n 50 -o DIR writes a dataset of synthetic, labelled ones that every "
        "command takes"
        if Path(reference).exists()
        else None
    )
    raise DatasetError(
        f"unknown dataset {reference!r}: not a shipped id ({', '.join(shipped_ids())}) nor a folder in a known format "
        f"({', '.join(sorted(DATASET_FORMATS))})",
        hint=hint,
    )


def describe_dataset(reference: str) -> tuple[dict[str, Any], str | None]:
    """``rag-eval datasets show``: the statistics (with the checksum) of the dataset ``reference`` loads, and its
    datasheet when that dataset is a shipped one. A folder named like a shipped id (``handbook``, made by
    ``queries synth ... -o handbook``) is that folder, described without the shipped set's datasheet."""
    dataset = load_dataset(reference)
    stats = dataset.stats()
    stats["checksum"] = dataset.checksum()
    sheet = datasheet(reference) if dataset.meta.get("format") == "shipped" and reference in shipped_ids() else None
    return stats, sheet
