"""The registries: entry-point discovery, lazy imports, duplicates, broken plug-ins, and declarations checked when a
plug-in is registered or loaded."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import regex
from helpers.plugins import (
    DeclaresNoLibraries,
    Fine,
    _Words,
)

from rag_eval import registry
from rag_eval.builders import BUILDERS, Builder
from rag_eval.errors import RegistryError
from rag_eval.registry import Registry
from rag_eval.spec import Option, OptionSet
from rag_eval.tokenizers import TOKENIZERS, Tokenizer
from rag_eval.tokenizers.bigram import BigramTokenizer

PLUGIN = textwrap.dedent(
    """
    from rag_eval.tokenizers import PythonTokenizer

    class WhitespaceTokenizer(PythonTokenizer):
        name = "whitespace"
        summary = "split on whitespace (test plug-in)"

        def _spans(self, text):
            import re
            return [m.span() for m in re.finditer(r"\\S+", text)]
    """
)


@pytest.fixture
def plugin_path(tmp_path: Path):
    """A real installed-looking distribution: a module plus a dist-info with entry_points.txt."""
    (tmp_path / "rag_eval_demo_plugin.py").write_text(PLUGIN, encoding="utf-8")
    (tmp_path / "rag_eval_broken_plugin.py").write_text(
        "raise ImportError('missing native library')\n", encoding="utf-8"
    )
    dist = tmp_path / "rag_eval_demo_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: rag-eval-demo-plugin\nVersion: 1.0\n", encoding="utf-8"
    )
    (dist / "entry_points.txt").write_text(
        "[rag_eval.tokenizers]\n"
        "whitespace = rag_eval_demo_plugin:WhitespaceTokenizer\n"
        "broken = rag_eval_broken_plugin:Broken\n",
        encoding="utf-8",
    )
    sys.path.insert(0, str(tmp_path))
    yield tmp_path
    sys.path.remove(str(tmp_path))
    for module in ("rag_eval_demo_plugin", "rag_eval_broken_plugin"):
        sys.modules.pop(module, None)


def test_plugin_discovered_through_entry_point(plugin_path: Path) -> None:
    registry: Registry[Tokenizer] = Registry("rag_eval.tokenizers", "tokenizer")
    assert {"whitespace", "broken", "bigram", "jieba"} <= set(registry)
    tokenizer = registry["whitespace"]()
    assert tokenizer.terms("Ｈｅｌｌｏ  世界 ，") == ["hello", "世界"]


def test_broken_plugin_breaks_only_itself(plugin_path: Path) -> None:
    registry: Registry[Tokenizer] = Registry("rag_eval.tokenizers", "tokenizer")
    with pytest.raises(
        RegistryError,
        match=r"tokenizer 'broken' failed to load from rag_eval_broken_plugin:Broken: "
        r"ImportError: missing native library",
    ):
        registry["broken"]
    assert registry["bigram"] is BigramTokenizer
    assert registry["whitespace"].name == "whitespace"


def test_plugin_listed_by_cli(plugin_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "rag_eval", "tokenizers"],
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "PYTHONPATH": str(plugin_path)},
    )
    assert result.returncode == 0, result.stderr
    assert "whitespace  (Python)  available" in result.stdout
    assert "broken  (plug-in)  unavailable" in result.stdout
    assert "bigram  (Python)  available" in result.stdout


def test_duplicate_name_raises() -> None:
    registry: Registry[Tokenizer] = Registry("rag_eval.tokenizers", "tokenizer")

    class Again(BigramTokenizer):
        name = "bigram"

    with pytest.raises(RegistryError, match="duplicate tokenizer name 'bigram'"):
        registry.register(Again)


def test_register_at_run_time() -> None:
    registry: Registry[Tokenizer] = Registry("rag_eval.tokenizers", "tokenizer")

    class Reversed(BigramTokenizer):
        name = "reversed-bigram"

    registry.register(Reversed)
    assert "reversed-bigram" in sorted(registry)
    assert registry["reversed-bigram"] is Reversed


def test_unknown_name_lists_registered_names() -> None:
    with pytest.raises(
        RegistryError, match=r"unknown tokenizer 'bigrams'; choose from: bigram, jieba, pkuseg, rjieba, trigram"
    ):
        TOKENIZERS["bigrams"]


def test_names_do_not_import_strategy_modules() -> None:
    code = (
        "import sys\n"
        "from rag_eval.tokenizers import TOKENIZERS\n"
        "names = sorted(TOKENIZERS)\n"
        "from rag_eval.cli import cli\n"
        "heavy = [m for m in ('jieba', 'rjieba', 'spacy_pkuseg', 'opencc', 'rag_eval.tokenizers.jieba',\n"
        "                     'rag_eval.tokenizers.pkuseg') if m in sys.modules]\n"
        "print(len(names), heavy)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "7 []"


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
@pytest.mark.usefixtures("own_cache")
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
@pytest.mark.usefixtures("own_cache")
def test_a_builder_declaring_nonsense_is_refused_by_name(attribute: str, value: object) -> None:
    cls = type("Declares", (_Paragraphs,), {attribute: value})
    with pytest.raises(RegistryError, match=rf"declares {attribute} = "):
        BUILDERS.register(cls)
    assert "audit-paragraphs" not in BUILDERS


@pytest.mark.usefixtures("own_cache")
def test_every_registered_plug_in_passes_the_declaration_check() -> None:
    for plugins in (TOKENIZERS, BUILDERS):
        for name in plugins:
            assert registry.declaration_problem(plugins[name], plugins.kind, plugins.base) is None, name


@pytest.mark.usefixtures("own_cache")
def test_a_fresh_registry_refuses_what_the_shared_one_refuses() -> None:
    """register() and entry-point loading apply the same declaration check."""
    fresh: Registry[Tokenizer] = Registry("rag_eval.audit-none", "tokenizer", Tokenizer)
    with pytest.raises(RegistryError, match="declares libraries"):
        fresh.register(DeclaresNoLibraries)
    fresh.register(Fine)
    assert fresh["audit-fine"] is Fine
