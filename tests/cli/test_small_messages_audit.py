"""Small input-handling defects from an audit: refusal messages that said what was not true (a replay "rag-eval only
replaces", "no such folder" for an unknown index name, "no such file" for /dev/zero), options that were silently
ignored (serve --port over stdio, judge --port with --oracle, an empty --assessor, ``bigram:``), a duplicate run
line named neither file nor line, a file converted twice, fused scores cut to 6 decimals, and a batch search in an
unknown category without the hint single search gives."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import ALL_SPECS, REPO, invoke, one_error

from rag_eval.builders import BUILDERS, get_builder
from rag_eval.cli import cli
from rag_eval.errors import DatasetError, ServeError, SpecError, UnavailableError
from rag_eval.eval.compare.fusion import FusionError, parse_fusion
from rag_eval.eval.datasets.squad import convert_squad
from rag_eval.eval.datasets.trec import read_run
from rag_eval.files.outputs import OutputError, check_file_target, publish_folder, write_text_atomic
from rag_eval.index.processing import QueryProcessing
from rag_eval.index.writer import build
from rag_eval.serve.served import IndexSet
from rag_eval.serve.server import serve
from rag_eval.tokenizers import get_tokenizer

ROOT = REPO
EVIDENCE = ROOT / "datasets" / "evidence-mini" / "corpus"
HANDBOOK_QUESTIONS = ROOT / "docs" / "examples" / "handbook-questions.txt"
HANDBOOK_QRELS = ROOT / "docs" / "examples" / "handbook-questions.qrels"


@pytest.fixture(scope="module")
def indexes(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two small lines indexes (evidence-mini, bigram), named ``kb`` and ``kb2``; read only."""
    folder = tmp_path_factory.mktemp("indexes")
    for name in ("kb", "kb2"):
        build(EVIDENCE, folder / f"{name}.sqlite", builder="lines", tokenizer="bigram")
    return folder / "kb.sqlite", folder / "kb2.sqlite"


def _not_regular(tmp_path: Path, kind: str) -> Path:
    """A path that exists but is no regular file: a folder, a FIFO, a character device, or a link to a folder."""
    if kind == "folder":
        (tmp_path / "thing").mkdir()
    elif kind == "fifo":
        os.mkfifo(tmp_path / "thing")
    elif kind == "device":
        return Path("/dev/zero")
    else:
        (tmp_path / "elsewhere").mkdir()
        (tmp_path / "thing").symlink_to(tmp_path / "elsewhere")
    return tmp_path / "thing"


NOT_REGULAR = ["folder", "fifo", "device", "link to a folder"]


# -- 1. refusals that name the rule that refused ----------------------------------------------------------------


@pytest.mark.parametrize("kind", ["file", "folder", "fifo", "symbolic link"])
def test_a_never_replaced_output_says_it_is_never_replaced(tmp_path: Path, kind: str) -> None:
    """Bug: a replay rag-eval wrote was refused with "rag-eval only replaces a replay it wrote"."""
    target = tmp_path / "replay.json"
    if kind == "file":
        write_text_atomic(target, "{}\n", owned=None, what="replay")  # rag-eval wrote it
    elif kind == "folder":
        target.mkdir()
    elif kind == "fifo":
        os.mkfifo(target)
    else:
        target.symlink_to(tmp_path / "nowhere")
    with pytest.raises(OutputError) as raised:
        check_file_target(target, owned=None, what="replay")
    message = str(raised.value)
    assert "refusing to replace it" in message and "it wrote" not in message
    assert "rag-eval never replaces a replay: it writes one only to a new path" in message
    with pytest.raises(OutputError, match="it wrote"):  # outputs rag-eval does replace keep their rule
        check_file_target(target, owned=lambda _path: "it is not a study", what="study")


def test_a_folder_written_only_to_a_new_path_says_so(tmp_path: Path) -> None:
    """Bug: a new-only folder found in place was refused as "rag-eval only replaces a dataset folder it wrote"."""
    (tmp_path / "out").mkdir()
    with pytest.raises(OutputError) as raised, publish_folder(tmp_path / "out", owned=None, what="dataset folder"):
        pass
    assert "it already exists; rag-eval never replaces a dataset folder" in str(raised.value)


