"""pkuseg models: the small one shipped with rag-eval, the real ``default`` one installed from PyPI."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pickle
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from importlib.resources import files
from pathlib import Path

from .cache import cache_dir
from .errors import ModelError, UnavailableError
from .files.outputs import only_names, publish_folder
from .files.textio import counted, file_kind, read_json, text_argument

#: Environment variable naming the pkuseg model (a model name or a directory).
PKUSEG_MODEL_ENV = "RAG_EVAL_PKUSEG_MODEL"
PKUSEG_SDIST = "pkuseg==0.0.25"
#: sha256 of pkuseg-0.0.25.tar.gz on PyPI, which contains the ``default`` model.
PKUSEG_SDIST_SHA256 = "dd012bf93689721c9574bc2b2ba98fb4ac22790cec0af354a78e217828b81e91"
_SDIST_MODEL = "pkuseg-0.0.25/pkuseg/models/default/"
MODEL_FILES = ("features.msgpack", "weights.npz")
INSTALL_COMMAND = "rag-eval models install pkuseg"
#: Largest model file accepted: ten times the real default model's largest (weights.npz, 106 MB). A bigger one is
#: refused before it is hashed or loaded whole into memory.
MAX_MODEL_FILE_BYTES = 1 << 30

#: ``say(message)``: how an install reports each step.
Say = Callable[[str], None]


def mini_model_dir() -> Path:
    """The small model trained by rag-eval on its own segmented text (tokenizers/data/)."""
    return Path(str(files("rag_eval.tokenizers") / "data" / "pkuseg-mini"))


def mini_training_text() -> Path:
    """The segmented text the shipped small model was trained on."""
    return mini_model_dir().parent / "pkuseg_train.txt"


def default_model_dir() -> Path:
    """Where ``rag-eval models install pkuseg`` puts the real default model."""
    return cache_dir() / "models" / "pkuseg" / "default"


def _named(name: str) -> Path | None:
    return {"mini": mini_model_dir(), "default": default_model_dir()}.get(name)


def resolve_pkuseg_model(option: str = "") -> tuple[str, Path]:
    """(label, directory) of the pkuseg model: the ``model=`` option, else ``$RAG_EVAL_PKUSEG_MODEL``,
    else the installed default model. Names: ``mini`` (shipped), ``default`` (installed); anything else
    is a directory holding features.msgpack and weights.npz."""
    source = option or os.environ.get(PKUSEG_MODEL_ENV, "") or "default"
    # The label goes into specs and index meta, which hold only text: undecodable bytes in a path are refused here.
    text_argument(source, "the pkuseg model" if option else f"${PKUSEG_MODEL_ENV}", UnavailableError)
    path = _named(source) or Path(source).expanduser().resolve()
    label = source if _named(source) else str(path)
    hint = f"give a directory with {' and '.join(MODEL_FILES)}, or run: {INSTALL_COMMAND}"
    try:
        missing = _missing_files(path)
        too_big = [] if missing else _oversized_files(path)
        kind = _kind(path)
        # A model file that is there but no regular file (a folder, a FIFO) is not "lacking": say what it is.
        odd = {name: _kind(path / name) for name in missing} if kind == stat.S_IFDIR else {}
    except OSError as exc:
        raise UnavailableError(f"cannot read pkuseg model {label!r} in {path}: {exc.strerror or exc}") from None
    if missing:
        if source == "default":
            raise UnavailableError(
                f"the pkuseg default model is not installed (looked in {path})",
                hint=f"run: {INSTALL_COMMAND}   (or use the shipped small model: -t pkuseg:model=mini)",
            )
        if kind is None:
            raise UnavailableError(f"pkuseg model {label!r}: no such folder: {path}", hint=hint)
        if kind == stat.S_IFREG:
            raise UnavailableError(f"pkuseg model {label!r} is a file, not a model folder", hint=hint)
        if kind != stat.S_IFDIR:
            raise UnavailableError(f"pkuseg model {label!r}: {path} {file_kind(kind)}, not a model folder", hint=hint)
        if any(odd[name] is not None for name in missing):
            said = [
                f"{name} is missing" if mode is None else f"{name} {file_kind(mode)}, not a regular file"
                for name, mode in ((name, odd[name]) for name in missing)
            ]
            raise UnavailableError(f"pkuseg model {label!r} in {path}: {'; '.join(said)}", hint=hint)
        raise UnavailableError(f"pkuseg model {label!r} lacks {', '.join(missing)} in {path}", hint=hint)
    if too_big:
        raise UnavailableError(
            f"pkuseg model {label!r}: {', '.join(too_big)} over the limit of {MAX_MODEL_FILE_BYTES} bytes", hint=hint
        )
    return label, path


def _kind(path: Path) -> int | None:
    """The file type of ``path`` (``stat.S_IFDIR``, ``S_IFREG``, ...) following links, or None when missing."""
    try:
        return stat.S_IFMT(path.stat().st_mode)
    except (FileNotFoundError, NotADirectoryError):
        return None


def _missing_files(path: Path) -> list[str]:
    return [name for name in MODEL_FILES if not (path / name).is_file()]


def _oversized_files(path: Path) -> list[str]:
    sizes = {name: (path / name).stat().st_size for name in MODEL_FILES}
    return [f"{name} is {size} bytes" for name, size in sizes.items() if size > MAX_MODEL_FILE_BYTES]


def _sha256(*paths: Path) -> str:
    """sha256 over the files' bytes, one after the other, read in 1 MB blocks."""
    digest = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


