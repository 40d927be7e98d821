"""jieba runs silently and keeps its cache file in rag-eval's cache dir."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


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
