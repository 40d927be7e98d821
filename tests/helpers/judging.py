"""`rag-eval judge`'s server in a thread or a child process, and the pools and questions its tests judge."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from helpers.paths import TESTS
from helpers.signals import default_sigint
from rag_eval.eval.judging.judgments import Judgments, PoolIdentity
from rag_eval.eval.judging.pool import build_pool, plan
from rag_eval.eval.judging.selection import Selector
from rag_eval.eval.judging.server import REQUEST_TIMEOUT, JudgeServer
from rag_eval.eval.judging.session import Session

#: The handbook questions the judging tests use.
QUESTIONS = TESTS / "data" / "judge" / "questions.txt"


CHEAP = ["-t", "bigram", "-t", "unigram"]


POOL = PoolIdentity(corpus="c" * 64, questions=("q1", "q2"), systems=("bigram", "unigram"), depth=10)


class Running:
    """A judging server on 127.0.0.1 in a thread of this process, over the handbook's test questions."""

    def __init__(self, output: Path, *, request_timeout: float = REQUEST_TIMEOUT) -> None:
        dataset, systems, skipped, identity = plan("handbook", QUESTIONS, tokenizers=["bigram", "unigram"])
        pool = build_pool(dataset, systems, identity, skipped=skipped)
        self.output = output
        self.judgments = Judgments.open(output, identity, assessor="")
        self.session = Session(pool, self.judgments, Selector(pool.runs))
        self.server = JudgeServer.bind(0, request_timeout=request_timeout)
        self.lines: list[str] = []  # what the server logs
        self.server.log = self.lines.append
        self.port = self.server.port
        started = threading.Event()
        self.thread = threading.Thread(
            target=self.server.serve,
            args=(self.session,),
            kwargs={"announce": lambda _url: started.set(), "idle_timeout": 30.0},  # stops by itself
            daemon=True,
        )
        self.thread.start()
        started.wait(10)

    def request(
        self, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
            sent = {"Host": f"127.0.0.1:{self.port}", "X-Judge-Token": self.server.token}
            sent |= {"Content-Type": "application/json", "Content-Length": str(len(body or b""))}
            for key, value in (sent | (headers or {})).items():
                connection.putheader(key, value)
            connection.endheaders(body)
            response = connection.getresponse()
            return response.status, dict(response.getheaders()), response.read()
        finally:
            connection.close()

    def post(self, path: str, data: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        status, _, body = self.request("POST", path, json.dumps(data).encode())
        return status, json.loads(body)

    def stop(self) -> None:
        self.server.httpd.shutdown()
        self.thread.join(10)
        self.server.close()
        self.judgments.close()


def make_change(judgments: Judgments, change: str) -> None:
    """One write of the kind ``change`` names: a grade of a new pair, a re-grade, or an undo."""
    if change == "new pair":
        judgments.record("q1", "c", 1)
    elif change == "regrade":
        judgments.record("q1", "a", 0)
    else:
        judgments.undo()


class Server:
    """``rag-eval judge`` in a child process; its URL read from the first line it prints."""

    def __init__(self, output: Path, source: str = "handbook", questions: Path = QUESTIONS) -> None:
        command = [sys.executable, "-m", "rag_eval", "judge", source, "--queries", str(questions)]
        command += ["-t", "bigram", "-t", "unigram", "-o", str(output), "--idle-timeout", "3"]
        self.process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=os.environ.copy(),
            # Ctrl-C as in a terminal: a test run started in the background (CI runners, `cmd &`) inherits
            # SIGINT ignored, and Python keeps an ignored SIGINT ignored, so the clean stop below never came
            preexec_fn=default_sigint,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert "http://127.0.0.1:" in line, line + self.stop()
        self.url = line.split()[-1]
        self.port = int(self.url.split(":")[2].split("/")[0])
        self.token = self.url.split("token=")[1]

    def stop(self, sig: int = signal.SIGKILL) -> str:
        """Stop the server with ``sig``; its stderr."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
        _, err = self.process.communicate(timeout=30)
        return err
