"""One reader per input kind: regular files, UTF-8 text, lines, untrusted JSON and JSON Lines.

Every loader in rag-eval reads through here, so every input gets the same treatment: only regular files
are read (a FIFO, socket or device is refused without blocking), sizes are checked before reading,
UTF-8 is strict with one leading BOM removed, and JSON is parsed with limits (nesting depth, integer
length, finite numbers, no lone surrogates). Every failure is one ``error`` (a RagEvalError subclass)
whose message names the file, and the line where there is one.
"""

from __future__ import annotations

import difflib
import errno
import fcntl
import io
import json
import math
import os
import re
import stat
from collections.abc import Collection, Generator, Iterator, Mapping
from itertools import accumulate
from pathlib import Path
from typing import Any, NoReturn

from ..errors import CorpusError, MissingSourceError, RagEvalError

BOM = "\ufeff"
_BOM_BYTES = BOM.encode("utf-8")
_NEWLINE = b"\n"

#: Deepest JSON nesting accepted. Real inputs (manifests, BEIR records, SQuAD files) nest 2 to 6 deep;
#: CPython's parser recurses per level, so a hostile file 100,000 deep would raise RecursionError.
MAX_JSON_DEPTH = 64
#: Longest JSON integer accepted, in digits. No count, offset or id in rag-eval's inputs comes close;
#: CPython refuses over 4,300 digits with a ValueError and converts long ones in quadratic time.
MAX_JSON_INT_DIGITS = 100

# C0 controls, DEL, C1 controls and surrogates (a lone surrogate cannot be encoded; Python gives
# undecodable bytes in file names as surrogates U+DC80..U+DCFF).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?', re.S)  # an unterminated string runs to the end
_BRACKET = re.compile(r"[\[\]{}]")
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[\]{}]|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|NaN|-?Infinity', re.S)


def display_name(name: str) -> str:
    """``name`` as messages show it: unchanged, or ``repr`` when it holds control characters or surrogates."""
    return repr(name) if _UNSAFE.search(name) else name


