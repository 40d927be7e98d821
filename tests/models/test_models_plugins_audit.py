"""Hostile input to model management and plug-in loading: broken sdists and model folders, unreadable caches,
plug-ins that raise or declare nonsense. Each failure is one error naming its cause; nothing is left behind."""

from __future__ import annotations

import errno
import pickle
import shutil
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest
import regex
import srsly
from click.testing import CliRunner
from helpers import invoke, one_error
from helpers.models import fake_sdist, sha256, write_tarball
from helpers.plugins import (
    ENTRY_POINT_PLUGINS,
    DeclaresNoLibraries,
    Fine,
    _Words,
)

from rag_eval import models, registry
from rag_eval.builders import BUILDERS, Builder
from rag_eval.cache import CACHE_ENV
from rag_eval.cli import cli
from rag_eval.errors import ModelError, RagEvalError, RegistryError, UnavailableError
from rag_eval.models import PKUSEG_MODEL_ENV, install_pkuseg_model, mini_model_dir, resolve_pkuseg_model
from rag_eval.registry import Registry
from rag_eval.spec import Option, OptionSet
from rag_eval.tokenizers import TOKENIZERS, Tokenizer, get_tokenizer
from rag_eval.tokenizers.listing import describe_all

MODEL_DIR = "pkuseg-0.0.25/pkuseg/models/default/"


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Never the real cache (it holds the installed default model)."""
    cache = tmp_path / "cache"
    monkeypatch.setenv(CACHE_ENV, str(cache))
    monkeypatch.delenv(PKUSEG_MODEL_ENV, raising=False)
    return cache


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


def test_a_model_path_that_is_a_file_says_so(tmp_path: Path) -> None:
    file = tmp_path / "weights.npz"
    file.write_bytes(b"x")
    with pytest.raises(UnavailableError, match="is a file, not a model folder"):
        resolve_pkuseg_model(str(file))


def test_a_model_folder_with_garbage_names_the_folder(tmp_path: Path) -> None:
    """The error was 'tokenizer 'pkuseg' failed to load: ExtraData: ...', naming no model."""
    folder = tmp_path / "my model"
    folder.mkdir()
    for name in models.MODEL_FILES:
        (folder / name).write_bytes(b"\x93garbage" * 10)
    error = one_error(invoke("tokenize", "-t", f"pkuseg:model={folder}", "导出"))
    assert f"pkuseg model '{folder}' cannot be loaded" in error


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


# --- plug-ins ---------------------------------------------------------------------------------------------------


def _declaring(attribute: str, value: object, base: type = _Words) -> type:
    return type(f"Declares_{attribute}", (base,), {"name": "audit-declares", attribute: value})


class _Paragraphs(Builder):
    name = "audit-paragraphs"


NONSENSE = [
    ("libraries", "spacy-pkuseg", "libraries = 'spacy-pkuseg', which is not of type tuple[str, ...]"),
    ("libraries", None, "libraries = None, which is not of type tuple[str, ...]"),
    ("libraries", ("jieba", 3), "libraries = ('jieba', 3), which is not of type tuple[str, ...]"),
    ("summary", 42, "summary = 42, which is not of type str"),
    ("native", "no", "native = 'no', which is not of type bool"),
    ("parallel", 1, "parallel = 1, which is not of type bool"),
    ("install_hint", ["pip", "install"], "install_hint = ['pip', 'install'], which is not of type str"),
    ("option_set", "nonsense", "option_set = 'nonsense', which is not of type OptionSet"),
    ("option_set", OptionSet(("model",)), "the option 'model', which is not a rag_eval.spec.Option"),  # type: ignore[arg-type]
    ("option_set", OptionSet(5), "its options as 5, not a tuple"),  # type: ignore[arg-type]
    ("option_set", OptionSet((Option("n", "n", ""), Option("n", "m", ""))), "the option 'n' twice"),
    ("segmentation_options", (("mode",),), "segmentation_options = (('mode',),), which is not of type tuple"),
]


@pytest.mark.parametrize(("attribute", "value", "expected"), NONSENSE, ids=[f"{a}={v!r}" for a, v, _ in NONSENSE])
def test_a_tokenizer_declaring_nonsense_is_refused_by_name(attribute: str, value: object, expected: str) -> None:
    """Declarations of the wrong type were accepted, then failed far away: `rag-eval tokenizers` died with an
    AttributeError traceback (option_set), `--version` with a TypeError (libraries=None), and libraries='name'
    reported each letter as a missing library."""
    cls = _declaring(attribute, value)
    with pytest.raises(RegistryError, match=rf"cannot register .*: it declares {regex.escape(expected)}"):
        TOKENIZERS.register(cls)
    assert "audit-declares" not in TOKENIZERS


@pytest.mark.parametrize(
    ("attribute", "value"), [("recognise_order", "first"), ("index_title", "yes"), ("list_by", None)]
)
def test_a_builder_declaring_nonsense_is_refused_by_name(attribute: str, value: object) -> None:
    cls = type("Declares", (_Paragraphs,), {attribute: value})
    with pytest.raises(RegistryError, match=rf"declares {attribute} = "):
        BUILDERS.register(cls)
    assert "audit-paragraphs" not in BUILDERS


def test_every_registered_plug_in_passes_the_declaration_check() -> None:
    for plugins in (TOKENIZERS, BUILDERS):
        for name in plugins:
            assert registry.declaration_problem(plugins[name], plugins.kind, plugins.base) is None, name


@pytest.fixture
def entry_point_plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test plug-ins arrive through entry points, beside the installed ones, in a freshly discovered
    TOKENIZERS (monkeypatch puts its state back)."""
    group = "rag_eval.tokenizers"
    installed = list(registry.entry_points(group=group))
    ours = [EntryPoint(cls.name, f"helpers.plugins:{cls.__name__}", group) for cls in ENTRY_POINT_PLUGINS]

    def entry_points(*, group: str) -> list[EntryPoint]:
        return installed + ours if group == "rag_eval.tokenizers" else []

    monkeypatch.setattr(registry, "entry_points", entry_points)
    monkeypatch.setattr(TOKENIZERS, "_sources", None)
    monkeypatch.setattr(TOKENIZERS, "_loaded", {})
    monkeypatch.setattr(TOKENIZERS, "_conflicts", {})


