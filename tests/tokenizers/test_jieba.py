"""jieba runs silently and keeps its cache file in rag-eval's cache dir; a user dictionary (``jieba:userdict=``) that
is not UTF-8, not a regular file or gone is one error naming it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import one_error
from helpers.paths import NOT_REGULAR, _not_regular

from rag_eval.cli import cli
from rag_eval.errors import SpecError
from rag_eval.tokenizers import get_tokenizer


def test_jieba_is_silent_and_caches_in_rag_eval_cache(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {**os.environ, "RAG_EVAL_CACHE": str(cache), "TMPDIR": str(temp)}
    code = "from rag_eval.tokenizers import get_tokenizer; print(get_tokenizer('jieba').terms('导出文件'))"
    result = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['导出', '文件']"
    assert result.stderr == ""
    assert (cache / "jieba" / "jieba.cache").is_file()
    assert list(temp.iterdir()) == []


# -- 5. file-valued tokenizer options that are not regular files -------------------------------------------------


@pytest.mark.parametrize("kind", NOT_REGULAR)
@pytest.mark.parametrize("strategy", ["jieba:userdict=", "pkuseg:model=mini,userdict="])
def test_a_user_dictionary_that_is_no_regular_file_says_so(tmp_path: Path, strategy: str, kind: str) -> None:
    """Bug: jieba:userdict=/dev/zero (or a FIFO, a folder) said "no such file: /dev/zero"."""
    path = _not_regular(tmp_path, kind)
    with pytest.raises(SpecError) as raised:
        get_tokenizer(f"{strategy}{path}")
    assert "not a regular file" in str(raised.value) and "no such file" not in str(raised.value)


@pytest.mark.parametrize("strategy", ["jieba", "jieba:mode=precise", "pkuseg:model=mini"])
@pytest.mark.parametrize("content", [b"\xff\xfe\x80abc", "导出 5\n".encode("gb18030")])
def test_a_user_dictionary_that_is_not_utf8_is_a_spec_error(tmp_path: Path, strategy: str, content: bytes) -> None:
    path = tmp_path / "words.txt"
    path.write_bytes(content)
    with pytest.raises(SpecError, match="not valid UTF-8 at byte"):
        get_tokenizer(f"{strategy},userdict={path}" if ":" in strategy else f"{strategy}:userdict={path}")
    result = CliRunner().invoke(cli, ["tokenize", "-t", f"jieba:userdict={path}", "导出"])
    assert result.exit_code != 0 and "userdict" in one_error(result)


def test_an_index_whose_user_dictionary_is_gone_says_so_not_damaged(tmp_path: Path) -> None:
    """The index is intact; the dictionary file its spec names was removed."""
    from rag_eval.eval.datasets.shipped import corpus_dir
    from rag_eval.index.writer import build

    words = tmp_path / "words.txt"
    words.write_text("导出文件 5\n", encoding="utf-8")
    index = tmp_path / "kb.sqlite"
    build(corpus_dir("evidence-mini"), index, builder="lines", tokenizer=f"jieba:userdict={words}")
    words.unlink()
    result = CliRunner().invoke(cli, ["search", str(index), "导出"])
    line = one_error(result)
    assert "cannot load the tokenizer or builder this index records" in line and "damaged" not in line
    assert "userdict" in line or str(words) in line
