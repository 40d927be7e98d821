"""The judging page's HTTP server: 127.0.0.1 only, a random token per run, a small JSON API.

The server answers only on the loopback address, only requests whose ``Host`` is 127.0.0.1 or localhost
on its port (a web page elsewhere cannot reach it through DNS rebinding), and only with the run's token:
from the printed URL once, then from a cookie (HttpOnly, SameSite=Strict, named after the port since
cookies do not tell ports apart). State-changing calls are POSTs with JSON bodies from the same origin.
Nothing the page shows is HTML from the data: the page builds text nodes, the template is escaped, and a
Markdown passage arrives as HTML built from its tokens (eval/judging/passage_html.py: a fixed set of tags, every text
escaped, no address a link or image could follow).
"""

from __future__ import annotations

import errno
import hmac
import json
import re
import secrets
import sys
import threading
import time
from collections.abc import Callable
from http import HTTPStatus
from http.cookies import CookieError, SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import parse_qs, urlsplit

from ...errors import RagEvalError, Terminated
from ...files.textio import parse_json
from .log_records import JudgmentsConflict, JudgmentsWriteError

if TYPE_CHECKING:
    from .session import Session

HOST = "127.0.0.1"
_TOKEN_IN_TEXT = re.compile(r"token=[^&\s'\"]*")
#: C0, DEL and C1 controls: a request line may hold any of them, and the log goes to the assessor's terminal.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
#: Largest request body read, in bytes (a grade is under 300).
MAX_BODY = 16_384
#: Stop after this many seconds without a request, unless told otherwise (None: never).
DEFAULT_IDLE_TIMEOUT = 4 * 3600.0
#: Seconds a connection may send nothing (or take nothing of the answer) before it is closed: a request that
#: never ends would otherwise hold its thread and descriptor for as long as the server runs.
REQUEST_TIMEOUT = 30.0
#: The methods the server answers; any other known method is 405 with this list in ``Allow``.
ALLOWED = "GET, POST"


class ServerError(RagEvalError):
    """The judging server cannot start (a port in use, a bad port number)."""


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    app: JudgeServer
    request_timeout: float = REQUEST_TIMEOUT

    def handle_error(self, request: Any, client_address: Any) -> None:
        # One log line, never socketserver's traceback: a page closed mid-answer is routine, anything else a bug.
        exc = sys.exc_info()[1]
        if isinstance(exc, ConnectionError):
            return
        self.app.log(f"judge: internal error: {type(exc).__name__}: {exc}")


