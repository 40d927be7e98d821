"""The oracle study's charts (``python -m rag_eval.eval.judging.oracle --charts FOLDER``) are written like every other
output: staged, then moved in place; a file there that is not one of these charts is never replaced."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import REPO
from helpers.studies import small_study

from rag_eval.errors import RagEvalError
from rag_eval.eval.judging.oracle_report import _a_chart, write_charts

REPORTS = REPO / "reports" / "judging"


def test_charts_are_redrawn_over_charts_it_drew(tmp_path: Path) -> None:
    first = write_charts({"set": small_study()}, tmp_path)
    assert sorted(p.name for p in first) == ["picks.svg", "settled.svg"]
    (tmp_path / "picks.svg").write_text((tmp_path / "picks.svg").read_text(encoding="utf-8") + "\n", "utf-8")
    again = write_charts({"set": small_study()}, tmp_path)
    assert [p.read_bytes() for p in again] == [p.read_bytes() for p in first]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["picks.svg", "settled.svg"]  # nothing left behind


@pytest.mark.parametrize("kind", ["picks", "settled"])
def test_a_users_file_under_a_charts_name_is_never_replaced_and_nothing_else_moves(tmp_path: Path, kind: str) -> None:
    """Regression: savefig wrote straight over any picks.svg or settled.svg in the folder."""
    mine = tmp_path / f"{kind}.svg"
    mine.write_text("<svg>my own drawing</svg>\n", encoding="utf-8")
    with pytest.raises(RagEvalError, match="not a judging-study chart"):
        write_charts({"set": small_study()}, tmp_path)
    assert mine.read_text(encoding="utf-8") == "<svg>my own drawing</svg>\n"
    assert [p.name for p in tmp_path.iterdir()] == [mine.name]  # the other chart was not put in place either


def test_a_folder_under_a_charts_name_is_refused(tmp_path: Path) -> None:
    (tmp_path / "settled.svg").mkdir()
    with pytest.raises(RagEvalError):
        write_charts({"set": small_study()}, tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["settled.svg"]


@pytest.mark.skipif(not (REPORTS / "picks.svg").exists(), reason="no committed judging charts")
def test_the_committed_charts_count_as_charts_it_drew(tmp_path: Path) -> None:
    for name in ("picks.svg", "settled.svg"):
        shutil.copy(REPORTS / name, tmp_path / name)
        assert _a_chart(tmp_path / name) is None
