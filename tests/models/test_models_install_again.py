"""``models install pkuseg`` run again (the README's main job runs it every time): a model it installed from the same
sdist, its files unchanged, is kept without a download; a changed file, another sdist or ``--force`` installs again.
It downloaded 49 MB and converted the model on every run."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from helpers.models import fake_sdist, sha256

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


@pytest.mark.parametrize("given", [[], ["--force"]])
def test_the_cli_passes_force_on(monkeypatch: pytest.MonkeyPatch, given: list[str]) -> None:
    from click.testing import CliRunner

    from rag_eval.cli import cli

    seen: list[bool] = []

    def install(sdist: Path | None, *, progress: object = None, force: bool = False) -> None:
        seen.append(force)

    monkeypatch.setattr(models, "install_pkuseg_model", install)
    result = CliRunner().invoke(cli, ["models", "install", "pkuseg", *given])
    assert result.exit_code == 0, result.output
    assert seen == [given == ["--force"]]


def test_a_model_file_rewritten_in_place_at_the_same_size_gets_a_new_checksum(tmp_path: Path) -> None:
    """The checksum is memoised by size and mtime: a file rewritten with other bytes of the same size (its mtime
    moved) must be hashed again, or an index would record the old model's checksum."""
    for name in models.MODEL_FILES:
        (tmp_path / name).write_bytes(b"a" * 64)
    first = models.model_checksum(tmp_path)
    weights = tmp_path / models.MODEL_FILES[-1]
    before = weights.stat().st_mtime_ns
    weights.write_bytes(b"b" * 64)
    os.utime(weights, ns=(before + 1_000_000_000, before + 1_000_000_000))
    assert models.model_checksum(tmp_path) != first
