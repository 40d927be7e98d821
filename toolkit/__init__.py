"""rag-eval: choose and use a tokenization strategy for Chinese full-text retrieval on SQLite FTS5."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from .errors import RagEvalError

try:
    __version__ = version("rag-eval")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without installing
    __version__ = "0+unknown"

__all__ = ["RagEvalError", "__version__"]
