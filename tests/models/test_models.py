"""pkuseg models: resolution order, clear errors, install from the sdist (broken sdists, full disks, FIFOs), model
paths and folders that cannot be one, training, the shipped small model."""

from __future__ import annotations

import errno
import io
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
from pathlib import Path
from typing import Any

import pytest
import srsly
from click.testing import CliRunner
from helpers import invoke, one_error
from helpers.models import fake_sdist, sha256, write_tarball
from helpers.paths import _not_regular

from rag_eval import models
from rag_eval.cli import cli
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


@pytest.mark.parametrize("kind", ["fifo", "device", "missing", "model file a folder"])
def test_a_pkuseg_model_path_says_what_it_is(tmp_path: Path, kind: str) -> None:
    """Bug: a model path that was a FIFO, a device or missing, or a model folder holding a folder where a file
    belongs, all said the folder "lacks features.msgpack, weights.npz"."""
    expected = {
        "fifo": "is a FIFO (named pipe), not a model folder",
        "device": "is a character device, not a model folder",
        "missing": "no such folder",
        "model file a folder": "features.msgpack is a directory, not a regular file; weights.npz is missing",
    }[kind]
    if kind == "missing":
        path = tmp_path / "nothing"
    elif kind == "model file a folder":
        path = tmp_path / "model"
        (path / "features.msgpack").mkdir(parents=True)
    else:
        path = _not_regular(tmp_path, kind)
    with pytest.raises(UnavailableError) as raised:
        get_tokenizer(f"pkuseg:model={path}").load()
    assert expected in str(raised.value) and "lacks" not in str(raised.value)


# -- hostile files and paths: one error line, nothing created -------------------------------------------------------


def test_models_install_from_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pkuseg.tar.gz"
    os.mkfifo(fifo)
    outcome: list[tuple[int, str]] = []
    worker = threading.Thread(
        target=lambda: outcome.append(invoke("models", "install", "pkuseg", "--sdist", str(fifo)))
    )
    worker.daemon = True
    worker.start()
    worker.join(timeout=30)
    if not outcome:  # free the blocked reader before failing
        with open(fifo, "wb"):
            pass
        worker.join(timeout=10)
        pytest.fail("models install --sdist FIFO blocked reading the FIFO")
    assert "FIFO" in one_error(outcome[0])


MODEL_DIR = "pkuseg-0.0.25/pkuseg/models/default/"


def sdist_with(folder: Path, features: bytes) -> Path:
    """An sdist laid out like pkuseg's whose features.pkl holds ``features``."""
    members = {
        MODEL_DIR + "features.pkl": features,
        MODEL_DIR + "weights.npz": (mini_model_dir() / "weights.npz").read_bytes(),
    }
    return write_tarball(folder / "pkuseg-0.0.25.tar.gz", members)


def _features(**changes: Any) -> bytes:
    data = dict(srsly.read_msgpack(mini_model_dir() / "features.msgpack"))
    data.update(changes)
    return pickle.dumps(data)


# --- models install ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "features",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"garbage, not a pickle", id="garbage"),
        pytest.param(pickle.dumps({"unigram": []})[:-5], id="truncated"),
        pytest.param(pickle.dumps([1, 2, 3]), id="a-list"),
        pytest.param(_features(unigram=[1, "a"]), id="unsortable"),
        pytest.param(_features(feature_to_idx={"a": object()}), id="not-msgpack"),
    ],
)
@pytest.mark.usefixtures("own_cache")
def test_an_sdist_with_a_broken_feature_file_is_one_error_and_keeps_the_model(tmp_path: Path, features: bytes) -> None:
    """A truncated, empty or foreign features.pkl escaped as UnpicklingError/EOFError/TypeError tracebacks."""
    good = fake_sdist(tmp_path)
    target = tmp_path / "models" / "default"
    install_pkuseg_model(good, target=target, expected_sha256=sha256(good))
    before = {p.name: p.read_bytes() for p in target.iterdir()}
    broken_dir = tmp_path / "broken"
    broken_dir.mkdir()
    broken = sdist_with(broken_dir, features)
    with pytest.raises(ModelError, match=r"pkuseg-0.0.25.tar.gz: features.pkl is not a pkuseg feature file"):
        install_pkuseg_model(broken, target=target, expected_sha256=sha256(broken))
    assert {p.name: p.read_bytes() for p in target.iterdir()} == before
    assert sorted(p.name for p in target.parent.iterdir()) == ["default"]  # no staging folder left


@pytest.mark.usefixtures("own_cache")
def test_a_disk_full_install_keeps_the_previous_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sdist = fake_sdist(tmp_path)
    target = tmp_path / "models" / "default"
    install_pkuseg_model(sdist, target=target, expected_sha256=sha256(sdist))
    before = {p.name: p.read_bytes() for p in target.iterdir()}

    def full(path: Any, data: Any) -> None:
        Path(path).write_bytes(b"half")
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(srsly, "write_msgpack", full)
    with pytest.raises(OSError, match="No space left"):
        install_pkuseg_model(sdist, target=target, expected_sha256=sha256(sdist))
    assert {p.name: p.read_bytes() for p in target.iterdir()} == before
    assert sorted(p.name for p in target.parent.iterdir()) == ["default"]


