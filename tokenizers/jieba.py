"""jieba word segmentation: search mode (``cut_for_search``) by default, precise mode as an option."""

from __future__ import annotations

import hashlib
import logging
import warnings
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..cache import cache_dir
from ..errors import SpecError
from ..spec import Option, parse_bool
from .base import PythonTokenizer, user_dictionary, with_options


class JiebaTokenizer(PythonTokenizer):
    """jieba with its own ``Tokenizer`` instance: silent, with its cache file in rag-eval's cache dir.

    Search mode emits the words of precise mode plus their dictionary sub-words (三十天 -> 三十, 十天,
    三十天), which helps recall. HMM discovery of unknown words is on, as in jieba's defaults.
    """

    name = "jieba"
    summary = "jieba word segmentation, search mode (cut_for_search) by default"
    option_set = with_options(
        PythonTokenizer.option_set,
        Option(
            "mode",
            "search: words plus dictionary sub-words; precise: one segmentation",
            "search",
            str,
            ("search", "precise"),
        ),
        Option("userdict", "path of a jieba user dictionary (word [freq] [tag] per line)", "", user_dictionary),
        Option("hmm", "let jieba's HMM join unknown words", True, parse_bool),
    )
    libraries = ("jieba",)
    parallel = True
    segmentation_options = (("mode", "precise"),)
    install_hint = "pip install 'jieba>=0.42.1,<0.43'"

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._jieba: Any = None

    def fingerprint(self) -> dict[str, str]:
        details = super().fingerprint()
        userdict = self.options["userdict"]
        if userdict:
            try:
                details["userdict"] = "sha256:" + hashlib.sha256(Path(userdict).read_bytes()).hexdigest()[:16]
            except OSError as exc:
                raise SpecError(f"cannot read jieba user dictionary {userdict}: {exc.strerror}") from None
        return details

    def _load(self) -> None:
        self._jieba = _load_jieba(self.options["userdict"], self.fingerprint().get("userdict", ""))

    def _spans(self, text: str) -> Iterator[tuple[int, int]]:
        mode = "search" if self.options["mode"] == "search" else "default"
        for _word, start, end in self._jieba.tokenize(text, mode=mode, HMM=self.options["hmm"]):
            yield start, end


@lru_cache(maxsize=8)
def _load_jieba(userdict: str, userdict_checksum: str) -> Any:
    """One loaded jieba dictionary per user dictionary (and its content) per process."""
    with warnings.catch_warnings():
        # jieba imports pkg_resources, which newer setuptools deprecates.
        warnings.simplefilter("ignore")
        import jieba
    jieba.setLogLevel(logging.WARNING)
    tokenizer = jieba.Tokenizer()
    tokenizer.tmp_dir = str(_jieba_cache())
    tokenizer.initialize()
    if userdict:
        with open(userdict, "rb") as words:  # jieba leaves a path's file open
            tokenizer.load_userdict(words)
    return tokenizer


def _jieba_cache() -> Path:
    folder = cache_dir() / "jieba"
    folder.mkdir(parents=True, exist_ok=True)
    return folder
