"""Shared fixtures: an isolated cache for the whole run, the shipped pkuseg model, hypothesis profiles."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from rag_eval.models import MODEL_FILES, PKUSEG_MODEL_ENV, default_model_dir
from rag_eval.tokenizers import TOKENIZERS, Tokenizer, get_tokenizer

# Looked up before the cache is redirected, read only: tests that need pkuseg's real model use it
# from the user's cache when `rag-eval models install pkuseg` has put it there, and skip otherwise.
_REAL_PKUSEG = default_model_dir()
REAL_PKUSEG_MODEL = _REAL_PKUSEG if all((_REAL_PKUSEG / f).is_file() for f in MODEL_FILES) else None

settings.register_profile(
    "ci", derandomize=True, max_examples=200, database=None, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("long", max_examples=10_000, deadline=None, database=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

#: Every registered tokenizer, with the shipped small pkuseg model so no test needs a download.
ALL_SPECS = [f"{name}:model=mini" if name == "pkuseg" else name for name in sorted(TOKENIZERS)]


@pytest.fixture(scope="session", autouse=True)
def isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Point rag-eval's cache at a temporary folder so tests never touch the user's cache."""
    cache = tmp_path_factory.mktemp("rag-eval-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAG_EVAL_CACHE", str(cache))
        patch.delenv(PKUSEG_MODEL_ENV, raising=False)
        yield cache


_TOKENIZERS: dict[str, Tokenizer] = {}


def tokenizer_for(spec: str) -> Tokenizer:
    """One loaded tokenizer per spec for the whole run (jieba and pkuseg take a while to load)."""
    if spec not in _TOKENIZERS:
        tokenizer = get_tokenizer(spec)
        tokenizer.load()
        _TOKENIZERS[spec] = tokenizer
    return _TOKENIZERS[spec]


@pytest.fixture
def real_pkuseg_model() -> Path:
    """pkuseg's real default model, or skip."""
    if REAL_PKUSEG_MODEL is None:
        pytest.skip("pkuseg's default model is not installed (rag-eval models install pkuseg)")
    return REAL_PKUSEG_MODEL
