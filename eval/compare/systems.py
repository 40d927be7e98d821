"""What ``rag-eval compare`` runs: the default systems, a --systems TOML file's systems and fusions, outside
runs, and the check on a query mode."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ...builders import get_builder
from ...engines.base import DEFAULT_ENGINE, written_engine
from ...errors import RagEvalError
from ...files.textio import read_text
from ...index.processing import QueryProcessing
from ...search.query import MODES
from ...tokenizers import TOKENIZERS, get_tokenizer, tokenizer_class
from ..datasets.formats import dataset_builder
from ..datasets.records import Dataset
from ..datasets.split_record import TunedSplit, read_split_blocks
from ..reporting.model import Skipped
from .fusion import Fusion, fusion_from_table
from .runner import System

#: Largest --systems TOML file read, in bytes.
MAX_SYSTEMS_FILE_BYTES = 1_000_000


@dataclass(frozen=True)
class OutsideRun:
    """A run file from another engine, put in the same table (``--run NAME=FILE``)."""

    name: str
    path: Path


def default_systems(dataset: Dataset, builder: str | None, mode: str | None) -> tuple[list[System], list[Skipped]]:
    """Every available tokenizer meant for default comparisons, with the dataset's builder and query mode,
    and the ones left out as unavailable (and why)."""
    chosen_builder = builder or dataset_builder(dataset)
    chosen_mode = mode or dataset.meta.get("mode") or "or"
    systems, skipped = [], []
    for name in TOKENIZERS:
        try:
            # A plug-in that fails to import, or breaks its declarations, is left out like a missing library.
            if not tokenizer_class(name).in_default_comparison:
                continue
            get_tokenizer(name).check_available()
        except RagEvalError as exc:
            skipped.append(Skipped(name, str(exc).removeprefix(f"tokenizer {name!r} is unavailable: "), exc.hint or ""))
            continue
        systems.append(System(name, chosen_builder, chosen_mode))
    return systems, skipped


def load_systems_file(path: Path) -> list[System]:
    """Systems from TOML: ``[[system]]`` tables with ``tokenizer``, optional ``builder``, ``mode``, ``query``
    and ``engine``."""
    return load_systems_toml(path)[0]


def one_system(path: Path) -> System:
    """The one ``[[system]]`` of a systems file (what ``index build --from`` builds)."""
    systems, fusions = load_systems_toml(path)
    if fusions:
        members = ", ".join(system.tokenizer for system in systems)
        raise RagEvalError(
            f"{path}: a fusion of several systems needs an index per system; build each: {members}",
            hint="rag-eval index build SOURCE --from FILE takes a file with one [[system]]",
        )
    if len(systems) != 1:
        raise RagEvalError(f"{path}: expected exactly one [[system]] table, found {len(systems)}")
    return systems[0]


def load_systems_toml(path: Path) -> tuple[list[System], list[Fusion]]:
    """Systems and fused systems from TOML: ``[[system]]`` tables (``tokenizer``, optional ``builder``, ``mode``,
    ``query`` and ``engine``) and ``[[fusion]]`` tables (``method``, ``systems``, optional ``k``, ``normalise``,
    ``weights``)."""
    found = read_systems_file(path)
    return found.systems, found.fusions


@dataclass(frozen=True)
class SystemsFile:
    """A --systems file: its systems, fusions and, in one tune wrote, the split tune chose on (one per collection
    when tune chose on several)."""

    systems: list[System]
    fusions: list[Fusion]
    splits: tuple[TunedSplit, ...] = ()

    @property
    def split(self) -> TunedSplit | None:
        """The first recorded split (the only one from a tune of one dataset)."""
        return self.splits[0] if self.splits else None


def read_systems_file(path: Path) -> SystemsFile:
    """A --systems file read and checked whole: its tables (see ``load_systems_toml``) and its split record."""
    import tomllib

    from .recommended import shipped_systems_file

    path = shipped_systems_file(path)  # ``default``: the shipped default recommendation
    text = read_text(path, RagEvalError, max_bytes=MAX_SYSTEMS_FILE_BYTES)
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError) as exc:  # arrays nested thousands deep exhaust the stack
        raise RagEvalError(f"{path}: invalid TOML: {exc}") from None
    tables = sorted(set(data) - {"system", "fusion"})
    if tables:  # a misspelt [[fusion]] would otherwise be left out without a word
        raise RagEvalError(f"{path}: unknown tables {', '.join(tables)}; expected [[system]] and [[fusion]]")
    entries, fused = data.get("system", []), data.get("fusion", [])
    if not isinstance(entries, list) or not isinstance(fused, list) or not (entries or fused):
        raise RagEvalError(f"{path}: expected one or more [[system]] tables (and optional [[fusion]] tables)")
    systems = []
    for number, entry in enumerate(entries, start=1):
        if not isinstance(entry, dict) or not isinstance(entry.get("tokenizer"), str):
            raise RagEvalError(f'{path}: [[system]] number {number} needs tokenizer = "SPEC"')
        unknown = set(entry) - {"tokenizer", "builder", "mode", "query", "engine"}
        if unknown:
            raise RagEvalError(f"{path}: [[system]] number {number} has unknown keys: {', '.join(sorted(unknown))}")
        for key in ("builder", "mode", "query", "engine"):
            if not isinstance(entry.get(key, ""), str):
                raise RagEvalError(f"{path}: [[system]] number {number}: {key} must be a string")
        # Each value is checked here, so that an error names the file and table, not only the value.
        checks: dict[str, Callable[[str], object]] = {"tokenizer": get_tokenizer, "builder": get_builder}
        checks |= {"mode": check_mode, "query": QueryProcessing.parse, "engine": written_engine}
        for key, check in checks.items():
            if entry.get(key, ""):
                try:
                    check(entry[key])
                except RagEvalError as exc:
                    raise RagEvalError(f"{path}: [[system]] number {number}: {key}: {exc}", hint=exc.hint) from None
        systems.append(
            System(
                entry["tokenizer"],
                entry.get("builder", ""),
                entry.get("mode", ""),
                entry.get("query", ""),
                entry.get("engine", "") or DEFAULT_ENGINE,
            )
        )
    fusions = [fusion_from_table(entry, f"{path}: [[fusion]] number {n}") for n, entry in enumerate(fused, start=1)]
    return SystemsFile(systems, fusions, read_split_blocks(text, str(path)))


def check_mode(mode: str) -> None:
    """Refuse a query mode the search does not know, before any index is built."""
    if mode not in MODES:
        raise RagEvalError(f"unknown query mode {mode!r}; choose from: {', '.join(MODES)}")
