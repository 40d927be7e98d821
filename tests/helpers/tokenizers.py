"""Every registered strategy as the tests run it, each loaded once for the whole run."""

from __future__ import annotations

from rag_eval.models import MODEL_FILES, default_model_dir
from rag_eval.tokenizers import TOKENIZERS, Tokenizer, get_tokenizer

# Looked up when conftest.py imports this module, before the cache is redirected, read only: tests that need
# pkuseg's real model use it from the user's cache when `rag-eval models install pkuseg` has put it there, and
# skip otherwise.
_REAL_PKUSEG = default_model_dir()
REAL_PKUSEG_MODEL = _REAL_PKUSEG if all((_REAL_PKUSEG / f).is_file() for f in MODEL_FILES) else None

#: Every registered tokenizer, with the shipped small pkuseg model so no test needs a download.
ALL_SPECS = [f"{name}:model=mini" if name == "pkuseg" else name for name in sorted(TOKENIZERS)]

_TOKENIZERS: dict[str, Tokenizer] = {}


def tokenizer_for(spec: str) -> Tokenizer:
    """One loaded tokenizer per spec for the whole run (jieba and pkuseg take a while to load)."""
    if spec not in _TOKENIZERS:
        tokenizer = get_tokenizer(spec)
        tokenizer.load()
        _TOKENIZERS[spec] = tokenizer
    return _TOKENIZERS[spec]
