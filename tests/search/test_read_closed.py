"""Whole-file reads are closed to what the index holds: `rag-eval read`, the library's read/read_entry, compat's
DocIndex.read and the MCP `read` tool (stdio and streamable HTTP) serve only the files the index was built from.

Bug: `serve --root docs` handed out any file under the root (`read {"key": ".env"}` returned the secret,
`.git/config` too), and so did `rag-eval read`. Every key below is one the index does not hold (or a dotfile
it does), and each is refused with the same line whether or not such a file exists.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers.closed_reads import CORPORA, SECRET, _sections
from helpers.serve import AS_OF, call, http_server, refused, run, stdio_server
from mcp import Client

from rag_eval.builders import BUILDERS
from rag_eval.cli import cli
from rag_eval.compat import DocIndex
from rag_eval.errors import ReadError
from rag_eval.files.textio import shown
from rag_eval.index.store import Index
from rag_eval.index.writer import build
from rag_eval.search.read import read, read_entry
from rag_eval.serve.served import IndexSet


def _beside(root: Path, outside: Path) -> None:
    """What sits beside a corpus: dotfiles, a dot-folder, a file the builder skips; after the build a file
    added, links inside the root (one out of it, one to the dotfile)."""
    (root / ".env").write_text(SECRET + "\n", encoding="utf-8")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text(f"[remote]\n\turl = {SECRET}\n", encoding="utf-8")
    (root / "skipped.bin").write_text(SECRET + "\n", encoding="utf-8")
    outside.write_text(SECRET + "\n", encoding="utf-8")


def _after_build(root: Path, outside: Path, held: str | None) -> None:
    (root / "later.md").write_text(f"# 后来\n\n{SECRET}\n", encoding="utf-8")
    (root / "later.txt").write_text(f"{SECRET}\n", encoding="utf-8")
    os.symlink(outside, root / "link-out.md")
    os.symlink(root / ".env", root / "link-env.md")
    if held is not None:  # a file the index holds, swapped for a link to a file it does not
        (root / held).unlink()
        os.symlink(root / "skipped.bin", root / held)


#: Keys the index does not hold (or dotfiles it does): refused, one line, the same words as for no file at all.
REFUSED = [
    ".env",
    ".env#",
    ".git/config",
    ".git/config#",
    ".hidden/secret.md",
    ".hidden/secret.md#",
    "skipped.bin",
    "manifest.json",
    "queries.jsonl",
    "later.md",
    "later.txt",
    "link-out.md",
    "link-env.md",
    "../outside.txt",
    "guide/../.env",
    "./.env",
    "guide/./../.env",
    "/etc/passwd",
    "{root}/.env",
    "%2e%2e/outside.txt",
    "%2eenv",
    "%2Eenv",
    ".%65nv",
    "%2e%2e%2foutside.txt",
    "guide%2f..%2f.env",
    "%20.env",
    "no-such-file.md",
    ".no-such-dotfile",
]


def refusal(key: str) -> str:
    """The refusal's words, which depend on the key alone."""
    path = key[:-1] if key.endswith("#") else key
    return f"no file {shown(path)} is served from this index"


def make_index(tmp_path: Path, builder: str) -> tuple[Path, Path, dict[str, str], list[str]]:
    """(index, corpus root, reads that work, keys refused) for ``builder``, with everything beside the corpus."""
    root = tmp_path / "corpus"
    maker, swapped = CORPORA[builder]
    allowed = maker(root)
    _beside(root, tmp_path / "outside.txt")
    index = tmp_path / "index.sqlite"
    build(root, index, builder=builder, tokenizer="bigram")
    _after_build(root, tmp_path / "outside.txt", swapped)
    keys = [key.replace("{root}", str(root)) for key in REFUSED]
    return index, root, allowed, keys if swapped is None else [*keys, swapped]


def test_every_builder_has_a_corpus_here() -> None:
    assert sorted(CORPORA) == sorted(BUILDERS)


