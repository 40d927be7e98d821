"""The command line as the tests drive it: ``invoke`` runs ``rag-eval ARGS`` through click's CliRunner, and
``one_error`` reads the one ``error:`` line a failed command must print, never a traceback."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from rag_eval.cli import cli
from rag_eval.files.textio import control_character

#: How long a call under a hang guard may take before the test fails.
HANG_SECONDS = 10


def finishes(call: Callable[[], Any], fifos: tuple[Path, ...] = (), seconds: float = HANG_SECONDS) -> dict[str, Any]:
    """Run ``call`` in a thread; fail the test (and unblock the thread) if it blocks, e.g. reading a FIFO.

    Returns ``{"value": what call returned}`` or ``{"error": what it raised}``."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        for fifo in fifos:  # a writer that opens and closes at once gives the blocked reader end-of-file
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass
        thread.join(5)
        pytest.fail(f"the reader was still blocked after {seconds} s")
    return outcome


def invoke(*args: object, hang: float | None = None, fifos: tuple[Path, ...] = ()) -> Result:
    """``rag-eval ARGS`` (each argument str()'d) through click's CliRunner.

    With ``hang``, under a hang guard: the test fails if the command is still running after ``hang`` seconds (a
    FIFO must never block a command); ``fifos`` are opened for writing then, so a command blocked reading one
    ends."""
    command = [str(arg) for arg in args]
    if hang is None:
        return CliRunner().invoke(cli, command)
    outcome = finishes(lambda: CliRunner().invoke(cli, command), fifos, hang)
    assert "error" not in outcome, outcome
    return outcome["value"]


def one_error(result: Result, *words: str, code: int | None = 1, alone: bool = False) -> str:
    """The one ``error:`` line of a failed command, which is returned.

    The command exited with ``code`` (None: any status but 0), no exception escaped it but SystemExit, nothing it
    printed holds a traceback, and exactly one line of all it printed starts with ``error:``, on stderr, holding
    each of ``words``. ``alone``: stderr is that line and at most one ``hint:`` line after it, nothing else."""
    shown = (result.exit_code, result.output, result.stderr, result.exception)
    if code is None:
        assert result.exit_code != 0, shown
    else:
        assert result.exit_code == code, shown
    assert result.exception is None or isinstance(result.exception, SystemExit), shown
    assert "Traceback" not in result.output + result.stderr, shown
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0] in result.stderr.splitlines(), shown
    if alone:
        lines = result.stderr.splitlines()
        assert lines[0] == errors[0] and len(lines) <= 2, shown
        assert all(line.startswith("hint: ") for line in lines[1:]), shown
    for word in words:
        assert word in errors[0], (word, errors[0])
    return errors[0]


def metric_cli_args(command: str, tmp_path: Path) -> list[str]:
    """``compare`` or ``evaluate`` arguments (before ``--metric``) over a one-query run and qrels in ``tmp_path``,
    for tests of what ``--metric`` accepts."""
    (tmp_path / "qrels.txt").write_text("q1 0 d1 1\nq1 0 d2 0\n", encoding="utf-8")
    (tmp_path / "run.txt").write_text("q1 Q0 d1 1 2.0 x\nq1 Q0 d3 2 1.0 x\n", encoding="utf-8")
    if command == "compare":
        return ["compare", "evidence-mini", "-t", "bigram", "-o", str(tmp_path / "out")]
    return ["evaluate", str(tmp_path / "run.txt"), str(tmp_path / "qrels.txt")]


def _safe(message: str) -> None:
    """A message shows no raw control character (a terminal would act on it) and stays short."""
    for line in message.splitlines():
        assert control_character(line) is None, repr(message)
    assert len(message) < 1000, len(message)


def _one_safe_error(result: Result) -> str:
    """The one ``error:`` line of a failed command, whose stderr shows no character raw."""
    line = one_error(result)
    _safe(result.stderr)
    return line


def _error_lines(result) -> list[str]:  # noqa: ANN001 - click's Result
    """The ``error:`` lines of all a command printed."""
    return [line for line in result.output.splitlines() if line.startswith("error:")]