def path_argument(value: object, what: str, error: type[RagEvalError]) -> str:
    """``value`` (a ``str`` or ``os.PathLike``) as a string; anything else, which ``str()`` would turn into a
    file named ``None`` or ``b'x'`` in the working directory, is ``error`` naming its type."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise error(f"{what} must be a str or os.PathLike, not {type(value).__name__}")
    return value


def text_argument(value: object, what: str, error: type[RagEvalError]) -> str:
    """``value`` if it is a string that can be stored and printed (no NUL, no lone surrogate, which is how
    undecodable bytes arrive), else ``error`` naming ``what``."""
    if not isinstance(value, str):
        raise error(f"{what} must be a string, not {type(value).__name__}")
    if "\x00" in value:
        raise error(f"{what} {display_name(value)} contains a NUL character")
    found = _SURROGATE.search(value)
    if found is not None:
        raise error(
            f"{what} {display_name(value)} is not valid Unicode text (lone surrogate "
            f"U+{ord(found.group()):04X} at character {found.start()})"
        )
    return value


def control_character(text: str) -> str | None:
    """The first C0, DEL or C1 control character in ``text``, or None."""
    found = _CONTROL.search(text)
    return found.group() if found else None


def counted(number: int, singular: str, plural: str | None = None) -> str:
    """``1 question``, ``2 questions``: a count with its noun in the right number."""
    return f"{number} {singular if number == 1 else plural or singular + 's'}"


def fits_trec_column(value: str) -> bool:
    """Whether ``value`` can be one column of a TREC run or qrels line: non-empty, without whitespace (the column
    separator) or a control character."""
    return bool(value) and not any(char.isspace() for char in value) and control_character(value) is None


def file_kind(mode: int) -> str:
    """What a non-regular file is, as an error message says it: ``is a directory``, ``is a FIFO (named pipe)``, ..."""
    if stat.S_ISDIR(mode):
        return "is a directory"
    if stat.S_ISFIFO(mode):
        return "is a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "is a socket"
    if stat.S_ISCHR(mode):
        return "is a character device"
    if stat.S_ISBLK(mode):
        return "is a block device"
    return "is not a regular file"


def _missing(error: type[RagEvalError], message: str) -> RagEvalError:
    # Corpus readers have always raised MissingSourceError (also a FileNotFoundError) for a missing file.
    if issubclass(error, CorpusError) and not issubclass(error, MissingSourceError):
        return MissingSourceError(message)
    return error(message)


def _open_error(path: Path, name: str, exc: OSError, error: type[RagEvalError]) -> RagEvalError:
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        if str(path) == "-":  # the usual name of standard input, which this reader does not take
            return _missing(error, "-: file not found (this input is read from a file, not from standard input)")
        return _missing(error, f"{name}: file not found")
    if exc.errno == errno.ELOOP:
        return error(f"{name}: is a symbolic link loop")
    if exc.errno == errno.ENXIO:  # opening a Unix socket
        try:
            return error(f"{name}: {file_kind(os.stat(path).st_mode)}, not a regular file")
        except OSError:
            pass
    return error(f"{name}: cannot read: {exc.strerror or exc}")


def open_regular(
    path: str | Path,
    error: type[RagEvalError],
    *,
    max_bytes: int | None = None,
    label: str | None = None,
    too_large: type[RagEvalError] | None = None,
) -> io.BufferedReader:
    """``path`` opened for binary reading after checking, on the open descriptor, that it is a regular file
    of at most ``max_bytes`` (a larger one is ``too_large``, by default ``error``). Opening never blocks: a FIFO
    is opened non-blocking and refused."""
    name = display_name(label if label is not None else str(path))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise _open_error(Path(path), name, exc, error) from None
    except ValueError:  # an embedded NUL byte, or a surrogate the file system cannot encode
        raise error(f"{name}: invalid file name") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise error(f"{name}: {file_kind(info.st_mode)}, not a regular file")
        if max_bytes is not None and info.st_size > max_bytes:
            raise (too_large or error)(f"{name}: {info.st_size} bytes is over the limit of {max_bytes}")
        # Regular files ignore O_NONBLOCK on Linux; clear it so reads behave as documented everywhere.
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes(
    path: str | Path,
    error: type[RagEvalError],
    *,
    max_bytes: int | None = None,
    label: str | None = None,
    too_large: type[RagEvalError] | None = None,
) -> bytes:
    """The bytes of a regular file, refused (as ``error`` naming ``label``) when missing, unreadable,
    not a regular file or over ``max_bytes`` (checked before reading and again while reading; as ``too_large``
    when given, so a caller can tell a file it will not read from one it cannot)."""
    name = display_name(label if label is not None else str(path))
    with open_regular(path, error, max_bytes=max_bytes, label=label, too_large=too_large) as handle:
        try:
            if max_bytes is None:
                data = handle.read()
            else:
                # read(n) allocates n bytes first: ask for what the file holds (one more shows it grew since)
                size = os.fstat(handle.fileno()).st_size
                data = handle.read(min(max_bytes, size) + 1)
                if size < len(data) <= max_bytes:  # it grew: read on, up to the limit
                    data += handle.read(max_bytes + 1 - len(data))
        except OSError as exc:
            raise error(f"{name}: cannot read: {exc.strerror or exc}") from None
    if max_bytes is not None and len(data) > max_bytes:  # it grew after the size check
        raise (too_large or error)(f"{name}: more than {max_bytes} bytes, over the limit")
    return data


def _decode(
    data: bytes, where: str, error: type[RagEvalError], *, offset: int = 0, bom: bool = True, whole: bool = False
) -> str:
    skip = len(_BOM_BYTES) if bom and data.startswith(_BOM_BYTES) else 0
    try:
        return data[skip:].decode("utf-8")
    except UnicodeDecodeError as exc:
        position = skip + exc.start
        line = f" (line {data.count(_NEWLINE, 0, position) + 1})" if whole else ""
        raise error(f"{where}: not valid UTF-8 at byte {offset + position}{line}") from None


def decode_utf8(data: bytes, where: str, error: type[RagEvalError]) -> str:
    """Strict UTF-8 with exactly one leading BOM removed; ``where: not valid UTF-8 at byte N (line L)`` otherwise."""
    return _decode(data, display_name(where), error, whole=True)


def read_text(
    path: str | Path, error: type[RagEvalError], *, max_bytes: int | None = None, label: str | None = None
) -> str:
    """A regular file's text: :func:`read_bytes` then :func:`decode_utf8`."""
    name = label if label is not None else str(path)
    return decode_utf8(read_bytes(path, error, max_bytes=max_bytes, label=label), name, error)


