"""Where the tests find the repository's files, whatever folder a test module sits in."""

from __future__ import annotations

from pathlib import Path

#: The tests folder.
TESTS = Path(__file__).resolve().parents[1]
#: The repository: README.md, docs/, datasets/, reports/ ...
REPO = TESTS.parent
