"""Document files as strict JSON: read, parse, check and write, every failure one line.

An exported session (``app.store.exchange``) travels as a JSON file that anything may have written.
Python's ``json`` module is lenient where the store is not, and fails with a traceback where a user
needs a line: it accepts ``NaN``, ``Infinity`` and ``1e999`` (not JSON; the store then refuses or
keeps them and writes them back out as non-standard JSON), accepts escaped lone surrogates
(``"\\ud800"``: not Unicode; SQLite refuses them), raises ``ValueError`` on an integer of more than
4,300 digits and ``RecursionError`` on deep nesting. Here:

* ``read_document_file`` reads a regular file (a folder, a FIFO, a device, a link loop, an
  unreadable or oversized file are named as such; a FIFO is never waited on);
* ``parse_document`` parses UTF-8 JSON strictly;
* ``check_values`` walks a parsed value (without recursion) and refuses, naming the JSON path
  (``session.messages[0].content``): nesting deeper than ``MAX_DEPTH``, non-finite numbers,
  integers outside 64 bits, lone surrogates in strings or keys;
* ``document_text`` writes strict JSON (``allow_nan=False``).

Every failure is an ``ExchangeError`` (a ``CoreError``: its ``str()`` is the user's line).
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import stat
from collections.abc import Iterator
from typing import Any

from app.core.errors import CoreError

MAX_DEPTH = 64  # the schema's own records nest about 8 deep; pydantic gives up near 255
MAX_DOCUMENT_BYTES = 256 << 20
INT_MIN, INT_MAX = -(1 << 63), (1 << 63) - 1  # SQLite's INTEGER
_SIMPLE_KEY = re.compile(r"^[A-Za-z0-9_\-]+$")
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{},:]')


class ExchangeError(CoreError):
    """A document could not be exported or imported; ``str(err)`` names the path and the reason."""


def format_path(parts: Any) -> str:
    """Render a path like ``session.messages[2].role`` (``document`` for the root); a path of
    more than 12 parts keeps its first 8 and last 2 around "…"."""
    pieces: list[str] = []
    for part in parts:
        if isinstance(part, int):
            pieces.append(f"[{part}]")
        elif _SIMPLE_KEY.match(str(part)):
            pieces.append(f".{part}")
        else:
            pieces.append(f"[{json.dumps(str(part), ensure_ascii=True)[:80]}]")
    if len(pieces) > 12:
        pieces = [*pieces[:8], "…", *pieces[-2:]]
    return "".join(pieces).removeprefix(".") or "document"


# ---------------------------------------------------------------------------- reading


def read_document_file(path: str | os.PathLike[str], shown: str | None = None) -> Any:
    """The JSON value in the file ``path``, parsed strictly and checked (``check_values``).

    ``shown`` names the file in messages (default: the path as given). Raises ``ExchangeError``.
    """
    shown = shown or str(path)
    try:
        # Non-blocking: opening a FIFO with no writer must not wait (it is refused below).
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except FileNotFoundError:
        raise ExchangeError(f"{shown}: no such file") from None
    except OSError as err:
        raise ExchangeError(f"{shown} {_open_problem(err)}") from None
    try:
        data = _read_regular(fd, shown)
    finally:
        os.close(fd)
    return parse_document(data, shown)


def _read_regular(fd: int, shown: str) -> bytes:
    """The bytes of the open file ``fd`` when it is a regular file of at most
    ``MAX_DOCUMENT_BYTES``; ``ExchangeError`` otherwise."""
    info = os.fstat(fd)
    if stat.S_ISDIR(info.st_mode):
        raise ExchangeError(f"{shown} is a folder, not a JSON document; pick an exported .json file")
    if not stat.S_ISREG(info.st_mode):
        raise ExchangeError(f"{shown} is not a regular file (a pipe, device or socket); pick an exported .json file")
    if info.st_size > MAX_DOCUMENT_BYTES:
        raise ExchangeError(f"{shown} is {info.st_size >> 20} MB; documents of up to "
                            f"{MAX_DOCUMENT_BYTES >> 20} MB can be imported")
    chunks: list[bytes] = []
    total = 0
    try:
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
            total += len(chunk)
            if total > MAX_DOCUMENT_BYTES:
                raise ExchangeError(f"{shown} grew past {MAX_DOCUMENT_BYTES >> 20} MB while it was read")
    except OSError as err:
        raise ExchangeError(f"{shown} {_open_problem(err)}") from None
    return b"".join(chunks)


def _open_problem(err: OSError) -> str:
    if err.errno == errno.ELOOP:
        return "is a symbolic link loop (too many levels of symbolic links)"
    if err.errno == errno.EISDIR:
        return "is a folder, not a JSON document; pick an exported .json file"
    if isinstance(err, PermissionError):
        return "cannot be read (permission denied); check its permissions"
    return f"cannot be read ({err.strerror or err})"


# ---------------------------------------------------------------------------- parsing


class _Refused:
    """A parsed token JSON does not allow (NaN, Infinity) or the store cannot hold (a huge
    integer); left in place so that ``check_values`` can name its path."""

    def __init__(self, problem: str) -> None:
        self.problem = problem


def _constant(name: str) -> _Refused:
    return _Refused(f"{name} is not a JSON number; numbers must be finite")


def _integer(text: str) -> int | _Refused:
    digits = len(text.lstrip("-"))
    if digits > 19:  # more than any 64-bit integer; int() itself refuses over 4,300 digits
        return _Refused(f"an integer of {digits} digits does not fit in 64 bits")
    return int(text)


def parse_document(data: bytes | str, shown: str = "the document") -> Any:
    """Parse UTF-8 JSON text strictly and ``check_values`` the result; ``ExchangeError`` naming
    ``shown`` and the line and column (bad syntax, bad UTF-8) or the JSON path (anything else)."""
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as err:
            line = data.count(b"\n", 0, err.start) + 1
            raise ExchangeError(f"{shown} is not UTF-8 text (line {line}, byte {err.start}: {err.reason}); "
                                "a JSON document is UTF-8") from None
    else:
        text = data
    try:
        value = json.loads(text, parse_constant=_constant, parse_int=_integer)
    except RecursionError:
        where = format_path(_deep_path(text))
        raise ExchangeError(f"{shown}: {where}: nested deeper than {MAX_DEPTH} levels") from None
    except json.JSONDecodeError as err:
        raise ExchangeError(f"{shown} is not a JSON document (line {err.lineno} column {err.colno}: "
                            f"{err.msg})") from None
    try:
        check_values(value)
    except ExchangeError as err:
        raise ExchangeError(f"{shown}: {err}") from None
    return value


def _deep_path(text: str) -> list[Any]:
    """The path of the first container nested ``MAX_DEPTH`` levels deep, by a scan of the
    tokens (for text too deep for the parser itself; the same path ``check_values`` names)."""
    path: list[Any] = []
    frames: list[list[Any]] = []  # per open container: [kind, its current key or index, awaiting a key]
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token in "[{":
            if frames:
                path.append(frames[-1][1])
            if len(frames) >= MAX_DEPTH:
                return path
            frames.append([token, 0 if token == "[" else None, token == "{"])
        elif token in "]}":
            frames.pop()
            if frames:
                path.pop()
        elif token == "," and frames:
            if frames[-1][0] == "[":
                frames[-1][1] += 1
            else:
                frames[-1][2] = True
        elif token != ":" and frames and frames[-1][2]:
            frames[-1][1], frames[-1][2] = json.loads(token), False
    return path


# ---------------------------------------------------------------------------- checking


def _walk(value: Any) -> Iterator[tuple[Any, tuple[Any, ...] | None, int]]:
    """Every value under ``value`` with a link to its path and its depth, without recursion."""
    stack: list[tuple[Any, tuple[Any, ...] | None, int]] = [(value, None, 0)]
    while stack:
        item, link, depth = stack.pop()
        yield item, link, depth
        if isinstance(item, dict):
            stack.extend((child, (link, key), depth + 1) for key, child in reversed(item.items()))
        elif isinstance(item, list):
            stack.extend((child, (link, i), depth + 1) for i, child in reversed(list(enumerate(item))))


def _unlink(link: tuple[Any, ...] | None) -> list[Any]:
    parts: list[Any] = []
    while link is not None:
        link, part = link
        parts.append(part)
    return parts[::-1]


def _bad_text(text: str) -> str | None:
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        return f"a lone surrogate \\u{ord(text[err.start]):04x} at character {err.start} is not valid Unicode text"
    return None


def _problem(item: Any, depth: int) -> str | None:
    if isinstance(item, _Refused):
        return item.problem
    if isinstance(item, (dict, list)) and depth >= MAX_DEPTH:
        return f"nested deeper than {MAX_DEPTH} levels"
    if isinstance(item, str):
        return _bad_text(item)
    if isinstance(item, float) and not math.isfinite(item):
        what = "NaN is not a JSON number" if math.isnan(item) else "the number is infinite (out of range)"
        return f"{what}; numbers must be finite"
    if isinstance(item, int) and not isinstance(item, bool) and not INT_MIN <= item <= INT_MAX:
        return "the integer does not fit in 64 bits"
    if isinstance(item, dict):
        for key in item:
            bad = _bad_text(key) if isinstance(key, str) else None
            if bad is not None:
                return f"a key: {bad}"
    return None


def check_values(value: Any) -> None:
    """``ExchangeError`` naming the JSON path of the first value a document may not hold (see
    the module doc); returns quietly when there is none."""
    for item, link, depth in _walk(value):
        problem = _problem(item, depth)
        if problem is not None:
            raise ExchangeError(f"{format_path(_unlink(link))}: {problem}")


# ---------------------------------------------------------------------------- writing


def document_text(doc: Any) -> str:
    """``doc`` as strict JSON text (two-space indent, UTF-8 characters kept, a final newline);
    ``ExchangeError`` naming the path of a value JSON cannot hold."""
    check_values(doc)
    return json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
