"""Reading a file the user attaches (File › Attach file…): the engine's ``FileReader`` port.

Unlike a watched folder, the user picked this one file, so it is read where it is (a symbolic
link is followed to the file it names) — but only when it is a regular file of at most
``max_bytes`` that is text: a file with NUL bytes, or one where more than 30% of the
characters are not text (undecodable bytes, control characters), is refused as binary. Text is
UTF-8 (a BOM allowed; an undecodable byte becomes U+FFFD) or UTF-16 with a BOM. An HTML file
gives its visible text, hidden elements left out, as a watched HTML file does
(:func:`app.sensors.confined.as_text`). Every refusal is an ``AttachError`` whose message says
why in plain words. Blocking: the engine runs it in a worker thread.
"""

from __future__ import annotations

import errno
import os
import stat
from datetime import datetime, timezone

from app.core.errors import AttachError
from app.core.ports import LocalFile
from app.core.text.names import safe_text
from app.sensors.confined import as_text

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


def read_attachment(path: str, max_bytes: int) -> LocalFile:
    """The text of the file at ``path`` (``~`` expanded, made absolute, links resolved), or an
    ``AttachError`` saying why not. Never reads more than ``max_bytes + 1`` bytes."""
    full = os.path.realpath(os.path.expanduser(path))
    name = safe_text(os.path.basename(full) or full)
    fd, st = _open(full, name)
    try:
        if st.st_size > max_bytes:
            raise AttachError(f"{name} is {size_text(st.st_size)}; files up to {size_text(max_bytes)} can be attached")
        chunks, got = [], 0
        while got <= max_bytes:
            chunk = os.read(fd, min(1 << 16, max_bytes + 1 - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
    except OSError as exc:
        raise AttachError(f"{name} could not be read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > max_bytes:  # it grew after the stat
        raise AttachError(f"{name} is larger than {size_text(max_bytes)}, the most that can be attached")
    text, encoding = _decode(data)
    if text is None:
        raise AttachError(f"{name} is a binary file; only text files can be attached")
    text, hidden = as_text(full, text)
    modified = datetime.fromtimestamp(st.st_mtime_ns / 1e9, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return LocalFile(path=full, size=len(data), text=text, modified=modified, encoding=encoding,
                     hidden_removed=hidden or 0)
