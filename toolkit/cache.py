"""Where rag-eval keeps caches and installed models."""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "RAG_EVAL_CACHE"


def cache_dir() -> Path:
    """The cache folder: ``$RAG_EVAL_CACHE`` or the platform's user cache dir (created lazily by users)."""
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured).expanduser()
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("rag-eval", appauthor=False))
