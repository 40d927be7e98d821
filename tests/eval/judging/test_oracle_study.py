"""The oracle study's tables and charts (``python -m rag_eval.eval.judging.oracle --charts FOLDER``): written like
every other output, staged, then moved in place, a file there that is not one of these charts never replaced; and a
study's name (its file's stem) shown as text whatever it holds."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO
from helpers.pages import Page, _tables, markdown_html
from helpers.studies import small_study

from rag_eval.errors import RagEvalError
from rag_eval.eval.judging.oracle_report import _a_chart, render_tables, write_charts

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


@pytest.fixture(scope="module")
def study() -> dict[str, Any]:
    return small_study()


# -- the oracle study ---------------------------------------------------------------------------------------


def test_study_names_keep_the_oracle_tables_columns(study: dict[str, Any]) -> None:
    """Bug: a study's name (its file's stem) went into the Markdown tables as it was: a '|' added columns, a line
    break cut the row, '<b>' was markup."""
    names = {"plain": study, "a | b\nc `d` <b>e</b>": study}
    rendered = markdown_html(render_tables(names))
    assert "<b>" not in rendered
    for table in _tables(rendered):
        assert len(set(table)) == 1
    assert "a | b c `d` <b>e</b>" in "".join(Page(rendered).text)


@pytest.mark.parametrize("name", ["$x^$", "$\\frac$", "a $\\alpha$ c"])
def test_dollars_in_a_study_name_are_text_in_its_charts(study: dict[str, Any], tmp_path: Path, name: str) -> None:
    """Bug: matplotlib read '$...$' in a study name as mathtext: a ValueError traceback, or the name drawn as math."""
    written = write_charts({name: study}, tmp_path)
    assert len(written) == 2
    for path in written:
        assert re.search("<text[^>]*>" + re.escape(name + " ("), path.read_text(encoding="utf-8"))


def test_a_study_file_name_that_is_not_utf8_is_shown_escaped(study: dict[str, Any], tmp_path: Path) -> None:
    """Bug: a study file's stem with a byte that is not UTF-8 (a lone surrogate) made the charts raise TypeError and
    the printed tables UnicodeEncodeError."""
    name = "set\udcffname"
    tables = render_tables({name: study})
    tables.encode("utf-8")
    assert "set\\xffname" in "".join(Page(markdown_html(tables)).text)
    for path in write_charts({name: study}, tmp_path):
        assert "set\\xffname" in path.read_text(encoding="utf-8")
