"""``models install pkuseg`` run again (the README's main job runs it every time): a model it installed from the same
sdist, its files unchanged, is kept without a download; a changed file, another sdist or ``--force`` installs again.
It downloaded 49 MB and converted the model on every run."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from test_models import fake_sdist, sha256

from rag_eval import models
from rag_eval.models import install_pkuseg_model


def test_an_unchanged_install_is_kept_and_anything_else_installs_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pypi").mkdir()
    source = fake_sdist(tmp_path / "pypi")
    downloads: list[Path] = []

    def download(folder: Path) -> Path:
        downloads.append(folder)
        return Path(shutil.copy(source, folder / source.name))

    monkeypatch.setattr(models, "download_pkuseg_sdist", download)
    target = tmp_path / "models" / "default"
    expected = sha256(source)
    said: list[str] = []
    install_pkuseg_model(target=target, expected_sha256=expected)
    install_pkuseg_model(target=target, expected_sha256=expected, progress=said.append)
    assert len(downloads) == 1 and said == [
        f"the pkuseg default model is already installed in {target} (its files checked against its record)"
    ]
    install_pkuseg_model(target=target, expected_sha256=expected, force=True)
    assert len(downloads) == 2
    with open(target / "weights.npz", "ab") as handle:  # a damaged install
        handle.write(b"\0")
    install_pkuseg_model(target=target, expected_sha256=expected)
    assert len(downloads) == 3
    install_pkuseg_model(target=target, expected_sha256=expected)
    assert len(downloads) == 3
    (target / models.INSTALL_RECORD).write_text("{not json", encoding="utf-8")
    install_pkuseg_model(target=target, expected_sha256=expected)
    assert len(downloads) == 4
    with pytest.raises(models.ModelError, match="expected 0000"):  # another pinned sdist: not the installed one
        install_pkuseg_model(target=target, expected_sha256="0" * 64)
    assert len(downloads) == 5
