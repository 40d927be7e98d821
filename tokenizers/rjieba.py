"""rjieba (jieba-rs, in Rust): jieba's dictionary and modes, much faster, but not jieba's tokens.

Measured against ``jieba`` (search mode, HMM) in reports/builds.md: 76% of cmrc2018_dev_trial's passages
get identical tokens (jieba-rs keeps runs such as ``2010-2011`` whole and its HMM joins differently), so it is
a strategy of its own with its own quality figures, not an engine of ``jieba``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..spec import Option, parse_bool
from .base import PythonTokenizer, with_options


class RjiebaTokenizer(PythonTokenizer):
    """jieba-rs through rjieba: search mode (words plus dictionary sub-words) by default, HMM on."""

    name = "rjieba"
    summary = "jieba-rs (rjieba) word segmentation, search mode by default; fast, tokens differ from jieba's"
    option_set = with_options(
        PythonTokenizer.option_set,
        Option(
            "mode",
            "search: words plus dictionary sub-words; precise: one segmentation",
            "search",
            str,
            ("search", "precise"),
        ),
        Option("hmm", "let the HMM join unknown words", True, parse_bool),
    )
    in_default_comparison = False  # nDCG@10 equal to jieba's on three public sets: name it with -t
    libraries = ("rjieba",)
    segmentation_options = (("mode", "precise"),)
    install_hint = "pip install 'rjieba>=0.2.2,<0.3'"

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._jieba: Any = None

    def _load(self) -> None:
        import rjieba

        self._jieba = rjieba.Jieba()  # its own instance: the module-level one is shared with other users

    def _spans(self, text: str) -> Iterator[tuple[int, int]]:
        mode = "search" if self.options["mode"] == "search" else "default"
        for _word, start, end in self._jieba.tokenize(text, mode=mode, hmm=self.options["hmm"]):
            yield start, end
