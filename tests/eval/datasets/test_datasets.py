"""Dataset loaders (BEIR, TREC, SQuAD), shipped sets and the datasets commands."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import invoke, one_error

from rag_eval.builders import get_builder
from rag_eval.cli import cli
from rag_eval.errors import DatasetError, RagEvalError
from rag_eval.eval.datasets import shipped
from rag_eval.eval.datasets.beir import load_beir, write_beir
from rag_eval.eval.datasets.formats import load_dataset
from rag_eval.eval.datasets.records import Dataset, Passage, Query
from rag_eval.eval.datasets.shipped import datasheet, export_shipped, load_shipped, shipped_ids
from rag_eval.eval.datasets.squad import convert_squad, export_squad
from rag_eval.eval.datasets.trec import read_trec_qrels, write_trec_qrels
from rag_eval.files.outputs import (
    OutputError,
)
from rag_eval.files.questions import read_topics


def small() -> Dataset:
    corpus = {"d1": Passage("d1", "标题一", "导出文件保留三十天。"), "d2": Passage("d2", "", "备份每天凌晨两点。")}
    queries = {"q1": Query("q1", "导出保留多久", "question"), "q2": Query("q2", "发票", "no-answer")}
    return Dataset("small", corpus, queries, {"q1": {"d1": 2, "d2": 0}})


def test_beir_round_trip(tmp_path: Path) -> None:
    original = small()
    write_beir(original, tmp_path / "set")
    loaded = load_beir(tmp_path / "set", dataset_id="small")
    assert (loaded.corpus, loaded.queries, loaded.qrels) == (original.corpus, original.queries, original.qrels)
    assert loaded.checksum() == original.checksum()
    assert (tmp_path / "set" / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()[
        0
    ] == "query-id\tcorpus-id\tscore"


def _beir(tmp_path: Path, corpus: str, queries: str, qrels: str) -> Path:
    (tmp_path / "qrels").mkdir(parents=True, exist_ok=True)
    (tmp_path / "corpus.jsonl").write_text(corpus, encoding="utf-8")
    (tmp_path / "queries.jsonl").write_text(queries, encoding="utf-8")
    (tmp_path / "qrels" / "test.tsv").write_text(qrels, encoding="utf-8")
    return tmp_path


GOOD_CORPUS = '{"_id": "d1", "title": "", "text": "甲"}\n{"_id": "d2", "text": "乙"}\n'
GOOD_QUERIES = '{"_id": "q1", "text": "甲"}\n'


@pytest.mark.parametrize(
    ("corpus", "queries", "qrels", "message"),
    [
        (
            '{"_id": "d1", "text": "x"}\n{"_id": "d1", "text": "y"}\n',
            GOOD_QUERIES,
            "",
            r"corpus.jsonl:2: duplicate passage id 'd1'",
        ),
        ('{"_id": "d1", "text": "x"}\n{oops\n', GOOD_QUERIES, "", r"corpus.jsonl:2: invalid JSON"),
        ('{"title": "x"}\n', GOOD_QUERIES, "", r"corpus.jsonl:1: field '_id' must be a non-empty string"),
        (GOOD_CORPUS, '{"_id": "q1"}\n', "", r"queries.jsonl:1: field 'text' must be a non-empty string"),
        (
            GOOD_CORPUS,
            GOOD_QUERIES + '{"_id": "q1", "text": "again"}\n',
            "",
            r"queries.jsonl:2: duplicate query id 'q1'",
        ),
        (GOOD_CORPUS, GOOD_QUERIES, "query-id\tcorpus-id\tscore\nq1\td9\t1\n", r"test.tsv:2: unknown passage id 'd9'"),
        (GOOD_CORPUS, GOOD_QUERIES, "q7\td1\t1\n", r"test.tsv:1: unknown query id 'q7'"),
        (GOOD_CORPUS, GOOD_QUERIES, "q1\td1\tyes\n", r"test.tsv:1: score 'yes' is not an integer"),
        (GOOD_CORPUS, GOOD_QUERIES, "q1\td1\n", r"test.tsv:1: expected 3 tab-separated fields"),
        (GOOD_CORPUS, GOOD_QUERIES, "q1\td1\t1\nq1\td1\t2\n", r"test.tsv:2: duplicate judgement"),
    ],
)
def test_bad_beir_files_name_file_and_line(tmp_path: Path, corpus: str, queries: str, qrels: str, message: str) -> None:
    with pytest.raises(DatasetError, match=message):
        load_beir(_beir(tmp_path, corpus, queries, qrels))


def test_trec_topics_and_qrels(tmp_path: Path) -> None:
    (tmp_path / "topics.txt").write_text(
        "<top>\n<num> Number: 301\n<title> 数据 导出\n<desc> Description:\n如何导出。\n</top>\n"
        "<top>\n<num> Number: 302\n<title> 备份\n</top>\n",
        encoding="utf-8",
    )
    assert read_topics(tmp_path / "topics.txt") == {"301": Query("301", "数据 导出"), "302": Query("302", "备份")}
    (tmp_path / "topics.tsv").write_text("1\t导出\n2\t备份 时间\n", encoding="utf-8")
    assert list(read_topics(tmp_path / "topics.tsv").values())[1] == Query("2", "备份 时间")
    write_trec_qrels({"301": {"d1": 2, "d2": 0}}, tmp_path / "qrels.txt")
    assert (tmp_path / "qrels.txt").read_text(encoding="utf-8") == "301 0 d1 2\n301 0 d2 0\n"
    assert read_trec_qrels(tmp_path / "qrels.txt") == {"301": {"d1": 2, "d2": 0}}
    (tmp_path / "bad.txt").write_text("301 0 d1 2\n301 d1 1\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=r"bad.txt:2: expected 'query-id iteration doc-id relevance'"):
        read_trec_qrels(tmp_path / "bad.txt")
    (tmp_path / "bad.tsv").write_text("1\t导出\n2\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=r"bad.tsv:2: expected 'query-id<TAB>text'"):
        read_topics(tmp_path / "bad.tsv")


SQUAD = {
    "version": "test",
    "data": [
        {
            "title": "星屿手册",
            "paragraphs": [
                {
                    "context": "导出文件保留三十天，到期后自动清理。",
                    "qas": [
                        {
                            "id": "a1",
                            "question": "导出文件保留多久？",
                            "answers": [{"text": "三十天", "answer_start": 6}],
                        },
                        {"id": "a2", "question": "到期后会怎样？", "answers": []},
                    ],
                },
                {"context": "备份在每天凌晨两点进行。", "qas": [{"id": "a3", "question": "几点备份？"}]},
            ],
        },
        {
            "title": "重复",
            "paragraphs": [
                {
                    "context": " 导出文件保留三十天，到期后自动清理。 ",
                    "qas": [{"id": "a4", "question": "导出文件保留多久？"}],
                },
                {"context": "另一段落也提到保留期限。", "qas": [{"id": "a5", "question": "导出文件保留多久？ "}]},
            ],
        },
    ],
}


def test_squad_conversion_merges_duplicates(tmp_path: Path) -> None:
    (tmp_path / "train.json").write_text(json.dumps(SQUAD, ensure_ascii=False), encoding="utf-8")
    dataset, summary = convert_squad([tmp_path / "train.json"])
    assert (summary.paragraphs, summary.passages, summary.duplicate_paragraphs) == (4, 3, 1)
    assert (summary.questions, summary.queries, summary.duplicate_questions, summary.qrels) == (5, 3, 2, 4)
    assert dataset.corpus["p1"] == Passage("p1", "星屿手册", "导出文件保留三十天，到期后自动清理。")
    assert dataset.queries["q1"].text == "导出文件保留多久？"
    assert dataset.qrels == {"q1": {"p1": 1, "p3": 1}, "q2": {"p1": 1}, "q3": {"p2": 1}}
    assert dataset.meta["original_question_ids"]["q1"] == ["a1", "a4", "a5"]


def test_squad_convert_command(tmp_path: Path) -> None:
    (tmp_path / "dev.json").write_text(json.dumps(SQUAD, ensure_ascii=False), encoding="utf-8")
    runner = CliRunner()
    result = runner.invoke(
        cli, ["datasets", "convert", "squad", str(tmp_path / "dev.json"), "-o", str(tmp_path / "out"), "--json"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["duplicate_questions"] == 2
    assert len(load_dataset(str(tmp_path / "out")).corpus) == 3
    again = runner.invoke(
        cli, ["datasets", "convert", "squad", str(tmp_path / "dev.json"), "-o", str(tmp_path / "out")]
    )
    assert again.exit_code == 1 and "already exists" in again.stderr
    (tmp_path / "broken.json").write_text('{"data": [}', encoding="utf-8")
    bad = runner.invoke(
        cli, ["datasets", "convert", "squad", str(tmp_path / "broken.json"), "-o", str(tmp_path / "o2")]
    )
    assert bad.exit_code == 1 and "broken.json: invalid JSON at line 1 column 11" in bad.stderr


def test_evidence_mini_pinned() -> None:
    dataset = load_shipped("evidence-mini")
    assert dataset.stats() == {
        "id": "evidence-mini",
        "passages": 26,
        "queries": 24,
        "judged_queries": 19,
        "qrels": 22,
        "qrels_per_judged_query": 1.16,
        "avg_passage_chars": 42.1,
        "avg_query_chars": 7.3,
        "query_kinds": {"compact": 2, "keyword": 11, "mixed": 3, "no-answer": 5, "question": 2, "short": 1},
    }
    first, last = list(dataset.corpus.values())[0], list(dataset.corpus.values())[-1]
    assert first.id.startswith("refund-policy@r3:") and first.text == "云帆 商城 客服 手册 · 退款 规则"
    assert last.id.endswith("#L4") and last.text == "如 提示 错误 E-619 ， 请 检查 本地 防火墙 设置 。"
    assert list(dataset.queries.values())[0] == Query("e01", "退款 多久 到账", "question")
    assert list(dataset.queries.values())[-1] == Query("e24", "年假 天数", "no-answer")
    assert dataset.meta["as_of"] == "2026-10-07"
    assert all(q.kind == "no-answer" for q in dataset.queries.values() if q.id not in dataset.qrels)


@pytest.mark.parametrize("dataset_id", shipped_ids())
def test_every_qrel_points_at_an_existing_passage(dataset_id: str) -> None:
    dataset = load_shipped(dataset_id)
    for query_id, docs in dataset.qrels.items():
        assert query_id in dataset.queries
        assert set(docs) <= set(dataset.corpus)
        assert dataset.queries[query_id].kind != "no-answer"


@pytest.mark.parametrize("dataset_id", shipped_ids())
def test_query_kind_counts_match_the_datasheet(dataset_id: str) -> None:
    dataset = load_shipped(dataset_id)
    from rag_eval.eval.datasets.shipped import datasheet

    sheet = datasheet(dataset_id)
    for kind, count in dataset.stats()["query_kinds"].items():
        assert f"| {kind} | {count} |" in sheet, kind


def test_export_refuses_to_overwrite_and_round_trips(tmp_path: Path) -> None:
    target = export_shipped("evidence-mini", tmp_path / "out")
    assert (target / "corpus" / "manifest.json").is_file()
    assert load_dataset(str(target)).checksum() == load_shipped("evidence-mini").checksum()
    with pytest.raises(OutputError, match="it already exists; rag-eval writes a dataset folder only to a new path"):
        export_shipped("evidence-mini", target)
    (tmp_path / "empty").mkdir()
    with pytest.raises(OutputError, match="already exists"):
        export_shipped("evidence-mini", tmp_path / "empty")


def test_datasets_commands(tmp_path: Path) -> None:
    runner = CliRunner()
    listing = runner.invoke(cli, ["datasets", "list"])
    assert (
        listing.exit_code == 0
        and "evidence-mini\tlines\t26 passages\t24 queries (19 judged)\t22 qrels" in listing.output
    )
    shown = runner.invoke(cli, ["datasets", "show", "evidence-mini"])
    assert shown.output.startswith("# evidence-mini") and "judged_queries: 19" in shown.output
    unknown = runner.invoke(cli, ["datasets", "show", "nope"])
    assert unknown.exit_code == 1 and unknown.stderr.startswith(
        "error: unknown dataset 'nope': not a shipped id (evidence-mini"
    )
    exported = runner.invoke(cli, ["datasets", "export", "evidence-mini", str(tmp_path / "x")])
    assert exported.exit_code == 0 and (tmp_path / "x" / "corpus.jsonl").is_file()


def test_shipped_checksum_mismatch_is_reported(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import shutil

    import rag_eval.eval.datasets.shipped as shipped

    copy = tmp_path / "datasets"
    shutil.copytree(shipped.datasets_root(), copy)
    (copy / "evidence-mini" / "corpus" / "office-plants.txt").write_text("改动\n", encoding="utf-8")
    monkeypatch.setattr(shipped, "datasets_root", lambda: copy)
    with pytest.raises(DatasetError, match="datasets/evidence-mini/corpus/office-plants.txt does not match its sha256"):
        load_shipped("evidence-mini")


def test_handbook_pinned() -> None:
    dataset = load_shipped("handbook")
    assert dataset.stats() == {
        "id": "handbook",
        "passages": 385,
        "queries": 324,
        "judged_queries": 289,
        "qrels": 1054,
        "qrels_per_judged_query": 3.65,
        "avg_passage_chars": 347.6,
        "avg_query_chars": 10.8,
        "query_kinds": {
            "compact": 36,
            "keyword": 36,
            "mixed": 36,
            "no-answer": 35,
            "paraphrase": 36,
            "question": 37,
            "short": 36,
            "traditional": 36,
            "typo": 36,
        },
    }
    passages = list(dataset.corpus.values())
    assert passages[0].id == "accounts/groups-and-department-sync.md#用户组与部门同步"
    assert passages[-1].id == "security/security-overview.md#常见问题"
    assert passages[-1].text.endswith("退出登录时缓存会被清空。")
    assert list(dataset.queries.values())[0] == Query("h001", "客户端 最低配置 内存", "keyword")
    assert list(dataset.queries.values())[-1] == Query("h324", "内推候选人入职有奖励吗", "no-answer")
    assert "getting-started/quick-notes.md#_root" in dataset.corpus  # the file without headings


def test_handbook_structure_matches_the_datasheet() -> None:
    from rag_eval.eval.datasets.shipped import corpus_dir

    builder = get_builder("sections")
    files = builder.scan(corpus_dir("handbook"))
    assert len(files) == 44 and len({f.path.split("/")[0] for f in files}) == 7
    chunks = [c for f in files for c in builder.chunks(f)]
    assert len(chunks) == 391  # 385 sections, 6 of them over 2,000 characters split once more
    assert sum(c.anchor.endswith("~2") for c in chunks) == 6
    assert {len(c.heading_path.split(" > ")) for c in chunks if c.heading_path} == {1, 2, 3, 4}


def test_handbook_judgements_cover_the_qrels() -> None:
    from rag_eval.eval.datasets.beir import read_qrels
    from rag_eval.eval.datasets.shipped import datasets_root

    dataset = load_shipped("handbook")
    pooled = read_qrels(datasets_root() / "handbook" / "judgements.tsv", dataset.corpus, dataset.queries)
    for query_id, docs in dataset.qrels.items():
        assert all(pooled[query_id][doc] == grade for doc, grade in docs.items())
    assert sum(len(d) for d in pooled.values()) == 6034


def test_the_datasets_manifest_refuses_unknown_entry_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """datasets/manifest.json: a misspelt "as-of" would silently evaluate the set without its date."""
    entry = {"kind": "retrieval", "builder": "lines", "as-of": "2026-10-07", "files": {}}
    (tmp_path / "manifest.json").write_text(json.dumps({"mini": entry}), encoding="utf-8")
    monkeypatch.setattr(shipped, "datasets_root", lambda: tmp_path)
    shipped.manifest.cache_clear()
    try:
        with pytest.raises(DatasetError, match=r"entry 'mini': unknown key 'as-of' \(did you mean 'as_of'\?\)"):
            shipped.manifest()
    finally:
        shipped.manifest.cache_clear()


# -- 8. one SQuAD file converted twice ----------------------------------------------------------------------------


@pytest.mark.parametrize("spelling", ["same", "dot", "symbolic link", "hard link"])
def test_converting_one_file_twice_is_refused(tmp_path: Path, spelling: str) -> None:
    """Bug: `datasets convert squad F F` reported "from 2 files" and listed every question id twice."""
    source = tmp_path / "a.json"
    squad = {
        "data": [
            {
                "title": "t",
                "paragraphs": [{"context": "退款三日内到账。", "qas": [{"id": "a1", "question": "退款多久？"}]}],
            }
        ]
    }
    source.write_text(json.dumps(squad, ensure_ascii=False), encoding="utf-8")
    again = {
        "same": source,
        "dot": tmp_path / "." / "a.json",
        "symbolic link": tmp_path / "link.json",
        "hard link": tmp_path / "hard.json",
    }[spelling]
    if spelling == "symbolic link":
        again.symlink_to(source)
    elif spelling == "hard link":
        os.link(source, again)
    with pytest.raises(DatasetError, match="given twice"):
        convert_squad([source, again])
    result = invoke("datasets", "convert", "squad", source, again, "-o", tmp_path / "out")
    assert result.exit_code == 1 and "given twice" in one_error(result) and not (tmp_path / "out").exists()


def test_export_names_what_it_exports_when_given_a_folder(tmp_path: Path) -> None:
    folder = tmp_path / "beir"
    folder.mkdir()
    (folder / "corpus.jsonl").write_text('{"_id": "a", "title": "", "text": "x"}\n', encoding="utf-8")
    result = CliRunner().invoke(cli, ["datasets", "export", str(folder), str(tmp_path / "out")])
    assert result.exit_code != 0 and "export writes a shipped set" in one_error(result)
    assert not (tmp_path / "out").exists()


def _squad(title: object, context: str) -> dict[str, object]:
    question = {"id": "SRC-Q1", "question": "保留多久", "answers": [{"text": "三十天", "answer_start": 6}]}
    return {"data": [{"title": title, "paragraphs": [{"id": "SRC-P1", "context": context, "qas": [question]}]}]}


@pytest.mark.parametrize(
    ("title", "context", "message"),
    [
        ("T", "ab\x00c", "NUL character"),
        ("T", "   ", "'context' is empty"),
        ({"a": [1]}, "abc", "'title' must be text"),
    ],
)
def test_convert_refuses_contexts_and_titles_a_corpus_cannot_hold(
    tmp_path: Path, title: object, context: str, message: str
) -> None:
    source = tmp_path / "in.json"
    source.write_text(json.dumps(_squad(title, context), ensure_ascii=False), encoding="utf-8")
    with pytest.raises(RagEvalError, match=message):
        export_squad([source], tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_convert_writes_where_each_question_came_from(tmp_path: Path) -> None:
    source = tmp_path / "in.json"
    source.write_text(json.dumps(_squad("T", "导出文件保留三十天。"), ensure_ascii=False), encoding="utf-8")
    export_squad([source], tmp_path / "out")
    assert json.loads((tmp_path / "out" / "original_ids.json").read_text(encoding="utf-8")) == {"q1": ["SRC-Q1"]}


# --- datasets show: a folder named like a shipped id printed the shipped datasheet over the folder's statistics.


def _local_beir(folder: Path) -> None:
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text('{"_id": "p1", "title": "", "text": "本地的一段文字"}\n', encoding="utf-8")
    (folder / "queries.jsonl").write_text('{"_id": "q1", "text": "文字"}\n', encoding="utf-8")
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\tp1\t1\n", encoding="utf-8")


@pytest.mark.parametrize("dataset_id", shipped_ids())
def test_show_describes_a_local_folder_named_like_a_shipped_set_as_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dataset_id: str
) -> None:
    _local_beir(tmp_path / dataset_id)
    monkeypatch.chdir(tmp_path)
    result = invoke("datasets", "show", dataset_id)
    assert result.exit_code == 0, result.output
    assert "passages: 1" in result.output.splitlines()
    sheet = [line for line in datasheet(dataset_id).splitlines() if line.strip()]
    assert not any(line in result.output.splitlines() for line in sheet[:3]), result.output


@pytest.mark.parametrize("dataset_id", shipped_ids())
def test_show_of_a_shipped_id_still_prints_its_datasheet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dataset_id: str
) -> None:
    monkeypatch.chdir(tmp_path)
    result = invoke("datasets", "show", dataset_id)
    assert result.exit_code == 0, result.output
    first = next(line for line in datasheet(dataset_id).splitlines() if line.strip())
    assert first in result.output.splitlines()


# --- datasets convert: a file with no question wrote an empty retrieval set and succeeded.

NO_QUESTIONS = {
    "no articles": {"data": []},
    "no paragraphs": {"data": [{"title": "T", "paragraphs": []}]},
    "no qas key": {"data": [{"title": "T", "paragraphs": [{"context": "一段上下文。"}]}]},
    "empty qas": {"data": [{"title": "T", "paragraphs": [{"context": "一段上下文。", "qas": []}]}]},
}


@pytest.mark.parametrize("case", sorted(NO_QUESTIONS))
def test_convert_refuses_input_without_a_question(tmp_path: Path, case: str) -> None:
    source = tmp_path / "in.json"
    source.write_text(json.dumps(NO_QUESTIONS[case], ensure_ascii=False), encoding="utf-8")
    line = one_error(invoke("datasets", "convert", "squad", source, "-o", tmp_path / "out"))
    assert "no question" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.json"]


def test_a_copy_that_fails_for_many_files_is_one_short_error_line(tmp_path: Path, monkeypatch) -> None:
    """copytree's shutil.Error (an OSError) listed every file that failed, with both paths, in one giant line."""
    failed = [(f"/src/{n}.md", f"/dst/{n}.md", f"[Errno 28] No space left on device: '/src/{n}.md'") for n in range(40)]

    def no_space(*_args: object, **_kwargs: object) -> None:
        raise shutil.Error(failed)

    monkeypatch.setattr("rag_eval.eval.datasets.shipped.shutil.copytree", no_space)
    line = one_error(invoke("datasets", "export", "handbook", str(tmp_path / "hb")))
    assert "No space left on device" in line and "(and 39 more)" in line and len(line) < 200
    assert list(tmp_path.iterdir()) == []


def test_datasets_convert_prints_a_sentence_and_json_on_request(tmp_path: Path) -> None:
    squad = {
        "data": [
            {
                "title": "t",
                "paragraphs": [
                    {"context": "第一段。", "qas": [{"id": "q1", "question": "问一？", "answers": []}]},
                    {"context": "第二段。", "qas": [{"id": "q2", "question": "问二？", "answers": []}]},
                ],
            }
        ]
    }
    source = tmp_path / "dev.json"
    source.write_text(json.dumps(squad, ensure_ascii=False), encoding="utf-8")
    runner = CliRunner()
    said = runner.invoke(cli, ["datasets", "convert", "squad", str(source), "-o", str(tmp_path / "a")])
    assert said.exit_code == 0, said.output
    assert said.stdout.startswith(f"wrote {tmp_path / 'a'}: 2 passages (0 repeated paragraphs merged), 2 queries")
    counts = runner.invoke(cli, ["datasets", "convert", "squad", str(source), "-o", str(tmp_path / "b"), "--json"])
    assert json.loads(counts.stdout)["qrels"] == 2
