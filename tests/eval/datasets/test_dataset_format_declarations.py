"""Dataset formats act by what they declare: ``datasets show`` prints the datasheet a format keeps, whichever
format it is, and the registry takes only DatasetFormat classes (a stray class would fail later, mid-command)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from rag_eval.cli import cli
from rag_eval.errors import RegistryError
from rag_eval.eval.datasets.formats import DATASET_FORMATS, DatasetFormat, describe_dataset
from rag_eval.eval.datasets.records import Dataset, Passage, Query

SHEET = "# sheet-test\n\nA datasheet kept by a plug-in format.\n"


class SheetFormat(DatasetFormat):
    """A folder holding sheet.md: one passage, one question, and the sheet as its datasheet (a test plug-in)."""

    name = "sheet-test"
    summary = "a folder with sheet.md (a test plug-in)"

    def detect(self, reference: str) -> bool:
        return (Path(reference) / "sheet.md").is_file()

    def load(self, reference: str) -> Dataset:
        corpus = {"d1": Passage("d1", "", "导出文件保留三十天")}
        return Dataset(Path(reference).name, corpus, {"q1": Query("q1", "导出")}, {"q1": {"d1": 1}}, {})

    def datasheet(self, reference: str) -> str | None:
        return (Path(reference) / "sheet.md").read_text(encoding="utf-8")


@pytest.fixture
def sheet_format(tmp_path: Path) -> Iterator[Path]:
    DATASET_FORMATS.register(SheetFormat)
    folder = tmp_path / "kept"
    folder.mkdir()
    (folder / "sheet.md").write_text(SHEET, encoding="utf-8")
    yield folder
    DATASET_FORMATS.unregister(SheetFormat.name)


def test_datasets_show_prints_the_datasheet_a_plug_in_format_keeps(sheet_format: Path) -> None:
    result = CliRunner().invoke(cli, ["datasets", "show", str(sheet_format)])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(SHEET.rstrip() + "\n") and "# statistics" in result.stdout
    stats, sheet = describe_dataset(str(sheet_format))
    assert sheet == SHEET and stats["queries"] == 1
    as_json = CliRunner().invoke(cli, ["datasets", "show", str(sheet_format), "--json"])
    assert json.loads(as_json.stdout)["passages"] == 1  # the statistics alone, as for every format


def test_a_format_that_keeps_no_datasheet_shows_statistics_only(tmp_path: Path) -> None:
    folder = tmp_path / "handbook"  # named like a shipped set: the folder is what is shown
    folder.mkdir()
    (folder / "corpus.jsonl").write_text('{"_id": "d1", "title": "", "text": "导出文件"}\n', encoding="utf-8")
    (folder / "queries.jsonl").write_text('{"_id": "q1", "text": "导出"}\n', encoding="utf-8")
    (folder / "qrels").mkdir()
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n", encoding="utf-8")
    stats, sheet = describe_dataset(str(folder))
    assert sheet is None and stats["passages"] == 1
    shipped_stats, shipped_sheet = describe_dataset("handbook")
    assert shipped_sheet and shipped_stats["passages"] > 1


def test_the_registry_refuses_a_class_that_is_no_dataset_format() -> None:
    class NotAFormat:
        name = "not-a-format-test"

        def detect(self, reference: str) -> bool:
            return True

    with pytest.raises(RegistryError, match="not a subclass of"):
        DATASET_FORMATS.register(NotAFormat)
    assert "not-a-format-test" not in DATASET_FORMATS