@lru_cache(maxsize=16)
def _checksum(path: Path, stamp: tuple[tuple[int, int], ...]) -> str:
    return _sha256(*(path / name for name in MODEL_FILES))


def model_checksum(path: Path) -> str:
    """sha256 over a model's files (memoised while their size and mtime stay the same)."""
    stamp = tuple((int(st.st_size), int(st.st_mtime_ns)) for st in ((path / n).stat() for n in MODEL_FILES))
    return _checksum(path, stamp)


@dataclass(frozen=True)
class ModelInfo:
    """One pkuseg model as ``rag-eval models list`` shows it."""

    name: str
    path: Path
    installed: bool
    size_bytes: int
    note: str


def list_models() -> list[ModelInfo]:
    """The shipped and installed pkuseg models."""
    rows = []
    for name, note in (
        ("mini", "shipped: trained by rag-eval on its own text, for tests and CI"),
        ("default", f"pkuseg's default model from the PyPI sdist; install: {INSTALL_COMMAND}"),
    ):
        path = _named(name)
        assert path is not None
        try:
            present = not _missing_files(path)
            size = sum((path / f).stat().st_size for f in MODEL_FILES) if present else 0
        except OSError as exc:  # an unreadable cache folder: listed, with why, instead of ending the listing
            present, size, note = False, 0, f"cannot read {path}: {exc.strerror or exc}"
        rows.append(ModelInfo(name, path, present, size, note))
    return rows


def download_pkuseg_sdist(folder: Path) -> Path:
    """``pip download`` the pkuseg sdist (no dependencies, no build isolation) into ``folder``."""
    command = [
        sys.executable,
        "-P",  # the working folder is not searched: a pip.py there is not run
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--no-build-isolation",
        "--no-binary",
        "pkuseg",
        PKUSEG_SDIST,
        "-d",
        str(folder),
    ]
    result = subprocess.run(command, capture_output=True, text=True)
    found = sorted(folder.glob("pkuseg-0.0.25.tar.gz"))
    if result.returncode != 0 or not found:
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise ModelError(
            f"pip could not download {PKUSEG_SDIST}: {last}",
            hint="pip needs numpy and wheel in this environment to read the sdist's metadata: "
            f"{sys.executable} -m pip install numpy wheel; or download pkuseg-0.0.25.tar.gz elsewhere "
            "and pass it with --sdist FILE",
        )
    return found[0]


