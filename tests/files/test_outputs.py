"""Writing outputs (rag_eval.files.outputs): a command writes only what it created, replaces only what rag-eval
wrote, and a killed, failed or full-disk write leaves every path as it was; staging files and folders a killed
write left are cleared by the next write of the same target, and private files and folders stay private."""

from __future__ import annotations

import errno
import hashlib
import os
import signal
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers import invoke, make_docs, one_error

from rag_eval.cli import cli
from rag_eval.files import outputs
from rag_eval.files.outputs import OutputError, new_folder, publish_folder, write_text_atomic


def snapshot(root: Path) -> dict[str, str]:
    """Every path under ``root`` with its kind, mode and content digest: byte for byte what is there."""
    found = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode):
            found[str(path.relative_to(root))] = f"link {os.readlink(path)}"
        elif stat.S_ISDIR(info.st_mode):
            found[str(path.relative_to(root))] = f"dir {stat.S_IMODE(info.st_mode):o}"
        else:
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            found[str(path.relative_to(root))] = f"file {stat.S_IMODE(info.st_mode):o} {digest}"
    return found


def mine(_path: Path) -> None:
    return None


# -- a kill at any moment of replacing a folder leaves the folder under its name -----------------------------------

#: Publishes a new report over an existing one, SIGKILLed just before the Nth file-system change once the block
#: is done (audit hooks run before the operation they announce).
KILL_AT = """
import os, signal, sys
from rag_eval.files.outputs import publish_folder
target, at = sys.argv[1], int(sys.argv[2])
MUTATING = ("os.rename", "os.remove", "os.rmdir", "os.link", "os.chmod", "os.mkdir", "shutil.rmtree",
            "tempfile.mkdtemp", "ctypes.dlsym")
seen = 0
def hook(event, _args):
    global seen
    if event in MUTATING:
        seen += 1
        if seen == at:
            os.kill(os.getpid(), signal.SIGKILL)
with publish_folder(target, owned=lambda _path: None, what="report folder") as staging:
    (staging / "report.json").write_text("new")
    sys.addaudithook(hook)
"""


@pytest.mark.kill
def test_a_folder_replaced_is_never_missing_whenever_the_write_is_killed(tmp_path: Path) -> None:
    """publish_folder moved the previous folder aside, then the new one in: SIGKILL between the two renames
    left no folder under the target's name (only a hidden .old a later rag-eval run would put back)."""
    target = tmp_path / "out"
    for at in range(1, 30):
        target.mkdir(exist_ok=True)
        (target / "report.json").write_text("previous")
        child = subprocess.run([sys.executable, "-c", KILL_AT, str(target), str(at)], check=False)
        assert target.is_dir() and not target.is_symlink(), f"no folder under its name after a kill at step {at}"
        assert sorted(path.name for path in target.iterdir()) == ["report.json"]
        assert (target / "report.json").read_text() in ("previous", "new"), at
        if child.returncode == 0:
            break
        assert child.returncode == -signal.SIGKILL
    else:
        pytest.fail("the write never finished")
    assert (target / "report.json").read_text() == "new"
    with publish_folder(target, owned=mine, what="report folder") as staging:
        (staging / "report.json").write_text("again")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["out"]  # nothing left beside it


# -- what appears at the target while a command writes is never replaced ------------------------------------------


def after_the_last_check(monkeypatch: pytest.MonkeyPatch, check: str, act: Callable[[Path], object]) -> None:
    """``outputs.<check>`` runs ``act(path)`` right after its second call: the check just before the output is
    moved in (the first is before it is written)."""
    real = getattr(outputs, check)
    calls = []

    def checked(path: Path, *args: Any, **kwargs: Any) -> Any:
        result = real(path, *args, **kwargs)
        calls.append(path)
        if len(calls) == 2:
            act(Path(path))
        return result

    monkeypatch.setattr(outputs, check, checked)


