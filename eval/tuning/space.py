"""The search space of ``rag-eval tune``: a space file read and checked, and the candidates it lists (step 2
of :mod:`.tune`)."""

from __future__ import annotations

import itertools
import math
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, replace
from importlib.resources import files
from pathlib import Path
from typing import Any

from ...engines.base import DEFAULT_ENGINE, get_engine, written_engine
from ...errors import RagEvalError
from ...files.textio import read_text
from ...index.processing import QueryProcessing
from ...tokenizers import get_tokenizer
from ...tokenizers.hybrid import MAX_WEIGHT, valid_weight
from ..compare.fusion import Fusion
from ..compare.runner import System

MAX_SPACE_BYTES = 100_000
#: Most candidates a space may hold: a 100 kB file of weights and processing specs multiplies to millions,
#: which enumerating alone would take hours (only ``3 * budget`` of them ever run).
MAX_CANDIDATES = 100_000


@dataclass(frozen=True)
class Candidate:
    """One point of the space: a system, or a fusion of member systems."""

    name: str
    system: System | None = None
    fusion: Fusion | None = None
    members: tuple[System, ...] = ()

    @property
    def single(self) -> bool:
        """A plain tokenizer without processing, ranked by the default engine: the baselines the recommendation
        is tested against."""
        return (
            self.system is not None
            and not self.system.query
            and self.system.engine in ("", DEFAULT_ENGINE)
            and "+" not in self.system.tokenizer
            and ("^" not in self.system.tokenizer)
        )


#: Spaces shipped with rag-eval (``eval/spaces/NAME.toml``), named by ``--space NAME``: ``default`` (what tune
#: searches without --space) and ``wide`` (the default plus bm25 k1/b pairs and pseudo-relevance feedback).
SHIPPED_SPACES = ("default", "wide")


def load_space(path: Path | None) -> dict[str, Any]:
    """The search space: a TOML file, a shipped space by name (``wide``; a file of that name here wins), or the
    shipped default (``eval/spaces/default.toml``)."""
    shipped = "default" if path is None else str(path) if str(path) in SHIPPED_SPACES and not path.exists() else None
    if shipped is not None:
        text = (files("rag_eval.eval") / "spaces" / f"{shipped}.toml").read_text(encoding="utf-8")
    else:
        assert path is not None
        text = read_text(path, RagEvalError, max_bytes=MAX_SPACE_BYTES)
    where = str(path) if shipped is None else f"the {shipped} space"
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        raise RagEvalError(f"{where}: invalid TOML: {exc}") from None
    known = {"tokenizers", "hybrid_sizes", "weights", "processing", "fusion", "engines"}
    unknown = set(data) - known
    if unknown:
        raise RagEvalError(f"{where}: unknown keys {', '.join(sorted(unknown))}; expected {', '.join(sorted(known))}")
    for key, kind in (
        ("tokenizers", str),
        ("hybrid_sizes", int),
        ("weights", (int, float)),
        ("processing", str),
        ("fusion", str),
        ("engines", str),
    ):
        value = data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, kind) and not isinstance(v, bool) for v in value):
            raise RagEvalError(f"{where}: {key} must be a list of {getattr(kind, '__name__', 'numbers')}")
    if not data.get("tokenizers"):
        raise RagEvalError(f"{where}: tokenizers must list at least one tokenizer spec")
    # A hybrid has 2 fields or more, and at most as many as there are tokenizers to combine.
    for size in data.get("hybrid_sizes", []):
        if not 2 <= size <= max(2, len(data["tokenizers"])):
            raise RagEvalError(
                f"{where}: hybrid_sizes must be whole numbers from 2 to the number of tokenizers "
                f"({len(data['tokenizers'])}), not {size}"
            )
    for weight in data.get("weights", []):
        if not valid_weight(weight):
            low, high = 1 / MAX_WEIGHT, MAX_WEIGHT
            raise RagEvalError(f"{where}: weights must be numbers from {low:g} to {high:g}, not {weight}")
    for key in ("tokenizers", "hybrid_sizes", "weights", "processing", "fusion", "engines"):
        if key in data:
            data[key] = list(dict.fromkeys(data[key]))  # a value listed twice is one candidate, not two
    # Every value is checked now, each error naming the file and key: not only those a candidate happens to use.
    tokenizers = [_checked(where, "tokenizers", get_tokenizer, spec) for spec in data["tokenizers"]]
    for spec in data.get("processing", []):
        if spec:
            _checked(where, "processing", QueryProcessing.parse, spec)
    for method in data.get("fusion", []):
        _checked(where, "fusion", lambda m: Fusion(m, ("a", "b")), method)
    for spec in data.get("engines", []):
        _checked(where, "engines", written_engine, spec)
    _check_combinations(where, data, tokenizers)
    return data


def _checked(where: str, key: str, check: Callable[[Any], Any], value: Any) -> Any:
    """``check(value)``, a RagEvalError from it naming the space file and key."""
    try:
        return check(value)
    except RagEvalError as exc:
        raise RagEvalError(f"{where}: {key}: {exc}", hint=exc.hint) from None