def install_pkuseg_model(
    sdist: Path | None = None,
    *,
    target: Path | None = None,
    expected_sha256: str = PKUSEG_SDIST_SHA256,
    progress: Say = lambda message: None,
    force: bool = False,
) -> Path:
    """Install pkuseg's default model from its PyPI sdist, converted to spacy-pkuseg's format.

    Downloads the sdist with pip unless ``sdist`` is given, checks its sha256, extracts
    ``pkuseg/models/default``, converts features.pkl to features.msgpack and moves the result into
    place in one rename, so a failure leaves any previous install untouched. Without ``sdist``, a model this
    function installed from the same sdist whose files still have the recorded sha256 is kept (nothing is
    downloaded) unless ``force``.
    """
    target = target or default_model_dir()
    if sdist is None and not force and _installed_from(target, expected_sha256):
        progress(f"the pkuseg default model is already installed in {target} (its files checked against its record)")
        return target
    # The download and the extraction go to the system's temporary folder; the model is assembled in a hidden
    # folder beside the target that a killed install leaves for the next one to clear (publish_folder), and
    # an existing target is replaced only when it holds nothing but an installed model.
    with tempfile.TemporaryDirectory(prefix="rag-eval-install-") as scratch:
        work = Path(scratch)
        if sdist is None:
            progress(f"downloading {PKUSEG_SDIST} sdist from PyPI with pip (about 49 MB)")
            sdist = download_pkuseg_sdist(work)
        progress(f"checking sha256 of {sdist.name}")
        actual = _sha256(sdist)
        if actual != expected_sha256:
            raise ModelError(f"{sdist} has sha256 {actual}, expected {expected_sha256}; refusing to install it")
        progress("extracting pkuseg/models/default")
        extracted = work / "model"
        extracted.mkdir()
        _extract_model(sdist, extracted)
        with publish_folder(target, owned=_holds_only_an_installed_model, what="pkuseg model folder") as staged:
            shutil.copyfile(extracted / "weights.npz", staged / "weights.npz")
            progress("converting features.pkl to features.msgpack")
            _convert_features(extracted / "features.pkl", staged / "features.msgpack", f"{sdist}: features.pkl")
            progress("checking that spacy-pkuseg loads the model")
            _smoke_test(staged)
            (staged / INSTALL_RECORD).write_text(
                json.dumps({"source": PKUSEG_SDIST, "sdist_sha256": actual, "model_sha256": model_checksum(staged)}),
                encoding="utf-8",
            )
    progress(f"installed the pkuseg default model in {target}")
    return target


def _extract_model(sdist: Path, destination: Path) -> None:
    wanted = {_SDIST_MODEL + "features.pkl": "features.pkl", _SDIST_MODEL + "weights.npz": "weights.npz"}
    try:
        with tarfile.open(sdist, "r:gz") as archive:
            for member in archive:
                name = wanted.pop(member.name, None)
                if name is None or not member.isfile():
                    continue
                source = archive.extractfile(member)
                assert source is not None
                with source, open(destination / name, "wb") as out:
                    shutil.copyfileobj(source, out)
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise ModelError(f"cannot read {sdist}: {exc}") from None
    if wanted:
        raise ModelError(f"{sdist} does not contain {', '.join(sorted(wanted))}")


def _convert_features(source: Path, destination: Path, label: str) -> None:
    import srsly

    with open(source, "rb") as handle:
        try:
            data = pickle.load(handle)  # noqa: S301 - only from the sdist whose sha256 was just checked
        except Exception as exc:  # a truncated or foreign pickle raises any of a dozen exception types
            raise ModelError(f"{label} is not a pkuseg feature file: {type(exc).__name__}: {exc}") from None
    try:
        converted = {
            "unigram": sorted(data["unigram"]),
            "bigram": sorted(data["bigram"]),
            "feature_to_idx": data["feature_to_idx"],
            "tag_to_idx": data["tag_to_idx"],
        }
    except KeyError as exc:
        raise ModelError(f"{label} is not a pkuseg feature file: missing {exc}") from None
    except (TypeError, ValueError) as exc:
        raise ModelError(f"{label} is not a pkuseg feature file: {exc}") from None
    try:
        srsly.write_msgpack(destination, converted)
    except (TypeError, ValueError, OverflowError) as exc:  # values msgpack cannot hold; OSError (disk full) passes
        raise ModelError(f"{label} is not a pkuseg feature file: {exc}") from None


