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
    "ci",
    derandomize=True,
    max_examples=200,
    database=None,
    deadline=None,
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


LONG_PARAGRAPH = "备份策略说明。" * 50  # 350 characters
DOCS = {
    "guide/export.md": (
        "本手册介绍数据导出。\n\n"
        "# 导出指南\n\n导出文件保留三十天，到期后自动清理。\n\n"
        "## 导出文件\n\n在设置页面点击导出按钮，选择 CSV 或 Excel 格式。\n\n"
        "```bash\n# 这不是标题\nexport --all\n```\n\n"
        "## A\n\n第一个 A。\n\n## A\n\n第二个 A。\n\n## A-2\n\n名为 A-2 的标题。\n\n"
        "### 深层 标题\n\n#### 第四层\n\n四级标题下的内容。\n"
    ),
    "guide/long.md": "# 备份\n\n" + "\n\n".join([LONG_PARAGRAPH] * 8) + "\n\n" + "超长段落" * 600 + "\n",
    "faq/fullwidth.md": (
        "# ＦＡＱ\n\nＷｉ－Ｆｉ 密碼在設定頁面，版本 Ｖ２．３。\n\n# 資料庫備份\n\n資料庫備份會保留三十天。\n"
    ),
    "notes.md": "没有标题的笔记：导出前请确认权限。\n",
}


def make_docs(root: Path) -> Path:
    """A small Markdown knowledge base exercising every sections-builder rule."""
    for name, text in DOCS.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    return make_docs(tmp_path / "docs")


def metric_cli_args(command: str, tmp_path: Path) -> list[str]:
    """``compare`` or ``evaluate`` arguments (before ``--metric``) over a one-query run and qrels in ``tmp_path``,
    for tests of what ``--metric`` accepts."""
    (tmp_path / "qrels.txt").write_text("q1 0 d1 1\nq1 0 d2 0\n", encoding="utf-8")
    (tmp_path / "run.txt").write_text("q1 Q0 d1 1 2.0 x\nq1 Q0 d3 2 1.0 x\n", encoding="utf-8")
    if command == "compare":
        return ["compare", "evidence-mini", "-t", "bigram", "-o", str(tmp_path / "out")]
    return ["evaluate", str(tmp_path / "run.txt"), str(tmp_path / "qrels.txt")]


@pytest.fixture
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache folder of this test's own (what ``cache clear`` and cached builds see)."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("RAG_EVAL_CACHE", str(cache))
    return cache
