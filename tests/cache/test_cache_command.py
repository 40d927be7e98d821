"""rag-eval cache info / clear: only cached indexes go, by the names rag-eval gives them."""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from rag_eval.cli import cli


def test_cache_clear_removes_cached_indexes_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_EVAL_CACHE", str(tmp_path / "cache"))
    runner = CliRunner()
    built = runner.invoke(cli, ["compare", "evidence-mini", "-t", "bigram", "-t", "unigram", "-o", str(tmp_path / "o")])
    assert built.exit_code == 0, built.output
    info = json.loads(runner.invoke(cli, ["cache", "info", "--json"]).output)
    assert info["indexes"] == 2 and info["parts"]["indexes"]["bytes"] > 0
    indexes = sorted((tmp_path / "cache" / "indexes").glob("*/*.sqlite"))
    assert len(indexes) == 2
    # Not rag-eval's names: a user's file put there, and a model, are kept.
    stray = indexes[0].parent / "mine.sqlite"
    stray.write_bytes(b"not ours")
    model = tmp_path / "cache" / "models" / "m.bin"
    model.parent.mkdir(parents=True)
    model.write_bytes(b"model")
    # Recent ones are kept by --older-than; an old one goes.
    old = time.time() - 40 * 86400
    for path in indexes[1].parent.glob(indexes[1].stem + "*"):
        os.utime(path, (old, old))
    result = runner.invoke(cli, ["cache", "clear", "--older-than", "30"])
    assert result.exit_code == 0 and result.output.startswith("removed 1 cached index ("), result.output
    assert indexes[0].exists() and not indexes[1].exists() and not indexes[1].with_suffix(".build.json").exists()
    # One a build holds is kept.
    with open(indexes[0], "rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        result = runner.invoke(cli, ["cache", "clear"])
        assert "removed 0 cached indexes" in result.output and "1 in use by a running command, kept" in result.output
    result = runner.invoke(cli, ["cache", "clear"])
    assert result.output.startswith("removed 1 cached index")
    assert not indexes[0].exists() and stray.exists() and model.exists()
    for bad in ("-1", "nan", "inf"):
        result = runner.invoke(cli, ["cache", "clear", "--older-than", bad])
        assert result.exit_code != 0 and "error:" in result.output and "Traceback" not in result.output
