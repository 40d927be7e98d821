"""Progress on a terminal: a transient bar per phase on stderr; nothing at all when stderr is not a terminal.

The display is refreshed from the caller's own updates, never by a background thread: a running thread
would stop builds from forking their tokenization workers (forking is unsafe with other threads), and
they would start fresh and load their models again.
"""

from __future__ import annotations

import sys
import time
from typing import Any

#: Seconds between two redraws.
REFRESH = 0.1


class Bars:
    """``with Bars() as progress: library_call(progress=progress)``; ``progress(phase, done, total)``."""

    def __init__(self, *, enabled: bool | None = None) -> None:
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self._display: Any = None
        self._tasks: dict[str, Any] = {}
        self._drawn = 0.0

    def __enter__(self) -> Bars:
        return self

    def __call__(self, phase: str, done: float, total: int) -> None:
        if not self.enabled:
            return
        if self._display is None:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                Progress,
                SpinnerColumn,
                TaskProgressColumn,
                TextColumn,
                TimeElapsedColumn,
            )

            self._display = Progress(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                BarColumn(),
                TaskProgressColumn(),
                TimeElapsedColumn(),
                console=Console(stderr=True),
                transient=True,
                auto_refresh=False,
            )
            self._display.start()
        if phase not in self._tasks:
            self._tasks[phase] = self._display.add_task(phase[:60], total=max(total, 1))
        self._display.update(self._tasks[phase], completed=done, total=max(total, 1))
        now = time.monotonic()
        if now - self._drawn >= REFRESH or done >= total:
            self._display.refresh()
            self._drawn = now

    def __exit__(self, *exc: object) -> None:
        if self._display is not None:
            self._display.stop()
