"""A data-safety audit of every command that writes: what a killed or failed command leaves behind, bad input
that reached a traceback or a row of zeros, output paths that made rag-eval create what it should not.

Each test names the defect it pins down; each failed before its fix.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from helpers import REPO, invoke, make_docs, one_error

from rag_eval.files.outputs import publish_folder, write_text_atomic

RUN = "q1 Q0 d1 1 2.0 x\nq1 Q0 d2 2 1.0 x\n"


def tree(folder: Path) -> list[str]:
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*"))


# -- a killed write: its staging files and folders are cleared by the next write of the same target ---------------

KILLED = """
import os, signal, sys
from pathlib import Path
from rag_eval.files.outputs import publish_folder, stage_text
target = sys.argv[1]
if sys.argv[2] == "folder":
    with publish_folder(target, owned=lambda _path: None, what="report folder") as staging:
        (staging / "report.json").write_text("{}")
        os.kill(os.getpid(), signal.SIGKILL)
else:
    stage_text(target, "half", owned=None, what="run file")
    os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.parametrize("kind", ["folder", "file"])
def test_a_write_killed_with_sigkill_leaves_nothing_once_the_target_is_written_again(tmp_path: Path, kind: str) -> None:
    target = tmp_path / ("out" if kind == "folder" else "fused.run")
    killed = subprocess.run([sys.executable, "-c", KILLED, str(target), kind], check=False)
    assert killed.returncode == -signal.SIGKILL
    assert [path.name for path in tmp_path.iterdir()] != []  # what the kill left: a hidden .partial
    if kind == "folder":
        with publish_folder(target, owned=lambda _path: None, what="report folder") as staging:
            (staging / "report.json").write_text("{}")
    else:
        write_text_atomic(target, "whole\n", owned=None, what="run file")
    assert sorted(path.name for path in tmp_path.iterdir()) == [target.name]


def test_a_staging_folder_a_running_command_holds_is_left_alone(tmp_path: Path) -> None:
    target = tmp_path / "out"
    with publish_folder(target, owned=lambda _path: None, what="report folder") as staging:
        (staging / "report.json").write_text("{}")
        clear = "import sys; from rag_eval.files.outputs import clear_left_behind; clear_left_behind(sys.argv[1])"
        subprocess.run([sys.executable, "-c", clear, str(target)], check=True)
        assert (staging / "report.json").is_file()
    assert (target / "report.json").is_file()


def test_a_previous_folder_moved_aside_by_a_killed_write_is_put_back(tmp_path: Path) -> None:
    """Killed between moving the previous report aside and moving the new one in: the next write (or check)
    puts the previous one back under its name, and removes the new one that never got there."""
    from rag_eval.files.outputs import clear_left_behind

    (tmp_path / ".out.k1ll3d00.old" / "previous").mkdir(parents=True)
    (tmp_path / ".out.k1ll3d00.old" / "previous" / "report.json").write_text("previous")
    (tmp_path / ".out.k1ll3d01.partial").mkdir()
    (tmp_path / "mine.partial").write_text("a user's file, not rag-eval's")
    (tmp_path / ".other.k1ll3d02.partial").write_text("another target's")
    clear_left_behind(tmp_path / "out")
    assert (tmp_path / "out" / "report.json").read_text() == "previous"
    assert sorted(path.name for path in tmp_path.iterdir()) == [".other.k1ll3d02.partial", "mine.partial", "out"]


def test_compare_killed_leaves_no_staging_folder_after_the_next_compare(tmp_path: Path) -> None:
    (tmp_path / ".out.abcd1234.partial").mkdir()
    (tmp_path / ".out.abcd1234.partial" / "report.json").write_text("{}")
    result = invoke("compare", "evidence-mini", "-t", "bigram", "-o", str(tmp_path / "out"))
    assert result.exit_code == 0, result.output
    assert sorted(path.name for path in tmp_path.iterdir()) == ["out"]


# -- a failure writing one output leaves every output as it was ----------------------------------------------------


