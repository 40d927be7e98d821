"""What test modules share, importable from any test folder (pyproject.toml puts tests/ on pytest's pythonpath):
the command line (``invoke``, ``one_error``), corpora, strategies, paths, and helpers of one feature's tests
(``helpers.judging``, ``helpers.serve`` ...). Test modules never import one another; fixtures live in
tests/conftest.py."""

from helpers.cli import HANG_SECONDS, finishes, invoke, metric_cli_args, one_error
from helpers.corpora import DOCS, make_docs
from helpers.paths import REPO, TESTS
from helpers.tokenizers import ALL_SPECS, REAL_PKUSEG_MODEL, tokenizer_for

__all__ = [
    "ALL_SPECS",
    "DOCS",
    "HANG_SECONDS",
    "REAL_PKUSEG_MODEL",
    "REPO",
    "TESTS",
    "finishes",
    "invoke",
    "make_docs",
    "metric_cli_args",
    "one_error",
    "tokenizer_for",
]
