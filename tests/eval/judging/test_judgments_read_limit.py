"""The judgments log is read back with a limit: a log over it (written by hand or by another tool) is one error
at open, never read whole; and the write side keeps every log under the same limit."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.judging import POOL

from rag_eval.eval.datasets.trec import read_trec_qrels
from rag_eval.eval.judging import durable_writes
from rag_eval.eval.judging import judgments as judgments_module
from rag_eval.eval.judging.judgments import Judgments, JudgmentsError, log_path
from rag_eval.eval.judging.log_records import JudgmentsWriteError


def test_a_log_over_the_read_limit_is_one_error_at_open(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "h.qrels"
    with Judgments.open(path, POOL, assessor="") as judgments:
        for number in range(40):
            judgments.record("q1", f"d{number}", number % 3)
    size = log_path(path).stat().st_size
    assert size > 2_000
    monkeypatch.setattr(judgments_module, "MAX_LOG_BYTES", 2_000)  # where the log is read back
    with pytest.raises(JudgmentsError, match="2000|2,000"):
        Judgments.open(path, POOL, assessor="")
    assert log_path(path).stat().st_size == size  # refused, not cut


def test_a_qrels_file_over_the_read_limit_is_one_error_and_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The qrels file beside the log is read back under the same limit: one grown by another tool is refused, not
    read whole."""
    path = tmp_path / "h.qrels"
    with Judgments.open(path, POOL, assessor="") as judgments:
        judgments.record("q1", "d1", 1)
    assert log_path(path).stat().st_size < 2_000
    with path.open("a", encoding="utf-8") as handle:
        handle.write("q1 0 d1 1\n" * 400)
    grown = path.read_bytes()
    monkeypatch.setattr(judgments_module, "MAX_LOG_BYTES", 2_000)
    with pytest.raises(JudgmentsError, match="2000|2,000"):
        Judgments.open(path, POOL, assessor="")
    assert path.read_bytes() == grown


def test_the_log_never_grows_past_what_a_restart_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Bug: grades were acknowledged past the log's read limit, and the same command then refused the log
    ("over the limit"), so acknowledged grades could not be resumed."""
    # The limit is looked up where the log is read back (judgments) and where it is appended to (durable_writes).
    monkeypatch.setattr(judgments_module, "MAX_LOG_BYTES", 2_000)
    monkeypatch.setattr(durable_writes, "MAX_LOG_BYTES", 2_000)
    path = tmp_path / "h.qrels"
    acknowledged: dict[str, dict[str, int]] = {}
    with Judgments.open(path, POOL, assessor="") as judgments:
        with pytest.raises(JudgmentsWriteError, match=r"h\.qrels\.jsonl: reached its limit of 2,000 bytes"):
            for number in range(40):
                judgments.record("q1", f"d{number}", number % 3)
                acknowledged.setdefault("q1", {})[f"d{number}"] = number % 3
        assert log_path(path).stat().st_size <= 2_000
    with Judgments.open(path, POOL, assessor="") as judgments:
        assert judgments.grades == acknowledged and read_trec_qrels(path) == acknowledged
