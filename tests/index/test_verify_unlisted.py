"""`index verify` when the source cannot be listed: files added to it cannot be seen, so the check is
incomplete and must not end "all ok" with exit 0 (a FIFO in a Markdown folder, an unreadable folder)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import make_docs

from rag_eval.cli import cli
from rag_eval.index.store import Index
from rag_eval.index.verify import verify_index
from rag_eval.index.writer import build

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="FIFOs and permission bits")


def _fifo(docs: Path) -> None:
    os.mkfifo(docs / "pipe.md")


def _unreadable_folder(docs: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads every folder")
    locked = docs / "locked"
    locked.mkdir()
    locked.chmod(0)


@pytest.mark.parametrize("unlistable", [_fifo, _unreadable_folder])
@pytest.mark.parametrize("added", [False, True])
def test_verify_of_a_source_that_cannot_be_listed_is_not_all_ok(tmp_path: Path, unlistable, added: bool) -> None:
    docs = make_docs(tmp_path / "docs")
    index = tmp_path / "index.sqlite"
    build(docs, index, builder="sections", tokenizer="bigram")
    if added:
        (docs / "added.md").write_text("# 新增\n\n后来加入的文件。\n", encoding="utf-8")
    unlistable(docs)
    try:
        with Index.open(index) as opened:
            statuses = verify_index(opened)
        problems = [(s.path, s.status) for s in statuses if s.status != "ok"]
        assert problems == [(".", "missing")]
        assert "cannot be listed now" in statuses[-1].detail
        result = CliRunner().invoke(cli, ["index", "verify", str(index), "--problems", "--json"])
        assert result.exit_code == 1, result.output
        assert [entry["path"] for entry in json.loads(result.stdout)] == ["."]
        assert "0 stale, 1 missing, 0 new" in CliRunner().invoke(cli, ["index", "verify", str(index)]).stderr
    finally:
        for folder in docs.iterdir():
            if folder.is_dir():
                folder.chmod(0o755)


def test_a_missing_manifest_file_is_reported_once(tmp_path: Path) -> None:
    """Where the failed listing is explained by a missing file (a lines manifest naming it), that file's
    `missing` is the report; no second line for the listing."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("导出文件保留三十天\n第二行\n", encoding="utf-8")
    (corpus / "b.txt").write_text("会员积分有效期\n", encoding="utf-8")
    manifest = [
        {"doc_id": name, "revision": "r1", "status": "current", "expires": None, "path": f"{name}.txt"}
        for name in ("a", "b")
    ]
    (corpus / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    index = tmp_path / "index.sqlite"
    build(corpus, index, builder="lines", tokenizer="bigram")
    (corpus / "b.txt").unlink()
    with Index.open(index) as opened:
        problems = [(s.path, s.status) for s in verify_index(opened) if s.status != "ok"]
    assert problems == [("b.txt", "missing")]