@pytest.mark.parametrize("kind", NOT_REGULAR)
def test_search_run_over_something_not_a_file_does_not_claim_it_replaces_runs(
    indexes: tuple[Path, Path], tmp_path: Path, kind: str
) -> None:
    """Bug: `search --run DIR` said "rag-eval only replaces a run file it wrote"; it never replaces one."""
    (tmp_path / "q.txt").write_text("退款\n", encoding="utf-8")
    target = _not_regular(tmp_path, kind)
    result = invoke("search", indexes[0], "--queries", tmp_path / "q.txt", "--run", target)
    line = one_error(result)
    assert result.exit_code == 1 and "it wrote" not in line, line


# -- 2. serve --root with an unknown index name -----------------------------------------------------------------


@pytest.mark.parametrize("served", [1, 2])
def test_a_root_for_an_unknown_index_name_says_the_name_is_unknown(
    indexes: tuple[Path, Path], tmp_path: Path, served: int
) -> None:
    """Bug: --root x=DIR said "no such folder" (one index) or "name the index" (two), though x was the name given."""
    paths = list(indexes[:served])
    names = ", ".join(path.stem for path in paths)
    with pytest.raises(ServeError) as raised:
        IndexSet(paths, root=[f"zz={tmp_path}"])
    assert str(raised.value) == f"--root zz={tmp_path}: no served index is named 'zz'; served: {names}"
    # A folder whose whole name holds '=' is still a folder.
    (tmp_path / "x=corpus").mkdir()
    served_set = IndexSet(paths[:1], root=[str(tmp_path / "x=corpus")])
    try:
        assert served_set.root_of(paths[0].stem) == tmp_path / "x=corpus"
    finally:
        served_set.close()


# -- 3. options that do not apply are refused, not ignored -------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"port": 8000}, "--port applies"),
        ({"host": "0.0.0.0"}, "--host applies"),
        ({"host": "::1", "port": 0}, "--host and --port apply"),
    ],
)
def test_serve_refuses_host_and_port_over_stdio(tmp_path: Path, options: dict[str, object], named: str) -> None:
    """Bug: `serve --transport stdio --port 8000` ignored the port (refused before any index is opened)."""
    with pytest.raises(ServeError, match=f"{named} only with --transport http"):
        serve([tmp_path / "missing.sqlite"], transport="stdio", **options)  # type: ignore[arg-type]
    argv = [f"--{key}={value}" for key, value in options.items()]
    result = invoke("serve", tmp_path / "missing.sqlite", "--transport", "stdio", *argv)
    assert result.exit_code == 1 and f"{named} only with --transport http" in one_error(result)


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--oracle", HANDBOOK_QRELS, "--port", "99999"], "--port applies only to a judging page"),
        (["--oracle", HANDBOOK_QRELS, "--idle-timeout", "nan"], "--idle-timeout applies only to a judging page"),
        (["--oracle", HANDBOOK_QRELS, "--assessor", "ana"], "--assessor applies only to a judging page"),
        (["--oracle", HANDBOOK_QRELS, "--port", "0", "--idle-timeout", "240"], "--port and --idle-timeout apply"),
        (["-o", "x.qrels", "--samples", "3"], "--samples applies only with --oracle"),
        (["-o", "x.qrels", "--sample-queries", "5"], "--sample-queries applies only with --oracle"),
        (["-o", "x.qrels", "--seed", "1"], "--seed applies only with --oracle"),
        (["-o", "x.qrels", "--json"], "--json applies only with --oracle"),
    ],
)
def test_judge_refuses_options_of_the_other_mode(tmp_path: Path, extra: list[object], named: str) -> None:
    """Bug: `judge --oracle ... --idle-timeout nan --port 99999` ignored both (refused without --oracle)."""
    # A missing questions file: the old code failed on it only after taking the options silently.
    result = invoke("judge", "handbook", "--queries", tmp_path / "missing.txt", *extra)
    assert result.exit_code == 2 and named in one_error(result, code=2)


