"""Query-processing options take the spec grammar's numbers only, and a file read under a byte limit allocates
what it holds, not the limit, and still sees a file that grew past it."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_eval.errors import CorpusError, SpecError
from rag_eval.files.textio import read_bytes
from rag_eval.index.processing import QueryProcessing


@pytest.mark.parametrize(
    "spec", ["top_terms=1_0", "top_terms=١", "top_terms=-1", "top_terms=10001", "max_df=nan", "max_df=0", "max_df=1.5"]
)
def test_query_processing_refuses_numbers_outside_the_grammar(spec: str) -> None:
    with pytest.raises(SpecError, match="expected a"):
        QueryProcessing.parse(spec)


def test_query_processing_takes_its_edges() -> None:
    assert QueryProcessing.parse("top_terms=0,max_df=1").system == QueryProcessing.parse("").system
    assert "top_terms=10000" in QueryProcessing.parse("top_terms=10000").system


def test_read_bytes_under_a_huge_limit_reads_the_file(tmp_path: Path) -> None:
    path = tmp_path / "a.md"
    path.write_bytes(b"x" * 100)
    # a limit of 1e12 once meant a 1 TB allocation before the first byte was read
    assert read_bytes(path, CorpusError, max_bytes=10**12) == b"x" * 100
    with pytest.raises(CorpusError, match="over the limit"):
        read_bytes(path, CorpusError, max_bytes=99)


def test_read_bytes_reads_on_when_the_file_grew_after_its_size_was_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    path = tmp_path / "a.md"
    path.write_bytes(b"x" * 10)
    real_fstat = os.fstat
    calls = []

    def stale_fstat(descriptor: int) -> os.stat_result:
        found = real_fstat(descriptor)
        calls.append(found.st_size)
        if len(calls) == 2:  # the size read_bytes reads by is taken; then the file grows before it is read
            with open(path, "ab") as out:
                out.write(b"y" * 40)
        return found

    monkeypatch.setattr(os, "fstat", stale_fstat)
    assert read_bytes(path, CorpusError, max_bytes=1000) == b"x" * 10 + b"y" * 40
    assert calls == [10, 10]
    calls.clear()
    path.write_bytes(b"x" * 10)
    with pytest.raises(CorpusError, match="over the limit"):
        read_bytes(path, CorpusError, max_bytes=30)
