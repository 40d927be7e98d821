"""Dataset formats: a registry (entry-point group ``rag_eval.datasets``) that turns a reference into a Dataset.

A format declares what it can do: ``detect`` whether a reference is its own, ``load`` it, and (optionally) a
``datasheet`` to show beside the statistics. No other code asks a format's name: commands go through
:func:`load_dataset` and :func:`describe_dataset`, which ask each registered format in turn."""

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
    #: The builder whose units a dataset of this format is, when the dataset records none (a BEIR folder's
    #: corpus.jsonl is read by ``passages``); see :func:`dataset_builder`.
    builder: ClassVar[str] = ""

    def detect(self, reference: str) -> bool:
        raise NotImplementedError

    def load(self, reference: str) -> Dataset:
        raise NotImplementedError

    def datasheet(self, reference: str) -> str | None:
        """The dataset's datasheet (Markdown) that ``datasets show`` prints, or None when the format keeps none."""
        return None


class ShippedFormat(DatasetFormat):
    """An id from datasets/manifest.json, e.g. ``handbook``."""

    name = "shipped"
    summary = "a dataset shipped with rag-eval, by id"

    def detect(self, reference: str) -> bool:
        return reference in shipped_ids()

    def load(self, reference: str) -> Dataset:
        return load_shipped(reference)

    def datasheet(self, reference: str) -> str | None:
        return datasheet(reference)


class BeirFormat(DatasetFormat):
    """A folder with corpus.jsonl, queries.jsonl and qrels/test.tsv."""

    name = "beir"
    summary = "a BEIR folder (corpus.jsonl, queries.jsonl, qrels/test.tsv)"
    builder = "passages"

    def detect(self, reference: str) -> bool:
        return (Path(reference) / "corpus.jsonl").is_file()

    def load(self, reference: str) -> Dataset:
        return load_beir(reference)


#: Every dataset format, built-in or plug-in, keyed by name.
DATASET_FORMATS: Registry[DatasetFormat] = Registry("rag_eval.datasets", "dataset format", DatasetFormat)


def dataset_builder(dataset: Dataset) -> str:
    """The builder whose units ``dataset``'s passages are: the one it records (a shipped set's, a knowledge
    base's), else the one its format declares (a BEIR folder's: passages)."""
    recorded = dataset.meta.get("builder")
    if recorded:
        return str(recorded)
    name = dataset.meta.get("format", "")
    declared = (
        getattr(DATASET_FORMATS[name], "builder", "") if isinstance(name, str) and name in DATASET_FORMATS else ""
    )
    if not declared:
        raise DatasetError(f"dataset {dataset.id!r} records no builder, and its format {name!r} declares none")
    return str(declared)


def load_dataset(reference: str) -> Dataset:
    """A shipped id or any folder a registered format recognises."""
    return dataset_format(reference).load(reference)


def dataset_format(reference: str) -> DatasetFormat:
    """The first registered format (by name) that recognises ``reference``; a plug-in that fails to load is
    passed over."""
    for name in DATASET_FORMATS:
        try:
            fmt = DATASET_FORMATS[name]()
        except RagEvalError:
            continue
        if fmt.detect(reference):
            return fmt
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
    datasheet when its format keeps one (a shipped set's). A folder named like a shipped id (``handbook``, made by
    ``queries synth ... -o handbook``) is that folder, described without the shipped set's datasheet."""
    fmt = dataset_format(reference)
    dataset = fmt.load(reference)
    stats = dataset.stats()
    stats["checksum"] = dataset.checksum()
    return stats, fmt.datasheet(reference)
