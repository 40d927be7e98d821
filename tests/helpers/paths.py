"""Where the tests find the repository's files, whatever folder a test module sits in."""

from __future__ import annotations

import os
from pathlib import Path

#: The tests folder.
TESTS = Path(__file__).resolve().parents[1]
#: The repository: README.md, docs/, datasets/, reports/ ...
REPO = TESTS.parent


def _not_regular(tmp_path: Path, kind: str) -> Path:
    """A path that exists but is no regular file: a folder, a FIFO, a character device, or a link to a folder."""
    if kind == "folder":
        (tmp_path / "thing").mkdir()
    elif kind == "fifo":
        os.mkfifo(tmp_path / "thing")
    elif kind == "device":
        return Path("/dev/zero")
    else:
        (tmp_path / "elsewhere").mkdir()
        (tmp_path / "thing").symlink_to(tmp_path / "elsewhere")
    return tmp_path / "thing"


NOT_REGULAR = ["folder", "fifo", "device", "link to a folder"]
