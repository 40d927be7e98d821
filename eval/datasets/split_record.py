"""The dev/held-back split ``tune`` chose on, recorded in its recommendation.toml, and what ``compare`` evaluates
from it: the held-back queries of the same data, every query of other data.

The record is a TOML table written as a block of comments, as PEP 723 embeds a script's metadata::

    # /// tuned-on
    # dataset = "handbook"
    # ...
    # ///

so that versions of rag-eval that do not know it (they refuse tables other than [[system]] and [[fusion]])
read the file as before. The held-back ids are not listed: the split is the salt and dev fraction applied to the
dataset's query ids (:mod:`.split`), and ``held_back_sha256`` (sha256 of the sorted ids as a compact JSON array)
checks that it gives the same ids again.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import tomllib
from dataclasses import dataclass
from typing import Any

from ...errors import RagEvalError
from .records import Dataset
from .split import split_ids, subset

#: The block's type, after ``# ///``.
BLOCK = "tuned-on"
OPENING, CLOSING = f"# /// {BLOCK}", "# ///"
#: What ``compare`` calls the part it evaluates by default (the dataset id it reports is ``ID[held-back]``).
PART = "held-back"
ALL_QUERIES = "--all-queries"
HINT = "write it again with rag-eval tune, or delete the '# /// tuned-on' block to use the file as a plain systems file"
_HEX = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class TunedSplit:
    """Where ``tune`` chose: the dataset (id and checksum) and the split of its queries into dev and held-back."""

    dataset: str
    checksum: str
    salt: str
    dev_fraction: float
    dev_queries: int
    held_back_queries: int
    held_back_sha256: str


def ids_digest(query_ids: list[str]) -> str:
    """sha256 of the sorted ids as a compact JSON array: one value for one set of ids, whatever they hold."""
    text = json.dumps(sorted(query_ids), ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def tuned_split(data: Dataset, dev_ids: list[str], held_ids: list[str], dev_fraction: float, salt: str) -> TunedSplit:
    """The record of a split of ``data``'s queries (what tune writes)."""
    return TunedSplit(data.id, data.checksum(), salt, dev_fraction, len(dev_ids), len(held_ids), ids_digest(held_ids))


def _toml_string(value: str) -> str:
    """A TOML basic string: JSON's escapes, plus DEL (which TOML forbids raw) and bytes no UTF-8 file can hold."""
    text = value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def split_block(split: TunedSplit) -> list[str]:
    """The ``# /// tuned-on`` block's lines, with a line above saying what it is for."""
    values = {
        "dataset": _toml_string(split.dataset),
        "checksum": _toml_string(split.checksum),
        "salt": _toml_string(split.salt),
        "dev_fraction": repr(float(split.dev_fraction)),
        "dev_queries": str(split.dev_queries),
        "held_back_queries": str(split.held_back_queries),
        "held_back_sha256": _toml_string(split.held_back_sha256),
    }
    return [
        f"# The queries tune chose on. compare --systems on the same data evaluates only the {split.held_back_queries}",
        f"# held-back ones ({ALL_QUERIES} to add the {split.dev_queries} dev queries, which favour the pick).",
        OPENING,
        *(f"# {key} = {value}" for key, value in values.items()),
        CLOSING,
    ]


#: Each key of the block and the check its value must pass, with what the error says it must be.
_CHECKS: dict[str, tuple[Any, str]] = {
    "dataset": (lambda v: isinstance(v, str) and v != "", "a dataset id (a non-empty string)"),
    "checksum": (lambda v: isinstance(v, str) and _HEX.fullmatch(v), "a sha256 (64 lowercase hex digits)"),
    "salt": (lambda v: isinstance(v, str) and v != "", "a non-empty string"),
    "dev_fraction": (
        lambda v: isinstance(v, float) and math.isfinite(v) and 0 < v < 1,
        "a number above 0 and below 1 (such as 0.5)",
    ),
    "dev_queries": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0, "a whole number, 0 or more"),
    "held_back_queries": (
        lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
        "a whole number, 0 or more",
    ),
    "held_back_sha256": (lambda v: isinstance(v, str) and _HEX.fullmatch(v), "a sha256 (64 lowercase hex digits)"),
}


def read_split_block(text: str, where: str) -> TunedSplit | None:
    """The ``# /// tuned-on`` block of a systems file, checked; None when it has none (a file not from tune, or
    from a tune before the block). A file with several (tune over several collections) gives the first; see
    :func:`read_split_blocks`. Anything malformed is one error naming the file and the key."""
    found = read_split_blocks(text, where)
    return found[0] if found else None


def read_split_blocks(text: str, where: str) -> tuple[TunedSplit, ...]:
    """Every ``# /// tuned-on`` block of a systems file, checked, in order: one per collection tune chose on (one
    for a tune of one dataset); empty when it has none. Two blocks for the same data are refused."""
    lines = text.splitlines()
    opened = [number for number, line in enumerate(lines) if line.rstrip() == OPENING]
    splits = tuple(_one_block(lines, start, where) for start in opened)
    checksums = [split.checksum for split in splits]
    twice = sorted({c for c in checksums if checksums.count(c) > 1})
    if twice:
        lines_of = [str(n + 1) for n, split in zip(opened, splits, strict=True) if split.checksum == twice[0]]
        raise RagEvalError(
            f"{where}: the '{OPENING}' blocks on lines {', '.join(lines_of)} record the same data; expected one block "
            "per dataset",
            hint=HINT,
        )
    return splits


