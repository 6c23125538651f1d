"""Documents as evidence: PDF, Word, OpenDocument, Excel/CSV, Markdown, HTML and source code read
into structure-aware parts with selectors.

:func:`read_document` reads one file's bytes in a capped child process (:mod:`app.sensors.child`:
``READ_TIMEOUT_S``, ``READ_MEMORY_BYTES``; the readers in ``pdf``, ``office``, ``sheets`` and
``markup``, cut into parts by ``chunks``) and returns the document's text, its parts (each a span
of that text with its selector and heading path) and facts about it, or raises
:class:`DocumentRefused` with one line naming the file: encrypted, no text layer, too many pages,
a zip bomb, too slow, too much memory, cancelled. Progress (``done``/``total`` pages, paragraphs,
sheets) goes to ``on_progress``; ``cancelled()`` stops the child at once.

Libraries: pypdf (BSD-3-Clause) for PDF text per page and outline headings; python-docx (MIT) for
Word; openpyxl (MIT) for Excel; OpenDocument text, CSV, Markdown, HTML and code with the standard
library.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from app.sensors.child import run_capped
from app.sensors.documents.errors import DocumentRefused
from app.sensors.documents.markup import CODE_SUFFIXES

READ_TIMEOUT_S = 180.0
READ_MEMORY_BYTES = 2048 << 20
MAX_DOCUMENT_BYTES = 64 << 20
PART_SEPARATOR = "\n\n"

_FORMATS = {".pdf": "pdf", ".docx": "docx", ".odt": "odt", ".xlsx": "xlsx", ".xlsm": "xlsx", ".csv": "csv",
            ".tsv": "csv", ".md": "markdown", ".markdown": "markdown", ".html": "html", ".htm": "html",
            ".xhtml": "html", **{suffix: "code" for suffix in CODE_SUFFIXES}}
_LABELS = {"pdf": "PDF", "docx": "Word document", "odt": "OpenDocument text", "xlsx": "Excel workbook",
           "csv": "CSV table", "markdown": "Markdown", "html": "HTML page", "code": "source file"}

__all__ = ["DocumentRefused", "DocumentText", "document_format", "read_document"]


def document_format(name: str, head: bytes = b"") -> str | None:
    """The reader for a file: by its name's suffix, else by its first bytes (``%PDF``); None
    for a file that is read as plain text (or not at all)."""
    suffix = os.path.splitext(name)[1].lower()
    if suffix in _FORMATS:
        return _FORMATS[suffix]
    if head.startswith(b"%PDF-"):
        return "pdf"
    return None


def is_binary_format(fmt: str) -> bool:
    return fmt in ("pdf", "docx", "odt", "xlsx")


@dataclass(frozen=True)
class DocumentText:
    """A read document: its text (the parts' texts joined by blank lines), its parts as spans of
    that text (``selector``, ``heading``, ``start``, ``end``, ``sha``: a hash of the part's text),
    its format and facts (``pages``, ``outline``, ``sheets``, ``sections``), the child's peak
    address space and peak resident memory in MB."""

    text: str
    parts: list[dict[str, Any]]
    format: str
    facts: dict[str, Any] = field(default_factory=dict)
    peak_mb: int = 0
    peak_rss_mb: int = 0

    def payload(self) -> dict[str, Any]:
        """What an env event's payload keeps of it (``payload["document"]``)."""
        return {"format": self.format, "label": _LABELS.get(self.format, self.format), "parts": self.parts,
                **{k: v for k, v in self.facts.items() if v not in (None, "", [], {})}}


def _spans(parts: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    texts, spans, at = [], [], 0
    for part in parts:
        text = str(part["text"])
        spans.append({"selector": part["selector"], "heading": part.get("heading", []), "start": at,
                      "end": at + len(text), "sha": hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:32]})
        texts.append(text)
        at += len(text) + len(PART_SEPARATOR)
    return PART_SEPARATOR.join(texts), spans


def read_document(data: bytes, name: str, fmt: str, *, on_progress: Callable[[dict[str, Any]], None] | None = None,
                  cancelled: Callable[[], bool] | None = None, timeout_s: float = READ_TIMEOUT_S,
                  memory_bytes: int = READ_MEMORY_BYTES) -> DocumentText:
    """Read ``data`` (the file called ``name``) as ``fmt`` in the capped child process; the
    document, or ``DocumentRefused`` with one line naming the file."""
    if len(data) > MAX_DOCUMENT_BYTES:
        raise DocumentRefused(f"{name} is {len(data) / 2**20:,.0f} MB; documents up to "
                              f"{MAX_DOCUMENT_BYTES >> 20} MB can be read")
    outcome = run_capped("app.sensors.documents.worker", {"name": name, "format": fmt}, data, what=f"reading {name}",
                         timeout_s=timeout_s, memory_bytes=memory_bytes, on_progress=on_progress, cancelled=cancelled)
    if outcome.get("kind") != "ok":
        raise DocumentRefused(str(outcome.get("message") or f"{name} could not be read"))
    text, spans = _spans(list(outcome.get("parts") or []))
    return DocumentText(text=text, parts=spans, format=fmt, facts=dict(outcome.get("facts") or {}),
                        peak_mb=int(outcome.get("peak_mb") or 0), peak_rss_mb=int(outcome.get("peak_rss_mb") or 0))