def _smoke_test(model_dir: Path) -> None:
    code = (
        "import sys, spacy_pkuseg;"
        "seg = spacy_pkuseg.pkuseg(model_name=sys.argv[1]);"
        "print(' '.join(seg.cut('导出文件保留三十天')))"
    )
    # -P: a spacy_pkuseg.py in the working folder is not the one checked
    result = subprocess.run([sys.executable, "-P", "-c", code, str(model_dir)], capture_output=True, text=True)
    if result.returncode != 0 or result.stderr.strip() or not result.stdout.strip():
        detail = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise ModelError(f"spacy-pkuseg could not load the converted model cleanly: {detail}")


#: What ``models install`` writes beside the model files: where the model came from.
INSTALL_RECORD = "rag-eval-install.json"
#: Largest install record read back (about 200 bytes as written).
MAX_INSTALL_RECORD_BYTES = 100_000
#: The fewest sentences spacy-pkuseg trains on (it steps its learning rate every tenth of them).
MIN_TRAINING_SENTENCES = 10


def _installed_from(target: Path, sdist_sha256: str) -> bool:
    """Whether ``target`` holds a model installed from the sdist with ``sdist_sha256``, its files unchanged."""
    try:
        record = read_json(target / INSTALL_RECORD, ModelError, max_bytes=MAX_INSTALL_RECORD_BYTES)
        return (
            isinstance(record, dict)
            and record.get("sdist_sha256") == sdist_sha256
            and record.get("model_sha256") == model_checksum(target)
        )
    except (ModelError, OSError):  # no record, not JSON, a model file missing: installed again
        return False


def _holds_only_an_installed_model(folder: Path) -> str | None:
    return only_names(
        folder,
        lambda name: len(name.parts) == 1 and name.name in (*MODEL_FILES, INSTALL_RECORD),
        what="pkuseg model folder",
    )


def _holds_only_a_model(folder: Path) -> str | None:
    return only_names(
        folder, lambda name: len(name.parts) == 1 and name.name in MODEL_FILES, what="pkuseg model folder"
    )


def train_pkuseg_model(training_text: Path, output: Path, *, iterations: int = 20) -> Path:
    """Train a small pkuseg model from segmented text (words separated by spaces, one sentence a line).

    spacy-pkuseg shuffles without a seed, so two runs differ slightly: train once and keep the result.
    """
    if not training_text.is_file():
        raise ModelError(f"training text {training_text} does not exist")
    try:
        lines = training_text.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise ModelError(f"{training_text}: not valid UTF-8 at byte {exc.start}") from None
    words = sum(len(line.split()) for line in lines)
    if words < 2:
        raise ModelError(
            f"{training_text}: no segmented text (expected words separated by spaces, one sentence a line)"
        )
    sentences = sum(1 for line in lines if line.strip())
    if sentences < MIN_TRAINING_SENTENCES:  # the trainer divides by sentences // 10 (ZeroDivisionError below 10)
        raise ModelError(
            f"{training_text}: {counted(sentences, 'sentence')}; training needs at least {MIN_TRAINING_SENTENCES}",
            hint="one segmented sentence a line (the shipped mini model was trained on 469)",
        )
    import spacy_pkuseg

    # Trained next to the target and moved into place at the end: an existing folder is replaced only when
    # it holds nothing but a model (what this command writes), and a failed training leaves it untouched.
    with publish_folder(output, owned=_holds_only_a_model, what="model folder") as staging:
        with contextlib.redirect_stdout(sys.stderr):  # the trainer's progress log; standard output is the result's
            try:
                spacy_pkuseg.train(str(training_text), str(training_text), str(staging), train_iter=iterations)
            except (ArithmeticError, LookupError, TypeError, ValueError) as exc:  # its own checks are bare errors
                raise ModelError(f"{training_text}: pkuseg's training failed: {type(exc).__name__}: {exc}") from None
    return output