@pytest.mark.parametrize("builder", sorted(CORPORA))
def test_rag_eval_read_serves_only_the_files_the_index_holds(tmp_path: Path, builder: str) -> None:
    index, root, allowed, keys = make_index(tmp_path, builder)
    runner = CliRunner()
    for key in keys:
        for extra in ([], ["--root", str(root)], ["--json"]):
            result = runner.invoke(cli, ["read", str(index), key, *extra])
            assert result.exit_code == 1, (key, extra, result.output)
            assert SECRET not in result.output
            errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
            assert errors == [f"error: {refusal(key)}"], (key, result.stderr)
    for key, text in allowed.items():
        result = runner.invoke(cli, ["read", str(index), key])
        assert result.exit_code == 0 and text in result.output, (key, result.output)


@pytest.mark.parametrize("builder", sorted(CORPORA))
def test_the_library_reads_serve_only_the_files_the_index_holds(tmp_path: Path, builder: str) -> None:
    index, root, allowed, keys = make_index(tmp_path, builder)
    with Index.open(index) as opened:
        for key in keys:
            for call_read in (read, read_entry):
                with pytest.raises(ReadError) as refused_read:
                    call_read(opened, key, root=root)
                assert str(refused_read.value) == refusal(key), key
        for key, text in allowed.items():
            assert text in read_entry(opened, key)["text"], key


def test_a_held_file_swapped_for_a_link_out_of_the_root_is_refused(tmp_path: Path) -> None:
    """The check at call time: a file the index holds that now leads out of the root is not read."""
    index, root, _allowed, _keys = make_index(tmp_path, "sections")
    (root / "guide" / "export.md").unlink()
    os.symlink(tmp_path / "outside.txt", root / "guide" / "export.md")
    with Index.open(index) as opened, pytest.raises(ReadError, match="resolves outside the corpus root") as refused:
        read(opened, "guide/export.md")
    assert SECRET not in str(refused.value)


def test_compat_docindex_read_serves_only_its_own_files(tmp_path: Path) -> None:
    root = tmp_path / "corpus"
    _sections(root)
    _beside(root, tmp_path / "outside.txt")
    seed = DocIndex(root, tokenizer="bigram")
    try:
        seed.build()
        assert "导出文件保留三十天" in seed.read("guide/export.md")
        assert "导出文件保留三十天" in seed.read("guide/export.md", "导出")
        for path in (".env", ".git/config", ".hidden/secret.md", "skipped.bin", "../outside.txt", "%2eenv"):
            with pytest.raises(PermissionError, match="is served from this index"):
                seed.read(path)
    finally:
        seed.close()


def test_index_set_read_refuses_with_a_root(tmp_path: Path) -> None:
    index, root, allowed, keys = make_index(tmp_path, "lines")
    served = IndexSet([index], as_of=AS_OF, root=root)
    try:
        for key in keys:
            with pytest.raises(ReadError) as refused_read:
                served.read(key)
            assert str(refused_read.value) == refusal(key), key
        for key, text in allowed.items():
            assert text in served.read(key)["text"], key
    finally:
        served.close()


async def _over_mcp(client: Client, keys: list[str], allowed: dict[str, str]) -> None:
    for key in keys:
        text = await refused(client, "read", {"key": key})
        assert text.startswith(refusal(key) + " (hint: ") and SECRET not in text, (key, text)
    for key, expected in allowed.items():
        assert expected in (await call(client, "read", {"key": key}))["text"], key


def test_mcp_read_over_stdio_serves_only_the_files_the_index_holds(tmp_path: Path) -> None:
    index, root, allowed, keys = make_index(tmp_path, "sections")

    async def scenario() -> None:
        async with stdio_server(tmp_path / "server.log", str(index), "--as-of", AS_OF, "--root", str(root)) as client:
            await _over_mcp(client, keys, allowed)

    run(scenario)
    assert "Traceback" not in (tmp_path / "server.log").read_text(encoding="utf-8")


def test_mcp_read_over_http_serves_only_the_files_the_index_holds(tmp_path: Path) -> None:
    index, root, allowed, keys = make_index(tmp_path, "lines")

    async def scenario(url: str) -> None:
        async with Client(url, read_timeout_seconds=30) as client:
            await _over_mcp(client, keys, allowed)

    with http_server(tmp_path / "server.log", str(index), "--as-of", AS_OF, "--root", str(root)) as url:
        run(scenario, url)
    assert "Traceback" not in (tmp_path / "server.log").read_text(encoding="utf-8")
