"""Children that see Ctrl-C as at a terminal, however the test run was started."""

from __future__ import annotations

import signal


def default_sigint() -> None:
    """``preexec_fn`` for a child process that must receive SIGINT: a test run started in the background (CI
    runners, ``cmd &``, nohup) inherits SIGINT ignored, and Python keeps an ignored SIGINT ignored, so Ctrl-C would
    never reach the command under test."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
