"""The Python API as a library user calls it: threads, rebuilds under an open index, wrong types, batch search."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from helpers import make_docs

from rag_eval.errors import IndexFileError, QueryError, RagEvalError, ReadError, SpecError
from rag_eval.index.store import Index
from rag_eval.index.verify import verify_index
from rag_eval.index.writer import build
from rag_eval.search.batch import batch_search
from rag_eval.search.read import list_entries, read_entry
from rag_eval.search.searching import search, warm


@pytest.fixture
def index_file(tmp_path: Path) -> Path:
    path = tmp_path / "kb.sqlite"
    build(make_docs(tmp_path / "docs"), path, builder="sections", tokenizer="bigram")
    return path


def test_a_shared_index_serves_one_thread_at_a_time(index_file: Path) -> None:
    """With check_same_thread=False, a search waits for another thread's read transaction instead of running
    inside it (it used to share, and end, that transaction: "cannot start a transaction within a transaction")."""
    with Index.open(index_file, check_same_thread=False) as index:
        expected = [(hit.id, hit.score) for hit in search(index, "导出文件").hits]
        held, release = threading.Event(), threading.Event()
        found: list[list[tuple[int, float]]] = []

        def holder() -> None:
            with index.reading():
                held.set()
                release.wait(10)

        def searcher() -> None:
            found.append([(hit.id, hit.score) for hit in search(index, "导出文件").hits])

        first = threading.Thread(target=holder)
        first.start()
        assert held.wait(10)
        second = threading.Thread(target=searcher)
        second.start()
        second.join(0.3)
        assert second.is_alive(), "the search ran inside another thread's transaction"
        release.set()
        first.join(10)
        second.join(10)
        assert found == [expected]


def test_threads_sharing_an_index_all_get_the_same_answers(index_file: Path) -> None:
    with Index.open(index_file, check_same_thread=False) as index:
        queries = ["导出文件", "备份", "Wi-Fi 密码", "资料库备份保留", "导出前请确认权限"]
        expected = {q: [(hit.id, hit.score) for hit in search(index, q, explain=True).hits] for q in queries}
        errors: list[BaseException] = []
        wrong: list[str] = []

        def worker(number: int) -> None:
            for round_ in range(30):
                for position, query in enumerate(queries):
                    try:
                        engine = "fts5" if (round_ + position + number) % 2 else "impact"
                        hits = search(index, query, engine=engine, explain=position % 2 == 0).hits
                        if [(hit.id, hit.score) for hit in hits] != expected[query]:
                            wrong.append(query)
                    except BaseException as exc:  # noqa: BLE001 - collected for the assertion
                        errors.append(exc)

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert errors == [] and wrong == []


def test_an_index_used_from_another_thread_says_so(index_file: Path) -> None:
    failures: list[BaseException] = []
    with Index.open(index_file) as index:

        def other() -> None:
            try:
                search(index, "导出")
            except BaseException as exc:  # noqa: BLE001 - collected for the assertion
                failures.append(exc)

        thread = threading.Thread(target=other)
        thread.start()
        thread.join(10)
    assert len(failures) == 1 and isinstance(failures[0], IndexFileError)
    assert "another thread" in str(failures[0]) and "damaged" not in str(failures[0])
    assert "check_same_thread=False" in (failures[0].hint or "")


def test_a_closed_index_says_it_is_closed(index_file: Path) -> None:
    index = Index.open(index_file)
    index.close()
    for call in (lambda: search(index, "导出"), index.count, lambda: list_entries(index)):
        with pytest.raises(IndexFileError, match="the index is closed") as caught:
            call()
        assert "damaged" not in str(caught.value)
    index.close()  # twice is harmless


def test_first_search_after_a_rebuild_uses_the_new_engine(index_file: Path, tmp_path: Path) -> None:
    """A long-running process whose index is rebuilt with --engine fts5 (no postings left) used to fail its next
    search with "this index holds no impact postings": the engine was chosen from the meta before reloading it."""
    with Index.open(index_file) as index:
        assert search(index, "导出文件", explain=True).explain["engine"] == "impact"
        build(tmp_path / "docs", index_file, builder="sections", tokenizer="bigram", engine="fts5")
        result = search(index, "导出文件", explain=True)
        assert result.hits and result.explain["engine"] == "fts5"
        build(tmp_path / "docs", index_file, builder="sections", tokenizer="bigram", engine="impact")
        assert warm(index) is True
        assert search(index, "导出文件", explain=True).explain["engine"] == "impact"


def test_first_search_after_a_rebuild_uses_the_new_processing(index_file: Path, tmp_path: Path) -> None:
    with Index.open(index_file) as index:
        assert search(index, "导出文件保留多久", explain=True).query.removed == ()
        build(tmp_path / "docs", index_file, builder="sections", tokenizer="bigram", processing="stopwords=zh")
        first = search(index, "导出文件保留多久", explain=True)
        assert first.query.removed == ("多久",) and "processing" in first.explain


def test_processing_is_a_spec_or_a_query_processing(index_file: Path) -> None:
    with Index.open(index_file) as index:
        assert search(index, "导出文件保留多久", processing="stopwords=zh").query.removed == ("多久",)
        assert search(index, "导出文件保留多久", processing="none").query.removed == ()
        with pytest.raises(SpecError):
            search(index, "导出", processing="bogus=1")
        with pytest.raises(QueryError, match="processing must be"):
            search(index, "导出", processing=1)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [None, "kb.sqlite", Path("kb.sqlite"), 5])
def test_search_needs_an_open_index(value: object) -> None:
    with pytest.raises(QueryError, match="index must be an open Index"):
        search(value, "导出")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("path", "message"),
    [
        (None, "index path must be a str or os.PathLike, not NoneType"),
        (b"kb.sqlite", "index path must be a str or os.PathLike, not bytes"),
        (5, "index path must be a str or os.PathLike, not int"),
        ("", "index path is empty"),
    ],
)
def test_index_open_refuses_what_is_not_a_path(path: object, message: str) -> None:
    with pytest.raises(IndexFileError) as caught:
        Index.open(path)  # type: ignore[arg-type]
    assert str(caught.value) == message


def test_index_open_refuses_a_tokenizer_that_is_not_a_spec(index_file: Path) -> None:
    with pytest.raises(SpecError, match="tokenizer must be a spec string"):
        Index.open(index_file, tokenizer=5)  # type: ignore[arg-type]


def test_list_entries_pages_are_checked(index_file: Path) -> None:
    with Index.open(index_file) as index:
        every = list_entries(index)
        assert list_entries(index, offset=2) == every[2:]
        assert list_entries(index, offset=1, limit=2) == every[1:3]
        assert list_entries(index, limit=0) == []
        for arguments in ({"limit": -1}, {"limit": "2"}, {"limit": True}, {"offset": -1}, {"offset": "1"}):
            with pytest.raises(QueryError):
                list_entries(index, **arguments)


def test_read_and_verify_check_their_arguments(index_file: Path) -> None:
    with Index.open(index_file) as index:
        for bound in ("1", -1, 0, 2.5):
            with pytest.raises(QueryError, match="max_bytes must be an integer"):
                read_entry(index, "guide/export.md", max_bytes=bound)  # type: ignore[arg-type]
        assert read_entry(index, "guide/export.md", max_bytes=10**6)["path"] == "guide/export.md"
        with pytest.raises(ReadError, match="root must be a str or os.PathLike"):
            verify_index(index, 5)  # type: ignore[arg-type]
        with pytest.raises(ReadError, match="root must be a str or os.PathLike"):
            read_entry(index, "guide/export.md", root=5)  # type: ignore[arg-type]


def test_batch_search_takes_an_open_index_and_leaves_it_open(index_file: Path, tmp_path: Path) -> None:
    topics = tmp_path / "questions.txt"
    topics.write_text("导出文件保留多久\n资料库备份\n", encoding="utf-8")
    by_path = batch_search(index_file, topics, tmp_path / "a.run")
    with Index.open(index_file) as index:
        by_index = batch_search(index, topics, tmp_path / "b.run")
        assert index.count() > 0  # still open
    assert by_index.lines == by_path.lines > 0
    assert (tmp_path / "a.run").read_text(encoding="utf-8") == (tmp_path / "b.run").read_text(encoding="utf-8")


def test_batch_search_refuses_what_is_not_a_path(
    index_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    topics = tmp_path / "questions.txt"
    topics.write_text("导出\n", encoding="utf-8")
    with pytest.raises(QueryError, match="output must be a path"):
        batch_search(index_file, topics, None)  # type: ignore[arg-type]
    assert not (tmp_path / "None").exists()
    with pytest.raises(QueryError, match="topics must be a path"):
        batch_search(index_file, {"q1": "导出"}, tmp_path / "c.run")  # type: ignore[arg-type]
    with pytest.raises(RagEvalError):
        batch_search(index_file, topics, tmp_path / "d.run", processing=3)  # type: ignore[arg-type]
    assert not (tmp_path / "d.run").exists()


def test_the_agent_tool_names_its_arguments(index_file: Path) -> None:
    """search_tool and evidence passed **options on to search(): a misspelt option was Python's TypeError from
    deep inside; now the signature names every option (a caller's type checker sees them too)."""
    import inspect

    from rag_eval.search.evidence import evidence, search_tool

    for function in (evidence, search_tool):
        parameters = inspect.signature(function).parameters
        assert not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
        assert {"mode", "category", "path_prefix", "explain", "processing", "engine"} <= set(parameters)
    with Index.open(index_file) as index:
        assert search_tool(index, "导出", as_of=None, mode="and") == evidence(index, "导出", as_of=None, mode="and")


@pytest.mark.parametrize("target", [None, 5, b"out.txt", ["out.txt"]])
def test_an_output_that_is_not_a_path_is_refused(
    target: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """outputs.checked_target took str() of anything: None became a file named 'None' (found for batch_search,
    which checks its own argument; every writer goes through this one)."""
    from rag_eval.files.outputs import OutputError, write_text_atomic

    monkeypatch.chdir(tmp_path)
    with pytest.raises(OutputError, match="must be a path"):
        write_text_atomic(target, "x", owned=None, what="run file")  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []
