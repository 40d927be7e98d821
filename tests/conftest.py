"""Shared fixtures: an isolated cache for the whole run, the shipped pkuseg model, hypothesis profiles.

What test modules import (``invoke``, ``one_error``, ``make_docs``, ``ALL_SPECS`` ...) is in tests/helpers/."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import REAL_PKUSEG_MODEL, make_docs
from hypothesis import HealthCheck, settings
from make_corpus import make

from rag_eval.models import PKUSEG_MODEL_ENV

settings.register_profile(
    "ci",
    derandomize=True,
    max_examples=200,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("long", max_examples=10_000, deadline=None, database=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session", autouse=True)
def isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Point rag-eval's cache at a temporary folder so tests never touch the user's cache."""
    cache = tmp_path_factory.mktemp("rag-eval-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAG_EVAL_CACHE", str(cache))
        patch.delenv(PKUSEG_MODEL_ENV, raising=False)
        yield cache


@pytest.fixture
def real_pkuseg_model() -> Path:
    """pkuseg's real default model, or skip."""
    if REAL_PKUSEG_MODEL is None:
        pytest.skip("pkuseg's default model is not installed (rag-eval models install pkuseg)")
    return REAL_PKUSEG_MODEL


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    return make_docs(tmp_path / "docs")


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """Seed 000's corpus (a lines manifest and its six documents) in a folder of this test's own; a test module may
    define a corpus of its own under the same name."""
    root = tmp_path / "corpus"
    make(root)
    return root


@pytest.fixture
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache folder of this test's own (what ``cache clear`` and cached builds see), never the real cache
    (it holds the installed default model), with no pkuseg model named by the environment."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("RAG_EVAL_CACHE", str(cache))
    monkeypatch.delenv(PKUSEG_MODEL_ENV, raising=False)
    return cache
