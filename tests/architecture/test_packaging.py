"""A normal (non-editable) install: one top-level package, data files included, works outside the repo."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from helpers import REPO

ROOT = REPO


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if importlib.util.find_spec("setuptools") is None or importlib.util.find_spec("wheel") is None:
        pytest.skip("building a wheel without isolation needs setuptools and wheel in this environment")
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", str(ROOT), "-w", str(out)],
        check=True,
        capture_output=True,
    )
    (built,) = out.glob("rag_eval-*.whl")
    return built


def test_wheel_has_one_top_level_package(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert {name.split("/")[0] for name in names} == {"rag_eval", wheel.name.split("-py")[0] + ".dist-info"}
    for needed in (
        "rag_eval/tokenizers/data/pkuseg-mini/weights.npz",
        "rag_eval/tokenizers/data/pkuseg_train.txt",
        "rag_eval/datasets/manifest.json",
        "rag_eval/datasets/bench-zh/part-a1.txt",
        "rag_eval/cli/__init__.py",
        "rag_eval/eval/templates/report.html",
        "rag_eval/eval/templates/report.md",
        "rag_eval/builders/sections.py",
        "rag_eval/datasets/handbook/docs/getting-started/quick-notes.md",
        "rag_eval/py.typed",
    ):
        assert needed in names


def test_installed_wheel_works_outside_the_repository(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
        check=True,
        capture_output=True,
    )
    code = (
        "import rag_eval, sys\n"
        "from rag_eval.eval.datasets.shipped import load_shipped\n"
        "from rag_eval.tokenizers import get_tokenizer\n"
        "assert rag_eval.__file__.startswith(sys.argv[1]), rag_eval.__file__\n"
        "print(len(load_shipped('handbook').corpus) > 100, get_tokenizer('pkuseg:model=mini').terms('导出文件'))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    result = subprocess.run(
        [sys.executable, "-c", code, str(site)], cwd=tmp_path, capture_output=True, text=True, env=env
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True ['导出', '文件']"
    cli = subprocess.run(
        [sys.executable, "-m", "rag_eval", "datasets", "list"], cwd=tmp_path, capture_output=True, text=True, env=env
    )
    assert cli.returncode == 0, cli.stderr
    assert cli.stdout.startswith("evidence-mini\tlines\t26 passages")