def test_a_user_folder_made_after_the_last_check_is_not_deleted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder the user made (with a file) just after publish_folder's last check: the old code saw it existed,
    moved it aside and deleted it with the previous output it took it for."""
    target = tmp_path / "out"

    def user_makes_it(path: Path) -> None:
        path.mkdir()
        (path / "thesis.tex").write_text("a user's only copy")

    after_the_last_check(monkeypatch, "_check_folder", user_makes_it)
    with pytest.raises(OutputError, match="refusing to replace"):
        with new_folder(target, what="dataset folder") as staging:
            (staging / "corpus.jsonl").write_text("{}\n")
    assert sorted(snapshot(tmp_path)) == ["out", "out/thesis.tex"]  # no staging folder left beside it
    assert (target / "thesis.tex").read_text() == "a user's only copy"


def test_a_new_file_never_replaces_one_that_appeared_since_the_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fuse -o / search --run / a judgments log (new files only): a file another run or the user put at the path
    after the check was overwritten by os.replace."""
    target = tmp_path / "fused.run"
    after_the_last_check(monkeypatch, "check_file_target", lambda path: path.write_text("the other run's\n"))
    with pytest.raises(OutputError, match="refusing to replace"):
        write_text_atomic(target, "mine\n", owned=None, what="run file")
    assert target.read_text() == "the other run's\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["fused.run"]


def test_two_writes_of_one_new_folder_at_once_both_end_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two compare runs into one new folder, the second finishing while the first puts its folder in place: the
    first replaces the second's (rag-eval's own) output whole, and leaves nothing beside it."""
    target = tmp_path / "out"
    real = outputs._check_folder

    def the_other_run_publishes(path: Path) -> None:
        monkeypatch.setattr(outputs, "_check_folder", real)
        with publish_folder(path, owned=mine, what="report folder") as other:
            (other / "report.json").write_text("other")

    after_the_last_check(monkeypatch, "_check_folder", the_other_run_publishes)
    with publish_folder(target, owned=mine, what="report folder") as staging:
        (staging / "report.json").write_text("first")
    assert (target / "report.json").read_text() == "first"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["out"]


# -- what the user set on a path rag-eval may replace stays set -----------------------------------------------------


def test_a_private_folder_stays_private_when_a_report_replaces_it(tmp_path: Path) -> None:
    """compare -o into an empty folder the user made with mode 700: the report came out 755 (readable by all)."""
    target = tmp_path / "private"
    target.mkdir(mode=0o700)
    target.chmod(0o700)
    result = CliRunner().invoke(cli, ["compare", "evidence-mini", "-t", "bigram", "-o", str(target)])
    assert result.exit_code == 0, result.output
    assert stat.S_IMODE(target.stat().st_mode) == 0o700
    result = CliRunner().invoke(cli, ["compare", "evidence-mini", "-t", "bigram", "-o", str(target)])
    assert result.exit_code == 0, result.output
    assert stat.S_IMODE(target.stat().st_mode) == 0o700


def test_a_private_file_stays_private_when_rag_eval_rewrites_it(tmp_path: Path) -> None:
    """A judgments file or baseline the user made 600: rewriting it gave it the umask's 644."""
    target = tmp_path / "kb.qrels"
    write_text_atomic(target, "q1 0 d1 1\n", owned=None, what="judgments file")
    target.chmod(0o600)
    write_text_atomic(target, "q1 0 d1 2\n", owned=mine, what="judgments file")
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert target.read_text() == "q1 0 d1 2\n"


# -- a full disk the file system reports late fails the write before anything is replaced ---------------------------


def test_a_full_disk_reported_at_flush_keeps_the_previous_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A report's files were never flushed before the folder replaced the previous one: a file system that reports
    ENOSPC only at fsync (NFS, quotas, delayed allocation) left a published report with empty files."""
    target = tmp_path / "report"
    result = CliRunner().invoke(cli, ["compare", "evidence-mini", "-t", "bigram", "-o", str(target)])
    assert result.exit_code == 0, result.output
    before = snapshot(tmp_path)
    real_fsync = os.fsync

    def full_disk(fd: int) -> None:
        name = os.readlink(f"/proc/self/fd/{fd}")
        if name.endswith("report.md"):
            raise OSError(errno.ENOSPC, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", full_disk)
    result = CliRunner().invoke(cli, ["compare", "evidence-mini", "-t", "bigram", "-t", "unigram", "-o", str(target)])
    assert result.exit_code != 0 and "No space left" in result.output, result.output
    assert snapshot(tmp_path) == before


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_folder_write_that_cannot_flush_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A new folder (queries synth, datasets export) whose files cannot be flushed leaves no folder and no
    staging folder."""
    real_fsync = os.fsync

    def io_error(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").endswith("queries.jsonl"):
            raise OSError(errno.EIO, "Input/output error")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", io_error)
    with pytest.raises(OSError, match="Input/output"):
        with new_folder(tmp_path / "a" / "out", what="dataset folder") as staging:
            (staging / "queries.jsonl").write_text("{}\n")
    assert list(tmp_path.iterdir()) == []


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
