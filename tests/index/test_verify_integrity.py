"""`index verify` checks the index itself, not only its sources: SQLite's integrity check, FTS5's (against the
stored text) and the impact postings against FTS5's document frequencies.

Bug: overwriting one page of the impact postings made `search` fail with "database disk image is malformed
... check it with: rag-eval index verify", and verify then printed "44 ok, 0 stale, 0 missing, 0 new" and
exited 0. Here a page of every table (and index) is overwritten in turn, for every builder, a native and a
Python tokenizer and a hybrid, each built with the impact postings; and damage SQLite cannot see (a changed
text, postings that disagree with FTS5) is made through SQL.
"""

from __future__ import annotations

import json
import random
import shlex
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from helpers import make_docs
from helpers.closed_reads import CORPORA

from rag_eval.cli import cli
from rag_eval.index.integrity import check_index
from rag_eval.index.store import Index
from rag_eval.index.writer import build

#: FTS5's own tokenizer, a Python strategy (tokens stored in the chunks table) and a hybrid (postings per field).
TOKENIZERS = ["unicode61", "bigram", "unigram+bigram"]
#: Tables every command reads when it opens an index: damage there is the opening's one error line.
READ_AT_OPEN = {"sqlite_schema", "meta"}


def make_index(tmp_path: Path, builder: str, tokenizer: str) -> Path:
    maker, _swapped = CORPORA[builder]
    maker(tmp_path / "corpus")
    index = tmp_path / "index.sqlite"
    build(tmp_path / "corpus", index, builder=builder, tokenizer=tokenizer, engine="impact")
    return index


def pages_by_table(index: Path) -> dict[str, tuple[str, list[int]]]:
    """Every b-tree of the file (tables and indexes, sqlite_schema included) -> (its table, its pages)."""
    db = sqlite3.connect(index)
    try:
        owner = {name: table for name, table in db.execute("SELECT name, tbl_name FROM sqlite_master")}
        owner["sqlite_schema"] = "sqlite_schema"
        try:
            found: dict[str, list[int]] = {}
            for name, page in db.execute("SELECT name, pageno FROM dbstat ORDER BY pageno"):
                found.setdefault(name, []).append(page)
        except sqlite3.OperationalError:  # SQLite without the dbstat table: each b-tree's root page
            found = {name: [page] for name, page in db.execute("SELECT name, rootpage FROM sqlite_master")}
            found["sqlite_schema"] = [1]
            found = {name: pages for name, pages in found.items() if pages[0]}
        return {name: (owner[name], pages) for name, pages in found.items()}
    finally:
        db.close()


def overwrite_page(index: Path, page: int, seed: str) -> None:
    """Random bytes over one whole page (page 1 keeps the file's 100-byte header: only its b-tree part)."""
    with sqlite3.connect(index) as db:
        size = db.execute("PRAGMA page_size").fetchone()[0]
    start = 100 if page == 1 else 0
    with open(index, "r+b") as handle:
        handle.seek((page - 1) * size + start)
        handle.write(random.Random(seed).randbytes(size - start))