def split_lines(text: str) -> list[str]:
    """Lines as editors number them: split on ``\\n`` only, one trailing ``\\r`` removed (CRLF files).

    Unlike ``str.splitlines`` this does not break at form feeds, ``\\x1c``-``\\x1e``, NEL or U+2028, so
    line N here is line N in an editor and in ``grep -n``.
    """
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def iter_lines(
    path: str | Path, error: type[RagEvalError], *, max_bytes: int | None = None, label: str | None = None
) -> Generator[tuple[int, str], None, None]:
    """``(line number, text)`` for every line of a UTF-8 file, streamed, numbered as :func:`split_lines` does.

    A BOM is removed from the first line only; an undecodable line is ``path:N: not valid UTF-8 at byte
    M`` with M counted from the start of the file.
    """
    name = display_name(label if label is not None else str(path))
    with open_regular(path, error, max_bytes=max_bytes, label=label) as handle:
        offset = 0
        number = 0
        while True:
            try:
                raw = handle.readline()
            except OSError as exc:
                raise error(f"{name}: cannot read: {exc.strerror or exc}") from None
            if not raw:
                return
            number += 1
            if max_bytes is not None and offset + len(raw) > max_bytes:
                raise error(f"{name}: more than {max_bytes} bytes, over the limit")
            text = _decode(raw, f"{name}:{number}", error, offset=offset, bom=number == 1)
            offset += len(raw)
            if text.endswith("\n"):
                text = text[:-1]
            yield number, text[:-1] if text.endswith("\r") else text


class _Refused(ValueError):
    """A JSON value outside the limits, raised from a parse hook; ``token`` is its text."""

    def __init__(self, token: str, problem: str) -> None:
        super().__init__(problem)
        self.token = token
        self.problem = problem


def _parse_int(token: str) -> int:
    digits = len(token) - token.startswith("-")
    if digits > MAX_JSON_INT_DIGITS:
        raise _Refused(token, f"an integer of {digits} digits (the limit is {MAX_JSON_INT_DIGITS})")
    return int(token)


def _parse_float(token: str) -> float:
    value = float(token)
    if not math.isfinite(value):
        raise _Refused(token, f"the number {token[:20]}{'…' if len(token) > 20 else ''} is out of range")
    return value


def _parse_constant(token: str) -> NoReturn:
    raise _Refused(token, f"{token} is not a JSON number")


def _position(text: str, index: int, one_line: bool) -> str:
    column = index - (text.rfind("\n", 0, index) + 1) + 1
    if one_line:
        return f"column {column}"
    return f"line {text.count(chr(10), 0, index) + 1} column {column}"


def _too_deep(text: str, where: str, error: type[RagEvalError], one_line: bool) -> NoReturn:
    depth = 0
    for token in _TOKEN.finditer(text):
        char = token.group()[0]
        if char in "[{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                raise error(
                    f"{where}: JSON nested deeper than {MAX_JSON_DEPTH} levels at "
                    f"{_position(text, token.start(), one_line)}"
                )
        elif char in "]}":
            depth -= 1
    raise error(f"{where}: JSON nested deeper than {MAX_JSON_DEPTH} levels")


def _check_depth(text: str, where: str, error: type[RagEvalError], one_line: bool) -> None:
    # Counting is C-speed; only a text with more brackets than the limit needs the scan that skips strings.
    if text.count("[") + text.count("{") <= MAX_JSON_DEPTH:
        return
    brackets = _BRACKET.findall(_STRING.sub("", text))
    if max(accumulate(1 if b in "[{" else -1 for b in brackets), default=0) > MAX_JSON_DEPTH:
        _too_deep(text, where, error, one_line)


def _check_surrogates(text: str, where: str, error: type[RagEvalError], one_line: bool) -> None:
    # json.loads turns a "\ud800" escape into a lone surrogate, which no encoder accepts later; a valid
    # pair ("\ud83d\ude00") decodes to one character and passes. Runs only after the text parsed.
    if not _SURROGATE_ESCAPE.search(text):
        return
    for token in _STRING.finditer(text):
        if _SURROGATE_ESCAPE.search(token.group()):
            lone = _SURROGATE.search(json.loads(token.group()))
            if lone:
                raise error(
                    f"{where}: a \\u{ord(lone.group()):04x} escape (a lone surrogate, not a character) "
                    f"in the string at {_position(text, token.start(), one_line)}"
                )


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) < len(pairs):
        seen: set[str] = set()
        for key, _value in pairs:
            if key in seen:
                raise _Refused(json.dumps(key, ensure_ascii=False), f"the key {shown(key)} appears twice in one object")
            seen.add(key)
    return found


