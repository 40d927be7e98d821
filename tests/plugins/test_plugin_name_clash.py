"""A plug-in that declares a built-in's name: the built-in keeps it (it made ``bigram`` unusable: "declared twice
by installed packages"), the listing names the ignored plug-in; two plug-ins sharing a new name still clash."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from rag_eval.errors import RegistryError
from rag_eval.registry import Registry
from rag_eval.tokenizers import Tokenizer
from rag_eval.tokenizers.bigram import BigramTokenizer

IMPOSTOR = textwrap.dedent(
    """
    from rag_eval.tokenizers import PythonTokenizer

    class Impostor(PythonTokenizer):
        name = "bigram"
        summary = "one token per character (test plug-in)"

        def _spans(self, text):
            return [(i, i + 1) for i in range(len(text))]

    class Twin(Impostor):
        name = "twin"
    """
)


def _distribution(root: Path, name: str, entry_points: str) -> None:
    dist = root / f"{name.replace('-', '_')}-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n", encoding="utf-8")
    (dist / "entry_points.txt").write_text(f"[rag_eval.tokenizers]\n{entry_points}", encoding="utf-8")


@pytest.fixture
def clashing(tmp_path: Path) -> Iterator[Path]:
    (tmp_path / "rag_eval_clash_plugin.py").write_text(IMPOSTOR, encoding="utf-8")
    _distribution(tmp_path, "clash-one", "bigram = rag_eval_clash_plugin:Impostor\ntwin = rag_eval_clash_plugin:Twin\n")
    _distribution(tmp_path, "clash-two", "twin = rag_eval_clash_plugin:Impostor\n")
    sys.path.insert(0, str(tmp_path))
    yield tmp_path
    sys.path.remove(str(tmp_path))
    sys.modules.pop("rag_eval_clash_plugin", None)


def test_a_plugin_named_like_a_built_in_leaves_the_built_in_usable(clashing: Path) -> None:
    registry: Registry[Tokenizer] = Registry("rag_eval.tokenizers", "tokenizer")
    assert registry["bigram"] is BigramTokenizer
    assert registry.shadowed("bigram") == "rag_eval_clash_plugin:Impostor (package clash-one)"
    assert registry.shadowed("jieba") is None


def test_two_plugins_sharing_a_new_name_still_clash(clashing: Path) -> None:
    registry: Registry[Tokenizer] = Registry("rag_eval.tokenizers", "tokenizer")
    with pytest.raises(RegistryError, match="'twin' is declared twice by installed packages: rag_eval_clash_plugin"):
        registry["twin"]
    assert registry.shadowed("twin") is None


def test_the_listing_names_the_ignored_plugin(clashing: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "rag_eval", "tokenizers"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(clashing)},
    )
    assert result.returncode == 0, result.stderr
    bigram = result.stdout.split("bigram  (Python)  available", 1)[1].split("\n\n", 1)[0]
    assert "ignored: rag_eval_clash_plugin:Impostor (package clash-one) also declares 'bigram'" in bigram
    assert "twin  (plug-in)  unavailable" in result.stdout


def test_one_plugin_seen_twice_on_the_path_is_not_a_clash(tmp_path: Path) -> None:
    """The same entry point declared twice (one package installed under two names, or twice in two folders on the
    path) is one declaration of one class, not two packages clashing."""
    (tmp_path / "rag_eval_twice_plugin.py").write_text(IMPOSTOR.replace('"twin"', '"twice"'), encoding="utf-8")
    for folder in ("one", "two"):
        (tmp_path / folder).mkdir()
        _distribution(tmp_path / folder, f"twice-plugin-{folder}", "twice = rag_eval_twice_plugin:Twin\n")
    sys.path[:0] = [str(tmp_path), str(tmp_path / "one"), str(tmp_path / "two")]
    try:
        registry: Registry[Tokenizer] = Registry("rag_eval.tokenizers", "tokenizer")
        assert registry["twice"].name == "twice"
    finally:
        for folder in (str(tmp_path), str(tmp_path / "one"), str(tmp_path / "two")):
            sys.path.remove(folder)
        sys.modules.pop("rag_eval_twice_plugin", None)