def verify(index: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["index", "verify", str(index), *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.stderr
    return result.exit_code, result.stdout, result.stderr


def assert_damaged(index: Path, table: str) -> None:
    """verify exits 1 naming ``table`` with the rebuild command, in the human output and in --json; or, for a
    table read when any command opens the index, says in one error line that the file is damaged."""
    code, out, err = verify(index)
    assert code == 1, (table, out, err)
    if table in READ_AT_OPEN and err.startswith("error:"):
        assert [line for line in err.splitlines() if line.startswith("error:")] == [err.splitlines()[0]]
        assert "damaged" in err or "malformed" in err or "not a database" in err, err
        return
    named = {line.split("\t")[1] for line in out.splitlines() if line.startswith("damaged\t")}
    assert table in named, (table, out, err)
    assert "# index damaged" in err and "rebuild it: rag-eval index build" in err, err
    code, out, _err = verify(index, "--json")
    entries = json.loads(out)
    assert code == 1 and table in {entry["table"] for entry in entries}, out
    assert all(e["status"] == "damaged" and e["rebuild"].startswith("rag-eval index build ") for e in entries)


@pytest.mark.parametrize("tokenizer", TOKENIZERS)
@pytest.mark.parametrize("builder", sorted(CORPORA))
def test_a_page_of_every_table_overwritten_is_caught(tmp_path: Path, builder: str, tokenizer: str) -> None:
    index = make_index(tmp_path, builder, tokenizer)
    assert verify(index)[0] == 0
    intact = index.read_bytes()
    tables = pages_by_table(index)
    assert {"impact_blocks", "search_data", "chunks", "files"} <= set(tables)  # the postings are there
    for name, (table, pages) in sorted(tables.items()):
        index.write_bytes(intact)
        overwrite_page(index, pages[len(pages) // 2], f"{builder}-{tokenizer}-{name}")
        assert_damaged(index, table)


def _first_search_column(db: sqlite3.Connection) -> str:
    return db.execute("PRAGMA table_info(search)").fetchone()[1]


def _add_a_word(db: sqlite3.Connection) -> None:
    """An indexed column's text changed behind FTS5's back: its index no longer matches the stored text."""
    column = _first_search_column(db)
    db.execute(f"UPDATE chunks SET {column} = {column} || ' 新增' WHERE id = 1")


def _drop_a_block(db: sqlite3.Connection) -> None:
    db.execute("DELETE FROM impact_blocks WHERE first = (SELECT max(first) FROM impact_blocks)")


def _drop_a_posting(db: sqlite3.Connection) -> None:
    """A term loses its last row: still well-formed, but fewer postings than FTS5's document frequency."""
    first, bounds, rowids, weights, peaks = db.execute(
        "SELECT first, bounds, rowids, weights, peaks FROM impact_blocks ORDER BY first"
    ).fetchone()
    ends = np.frombuffer(bounds, dtype="<i8").copy()
    term = int(np.argmax(np.diff(ends)))  # the block's term with the most rows
    assert ends[term + 1] - ends[term] >= 2, "no term in two rows"
    gone = int(ends[term + 1]) - 1
    ends[term + 1 :] -= 1
    ids = np.delete(np.frombuffer(rowids, dtype="<i8"), gone)
    kept = np.delete(np.frombuffer(weights, dtype="<f8"), gone)
    tops = np.frombuffer(peaks, dtype="<f8").copy()
    tops[term] = kept[ends[term] : ends[term + 1]].max()
    db.execute(
        "UPDATE impact_blocks SET bounds = ?, rowids = ?, weights = ?, peaks = ? WHERE first = ?",
        (ends.tobytes(), ids.tobytes(), kept.tobytes(), tops.tobytes(), first),
    )


def _halve_a_peak(db: sqlite3.Connection) -> None:
    first, peaks = db.execute("SELECT first, peaks FROM impact_blocks ORDER BY first LIMIT 1").fetchone()
    tops = np.frombuffer(peaks, dtype="<f8").copy()
    tops[0] /= 2
    db.execute("UPDATE impact_blocks SET peaks = ? WHERE first = ?", (tops.tobytes(), first))


#: Damage SQLite's own check cannot see (the pages are well-formed), and the table it must be found in.
UNSEEN = {"text changed": (_add_a_word, "search"), "block dropped": (_drop_a_block, "impact_blocks")}
UNSEEN |= {"posting dropped": (_drop_a_posting, "impact_blocks"), "peak halved": (_halve_a_peak, "impact_blocks")}


@pytest.mark.parametrize("tokenizer", TOKENIZERS)
@pytest.mark.parametrize("case", sorted(UNSEEN))
def test_damage_sqlite_cannot_see_is_caught(tmp_path: Path, case: str, tokenizer: str) -> None:
    index = tmp_path / "index.sqlite"
    build(make_docs(tmp_path / "docs"), index, builder="sections", tokenizer=tokenizer, engine="impact")
    tamper, table = UNSEEN[case]
    with sqlite3.connect(index) as db:
        tamper(db)
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert_damaged(index, table)


def test_an_index_opened_read_only_or_locked_is_still_checked(tmp_path: Path) -> None:
    """FTS5's check is a write statement: on a read-only connection, or while another process holds the write
    lock (a build), it runs on an in-memory copy instead of failing or waiting."""
    index = make_index(tmp_path, "sections", "bigram")
    with sqlite3.connect(index) as db:
        _add_a_word(db)
    readonly = sqlite3.connect(f"file:{index}?mode=ro", uri=True, isolation_level=None)
    with Index.from_connection(readonly, str(index)) as opened:
        assert [d.table for d in check_index(opened)] == ["search"]
    writer = sqlite3.connect(index, isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")
        with Index.open(index) as opened:
            assert [d.table for d in check_index(opened)] == ["search"]
    finally:
        writer.execute("ROLLBACK")
        writer.close()


@pytest.mark.parametrize("tokenizer", TOKENIZERS)
@pytest.mark.parametrize("builder", sorted(CORPORA))
def test_an_intact_index_verifies_ok(tmp_path: Path, builder: str, tokenizer: str) -> None:
    index = make_index(tmp_path, builder, tokenizer)
    code, out, err = verify(index)
    assert code == 0 and "damaged" not in out and " 0 stale, 0 missing, 0 new" in err, (out, err)
    with Index.open(index) as opened:
        assert check_index(opened) == []
    before = index.read_bytes()
    assert verify(index, "--json")[0] == 0
    assert index.read_bytes() == before  # the checks write nothing


def test_the_rebuild_command_it_prints_rebuilds_the_index(tmp_path: Path) -> None:
    index = make_index(tmp_path, "lines", "bigram")
    overwrite_page(index, pages_by_table(index)["impact_blocks"][1][0], "rebuild")
    code, out, _err = verify(index, "--json")
    build_command, move = json.loads(out)[0]["rebuild"].split(" && ")
    words = shlex.split(build_command)
    assert code == 1 and words[:3] == ["rag-eval", "index", "build"]
    assert CliRunner().invoke(cli, words[1:]).exit_code == 0
    source, target = shlex.split(move)[1:]
    Path(source).replace(target)
    assert verify(index)[0] == 0
