"""The ``rag-eval`` console script: Ctrl-C while the commands load ends it as Ctrl-C does later."""

from __future__ import annotations

import sys


def main() -> None:
    """Load the command line and run it; an interrupt while it loads exits 130 with one line, no traceback."""
    try:
        from .cli import main as run
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted\n")
        raise SystemExit(130) from None
    run()
