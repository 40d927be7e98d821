"""The builder a dataset's passages come from is declared, not written in each place that needs it: the dataset
records it (a shipped set, a knowledge base), else its format declares it (a BEIR folder: passages). Bug: the
default "passages" was written in four places of compare, tune and the runner."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rag_eval.errors import DatasetError
from rag_eval.eval.compare.runner import corpus_source
from rag_eval.eval.datasets.beir import load_beir, write_beir
from rag_eval.eval.datasets.formats import DATASET_FORMATS, BeirFormat, dataset_builder, load_dataset
from rag_eval.eval.datasets.records import Dataset, Passage, Query


class LinesFolderFormat(BeirFormat):
    """A BEIR folder marked lines.mark whose passages a test says are lines (a test plug-in)."""

    name = "a-marked-test"  # before "beir": formats are asked in name order
    builder = "lines"

    def detect(self, reference: str) -> bool:
        return (Path(reference) / "lines.mark").is_file()

    def load(self, reference: str) -> Dataset:
        dataset = load_beir(reference)
        dataset.meta["format"] = self.name
        return dataset


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    dataset = Dataset("d", {"p1": Passage("p1", "", "导出")}, {"q1": Query("q1", "导出")}, {"q1": {"p1": 1}})
    return write_beir(dataset, tmp_path / "set")


@pytest.fixture
def marked(folder: Path) -> Iterator[Path]:
    (folder / "lines.mark").write_text("", encoding="utf-8")
    DATASET_FORMATS.register(LinesFolderFormat)
    yield folder
    DATASET_FORMATS.unregister(LinesFolderFormat.name)


def test_a_beir_folder_is_read_by_the_builder_its_format_declares(folder: Path) -> None:
    dataset = load_dataset(str(folder))
    assert dataset_builder(dataset) == BeirFormat.builder == "passages"
    assert corpus_source(dataset) == (folder, "passages")


def test_a_plug_in_format_declares_its_own_builder(marked: Path) -> None:
    dataset = load_dataset(str(marked))
    assert dataset.meta["format"] == "a-marked-test" and dataset_builder(dataset) == "lines"


def test_a_recorded_builder_wins_and_none_at_all_is_one_error(folder: Path) -> None:
    shipped = load_dataset("handbook")
    assert dataset_builder(shipped) == shipped.meta["builder"]
    with pytest.raises(DatasetError, match="records no builder, and its format 'nowhere' declares none"):
        dataset_builder(Dataset("x", {}, {}, {}, {"format": "nowhere"}))