def _parse(text: str, where: str, error: type[RagEvalError], one_line: bool) -> Any:
    lone = _SURROGATE.search(text)
    if lone:
        raise error(f"{where}: a lone surrogate U+{ord(lone.group()):04X} at {_position(text, lone.start(), one_line)}")
    _check_depth(text, where, error, one_line)
    try:
        value = json.loads(
            text,
            parse_int=_parse_int,
            parse_float=_parse_float,
            parse_constant=_parse_constant,
            # A whole JSON file (a manifest, a baseline, a request) with a key given twice is ambiguous: Python
            # keeps the last silently (an "expires" typed twice). JSON Lines records (a corpus's millions of
            # passages) are left to the C parser alone.
            object_pairs_hook=None if one_line else _unique_keys,
        )
    except _Refused as exc:
        at = next(
            (f" at {_position(text, t.start(), one_line)}" for t in _TOKEN.finditer(text) if t.group() == exc.token), ""
        )
        raise error(f"{where}: {exc.problem}{at}") from None
    except json.JSONDecodeError as exc:
        at = f"column {exc.colno}" if one_line else f"line {exc.lineno} column {exc.colno}"
        raise error(f"{where}: invalid JSON at {at}: {exc.msg}") from None
    except RecursionError:  # cannot happen after the depth check; kept so no traceback ever escapes
        raise error(f"{where}: JSON nested too deeply") from None
    _check_surrogates(text, where, error, one_line)
    return value


def parse_json(text: str, where: str, error: type[RagEvalError]) -> Any:
    """``json.loads`` with limits: nesting over MAX_JSON_DEPTH, integers over MAX_JSON_INT_DIGITS digits,
    NaN, Infinity, non-finite numbers (``1e999``) and lone surrogate escapes are each ``error`` naming ``where``."""
    return _parse(text, display_name(where), error, one_line=False)


def read_json(
    path: str | Path, error: type[RagEvalError], *, max_bytes: int | None = None, label: str | None = None
) -> Any:
    """A JSON file read with :func:`read_text` and parsed with :func:`parse_json`."""
    name = label if label is not None else str(path)
    return parse_json(read_text(path, error, max_bytes=max_bytes, label=label), name, error)


def parse_jsonl(text: str, label: str, error: type[RagEvalError]) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` for each non-blank line of JSON Lines text already decoded (``label:N`` in messages)."""
    name = display_name(label)
    for number, line in enumerate(split_lines(text), start=1):
        if line.strip():
            yield number, _parse(line, f"{name}:{number}", error, one_line=True)


def parse_json_line(line: str, label: str, number: int, error: type[RagEvalError]) -> Any:
    """Line ``number`` of a JSON Lines file ``label`` parsed as :func:`parse_jsonl` does (``label:N: ...``)."""
    return _parse(line, f"{display_name(label)}:{number}", error, one_line=True)


def iter_jsonl(
    path: str | Path, error: type[RagEvalError], *, max_bytes: int | None = None, label: str | None = None
) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` for each non-blank line of a JSON Lines file, streamed; ``path:N`` in messages."""
    name = display_name(label if label is not None else str(path))
    for number, line in iter_lines(path, error, max_bytes=max_bytes, label=label):
        if line.strip():
            yield number, _parse(line, f"{name}:{number}", error, one_line=True)


def refuse_unknown_keys(
    found: Mapping[str, Any], allowed: Collection[str], where: str, error: type[RagEvalError]
) -> None:
    """Nothing when every key of ``found`` (a JSON object whose keys are fixed) is in ``allowed``; else one ``error``
    naming the first other key, the closest allowed one and every allowed key. Ignored, a misspelt key (``expire``
    for ``expires``) would silently leave its setting at the default."""
    for key in found:
        if key not in allowed:
            names = sorted(allowed)
            close = difflib.get_close_matches(key, names, n=1, cutoff=0.6) if len(key) <= 100 else []
            guess = f" (did you mean {close[0]!r}?)" if close else ""
            raise error(f"{where}: unknown key {shown(key)}{guess}; allowed keys: {', '.join(names)}")


def shown(value: object) -> str:
    """A hostile argument as a message shows it: short, and never the repr of a deeply nested list (it recurses)
    or of an integer of thousands of digits (Python refuses to print it)."""
    if isinstance(value, str):
        return repr(value) if len(value) <= 60 else repr(value[:57]) + "..."
    if isinstance(value, float) or (isinstance(value, int) and abs(value) < 10**18):
        return repr(value)
    if isinstance(value, int):
        return "an integer of more than 18 digits"
    return f"a {type(value).__name__}"
