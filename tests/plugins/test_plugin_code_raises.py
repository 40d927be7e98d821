"""A tokenizer plug-in whose own code raises while a command uses it (its constructor, its availability check,
its fingerprint) is one error line naming it, for `tokenize -t` and `index build` as for the listing; and a
plug-in registered under a name a spec cannot hold is never read as a spec."""

from __future__ import annotations

from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import invoke, one_error
from helpers.plugins import (
    ENTRY_POINT_PLUGINS,
    Fine,
    RaisesOnAvailability,
    RaisesOnConstruction,
    RaisesOnFingerprint,
)

from rag_eval import registry
from rag_eval.cli import cli
from rag_eval.tokenizers import TOKENIZERS, tokenize_many
from rag_eval.tokenizers.listing import describe_all

PLUG_INS = [RaisesOnConstruction, RaisesOnAvailability, RaisesOnFingerprint]


@pytest.fixture(autouse=True)
def plug_ins(monkeypatch: pytest.MonkeyPatch) -> None:
    """The raising plug-ins arrive through entry points beside every installed plug-in (builders included)."""
    found = registry.entry_points
    ours = [EntryPoint(cls.name, f"helpers.plugins:{cls.__name__}", "rag_eval.tokenizers") for cls in PLUG_INS]

    def entry_points(*, group: str) -> list[EntryPoint]:
        return list(found(group=group)) + (ours if group == "rag_eval.tokenizers" else [])

    monkeypatch.setattr(registry, "entry_points", entry_points)
    monkeypatch.setattr(TOKENIZERS, "_sources", None)
    monkeypatch.setattr(TOKENIZERS, "_loaded", {})


RAISING = {
    "audit-raises-init": "failed to start: ValueError: boom in __init__",
    "audit-raises-availability": "failed to check it can run: RuntimeError: boom in availability",
    "audit-raises-fingerprint": "failed to give its fingerprint: KeyError: 'boom in fingerprint'",
}


@pytest.mark.parametrize("name", sorted(RAISING))
def test_tokenize_with_a_raising_plug_in_is_one_error_naming_it(name: str) -> None:
    message = one_error(invoke("tokenize", "-t", name, "导出文件"))
    assert f"tokenizer {name!r} {RAISING[name]}" in message


@pytest.mark.parametrize("name", sorted(RAISING))
def test_index_build_with_a_raising_plug_in_is_one_error_and_writes_nothing(name: str, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# 标题\n\n导出文件保留三十天。\n", encoding="utf-8")
    message = one_error(
        invoke("index", "build", str(docs), "--builder", "sections", "-t", name, "-o", str(tmp_path / "kb.sqlite"))
    )
    assert f"tokenizer {name!r}" in message and "boom" in message
    assert sorted(path.name for path in tmp_path.iterdir()) == ["docs"]


def test_a_plug_in_under_a_hybrid_looking_name_is_not_run_as_a_hybrid(monkeypatch: pytest.MonkeyPatch) -> None:
    """`tokenize` with no -t runs every registered name: "bigram+jieba" from an entry point ran as a hybrid of
    the built-in bigram and jieba, under the plug-in's name."""
    found = registry.entry_points

    def with_hybrid_name(*, group: str) -> list[EntryPoint]:
        extra = [EntryPoint("bigram+jieba", f"helpers.plugins:{Fine.__name__}", group)]
        return list(found(group=group)) + (extra if group == "rag_eval.tokenizers" else [])

    monkeypatch.setattr(registry, "entry_points", with_hybrid_name)
    monkeypatch.setattr(TOKENIZERS, "_sources", None)
    monkeypatch.setattr(TOKENIZERS, "_loaded", {})
    rows = {row.system: row for row in tokenize_many([], "导出文件")}
    assert "bigram+jieba" in rows and rows["bigram+jieba"].tokens == []
    assert "a spec cannot hold" in (rows["bigram+jieba"].error or "")
    result = CliRunner().invoke(cli, ["tokenize", "导出文件"])
    assert "Traceback" not in result.output


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


@pytest.mark.usefixtures("own_cache")
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


@pytest.mark.usefixtures("own_cache")
def test_a_plug_in_with_a_declaration_problem_is_one_error_when_named(entry_point_plugins: None) -> None:
    assert "declares libraries = None" in one_error(invoke("tokenize", "-t", "audit-libraries-none", "x"))
    assert "declares option_set" in one_error(invoke("tokenize", "-t", "audit-options-string", "x"))
