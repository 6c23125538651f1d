"""A PDF, Word, OpenDocument or Excel file inside a watched folder, read into parts.

The folder sensor's preparer (:func:`app.sensors.files.prepare_file_change`) calls
:func:`read_watched_document` for those formats: the file is opened by the confined opener (a link
out of the folder is refused, never read), read up to ``MAX_DOCUMENT_BYTES`` and handed to the
readers' capped child. The result has the fields of a text preview the preparer reads, and the
document payload; a refusal (encrypted, no text layer, a zip bomb, past a cap) is ``skipped``
"refused" with the line in ``message``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from app.sensors.confined import REASONS, Missing, Refused, open_in_folder, read_fd
from app.sensors.documents import MAX_DOCUMENT_BYTES, DocumentRefused, read_document
from app.sensors.scan import relative


@dataclass(frozen=True)
class WatchedDocument:
    """What the preparer needs of a read (or refused) document."""

    size: int | None
    mtime: str | None
    text: str | None
    skipped: str | None = None
    message: str = ""
    links: int = 1
    encoding: str = ""
    hidden_removed: int = 0
    document: dict[str, Any] | None = None


def _iso(ts_ns: int) -> str:
    return datetime.fromtimestamp(ts_ns / 1e9, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def read_watched_document(path: str, fmt: str, *, root: str | None = None) -> WatchedDocument:
    """The document at ``path`` inside ``root`` (default: its own folder) read into parts."""
    p = os.path.abspath(path)
    base = os.path.abspath(root) if root is not None else os.path.dirname(p)
    try:
        opened = open_in_folder(base, relative(p, base))
    except Missing:
        return WatchedDocument(None, None, None, "missing")
    except Refused as exc:
        return WatchedDocument(None, None, None, exc.reason, message=REASONS[exc.reason])
    except OSError:
        return WatchedDocument(None, None, None, "unreadable")
    try:
        size, mtime = opened.st.st_size, _iso(opened.st.st_mtime_ns)
        if size > MAX_DOCUMENT_BYTES:
            return WatchedDocument(size, mtime, None, "too_large", links=opened.links)
        data = read_fd(opened.fd, MAX_DOCUMENT_BYTES + 1)
    except OSError:
        return WatchedDocument(None, None, None, "unreadable")
    finally:
        os.close(opened.fd)
    try:
        doc = read_document(data, os.path.basename(p), fmt)
    except DocumentRefused as refused:
        return WatchedDocument(len(data), mtime, None, "refused", message=str(refused), links=opened.links)
    return WatchedDocument(len(data), mtime, doc.text, links=opened.links, encoding=fmt, document=doc.payload())