# -- 4. the assessor's name ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["", "   ", "a\nb", "a\tb", "ana\x1b[31m", "a\u2028b", "x" * 101])
def test_an_empty_or_multiline_assessor_is_refused_before_any_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """Bug: `judge --assessor ''` (or a name with a newline) was accepted and written into every grade."""

    def no_plan(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the pool was planned before the assessor was checked")

    monkeypatch.setattr("rag_eval.eval.judging.judge.plan", no_plan)
    out = tmp_path / "j.qrels"
    result = invoke("judge", "handbook", "--queries", HANDBOOK_QUESTIONS, "--assessor", name, "-o", out)
    assert result.exit_code == 1 and "--assessor" in one_error(result) and not out.exists()


# -- 5. file-valued tokenizer options that are not regular files -------------------------------------------------


@pytest.mark.parametrize("kind", NOT_REGULAR)
@pytest.mark.parametrize("strategy", ["jieba:userdict=", "pkuseg:model=mini,userdict="])
def test_a_user_dictionary_that_is_no_regular_file_says_so(tmp_path: Path, strategy: str, kind: str) -> None:
    """Bug: jieba:userdict=/dev/zero (or a FIFO, a folder) said "no such file: /dev/zero"."""
    path = _not_regular(tmp_path, kind)
    with pytest.raises(SpecError) as raised:
        get_tokenizer(f"{strategy}{path}")
    assert "not a regular file" in str(raised.value) and "no such file" not in str(raised.value)


@pytest.mark.parametrize("kind", ["fifo", "device", "missing", "model file a folder"])
def test_a_pkuseg_model_path_says_what_it_is(tmp_path: Path, kind: str) -> None:
    """Bug: a model path that was a FIFO, a device or missing, or a model folder holding a folder where a file
    belongs, all said the folder "lacks features.msgpack, weights.npz"."""
    expected = {
        "fifo": "is a FIFO (named pipe), not a model folder",
        "device": "is a character device, not a model folder",
        "missing": "no such folder",
        "model file a folder": "features.msgpack is a directory, not a regular file; weights.npz is missing",
    }[kind]
    if kind == "missing":
        path = tmp_path / "nothing"
    elif kind == "model file a folder":
        path = tmp_path / "model"
        (path / "features.msgpack").mkdir(parents=True)
    else:
        path = _not_regular(tmp_path, kind)
    with pytest.raises(UnavailableError) as raised:
        get_tokenizer(f"pkuseg:model={path}").load()
    assert expected in str(raised.value) and "lacks" not in str(raised.value)


# -- 6. an empty option list after ':' ----------------------------------------------------------------------------


@pytest.mark.parametrize("spec", ALL_SPECS)
def test_an_empty_option_list_is_refused_and_no_written_spec_has_one(spec: str) -> None:
    """Bug: `-t bigram:` was accepted (`bigram:x,` is refused): a ':' promises options."""
    name = spec.split(":")[0]
    for given in (f"{name}:", f"{name}: ", f"bigram+{name}:"):
        with pytest.raises(SpecError, match=r"no options after ':'"):
            get_tokenizer(given)
    written = get_tokenizer(spec).system
    assert not written.endswith(":") and get_tokenizer(written).system == written


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_an_empty_builder_option_list_is_refused(name: str) -> None:
    with pytest.raises(SpecError, match=r"no options after ':'"):
        get_builder(f"{name}:")


def test_an_empty_option_list_is_refused_in_fusions_and_query_processing() -> None:
    with pytest.raises(FusionError, match=r"no options after ':'"):
        parse_fusion("rrf:(bigram, unigram)")
    with pytest.raises(SpecError, match=r"no options after ':'"):
        QueryProcessing.parse("query:")
    result = invoke("tokenize", "-t", "bigram:", "导出")
    assert result.exit_code == 1 and "no options after ':'" in one_error(result)


# -- 7. a document listed twice in a run --------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["evaluate", "fuse"])
def test_a_document_listed_twice_names_the_file_and_both_lines(tmp_path: Path, command: str) -> None:
    """Bug: `evaluate` said "run: query 'h001' returns document 'd1' twice", naming neither file nor line (and
    fuse took the run)."""
    run = tmp_path / "dup.run"
    run.write_text("q1 Q0 d1 1 3.0 t\nq1 Q0 d2 2 2.0 t\nq1 Q0 d1 3 1.0 t\n", encoding="utf-8")
    other = tmp_path / "other.run"
    other.write_text("q1 Q0 d2 1 1.0 t\n", encoding="utf-8")
    (tmp_path / "q.qrels").write_text("q1 0 d1 1\n", encoding="utf-8")
    if command == "evaluate":
        result = invoke("evaluate", run, tmp_path / "q.qrels")
    else:
        result = invoke("fuse", run, other, "-o", tmp_path / "out.run")
    line = one_error(result)
    assert result.exit_code == 1 and f"{run}:3: query 'q1' returns document 'd1' twice (first on line 1)" in line, line
    assert not (tmp_path / "out.run").exists()


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


# -- 9. fused scores written in full ------------------------------------------------------------------------------


def _float32(value: float) -> float:
    return struct.unpack("f", struct.pack("f", value))[0]


@pytest.mark.parametrize("k", ["60", "1000000"])
def test_fused_scores_keep_their_value_and_stay_strictly_decreasing(tmp_path: Path, k: str) -> None:
    """Bug: fuse wrote 6 fixed decimals: with --k 1000000 the scores read 0.000002, 0.000001, 0.000000,
    -0.000001 ..., and fusing that run again (combsum) used them."""
    docs = [f"d{n:02d}" for n in range(30)]
    (tmp_path / "a.run").write_text("".join(f"q1 Q0 {d} {n + 1} {30 - n} a\n" for n, d in enumerate(docs)), "utf-8")
    (tmp_path / "b.run").write_text(
        "".join(f"q1 Q0 {d} {n + 1} {30 - n} b\n" for n, d in enumerate(reversed(docs))), "utf-8"
    )
    result = invoke("fuse", tmp_path / "a.run", tmp_path / "b.run", "--k", k, "-o", tmp_path / "f.run")
    assert result.exit_code == 0, result.output
    fused = read_run(tmp_path / "f.run")
    scores = [doc.score for doc in fused]
    assert len(scores) == 30 and all(score > 0 for score in scores)  # every document was returned: all above 0
    # each pair d_n, d_(29-n) ties: 1/(k+n+1) + 1/(k+30-n); the first of a tie is written as it is
    top = 1 / (int(k) + 1) + 1 / (int(k) + 30)
    assert scores[0] == pytest.approx(top, rel=1e-12)
    assert all(_float32(a) > _float32(b) for a, b in zip(scores, scores[1:], strict=False))  # trec_eval's floats
    result = invoke("fuse", tmp_path / "f.run", tmp_path / "a.run", "--method", "combsum", "-o", tmp_path / "g")
    assert result.exit_code == 0, result.output


# -- 10. batch search in a category no chunk has ----------------------------------------------------------------


def test_batch_search_in_an_unknown_category_gives_the_single_search_hint(
    indexes: tuple[Path, Path], tmp_path: Path
) -> None:
    """Bug: `search --queries Q --run OUT --category nosuch` wrote an empty run with no hint; single search says
    "no chunk has category 'nosuch'"."""
    (tmp_path / "q.txt").write_text("退款\n发票\n", encoding="utf-8")
    hint = "hint: no chunk has category 'nosuch'; see the categories with: rag-eval index list INDEX"
    result = CliRunner().invoke(
        cli,
        ["search", str(indexes[0]), "--queries", str(tmp_path / "q.txt"), "--run", str(tmp_path / "o.run")]
        + ["--category", "nosuch"],
    )
    assert result.exit_code == 0 and hint in result.stderr.splitlines(), result.stderr
    single = CliRunner().invoke(cli, ["search", str(indexes[0]), "退款", "--category", "nosuch"])
    assert hint in single.stderr.splitlines()
    known = CliRunner().invoke(
        cli, ["search", str(indexes[0]), "--queries", str(tmp_path / "q.txt"), "--run", str(tmp_path / "p.run")]
    )
    assert known.exit_code == 0 and "hint:" not in known.stderr