def test_the_listing_names_each_misbehaving_plug_in_and_lists_the_rest(entry_point_plugins: None) -> None:
    """A plug-in raising in its constructor, availability() or fingerprint() ended `rag-eval tokenizers` with a
    traceback, and so did one declaring option_set as a string; `--version` died on libraries=None."""
    rows = {row.name: row for row in describe_all(TOKENIZERS)}
    expected = {
        "audit-raises-init": "ValueError: boom in __init__",
        "audit-raises-availability": "RuntimeError: boom in availability",
        "audit-raises-fingerprint": "KeyError: 'boom in fingerprint'",
        "audit-libraries-none": "declares libraries = None",
        "audit-options-string": "declares option_set = 'model=path'",
    }
    for name, reason in expected.items():
        assert not rows[name].available, name
        assert f"tokenizer {name!r}" in rows[name].reason and reason in rows[name].reason, rows[name]
    assert rows["audit-fine"].available and rows["bigram"].available
    listed = CliRunner().invoke(cli, ["tokenizers"])
    assert listed.exit_code == 0 and "Traceback" not in listed.output, listed.output
    versions = CliRunner().invoke(cli, ["--version"])
    assert versions.exit_code == 0, versions.output


def test_a_plug_in_with_a_declaration_problem_is_one_error_when_named(entry_point_plugins: None) -> None:
    assert "declares libraries = None" in one_error(invoke("tokenize", "-t", "audit-libraries-none", "x"))
    assert "declares option_set" in one_error(invoke("tokenize", "-t", "audit-options-string", "x"))


def test_a_fresh_registry_refuses_what_the_shared_one_refuses() -> None:
    """register() and entry-point loading apply the same declaration check."""
    fresh: Registry[Tokenizer] = Registry("rag_eval.audit-none", "tokenizer", Tokenizer)
    with pytest.raises(RegistryError, match="declares libraries"):
        fresh.register(DeclaresNoLibraries)
    fresh.register(Fine)
    assert fresh["audit-fine"] is Fine


def test_nothing_here_touched_the_real_cache(own_cache: Path) -> None:
    assert str(models.default_model_dir()).startswith(str(own_cache))
    with pytest.raises(RagEvalError):
        resolve_pkuseg_model("default")
