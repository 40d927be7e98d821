"""pkuseg models: resolution order, clear errors, install from the sdist, the shipped small model."""

from __future__ import annotations

import io
import signal
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from helpers.models import fake_sdist, sha256

from rag_eval.errors import ModelError, RagEvalError, UnavailableError
from rag_eval.models import (
    PKUSEG_MODEL_ENV,
    default_model_dir,
    install_pkuseg_model,
    list_models,
    mini_model_dir,
    mini_training_text,
    resolve_pkuseg_model,
)
from rag_eval.tokenizers import get_tokenizer


def test_resolution_order(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert resolve_pkuseg_model("mini") == ("mini", mini_model_dir())
    monkeypatch.setenv(PKUSEG_MODEL_ENV, "mini")
    assert resolve_pkuseg_model("")[0] == "mini"
    monkeypatch.setenv(PKUSEG_MODEL_ENV, str(tmp_path))
    with pytest.raises(UnavailableError, match="lacks features.msgpack, weights.npz"):
        resolve_pkuseg_model("")
    assert resolve_pkuseg_model("mini")[0] == "mini"  # the option wins over the environment


def test_missing_default_model_names_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PKUSEG_MODEL_ENV, raising=False)
    with pytest.raises(UnavailableError) as caught:
        get_tokenizer("pkuseg").tokenize("导出")
    assert "not installed" in str(caught.value)
    assert "rag-eval models install pkuseg" in (caught.value.hint or "")


def test_install_from_sdist_converts_and_loads(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    sdist = fake_sdist(tmp_path)
    target = tmp_path / "models" / "default"
    messages: list[str] = []
    installed = install_pkuseg_model(sdist, target=target, expected_sha256=sha256(sdist), progress=messages.append)
    assert installed == target
    assert sorted(p.name for p in target.iterdir()) == ["features.msgpack", "rag-eval-install.json", "weights.npz"]
    assert any("converting" in m for m in messages)
    tokenizer = get_tokenizer(f"pkuseg:model={target}")
    assert tokenizer.terms("导出文件保留三十天") == get_tokenizer("pkuseg:model=mini").terms("导出文件保留三十天")
    assert "WARNING" not in capfd.readouterr().err


def test_install_refuses_a_wrong_checksum_and_keeps_the_previous_model(tmp_path: Path) -> None:
    sdist = fake_sdist(tmp_path)
    target = tmp_path / "default"
    install_pkuseg_model(sdist, target=target, expected_sha256=sha256(sdist))
    before = {p.name: p.read_bytes() for p in target.iterdir()}
    with pytest.raises(ModelError, match="expected 0000"):
        install_pkuseg_model(sdist, target=target, expected_sha256="0" * 64)
    assert {p.name: p.read_bytes() for p in target.iterdir()} == before


def test_install_never_replaces_a_folder_that_holds_more_than_a_model(tmp_path: Path) -> None:
    sdist = fake_sdist(tmp_path)
    target = tmp_path / "default"
    target.mkdir()
    (target / "notes.txt").write_text("mine\n", encoding="utf-8")
    with pytest.raises(RagEvalError, match="notes.txt"):
        install_pkuseg_model(sdist, target=target, expected_sha256=sha256(sdist))
    assert sorted(p.name for p in target.iterdir()) == ["notes.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["default", sdist.name]  # nothing left beside it


def test_what_a_killed_install_left_is_cleared_by_the_next(tmp_path: Path) -> None:
    """An install killed outright left its hidden folder beside the model for ever (found by the data-safety
    audit); now it is in the system's temporary folder or a staging folder the next install clears."""
    sdist = fake_sdist(tmp_path)
    target = tmp_path / "models" / "default"
    target.parent.mkdir()
    code = (
        "import os, sys, signal\n"
        "from pathlib import Path\n"
        "from rag_eval import models\n"
        "def killed(*args):\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "models._smoke_test = killed\n"
        "models.install_pkuseg_model(Path(sys.argv[1]), target=Path(sys.argv[2]), expected_sha256=sys.argv[3])\n"
    )
    died = subprocess.run([sys.executable, "-c", code, str(sdist), str(target), sha256(sdist)], check=False)
    assert died.returncode == -signal.SIGKILL
    left = [p.name for p in target.parent.iterdir()]
    assert left and all(name.startswith(".default.") for name in left), left
    install_pkuseg_model(sdist, target=target, expected_sha256=sha256(sdist))
    assert sorted(p.name for p in target.parent.iterdir()) == ["default"]


def test_install_rejects_an_archive_without_the_model(tmp_path: Path) -> None:
    path = tmp_path / "pkuseg-0.0.25.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        info = tarfile.TarInfo("pkuseg-0.0.25/setup.py")
        archive.addfile(info, io.BytesIO(b""))
    with pytest.raises(
        ModelError, match=r"does not contain pkuseg-0.0.25/pkuseg/models/default/features.pkl, .*weights.npz"
    ):
        install_pkuseg_model(path, target=tmp_path / "default", expected_sha256=sha256(path))
    assert not (tmp_path / "default").exists()


def test_list_models_shows_shipped_and_default() -> None:
    rows = {row.name: row for row in list_models()}
    assert rows["mini"].installed and rows["mini"].size_bytes > 100_000
    assert rows["default"].path == default_model_dir()


def test_shipped_model_was_trained_on_shipped_text() -> None:
    lines = mini_training_text().read_text(encoding="utf-8").splitlines()
    assert len(lines) >= 300
    assert all(line == line.strip() and "  " not in line for line in lines)
    assert sum(line.split().count("导出") for line in lines) >= 10


@pytest.mark.real_model
def test_real_model_segments_compact_line(real_pkuseg_model: Path) -> None:
    assert get_tokenizer(f"pkuseg:model={real_pkuseg_model}").terms("数据导出文件保留三十天")[:2] == ["数据", "导出"]
