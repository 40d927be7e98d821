"""The model install's child Pythons (pip download, the spacy-pkuseg smoke test) do not import modules from the
working folder: a spacy_pkuseg.py or pip.py there would have been run in place of the real one."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from rag_eval import models
from rag_eval.errors import ModelError


def test_the_smoke_test_loads_the_installed_spacy_pkuseg_not_one_in_the_working_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("spacy_pkuseg")
    (tmp_path / "spacy_pkuseg.py").write_text("raise SystemExit('the working folder was searched')\n")
    monkeypatch.chdir(tmp_path)
    models._smoke_test(models.mini_model_dir())  # raises ModelError if the stand-in was imported


def test_pip_download_runs_without_the_working_folder_on_its_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: list[list[str]] = []

    def run(command: list[str], **options: Any) -> subprocess.CompletedProcess[str]:
        ran.append(command)
        return subprocess.CompletedProcess(command, 1, "", "offline")

    monkeypatch.setattr(models.subprocess, "run", run)
    with pytest.raises(ModelError, match="offline"):
        models.download_pkuseg_sdist(tmp_path)
    assert ran and ran[0][:4] == [models.sys.executable, "-P", "-m", "pip"]
