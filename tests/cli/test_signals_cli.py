"""Ctrl-C and SIGTERM stop a command the way errors do: one line, the shell's status for the signal (130, 143),
and everything the command had staged cleaned up (SIGTERM used to end the process at once: staged files were
left beside the output and the exit status was -15 with no word)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.signals import default_sigint

# Runs `rag-eval index build` through the console entry point; the first text the tokenizer sees sends the signal
# to the process (as `kill` or Ctrl-C would), in the middle of the build.
BUILD = r"""
import os, signal, sys
from rag_eval.tokenizers import get_tokenizer
kind = type(get_tokenizer("bigram"))
terms = kind.terms
sent = getattr(signal, sys.argv[1])
def stopping(self, text):
    os.kill(os.getpid(), sent)
    return terms(self, text)
kind.terms = stopping
sys.argv = ["rag-eval", "index", "build", sys.argv[2], "-t", "bigram", "-o", sys.argv[3]]
from rag_eval.cli import main
main()
"""


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    for n in range(3):
        (folder / f"{n}.md").write_text(f"# 第{n}章\n\n导出文件保留三十天。\n", encoding="utf-8")
    return folder


@pytest.mark.parametrize(("name", "status", "line"), [("SIGTERM", 143, "terminated"), ("SIGINT", 130, "interrupted")])
@pytest.mark.kill
def test_a_signal_mid_build_is_one_line_its_status_and_nothing_left(
    corpus: Path, tmp_path: Path, name: str, status: int, line: str
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("the user's", encoding="utf-8")
    env = {**os.environ, "RAG_EVAL_WORKERS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", BUILD, name, str(corpus), str(out / "docs.sqlite")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=default_sigint,
    )
    assert done.returncode == status, (done.returncode, done.stderr)
    assert done.stderr.splitlines()[-1].startswith(f"error: {line}"), done.stderr
    assert "Traceback" not in done.stderr
    assert sorted(p.name for p in out.iterdir()) == ["mine.txt"]  # no staged index, no side file


def test_a_caller_that_ignores_sigterm_keeps_it_ignored(corpus: Path, tmp_path: Path) -> None:
    """main() handles SIGTERM only where it has the default action: a caller's choice stands."""
    script = "import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN)\n" + BUILD
    done = subprocess.run(
        [sys.executable, "-c", script, "SIGTERM", str(corpus), str(tmp_path / "docs.sqlite")],
        env={**os.environ, "RAG_EVAL_WORKERS": "1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "docs.sqlite").is_file()


def test_the_exit_statuses_are_the_shells() -> None:
    from rag_eval.cli import INTERRUPTED_EXIT, TERMINATED_EXIT

    assert (INTERRUPTED_EXIT, TERMINATED_EXIT) == (128 + signal.SIGINT, 128 + signal.SIGTERM) == (130, 143)


# A pool of 4 batches whose first finished one meets Ctrl-C; every text a worker tokenizes is counted in a file.
POOL = r"""
import os, sys, time
from rag_eval.index import tokenize_pool as pool
from rag_eval.tokenizers import get_tokenizer
pool.POOL_MIN_CHARS, pool.BATCH = 0, 50
tokenizer = get_tokenizer("bigram")
type(tokenizer).parallel = True
terms = type(tokenizer).terms
counted = sys.argv[1]
def slow(self, text):
    with open(counted, "a") as out:
        out.write("x\n")
    time.sleep(0.05)
    return terms(self, text)
type(tokenizer).terms = slow
def progress(done):
    raise KeyboardInterrupt
try:
    pool.tokenize_chunks(tokenizer, [("", "导出文件保留三十天")] * 200, keep_offsets=False, progress=progress)
except KeyboardInterrupt:
    import multiprocessing
    # The executor's own thread may still be reaping a worker it ended a moment after the interrupt (seen: one
    # child listed for up to 50 ms after the joins): a worker counts as left only if it is still there after 5 s.
    deadline = time.monotonic() + 5
    while multiprocessing.active_children() and time.monotonic() < deadline:
        time.sleep(0.05)
    print(len(multiprocessing.active_children()))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forked workers")
@pytest.mark.kill
def test_an_interrupted_pool_stops_tokenizing(tmp_path: Path) -> None:
    """Regression: leaving the pool waited for every batch already handed to it, so Ctrl-C or SIGTERM tokenized
    the rest of the corpus before the command stopped (3.3 s of pkuseg on DRCD, 1.1 s now)."""
    counted = tmp_path / "counted"
    done = subprocess.run(
        [sys.executable, "-c", POOL, str(counted)],
        env={**os.environ, "RAG_EVAL_WORKERS": "2"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    left = int(done.stdout)
    tokenized = len(counted.read_text().splitlines())
    # 200 texts in 4 batches of 50: one had finished when Ctrl-C came, the others were ended, not waited for
    assert tokenized < 150, tokenized
    assert left == 0  # no worker outlives the pool


# --- the console script -------------------------------------------------------------------------------------------


def test_ctrl_c_while_the_commands_load_is_one_line_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C in the first quarter second printed a traceback from the imports (15 of 16 tries)."""
    from rag_eval import console

    class Interrupting:
        def find_spec(self, name: str, path: object = None, target: object = None) -> None:
            if name == "rag_eval.cli":
                raise KeyboardInterrupt

    monkeypatch.delitem(sys.modules, "rag_eval.cli")
    monkeypatch.setattr(sys, "meta_path", [Interrupting(), *sys.meta_path])
    with pytest.raises(SystemExit) as exited:
        console.main()
    assert exited.value.code == 130
    assert capsys.readouterr().err == "error: interrupted\n"


def test_the_console_script_is_the_interrupt_safe_entry() -> None:
    from importlib.metadata import entry_points

    (script,) = [point for point in entry_points(group="console_scripts") if point.name == "rag-eval"]
    assert script.value == "rag_eval.console:main"
