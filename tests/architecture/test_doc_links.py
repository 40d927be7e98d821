"""Every link in the README, docs/ and reports/ leads somewhere: a file or folder of the repository and, for
`page.md#anchor`, a heading of that page; every `reports/...` path the code and tools name exists; every
`rag_eval.x.y` name the README and docs/ give resolves to a module or an attribute of one.
A page renamed, a section retitled or a module moved breaks these silently otherwise."""

from __future__ import annotations

import importlib
import re
import unicodedata
from pathlib import Path

import pytest
from helpers import REPO

ROOT = REPO
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *(ROOT / "reports").rglob("*.md")])
GUIDES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
SOURCES = sorted(
    path
    for folder in ("toolkit", "eval", "tokenizers", "tools", "tests", ".ci")
    for path in (ROOT / folder).rglob("*")
    if path.is_file() and path.suffix in {".py", ".sh", ".toml", ""} and "__pycache__" not in path.parts
) + [ROOT / "pyproject.toml"]

_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^()\s]+(?:\([^()\s]*\))?)(?:\s+\"[^\"]*\")?\)")
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
_CODE = re.compile(r"`[^`\n]*`")


def github_anchor(heading: str) -> str:
    """The id GitHub gives a heading: lower case, markup and punctuation dropped, spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    kept = [ch for ch in text if ch in " -_" or unicodedata.category(ch)[0] in "LMN"]
    return "".join(kept).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading id of a Markdown page, with GitHub's -1, -2 suffixes for repeated headings."""
    seen: dict[str, int] = {}
    found = set()
    for line in _FENCE.sub("", page.read_text(encoding="utf-8")).splitlines():
        heading = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading:
            slug = github_anchor(heading.group(1))
            count = seen.get(slug, 0)
            found.add(slug if count == 0 else f"{slug}-{count}")
            seen[slug] = count + 1
    return found


def links(page: Path) -> list[str]:
    """The targets of a page's Markdown links and images, outside code blocks and code spans."""
    text = _CODE.sub("", _FENCE.sub("", page.read_text(encoding="utf-8")))
    return _LINK.findall(text)


def broken(page: Path, target: str) -> str | None:
    """Why a link of the page does not resolve, or None."""
    if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
        return None
    path_part, _, fragment = target.partition("#")
    destination = (page.parent / path_part).resolve() if path_part else page
    if not destination.is_relative_to(ROOT):
        return f"{target}: outside the repository"
    if not destination.exists():
        return f"{target}: no such file"
    if fragment and destination.suffix == ".md" and fragment not in anchors(destination):
        return f"{target}: no heading #{fragment} in {destination.relative_to(ROOT)}"
    return None


def test_the_anchor_rule_is_githubs() -> None:
    assert github_anchor("A hybrid's `and` on the impact engine (`716466a`, 2026-12-01, 21:23 UTC)") == (
        "a-hybrids-and-on-the-impact-engine-716466a-2026-12-01-2123-utc"
    )
    assert github_anchor("Serving to agents") == "serving-to-agents"
    assert github_anchor("分词 与 检索") == "分词-与-检索"


def test_a_broken_link_and_a_missing_heading_are_found(tmp_path: Path) -> None:
    page = ROOT / "docs" / "commands.md"
    assert broken(page, "evaluation.md") is None
    assert broken(page, "nowhere.md") is not None
    assert broken(page, "evaluation.md#no-such-heading-anywhere") is not None
    assert broken(page, "https://example.org/x") is None


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_link_resolves(page: Path) -> None:
    problems = [problem for target in links(page) if (problem := broken(page, target))]
    assert not problems, "\n".join(problems)


def test_every_reports_path_the_code_names_exists() -> None:
    missing = []
    for source in SOURCES:
        for match in re.finditer(r"reports/[\w./-]*\.(?:md|json|jsonl|svg|toml|tsv|html)\b", source.read_text("utf-8")):
            if re.search(r"\b[A-Z]{3,}\b", match.group(0)):  # a placeholder: reports/baseline/NAME.json
                continue
            if not (ROOT / match.group(0)).exists():
                missing.append(f"{source.relative_to(ROOT)}: {match.group(0)}")
    assert not missing, "\n".join(missing)


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        try:
            target: object = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for attribute in parts[split:]:
            if not hasattr(target, attribute):
                return False
            target = getattr(target, attribute)
        return True
    return False


def test_every_rag_eval_name_in_the_guides_resolves() -> None:
    unresolved = []
    for page in GUIDES:
        for name in sorted(set(re.findall(r"\brag_eval(?:\.[A-Za-z_]\w*)+", page.read_text(encoding="utf-8")))):
            if not _resolves(name):
                unresolved.append(f"{page.relative_to(ROOT)}: {name}")
    assert not unresolved, "\n".join(unresolved)
