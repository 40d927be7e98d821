"""Where a report came from: the machine, package versions, commit, time and command line every report records."""

from __future__ import annotations

import os
import platform
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ... import __version__
from ...files.outputs import recorded_name
from ...tokenizers.base import library_version


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=Path(__file__).parent, timeout=5
        )
        return out.stdout.strip() if out.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def environment() -> dict[str, Any]:
    """Machine, versions and commit, recorded in every report."""
    packages = ["rag-eval", "jieba", "spacy-pkuseg", "opencc", "ir-measures", "pytrec-eval-terrier", "numpy"]
    return {
        "rag_eval": __version__,
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "packages": {name: library_version(name) for name in packages},
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(),
        },
        "commit": _commit(),
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": command_line(),
    }


def command_line() -> str:
    """The ``rag-eval ...`` command that runs, as the outputs record it ("" when not run as rag-eval). An argument
    holding bytes that are not UTF-8 (a file name) shows them as ``\\xff``: recorded as they came (lone
    surrogates), they made every JSON output unwritable after the whole run."""
    if not sys.argv or "rag-eval" not in Path(sys.argv[0]).name:
        return ""
    words = ["rag-eval", *sys.argv[1:]]
    return " ".join(recorded_name(word) for word in words)
