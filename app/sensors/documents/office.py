"""Word (.docx, python-docx, MIT) and OpenDocument text (.odt, the standard library's XML parser):
sections under their headings, tables as rows of cells.

Both are zip files. Before a parser inflates anything, :func:`check_zip` reads the archive's
directory and refuses one that would unpack to more than ``MAX_UNPACKED`` bytes or whose member
compresses more than ``MAX_RATIO`` to one (a zip bomb): a parser that inflates a lying member
anyway runs into the child process's memory cap.

A heading is a paragraph styled "Heading N" or "Title" (Word) or a ``text:h`` with its outline
level (OpenDocument); a Word file without heading styles has its short, all-bold paragraphs that
end without a full stop taken as headings ("Chapter 1: The Hidden Forest").
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Callable, Iterator
from typing import Any

from app.core.session.selectors import section
from app.sensors.documents.chunks import Unit
from app.sensors.documents.errors import DocumentRefused

MAX_UNPACKED = 256 << 20
MAX_RATIO = 200
_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_TEXT = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"
_TABLE = "{urn:oasis:names:tc:opendocument:xmlns:table:1.0}"
_HEADING_STYLE = re.compile(r"^(?:heading|überschrift|titre|título)\s*(\d)", re.IGNORECASE)


def check_zip(data: bytes, name: str) -> zipfile.ZipFile:
    """The archive, once its directory says it unpacks to a sane size (``DocumentRefused`` else)."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        members = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise DocumentRefused(f"{name} is not a readable Office file (a damaged zip: {exc})") from None
    total = sum(m.file_size for m in members)
    worst = max((m.file_size / max(1, m.compress_size) for m in members if m.file_size > 1 << 20), default=0)
    if total > MAX_UNPACKED or worst > MAX_RATIO:
        raise DocumentRefused(f"{name} looks like a zip bomb ({total / 2**20:,.0f} MB when unpacked, "
                              f"{worst:,.0f}:1 compression); not read")
    return archive


class _Sections:
    """Paragraphs gathered into sections by heading level."""

    def __init__(self, name: str) -> None:
        self.units: list[Unit] = [Unit(section(name), [], [])]
        self.path: list[str] = []

    def heading(self, level: int, title: str) -> None:
        title = " ".join(title.split())[:200]
        self.path = [*self.path[:max(0, level - 1)], title]
        self.units.append(Unit(section(title), list(self.path), [title]))

    def line(self, text: str) -> None:
        text = " ".join(text.split())
        if text:
            self.units[-1].lines.append(text)


def _docx_level(paragraph: Any, styled: bool) -> int:
    """The heading level of a Word paragraph (0: body text)."""
    style = str(getattr(paragraph.style, "name", "") or "")
    if style.lower() == "title":
        return 1
    m = _HEADING_STYLE.match(style)
    if m:
        return max(1, int(m.group(1)))
    if styled:
        return 0
    text = paragraph.text.strip()
    runs = [r for r in paragraph.runs if r.text.strip()]
    if runs and all(r.bold for r in runs) and len(text.split()) <= 12 and not text.endswith(tuple('.!?,;"”')):
        return 1
    return 0


def _docx_blocks(document: Any) -> Iterator[tuple[str, Any]]:
    """("p", paragraph) and ("t", table) in body order."""
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    for child in document.element.body.iterchildren():
        if child.tag == f"{_W}p":
            yield "p", Paragraph(child, document)
        elif child.tag == f"{_W}tbl":
            yield "t", Table(child, document)


def read_docx(data: bytes, name: str, progress: Callable[..., None]) -> tuple[list[Unit], dict[str, Any]]:
    check_zip(data, name)
    import docx

    try:
        document = docx.Document(io.BytesIO(data))
    except Exception as exc:  # noqa: BLE001 - any parser failure is the file's
        raise DocumentRefused(f"{name} is not a readable Word file ({type(exc).__name__}: {str(exc)[:120]})") from None
    blocks = list(_docx_blocks(document))
    styled = any(kind == "p" and _HEADING_STYLE.match(str(getattr(b.style, "name", "") or "")) for kind, b in blocks)
    sections = _Sections(name)
    for n, (kind, block) in enumerate(blocks, 1):
        if kind == "t":
            for row in block.rows:
                sections.line(" | ".join(cell.text.strip() for cell in row.cells))
        elif (level := _docx_level(block, styled)) > 0:
            sections.heading(level, block.text)
        else:
            sections.line(block.text)
        if n % 50 == 0 or n == len(blocks):
            progress(done=n, total=len(blocks), unit="paragraphs")
    return sections.units, {"sections": [u.heading[-1] for u in sections.units if u.heading][:200]}


def _odt_text(element: Any) -> str:
    """The text of an OpenDocument paragraph: spans, spaces (``text:s``), tabs, breaks."""
    parts: list[str] = []
    stack = [(element, False)]
    while stack:  # no recursion: paragraphs nest spans
        node, tail = stack.pop()
        if tail:
            parts.append(node.tail or "")
            continue
        tag = node.tag
        if tag == f"{_TEXT}s":
            parts.append(" " * int(node.get(f"{_TEXT}c", "1") or 1))
        elif tag in (f"{_TEXT}tab", f"{_TEXT}line-break"):
            parts.append(" ")
        else:
            parts.append(node.text or "")
        if node is not element:
            stack.append((node, True))
        stack.extend((child, False) for child in reversed(list(node)))
    return "".join(parts)


def read_odt(data: bytes, name: str, progress: Callable[..., None]) -> tuple[list[Unit], dict[str, Any]]:
    import xml.etree.ElementTree as ET

    archive = check_zip(data, name)
    try:
        root = ET.fromstring(archive.read("content.xml"))
    except (KeyError, ET.ParseError, zipfile.BadZipFile) as exc:
        raise DocumentRefused(f"{name} is not a readable OpenDocument text ({exc})") from None
    sections = _Sections(name)
    in_tables = {id(p) for row in root.iter(f"{_TABLE}table-row") for p in row.iter(f"{_TEXT}p")}
    for element in root.iter():
        if element.tag == f"{_TEXT}h":
            sections.heading(int(element.get(f"{_TEXT}outline-level", "1") or 1), _odt_text(element))
        elif element.tag == f"{_TEXT}p" and id(element) not in in_tables:
            sections.line(_odt_text(element))
        elif element.tag == f"{_TABLE}table-row":
            cells = [" ".join(_odt_text(p) for p in cell.iter(f"{_TEXT}p")) for cell in element]
            sections.line(" | ".join(c.strip() for c in cells))
    progress(done=1, total=1, unit="files")
    return sections.units, {"sections": [u.heading[-1] for u in sections.units if u.heading][:200]}
