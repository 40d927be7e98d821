"""Datasets shipped with rag-eval (datasets/<id>/), described by datasets/manifest.json."""

from __future__ import annotations

import hashlib
import shutil
from functools import lru_cache
from importlib.resources import files
from pathlib import Path
from typing import Any

from ...builders import Builder, get_builder
from ...errors import DatasetError
from ...files.outputs import new_folder, refuse_inside_source
from ...files.textio import read_bytes, read_json, read_text, refuse_unknown_keys
from .beir import read_qrels, read_queries, write_beir
from .records import Dataset, Passage

#: The keys of a datasets/manifest.json entry; any other is refused (a misspelt ``as-of`` would silently evaluate
#: without the set's date). Its dataset ids and the names under ``files`` are free.
ENTRY_KEYS = (
    "kind",
    "description",
    "licence",
    "builder",
    "mode",
    "as_of",
    "corpus",
    "queries",
    "qrels",
    "files",
    "characters",
)


def datasets_root() -> Path:
    """The installed ``rag_eval/datasets`` folder."""
    return Path(str(files("rag_eval.datasets")))


@lru_cache(maxsize=1)
def manifest() -> dict[str, dict[str, Any]]:
    """datasets/manifest.json: ids, files with sha256, descriptions, builder, as-of date."""
    data = read_json(datasets_root() / "manifest.json", DatasetError, label="datasets/manifest.json")
    if not isinstance(data, dict) or not all(isinstance(value, dict) for value in data.values()):
        raise DatasetError("datasets/manifest.json: expected an object of dataset entries")
    for dataset_id, found in data.items():
        refuse_unknown_keys(found, ENTRY_KEYS, f"datasets/manifest.json entry {dataset_id!r}", DatasetError)
    return data


def shipped_ids() -> list[str]:
    """Ids of the shipped labelled sets (not the benchmark text)."""
    return sorted(name for name, entry in manifest().items() if entry.get("kind") == "retrieval")


def entry(dataset_id: str) -> dict[str, Any]:
    """The manifest entry of a shipped labelled set; unknown ids list the shipped ones."""
    found = manifest().get(dataset_id)
    if found is None or found.get("kind") != "retrieval":
        raise DatasetError(
            f"unknown dataset {dataset_id!r}; shipped: {', '.join(shipped_ids())}, or give a BEIR folder"
        )
    return found


def verify_files(dataset_id: str) -> None:
    """Check every file the manifest lists against its sha256."""
    folder = datasets_root() / dataset_id
    for name, expected in entry(dataset_id)["files"].items():
        actual = hashlib.sha256(
            read_bytes(folder / name, DatasetError, label=f"datasets/{dataset_id}/{name}")
        ).hexdigest()
        if actual != expected:
            raise DatasetError(f"datasets/{dataset_id}/{name} does not match its sha256 in datasets/manifest.json")


def read_from(reference: str | Path) -> Path:
    """The path a dataset or knowledge-base reference reads: a shipped id's own folder (a path of that name
    comes first, as every command that takes one decides), else the path itself."""
    if isinstance(reference, str) and not Path(reference).exists() and reference in shipped_ids():
        return datasets_root() / reference
    return Path(reference)


def corpus_dir(dataset_id: str) -> Path:
    """The corpus in its builder's layout (a lines manifest folder or a Markdown tree)."""
    return datasets_root() / dataset_id / entry(dataset_id)["corpus"]


def passages(dataset_id: str) -> dict[str, Passage]:
    """The corpus as BEIR passages: the units its builder's chunks are judged as (lines keep their source
    ids; sections are whole, ``path#anchor``)."""
    return unit_passages(get_builder(entry(dataset_id)["builder"]), corpus_dir(dataset_id))


def unit_passages(builder: Builder, root: Path) -> dict[str, Passage]:
    """Every judged unit ``builder`` makes of the source at ``root``, as passages keyed by unit, in source order."""
    return {key: Passage(key, title, text) for file in builder.scan(root) for key, title, text in builder.units(file)}


def load_shipped(dataset_id: str) -> Dataset:
    """A shipped set in the canonical form, checked against the manifest's checksums."""
    info = entry(dataset_id)
    verify_files(dataset_id)
    folder = datasets_root() / dataset_id
    corpus = passages(dataset_id)
    queries = read_queries(folder / info["queries"])
    qrels = read_qrels(folder / info["qrels"], corpus, queries)
    kept = ("builder", "mode", "as_of", "description", "licence")
    meta: dict[str, Any] = {key: info[key] for key in kept if key in info}
    meta.update(format="shipped", path=str(folder), corpus_dir=str(corpus_dir(dataset_id)))
    return Dataset(dataset_id, corpus, queries, qrels, meta)


def shipped_listing() -> list[dict[str, Any]]:
    """``rag-eval datasets list``: each shipped set's statistics, with its builder and description."""
    return [
        {
            **load_shipped(dataset_id).stats(),
            "builder": entry(dataset_id)["builder"],
            "description": entry(dataset_id)["description"],
        }
        for dataset_id in shipped_ids()
    ]


def datasheet(dataset_id: str) -> str:
    """The set's README.md."""
    entry(dataset_id)
    return read_text(datasets_root() / dataset_id / "README.md", DatasetError, label=f"datasets/{dataset_id}/README.md")


def export_shipped(dataset_id: str, target: str | Path) -> Path:
    """Write a shipped set for other tools: ``corpus/`` in its builder's layout, plus BEIR files
    (corpus.jsonl, queries.jsonl, qrels/test.tsv) and the datasheet, as a new folder (atomically; an
    existing ``target`` is never overwritten and nothing outside it is touched)."""
    if manifest().get(dataset_id, {}).get("kind") != "retrieval":  # exports copy a shipped set's own files
        raise DatasetError(
            f"unknown dataset {dataset_id!r}: export writes a shipped set ({', '.join(shipped_ids())}) for other "
            "tools; a BEIR folder is already in that form",
            hint="use the folder itself (rag-eval compare FOLDER), or copy it",
        )
    refuse_inside_source(target, [datasets_root() / dataset_id], what="dataset folder")
    with new_folder(target, what="dataset folder") as staging:
        dataset = load_shipped(dataset_id)
        shutil.copytree(corpus_dir(dataset_id), staging / "corpus")
        write_beir(dataset, staging)
        shutil.copy(datasets_root() / dataset_id / "README.md", staging / "README.md")
    return Path(target)
