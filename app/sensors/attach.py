"""Reading a file the user attaches (File › Attach file…): the engine's ``FileReader`` port.

Unlike a watched folder, the user picked this one file, so it is read where it is (a symbolic
link is followed to the file it names) — but only when it is a regular file of at most
``max_bytes`` that is text: a file with NUL bytes, or one where more than 30% of the
characters are not text (undecodable bytes, control characters), is refused as binary. Text is
UTF-8 (a BOM allowed; an undecodable byte becomes U+FFFD) or UTF-16 with a BOM. An HTML file
gives its visible text, hidden elements left out, as a watched HTML file does
(:func:`app.sensors.confined.as_text`). Every refusal is an ``AttachError`` whose message says
why in plain words. Blocking: the engine runs it in a worker thread.

A document — PDF, Word, OpenDocument text, Excel, CSV, Markdown, HTML, source code
(:func:`app.sensors.documents.document_format`) — is read by the document readers in their capped
child process instead (up to ``MAX_DOCUMENT_BYTES`` for the binary formats): its text is the parts'
texts and ``LocalFile.document`` carries the parts with their selectors; progress goes to
``on_progress``, ``cancelled()`` stops the reading. What the readers refuse (encrypted, no text
layer, too many pages, a zip bomb, past the time or memory cap) is an ``AttachError`` too.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from app.core.errors import AttachError
from app.core.ports import LocalFile
from app.core.text.names import safe_text
from app.sensors.confined import as_text
from app.sensors.documents import (
    MAX_DOCUMENT_BYTES,
    DocumentRefused,
    document_format,
    is_binary_format,
    read_document,
)

BINARY_SHARE = 0.3  # characters that are not text, above which a file counts as binary (random bytes: ~60%)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_TEXT_CONTROLS = frozenset("\t\n\r\f\v\x1b")


def size_text(n: int) -> str:
    """A size for people: ``812 bytes``, ``14 KB``, ``3.1 MB``."""
    if n < 1000:
        return f"{n} bytes"
    if n < 1_000_000:
        return f"{n / 1000:.0f} KB"
    return f"{n / 1_000_000:.1f} MB".replace(".0 MB", " MB")


def _decode(data: bytes) -> tuple[str | None, str]:
    """(text, encoding), or (None, "") for a binary file."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        text, encoding = data.decode("utf-16", errors="replace"), "utf-16"
    elif b"\x00" in data:  # text files have no NUL bytes; every common binary format does
        return None, ""
    else:
        text, encoding = data.decode("utf-8-sig", errors="replace"), "utf-8"
    odd = sum(1 for ch in text if ch == "\ufffd" or (ch < " " and ch not in _TEXT_CONTROLS))
    if text and odd > BINARY_SHARE * len(text):
        return None, ""
    return text, encoding


def _open(path: str, name: str) -> tuple[int, os.stat_result]:
    """An open descriptor of the regular file at ``path`` and its status (as opened)."""
    try:
        st = os.stat(path)
        if stat.S_ISDIR(st.st_mode):
            raise AttachError(f"{name} is a folder; choose a file")
        fd = os.open(path, os.O_RDONLY | _CLOEXEC | _NONBLOCK)  # a fifo never blocks the open
    except FileNotFoundError:
        raise AttachError(f"{name} does not exist (any more)") from None
    except PermissionError:
        raise AttachError(f"{name} may not be read (permission denied)") from None
    except OSError as exc:
        if exc.errno == errno.EISDIR:
            raise AttachError(f"{name} is a folder; choose a file") from None
        raise AttachError(f"{name} could not be read: {exc.strerror or exc}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise AttachError(f"{name} is not a regular file")
    return fd, st


def _read(fd: int, name: str, size: int, limit: int) -> bytes:
    """At most ``limit`` bytes of the open file (``AttachError`` when it is or grew larger)."""
    if size > limit:
        raise AttachError(f"{name} is {size_text(size)}; files up to {size_text(limit)} can be attached")
    chunks, got = [], 0
    try:
        while got <= limit:
            chunk = os.read(fd, min(1 << 16, limit + 1 - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
    except OSError as exc:
        raise AttachError(f"{name} could not be read: {exc.strerror or exc}") from None
    data = b"".join(chunks)
    if len(data) > limit:  # it grew after the stat
        raise AttachError(f"{name} is larger than {size_text(limit)}, the most that can be attached")
    return data


def _modified(st: os.stat_result) -> str:
    return datetime.fromtimestamp(st.st_mtime_ns / 1e9, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def read_attachment(path: str, max_bytes: int, *, on_progress: Callable[[dict[str, Any]], None] | None = None,
                    cancelled: Callable[[], bool] | None = None) -> LocalFile:
    """The text of the file at ``path`` (``~`` expanded, made absolute, links resolved), or an
    ``AttachError`` saying why not; a document's parts in ``document`` (module doc). Never
    reads more than its limit + 1 bytes."""
    full = os.path.realpath(os.path.expanduser(path))
    name = safe_text(os.path.basename(full) or full)
    fd, st = _open(full, name)
    try:
        head = os.pread(fd, 8, 0) if hasattr(os, "pread") else b""
        fmt = document_format(full, head)
        binary = fmt is not None and is_binary_format(fmt)
        data = _read(fd, name, st.st_size, MAX_DOCUMENT_BYTES if binary else max_bytes)
    finally:
        os.close(fd)
    if fmt is not None:
        if not binary and _decode(data)[0] is None:
            raise AttachError(f"{name} is a binary file; only text files can be attached")
        try:
            doc = read_document(data, name, fmt, on_progress=on_progress, cancelled=cancelled)
        except DocumentRefused as refused:
            raise AttachError(str(refused)) from None
        return LocalFile(path=full, size=len(data), text=doc.text, modified=_modified(st), encoding=fmt,
                         hidden_removed=int(doc.facts.get("hidden_removed") or 0), document=doc.payload())
    text, encoding = _decode(data)
    if text is None:
        raise AttachError(f"{name} is a binary file; only text files can be attached")
    text, hidden = as_text(full, text)
    return LocalFile(path=full, size=len(data), text=text, modified=_modified(st), encoding=encoding,
                     hidden_removed=hidden or 0)