def test_a_baseline_that_cannot_be_written_leaves_the_previous_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = tmp_path / "report"
    result = invoke("compare", "evidence-mini", "-t", "bigram", "-o", str(report))
    assert result.exit_code == 0, result.output
    before = {name: (report / name).read_bytes() for name in ("report.json", "report.md")}
    real_fsync = os.fsync

    def full_disk_for_the_baseline(fd: int) -> None:
        if "base.json" in os.readlink(f"/proc/self/fd/{fd}"):
            raise OSError(errno.ENOSPC, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", full_disk_for_the_baseline)
    args = ["compare", "evidence-mini", "-t", "bigram", "-t", "unigram", "-o", str(report)]
    result = invoke(*args, "--write-baseline", str(tmp_path / "base.json"))
    assert "No space left" in one_error(result)
    assert {name: (report / name).read_bytes() for name in before} == before
    assert sorted(path.name for path in tmp_path.iterdir()) == ["report"]


# -- an empty run file is not a run: never a row of zeros -----------------------------------------------------------


@pytest.mark.parametrize("command", ["evaluate", "fuse", "compare"])
def test_an_empty_run_file_is_one_error_not_zeros(tmp_path: Path, command: str) -> None:
    empty = tmp_path / "empty.run"
    empty.write_text("\n \n", encoding="utf-8")
    good = tmp_path / "good.run"
    good.write_text(RUN, encoding="utf-8")
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q1 0 d1 1\n", encoding="utf-8")
    out = tmp_path / "out"
    args = {
        "evaluate": ["evaluate", str(empty), str(qrels)],
        "fuse": ["fuse", str(empty), str(good), "-o", str(out)],
        "compare": ["compare", "evidence-mini", "-t", "bigram", "--run", f"mine={empty}", "-o", str(out)],
    }[command]
    assert "empty.run: no results" in one_error(invoke(*args))
    assert not out.exists()


# -- hostile files and paths: one error line, nothing created -------------------------------------------------------


def test_models_install_from_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pkuseg.tar.gz"
    os.mkfifo(fifo)
    outcome: list[tuple[int, str]] = []
    worker = threading.Thread(
        target=lambda: outcome.append(invoke("models", "install", "pkuseg", "--sdist", str(fifo)))
    )
    worker.daemon = True
    worker.start()
    worker.join(timeout=30)
    if not outcome:  # free the blocked reader before failing
        with open(fifo, "wb"):
            pass
        worker.join(timeout=10)
        pytest.fail("models install --sdist FIFO blocked reading the FIFO")
    assert "FIFO" in one_error(outcome[0])


def test_an_index_path_ending_in_dotdot_is_refused_and_creates_nothing(tmp_path: Path, monkeypatch) -> None:
    docs = make_docs(tmp_path / "docs")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    (tmp_path / "other").mkdir()
    for target in ("a/../..", str(tmp_path / "other" / "new" / "..")):
        one_error(invoke("index", "build", str(docs), "-t", "bigram", "-o", target))
    assert tree(work) == [] and tree(tmp_path / "other") == []
    assert sorted(path.name for path in tmp_path.iterdir()) == ["docs", "other", "work"]


def test_a_failed_build_leaves_no_folder_it_created(tmp_path: Path) -> None:
    docs = make_docs(tmp_path / "docs")
    (docs / "broken.md").write_bytes(b"# \xff\n")
    one_error(invoke("index", "build", str(docs), "-t", "bigram", "-o", str(tmp_path / "new" / "sub" / "kb.sqlite")))
    assert not (tmp_path / "new").exists()


def test_a_failed_convert_leaves_no_folder_it_created(tmp_path: Path) -> None:
    bad = tmp_path / "squad.json"
    bad.write_text('{"data": [{"paragraphs": [{"context": "", "qas": []}]}]}', encoding="utf-8")
    one_error(invoke("datasets", "convert", "squad", str(bad), "-o", str(tmp_path / "new" / "sub" / "set")))
    assert sorted(path.name for path in tmp_path.iterdir()) == ["squad.json"]


RAG_EVAL = Path(sys.executable).with_name("rag-eval")  # the console script: outputs record its command line
EXAMPLES = REPO / "docs" / "examples"


def console(*args: str | bytes, cwd: Path) -> tuple[int, str]:
    done = subprocess.run([RAG_EVAL, *args], cwd=cwd, capture_output=True, check=False)
    return done.returncode, (done.stdout + done.stderr).decode("utf-8", "backslashreplace")


@pytest.mark.parametrize(
    "args",
    [
        ["compare", "evidence-mini", "-t", "bigram", "-o", b"r\xff"],
        ["compare", "evidence-mini", "-t", "bigram", "--against", b"b\xff", "-o", "out"],
        ["tune", "evidence-mini", "--budget", "2", "-o", b"t\xff"],
        ["judge", "handbook", "--queries", "questions.txt", "-t", "bigram", "--oracle", b"j\xff.qrels"]
        + ["--samples", "0", "-o", "replay.json"],
    ],
    ids=["compare -o", "compare --against", "tune -o", "judge --oracle"],
)
def test_a_file_name_that_is_not_utf8_is_recorded_escaped_not_a_traceback(tmp_path: Path, args: list) -> None:
    """report.json, tune.json and the replay record the command line and input paths: a file name with a byte that
    is not UTF-8 (a lone surrogate in Python) ended in a UnicodeEncodeError traceback after the whole run."""
    code, output = console(
        "compare", "evidence-mini", "-t", "bigram", "-o", "base", "--write-baseline", "b.json", cwd=tmp_path
    )
    assert code == 0, output
    os.rename(tmp_path / "b.json", os.fsdecode(bytes(tmp_path) + b"/b\xff"))
    shutil.copy(EXAMPLES / "handbook-questions.txt", tmp_path / "questions.txt")
    shutil.copy(EXAMPLES / "handbook-questions.qrels", os.fsdecode(bytes(tmp_path) + b"/j\xff.qrels"))
    code, output = console(*args, cwd=tmp_path)
    assert code == 0 and "Traceback" not in output, output
    written = [path for path in tmp_path.rglob("*.json") if path.name in ("report.json", "tune.json", "replay.json")]
    assert any("\\xff" in path.read_text(encoding="utf-8") for path in written if "base" not in path.parts)


def test_an_index_source_that_is_not_utf8_is_one_error_before_any_work(tmp_path: Path) -> None:
    """The index records its source path in its meta table, which holds UTF-8 text only: refused up front (it was
    a UnicodeEncodeError traceback after tokenizing the whole source)."""
    make_docs(Path(os.fsdecode(bytes(tmp_path) + b"/docs\xff")))
    code, output = console("index", "build", b"docs\xff", "-t", "bigram", "-o", "kb.sqlite", cwd=tmp_path)
    lines = [line for line in output.splitlines() if line.startswith("error:")]
    assert code == 1 and len(lines) == 1 and "Traceback" not in output, output
    assert "not valid UTF-8" in lines[0]
    assert sorted(os.listdir(tmp_path)) == [os.fsdecode(b"docs\xff")]


def test_a_copy_that_fails_for_many_files_is_one_short_error_line(tmp_path: Path, monkeypatch) -> None:
    """copytree's shutil.Error (an OSError) listed every file that failed, with both paths, in one giant line."""
    failed = [(f"/src/{n}.md", f"/dst/{n}.md", f"[Errno 28] No space left on device: '/src/{n}.md'") for n in range(40)]

    def no_space(*_args: object, **_kwargs: object) -> None:
        raise shutil.Error(failed)

    monkeypatch.setattr("rag_eval.eval.datasets.shipped.shutil.copytree", no_space)
    line = one_error(invoke("datasets", "export", "handbook", str(tmp_path / "hb")))
    assert "No space left on device" in line and "(and 39 more)" in line and len(line) < 200
    assert list(tmp_path.iterdir()) == []


def test_write_baseline_never_replaces_another_commands_record(tmp_path: Path) -> None:
    """--write-baseline replaced any JSON with a rag-eval/ schema: a report folder's report.json (the folder then
    refused as no longer a report) or tune's tune.json, each lost for a 1 KB baseline."""
    result = invoke("compare", "evidence-mini", "-t", "bigram", "-o", str(tmp_path / "r1"))
    assert result.exit_code == 0, result.output
    result = invoke("compare", "evidence-mini", "-t", "bigram", "-o", str(tmp_path / "r0"))
    assert result.exit_code == 0, result.output
    tune = tmp_path / "tune.json"  # tune's own record, as it writes it
    tune.write_text(json.dumps({"schema": "rag-eval/tune/1", "trials": []}), encoding="utf-8")
    for target in (tmp_path / "r1" / "report.json", tune):
        before = target.read_bytes()
        args = ["compare", "evidence-mini", "-t", "bigram", "-o", str(tmp_path / "r2")]
        assert "refusing to replace it" in one_error(invoke(*args, "--write-baseline", str(target)))
        assert target.read_bytes() == before
    # a report's JSON kept as a file of its own, and a baseline, are still replaced
    kept = tmp_path / "kept.json"
    shutil.copy(tmp_path / "r0" / "report.json", kept)
    for _ in range(2):
        args = ["compare", "evidence-mini", "-t", "bigram", "-o", str(tmp_path / "r2"), "--write-baseline", str(kept)]
        result = invoke(*args)
        assert result.exit_code == 0, result.output
    assert json.loads(kept.read_text(encoding="utf-8"))["schema"].startswith("rag-eval/baseline/")


def test_fuse_refuses_one_run_file_named_twice_by_another_path(tmp_path: Path) -> None:
    """fuse compared the arguments as text: a run named by a relative and an absolute path, or through a link,
    was fused with itself, silently doubling its weight."""
    first = tmp_path / "a.run"
    first.write_text(RUN, encoding="utf-8")
    (tmp_path / "link.run").symlink_to(first)
    os.link(first, tmp_path / "hard.run")
    for other in (tmp_path / "link.run", tmp_path / "hard.run", tmp_path / "sub" / ".." / "a.run"):
        (tmp_path / "sub").mkdir(exist_ok=True)
        line = one_error(invoke("fuse", str(first), str(other), "-o", str(tmp_path / "out.run")))
        assert "given twice" in line
    assert not (tmp_path / "out.run").exists()


@pytest.mark.parametrize("command", ["compare", "tune"])
def test_a_report_inside_the_dataset_folder_is_refused(tmp_path: Path, command: str) -> None:
    """Only compare --queries refused a report inside its source: compare or tune on a dataset folder (such as
    `datasets export` writes, whose corpus/ is a Markdown knowledge base) put report.md into corpus/, and the next
    `index build .../corpus` indexed the report as documents."""
    result = invoke("datasets", "export", "evidence-mini", str(tmp_path / "set"))
    assert result.exit_code == 0, result.output
    before = tree(tmp_path / "set")
    args = ["-t", "bigram"] if command == "compare" else ["--budget", "2"]
    line = one_error(invoke(command, str(tmp_path / "set"), *args, "-o", str(tmp_path / "set" / "corpus" / "report")))
    assert "cannot go inside" in line
    assert tree(tmp_path / "set") == before