# --- pkuseg:model= ----------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("own_cache")
def test_a_model_path_that_is_not_valid_text_is_refused_before_it_reaches_an_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """$RAG_EVAL_PKUSEG_MODEL holding undecodable bytes crashed `index build` with a UnicodeEncodeError
    traceback when the model label (with a lone surrogate) was written to the index meta."""
    folder = Path(str(tmp_path / "model") + "\udcff")
    shutil.copytree(mini_model_dir(), folder)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# 导出\n\n导出文件\n", encoding="utf-8")
    monkeypatch.setenv(PKUSEG_MODEL_ENV, str(folder))
    with pytest.raises(UnavailableError, match="not valid Unicode"):
        resolve_pkuseg_model("")
    with pytest.raises(UnavailableError, match="not valid Unicode"):
        resolve_pkuseg_model(str(folder))
    error = one_error(invoke("index", "build", str(docs), "-t", "pkuseg", "-o", str(tmp_path / "i.sqlite")))
    assert f"${PKUSEG_MODEL_ENV}" in error and "not valid Unicode" in error
    assert not (tmp_path / "i.sqlite").exists()


@pytest.mark.usefixtures("own_cache")
def test_a_model_path_that_is_a_file_says_so(tmp_path: Path) -> None:
    file = tmp_path / "weights.npz"
    file.write_bytes(b"x")
    with pytest.raises(UnavailableError, match="is a file, not a model folder"):
        resolve_pkuseg_model(str(file))


@pytest.mark.usefixtures("own_cache")
def test_a_model_folder_with_garbage_names_the_folder(tmp_path: Path) -> None:
    """The error was 'tokenizer 'pkuseg' failed to load: ExtraData: ...', naming no model."""
    folder = tmp_path / "my model"
    folder.mkdir()
    for name in models.MODEL_FILES:
        (folder / name).write_bytes(b"\x93garbage" * 10)
    error = one_error(invoke("tokenize", "-t", f"pkuseg:model={folder}", "导出"))
    assert f"pkuseg model '{folder}' cannot be loaded" in error


@pytest.mark.usefixtures("own_cache")
def test_a_huge_model_file_is_refused_before_it_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "huge"
    shutil.copytree(mini_model_dir(), folder)
    monkeypatch.setattr(models, "MAX_MODEL_FILE_BYTES", 500_000, raising=False)
    read: list[Path] = []
    monkeypatch.setattr(models, "_sha256", lambda *paths: read.extend(paths) or "0" * 64)
    with pytest.raises(UnavailableError, match=r"weights.npz is 846834 bytes over the limit of 500000"):
        get_tokenizer(f"pkuseg:model={folder}").tokenize("导出")
    assert read == []


def _denied_under(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    """Every stat under ``folder`` fails with EACCES, as for a folder the user cannot read (tests run as root)."""
    real = Path.stat

    def stat(self: Path, *args: Any, **kwargs: Any) -> Any:
        if str(self).startswith(str(folder)):
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "stat", stat)


def test_an_unreadable_model_folder_is_unavailable_and_the_listings_survive(
    own_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A PermissionError from the model folder ended `rag-eval tokenizers` and `models list` instead of
    marking the one model unavailable."""
    _denied_under(monkeypatch, own_cache)
    with pytest.raises(UnavailableError, match="cannot read pkuseg model 'default'.*Permission denied"):
        resolve_pkuseg_model("default")
    listed = CliRunner().invoke(cli, ["tokenizers"])
    assert listed.exit_code == 0, listed.output
    assert "pkuseg  (Python)  unavailable" in listed.stdout and "Permission denied" in listed.stdout
    assert "bigram  (Python)  available" in listed.stdout
    models_listed = CliRunner().invoke(cli, ["models", "list"])
    assert models_listed.exit_code == 0, models_listed.output
    assert "pkuseg:model=default\tnot installed" in models_listed.stdout
    assert "pkuseg:model=mini\tinstalled" in models_listed.stdout


def test_a_cache_that_is_a_file_lists_and_refuses_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, own_cache: Path
) -> None:
    """A guard (this already worked): the listing says not installed, the install refuses before writing."""
    own_cache.write_text("not a folder\n", encoding="utf-8")
    listed = CliRunner().invoke(cli, ["models", "list"])
    assert listed.exit_code == 0 and "pkuseg:model=default\tnot installed" in listed.stdout
    sdist = fake_sdist(tmp_path)
    with pytest.raises(RagEvalError, match="cache is not a folder"):
        install_pkuseg_model(sdist, expected_sha256=sha256(sdist))
    assert own_cache.read_text(encoding="utf-8") == "not a folder\n"


def test_nothing_here_touched_the_real_cache(own_cache: Path) -> None:
    assert str(models.default_model_dir()).startswith(str(own_cache))
    with pytest.raises(RagEvalError):
        resolve_pkuseg_model("default")


def test_training_pkuseg_logs_on_stderr_and_refuses_too_little_text(tmp_path: Path) -> None:
    """The trainer's log filled standard output; under 10 sentences it died with a ZeroDivisionError traceback."""
    few = tmp_path / "few.txt"
    few.write_text("导出 文件 保留 三十 天\n退款 申请 审核 通过\n", encoding="utf-8")
    runner = CliRunner()
    refused = runner.invoke(cli, ["models", "train-pkuseg", str(few), "-o", str(tmp_path / "m1")])
    assert refused.exit_code == 1 and refused.stderr.startswith(
        f"error: {few}: 2 sentences; training needs at least 10"
    )
    assert "Traceback" not in refused.output and not (tmp_path / "m1").exists()
    enough = tmp_path / "enough.txt"
    enough.write_text("导出 文件 保留 三十 天\n退款 申请 审核 通过\n" * 6, encoding="utf-8")
    trained = runner.invoke(
        cli, ["models", "train-pkuseg", str(enough), "-o", str(tmp_path / "m2"), "--iterations", "1"]
    )
    assert trained.exit_code == 0, trained.output
    assert trained.stdout == f"wrote {tmp_path / 'm2'}\n"
    assert (tmp_path / "m2" / "weights.npz").is_file()