class JudgeServer:
    """A bound server: ``bind`` first (so a port in use fails before anything is built), then ``serve``."""

    def __init__(self, httpd: _HTTPServer) -> None:
        self.httpd = httpd
        httpd.app = self
        self.port = int(httpd.server_address[1])
        self.token = secrets.token_urlsafe(24)
        self.cookie = f"rag_eval_judge_{self.port}"
        self.session: Session | None = None
        self.last_request = time.monotonic()
        self.stop_reason = ""
        self.log: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True)

    @classmethod
    def bind(cls, port: int = 0, *, request_timeout: float = REQUEST_TIMEOUT) -> JudgeServer:
        """Listen on 127.0.0.1:``port`` (0: a free port chosen by the system); a connection silent for
        ``request_timeout`` seconds is closed."""
        if not 0 <= port <= 65535:
            raise ServerError(f"--port must be between 0 and 65535, not {port}")
        try:
            httpd = _HTTPServer((HOST, port), _Handler, bind_and_activate=True)
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                why = "in use" if exc.errno == errno.EADDRINUSE else "not allowed for this user"
                raise ServerError(
                    f"port {port} on {HOST} is {why}", hint="choose another --port, or leave it out for a free one"
                ) from None
            raise ServerError(f"cannot listen on {HOST}:{port}: {exc.strerror or exc}") from None
        httpd.request_timeout = request_timeout
        return cls(httpd)

    @property
    def url(self) -> str:
        """The page's address with the token: the only way in."""
        return f"http://{HOST}:{self.port}/?token={self.token}"

    def serve(
        self, session: Session, *, announce: Callable[[str], None], idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT
    ) -> str:
        """Answer requests until Ctrl-C, SIGTERM or ``idle_timeout`` seconds without one; returns why it stopped."""
        self.session = session
        self.last_request = time.monotonic()
        stop = threading.Event()
        watchdog = threading.Thread(target=self._watch, args=(stop, idle_timeout), daemon=True)
        watchdog.start()
        announce(self.url)
        try:
            self.httpd.serve_forever(poll_interval=0.2)
        except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM as the command line raises it
            self.stop_reason = "terminated" if isinstance(exc, Terminated) else "interrupted"
        finally:
            stop.set()
        return self.stop_reason or "stopped"

    def _watch(self, stop: threading.Event, idle_timeout: float | None) -> None:
        while not stop.wait(0.5):
            if idle_timeout is not None and time.monotonic() - self.last_request > idle_timeout:
                self.stop_reason = f"idle for {idle_timeout:g} s"
                self.log(f"judge: no request for {idle_timeout:g} s, stopping")
                self.httpd.shutdown()
                return

    def close(self) -> None:
        """Release the port."""
        self.httpd.server_close()

    def page(self, nonce: str) -> str:
        """The judging page (a jinja2 template, everything inline)."""
        import jinja2

        env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(Path(__file__).parents[1] / "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
        )
        session = self.session
        systems = list(session.pool.systems) if session is not None else []
        dataset = session.pool.dataset.id if session is not None else ""
        return env.get_template("judge.html").render(nonce=nonce, systems=systems, dataset=dataset)


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer
    server_version = "rag-eval-judge"
    sys_version = ""
    # http.server's own refusals (a malformed request line, an unknown method) in the server's plain text
    error_message_format = "%(message)s\n"
    error_content_type = "text/plain; charset=utf-8"

    # -- checks ---------------------------------------------------------------------------------------------

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.request_timeout)  # reads and writes alike

    @property
    def app(self) -> JudgeServer:
        return self.server.app

    def _host_ok(self) -> bool:
        # Exactly one Host (RFC 9112 3.2): with two, the one checked need not be the one a proxy or browser used.
        hosts = self.headers.get_all("Host") or []
        return len(hosts) == 1 and hosts[0] in (f"{HOST}:{self.app.port}", f"localhost:{self.app.port}")

    def _cookie_token(self) -> str:
        try:
            cookies = SimpleCookie(self.headers.get("Cookie", ""))
        except CookieError:
            return ""
        morsel = cookies.get(self.app.cookie)
        return morsel.value if morsel is not None else ""

    def _token_ok(self, given: str) -> bool:
        return bool(given) and hmac.compare_digest(given.encode(), self.app.token.encode())

    def _refuse(self, status: HTTPStatus, message: str) -> None:
        self._send(status, message.encode(), "text/plain; charset=utf-8")

    def _admitted(self) -> bool:
        """Host and token checks every request passes first."""
        if not self._host_ok():
            self._refuse(HTTPStatus.FORBIDDEN, "refused: this server answers only for 127.0.0.1 and localhost")
            return False
        if not self._token_ok(self._cookie_token() or self.headers.get("X-Judge-Token", "")):
            query = parse_qs(urlsplit(self.path).query)
            if urlsplit(self.path).path == "/" and self._token_ok((query.get("token") or [""])[0]):
                # Trade the URL's token for a cookie and drop it from the address bar (and history).
                self.send_response(HTTPStatus.SEE_OTHER)
                self.send_header("Location", "/")
                self.send_header("Set-Cookie", f"{self.app.cookie}={self.app.token}; Path=/; HttpOnly; SameSite=Strict")
                self.send_header("Content-Length", "0")
                self._common_headers()
                self.end_headers()
                return False
            self._refuse(HTTPStatus.FORBIDDEN, "forbidden: open the URL rag-eval judge printed (with its token)")
            return False
        self.app.last_request = time.monotonic()  # only the assessor's requests keep the server up
        return True

    # -- responses ------------------------------------------------------------------------------------------

    def _common_headers(self) -> None:
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("X-Frame-Options", "DENY")

    def _send(self, status: HTTPStatus, body: bytes, content_type: str, extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self._common_headers()
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: HTTPStatus, data: Any) -> None:
        self._send(status, json.dumps(data, ensure_ascii=False).encode(), "application/json; charset=utf-8")

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        # Control characters escaped, as http.server's own log_message does: a request line from anyone who can
        # reach the port must not drive the terminal (clear it, retitle it, fake a line).
        line = _CONTROL.sub(lambda found: f"\\x{ord(found.group()):02x}", format % args)
        self.app.log("judge: " + _TOKEN_IN_TEXT.sub("token=...", line))

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        # Grades, undos, skips and refusals; not every page poll. Never the query string (the token).
        if not hasattr(self, "path"):
            return  # a request line http.server could not parse: its refusal is logged already, with the line
        status = str(int(code)) if isinstance(code, int) else str(code)
        if self.command == "POST" or not status.startswith("2"):
            self.log_message("%s %s %s", self.command, urlsplit(self.path).path, status)

    # -- routes ---------------------------------------------------------------------------------------------

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if not self._admitted():
            return
        parts = urlsplit(self.path)
        session = self.app.session
        if session is None:
            self._refuse(HTTPStatus.SERVICE_UNAVAILABLE, "starting")
            return
        if parts.path == "/":
            nonce = secrets.token_urlsafe(16)
            csp = (
                f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; connect-src 'self'; "
                "img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
            )
            body = self.app.page(nonce).encode()
            self._send(HTTPStatus.OK, body, "text/html; charset=utf-8", {"Content-Security-Policy": csp})
        elif parts.path == "/api/state":
            raw = (parse_qs(parts.query).get("at") or [""])[0]
            position = int(raw) if raw.isascii() and raw.isdigit() and len(raw) < 10 else None
            self._json(HTTPStatus.OK, session.state(position))
        else:
            self._refuse(HTTPStatus.NOT_FOUND, "not found")

    def _not_allowed(self) -> None:
        if not self._admitted():
            return
        self._send(
            HTTPStatus.METHOD_NOT_ALLOWED,
            f"method {self.command} not allowed: this server answers {ALLOWED}".encode(),
            "text/plain; charset=utf-8",
            {"Allow": ALLOWED},
        )

    do_HEAD = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_TRACE = do_CONNECT = _not_allowed  # noqa: N815

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        if not self._admitted():
            return
        allowed = (f"http://{HOST}:{self.app.port}", f"http://localhost:{self.app.port}")
        if any(origin not in allowed for origin in self.headers.get_all("Origin") or []):
            self._refuse(HTTPStatus.FORBIDDEN, "refused: another origin")
            return
        session = self.app.session
        if session is None:
            self._refuse(HTTPStatus.SERVICE_UNAVAILABLE, "starting")
            return
        try:
            body = self._body()
            path = urlsplit(self.path).path
            if path == "/api/grade":
                grade = body.get("grade")
                if type(grade) is not int:
                    raise RagEvalError("grade must be 0, 1 or 2")
                state = session.grade(_text(body, "query"), _text(body, "doc"), grade, _position(body))
            elif path == "/api/undo":
                state = session.undo()
            elif path == "/api/skip":
                state = session.skip(_text(body, "query"), _text(body, "doc"))
            else:
                self._refuse(HTTPStatus.NOT_FOUND, "not found")
                return
        except JudgmentsConflict as exc:  # another tab graded this passage: the page reloads where judging stands
            self._json(HTTPStatus.CONFLICT, {"error": str(exc)})
            return
        except JudgmentsWriteError as exc:
            # the grade is not on disk and not in memory: the page says so and the assessor may try again
            said = f"{exc} (to go on: {exc.hint})" if exc.hint else str(exc)
            self.app.log(f"judge: not saved: {said}")
            self._json(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": said})
            return
        except RagEvalError as exc:
            self._json(HTTPStatus.BAD_REQUEST, {"error": str(exc)})
            return
        except Exception as exc:  # noqa: BLE001 - one line for the page and the log, never a dropped request
            self.app.log(f"judge: internal error: {type(exc).__name__}: {exc}")
            self._json(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": f"internal error: {type(exc).__name__}: {exc}"})
            return
        self._json(HTTPStatus.OK, state)

    def _body(self) -> dict[str, Any]:
        if self.headers.get_content_type() != "application/json":
            raise RagEvalError("expected Content-Type: application/json")
        if "Transfer-Encoding" in self.headers:  # a body this server does not read: never acted on as empty
            raise RagEvalError("Transfer-Encoding is not supported: send the body with a Content-Length")
        raw_length = self.headers.get("Content-Length", "0").strip()
        if not raw_length.isascii() or not raw_length.isdigit():
            raise RagEvalError(f"bad Content-Length {raw_length[:20]!r}: expected a whole number of bytes")
        digits = raw_length.lstrip("0") or "0"
        if len(digits) > len(str(MAX_BODY)) or int(digits) > MAX_BODY:
            raise RagEvalError(f"request body over {MAX_BODY} bytes")
        length = int(digits)
        try:
            raw = self.rfile.read(length) if length else b"{}"
        except TimeoutError:
            raise RagEvalError(f"the request body did not arrive within {self.server.request_timeout:g} s") from None
        if len(raw) < length:  # the client stopped sending: a prefix is never taken for the request
            raise RagEvalError(f"the request body was cut short ({len(raw)} of {length} bytes)")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise RagEvalError("the request body is not UTF-8") from None
        data = parse_json(text, "the request body", RagEvalError)  # depth, numbers, surrogates: one message
        if not isinstance(data, dict):
            raise RagEvalError("expected a JSON object")
        return cast(dict[str, Any], data)


def _text(body: dict[str, Any], key: str) -> str:
    value = body.get(key)
    if not isinstance(value, str) or not value:
        raise RagEvalError(f"{key} must be a non-empty string")
    return value


def _position(body: dict[str, Any]) -> int | None:
    value = body.get("at")
    if value is None:
        return None
    if type(value) is not int or value < 0:
        raise RagEvalError("at must be a position in the judged history")
    return value
