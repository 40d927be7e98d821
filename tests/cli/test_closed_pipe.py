"""A closed output pipe (``| head``) ends a command quietly with 141, as a command killed by SIGPIPE does; it exited 1,
which ``index verify`` also means for "not all ok", and only when the output outgrew what the pipe took at once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO

from rag_eval.index.writer import build

DATASETS = REPO / "datasets"


@pytest.fixture(scope="module")
def handbook(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("pipe") / "handbook.sqlite"
    build(DATASETS / "handbook" / "docs", path, builder="sections", tokenizer="bigram")
    return path


@pytest.mark.parametrize(
    "args",
    [["index", "list", "{index}"], ["index", "verify", "{index}"], ["tokenizers"], ["search", "{index}", "导出"]],
)
def test_a_closed_pipe_ends_the_command_with_141_and_no_message(handbook: Path, args: list[str]) -> None:
    command = [sys.executable, "-m", "rag_eval", *(a.format(index=handbook) for a in args)]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "PYTHONWARNINGS": "error"}
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # the reader is gone before anything is written
    with process.stderr:
        stderr = process.stderr.read()
    assert process.wait(timeout=120) == 141
    assert stderr == b""