def _check_combinations(where: str, data: dict[str, Any], tokenizers: list[Any]) -> None:
    """Refuse hybrid sizes and fusions the tokenizers cannot make: they would be left out without a word."""
    fields = [spec for spec, t in zip(data["tokenizers"], tokenizers, strict=True) if _can_be_field(t)]
    others = [spec for spec, t in zip(data["tokenizers"], tokenizers, strict=True) if not _can_be_field(t)]
    for size in data.get("hybrid_sizes", []):
        if size > len(fields):
            cannot = f"; {', '.join(others)} cannot be a field (a hybrid, or tokens with whitespace)" if others else ""
            raise RagEvalError(
                f"{where}: hybrid_sizes: a hybrid of {size} needs {size} tokenizers that can be its fields; "
                f"tokenizers lists {len(fields)} ({', '.join(fields) or 'none'}){cannot}",
                hint="list more tokenizers that can be fields, or leave the size out of hybrid_sizes",
            )
    if data.get("fusion") and len(tokenizers) < 2:
        raise RagEvalError(
            f"{where}: fusion: a fusion combines two tokenizers, and tokenizers lists {len(tokenizers)}",
            hint="list two tokenizers or more, or leave fusion empty",
        )


def _can_be_field(tokenizer: Any) -> bool:
    """Whether a tokenizer can be one field of a hybrid: one field of its own, tokens without whitespace."""
    return bool(tokenizer.whitespace_free_tokens) and len(tokenizer.fields) == 1


def candidates(space: dict[str, Any]) -> list[Candidate]:
    """Every candidate of a space, the available single tokenizers first; unavailable tokenizers are left out."""
    tokenizers = []
    canonical: set[str] = set()
    for spec in space["tokenizers"]:
        tokenizer = get_tokenizer(spec)
        # Two spellings of one tokenizer (bigram, bigram:t2s=false) are one candidate, as a value listed twice is.
        if tokenizer.availability() is None and tokenizer.system not in canonical:
            canonical.add(tokenizer.system)
            tokenizers.append(spec)
    processing = list(
        dict.fromkeys(QueryProcessing.parse(p).written if p else "" for p in space.get("processing", [""]))
    ) or [""]
    # Each system under each engine that ranks it (an engine for one field skips hybrids); the default engine if none.
    engines = [written_engine(spec) for spec in space.get("engines", [])] or [DEFAULT_ENGINE]
    storable = [spec for spec in tokenizers if _can_be_field(get_tokenizer(spec))]
    weights = list(dict.fromkeys(f"{weight:g}" for weight in space.get("weights", [1])))
    # Counted before any is made: the product of the lists, an upper bound of what the loops below enumerate.
    hybrids = sum(math.comb(len(storable), size) for size in space.get("hybrid_sizes", []) if size >= 0)
    fusions = len(space.get("fusion", [])) * math.comb(len(tokenizers), 2)
    count = (len(tokenizers) + hybrids * len(weights)) * len(processing) * len(engines) + fusions
    if count > MAX_CANDIDATES:
        raise RagEvalError(
            f"the search space holds {count} candidates, more than {MAX_CANDIDATES}",
            hint="list fewer tokenizers, hybrid_sizes, weights, processing or engines (tune runs 3x --budget of them)",
        )
    found: list[Candidate] = []
    seen: set[str] = set()

    def add(system: System) -> None:
        fields = len(get_tokenizer(system.tokenizer).fields)
        for spec in engines:
            engine = get_engine(spec)
            if (engine.one_field and fields != 1) or engine.availability() is not None:
                continue
            suffix = f" | engine={spec}" if spec != DEFAULT_ENGINE else ""
            name = system.tokenizer + (f" | {system.query}" if system.query else "") + suffix
            # Weights that print alike (1 and 1.0000001 both as ^1) make one system: one candidate, not an error.
            if name not in seen:
                seen.add(name)
                found.append(Candidate(name, replace(system, engine=spec)))

    for spec in tokenizers:
        for query in processing:
            add(System(spec, "", "", query))
    # A hybrid listed as a tokenizer is a candidate of its own, not a field: its fields would repeat (``storable``).
    for size in space.get("hybrid_sizes", []):
        for combination in itertools.combinations(storable, size):
            # A weight as a hybrid spec writes it: weights that print alike (1 and 1.0000001) are one system.
            for written in weights:
                suffix = f"^{written}" if written != "1" else ""
                hybrid = "+".join(spec + suffix for spec in combination)
                for query in processing:
                    add(System(hybrid, "", "", query))
    for method in space.get("fusion", []):
        for pair in itertools.combinations(tokenizers, 2):
            members = tuple(System(spec, "", "") for spec in pair)
            fusion = Fusion(method, tuple(pair))
            found.append(Candidate(fusion.spec(), None, fusion, members))
    return found


def checked_pool(space: dict[str, Any], space_file: Path | None) -> list[Candidate]:
    """The space's candidates, refused without a plain single tokenizer (the recommendation's baseline)."""
    pool = candidates(space)
    if not any(candidate.single for candidate in pool):
        # Step 5 tests the recommendation against the best plain single tokenizer: without one it has no baseline.
        where = str(space_file) if space_file is not None else "the default space"
        raise RagEvalError(
            f"{where}: no single tokenizer without query processing under the default engine, which the "
            "recommendation is tested against",
            hint='list a tokenizer that is not a hybrid, with "" in processing (and the default engine in engines)',
        )
    return pool


def check_limits(budget: int, max_p95_ms: float | None, max_index_mb: float | None) -> None:
    """Refuse a budget below 1 and a constraint that is not a finite number above 0 (tune.json is strict JSON)."""
    if budget < 1:
        raise RagEvalError(f"--budget must be at least 1, not {budget}")
    for value, name in ((max_p95_ms, "--max-p95-ms"), (max_index_mb, "--max-index-mb")):
        if value is not None and not (value > 0 and math.isfinite(value)):
            raise RagEvalError(f"{name} must be a finite number above 0, not {value}")