def matching_split(splits: tuple[TunedSplit, ...], data: Dataset) -> TunedSplit | None:
    """The recorded split that describes ``data``: the one with its checksum, else one with its id (compare then
    warns that the data changed), else the first (the data is another collection); None when none is recorded."""
    checksum = data.checksum() if splits else ""
    for test in (lambda split: split.checksum == checksum, lambda split: split.dataset == data.id):
        found = next((split for split in splits if test(split)), None)
        if found is not None:
            return found
    return splits[0] if splits else None


def _one_block(lines: list[str], start: int, where: str) -> TunedSplit:
    """The block opened on line ``start`` (0-based), checked."""
    body: list[str] = []
    for line in lines[start + 1 :]:
        if line.rstrip() == CLOSING:
            break
        # Every line of the block is a comment: '#' alone or '# ' and TOML (PEP 723's rule).
        if line.rstrip() != "#" and not line.startswith("# "):
            break
        body.append(line[2:])
    else:
        line = ""
    if line.rstrip() != CLOSING:
        raise RagEvalError(
            f"{where}: {BLOCK}: the block opened on line {start + 1} is not closed by a line '{CLOSING}' "
            "(each line of it starts with '# ')",
            hint=HINT,
        )
    try:
        data = tomllib.loads("\n".join(body))
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        raise RagEvalError(f"{where}: {BLOCK}: invalid TOML: {exc}", hint=HINT) from None
    unknown = sorted(set(data) - set(_CHECKS))
    if unknown:
        raise RagEvalError(
            f"{where}: {BLOCK}: unknown key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; "
            f"expected {', '.join(_CHECKS)}",
            hint=HINT,
        )
    missing = [key for key in _CHECKS if key not in data]
    if missing:
        raise RagEvalError(f"{where}: {BLOCK}: missing {', '.join(missing)}", hint=HINT)
    for key, (check, kind) in _CHECKS.items():
        if not check(data[key]):
            raise RagEvalError(f"{where}: {BLOCK}: {key} must be {kind}, not {_shown(data[key])}", hint=HINT)
    if data["dev_queries"] + data["held_back_queries"] == 0:
        raise RagEvalError(f"{where}: {BLOCK}: dev_queries and held_back_queries are both 0", hint=HINT)
    return TunedSplit(**data)


def _shown(value: Any) -> str:
    """A value as an error line shows it: TOML's spelling where it has one, at most 60 characters."""
    text = json.dumps(value, ensure_ascii=False, default=str) if not isinstance(value, bool) else str(value).lower()
    return text if len(text) <= 60 else text[:57] + "..."


@dataclass
class Evaluated:
    """The queries ``compare`` evaluates for a systems file with a split record, and what it says about them."""

    dataset: Dataset
    #: For report.json (``tuned_split``): where tune chose, which queries are evaluated, the note or warning.
    record: dict[str, Any]


def evaluated_queries(data: Dataset, split: TunedSplit, where: str, *, all_queries: bool = False) -> Evaluated:
    """The held-back part of ``data`` when it is the data tune chose on (its checksum matches), else every query;
    with ``all_queries``, every query always, with a warning when dev queries are among them."""
    record: dict[str, Any] = {
        "file": where,
        "tuned_on": {"dataset": split.dataset, "checksum": split.checksum},
        "same_data": data.checksum() == split.checksum,
        "dev_queries": split.dev_queries,
        "held_back_queries": split.held_back_queries,
        "queries": "all",
        "note": None,
        "warning": None,
    }
    total = len(data.queries)
    if not record["same_data"]:
        if data.id == split.dataset:
            record["warning"] = (
                f"{data.id} is not the data tune chose on (its checksum differs from the one {where} records): "
                f"all {total} queries are evaluated, and any that were dev queries favour the pick"
            )
        else:
            record["note"] = (
                f"the recommendation was tuned on {split.dataset}, not on {data.id}: nothing of {data.id} was held "
                f"back, so all {total} queries are evaluated"
            )
        return Evaluated(data, record)
    dev_ids, held_ids = split_ids(list(data.queries), split.dev_fraction, split.salt)
    for key, recorded, found in (
        ("dev_queries", split.dev_queries, len(dev_ids)),
        ("held_back_queries", split.held_back_queries, len(held_ids)),
        ("held_back_sha256", split.held_back_sha256, ids_digest(held_ids)),
    ):
        if recorded != found:
            raise RagEvalError(
                f"{where}: {BLOCK}: {key} is {recorded}, but the split it records (salt {split.salt!r}, dev fraction "
                f"{split.dev_fraction:g}) of {data.id}'s {total} queries gives {found}: the block does not describe "
                "this data",
                hint=HINT,
            )
    if all_queries:
        record["warning"] = (
            f"all {total} queries are evaluated, {len(dev_ids)} of them the dev queries tune chose the recommendation "
            f"on, which favour it; leave out {ALL_QUERIES} to evaluate only the {len(held_ids)} held-back ones"
        )
        return Evaluated(data, record)
    if not held_ids:
        raise RagEvalError(
            f"{where}: tune held back none of {data.id}'s {total} queries (all are dev queries it chose on), so there "
            "is nothing unseen to evaluate",
            hint=f"add {ALL_QUERIES} to evaluate the dev queries, which favour the pick",
        )
    record["queries"] = PART
    record["note"] = (
        f"evaluated on the {len(held_ids)} held-back queries tune did not choose on; {ALL_QUERIES} to include the "
        f"{len(dev_ids)} dev queries, which favour the pick"
    )
    return Evaluated(subset(data, held_ids, PART), record)
