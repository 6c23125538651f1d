"""PDF: the text layer page by page, with the outline's headings (pypdf, BSD-3-Clause).

Runs in the capped child process. Pages are numbered from 1 as a viewer shows them (the physical
page, not a printed page label). A page's heading path is the outline (bookmarks) entries that
start on it or before it, one per level. An encrypted file that does not open with the empty
password is refused as encrypted; a file whose pages hold no text at all has no text layer (a
scan), which is said, not read as nothing.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Callable
from typing import Any

from app.sensors.documents.chunks import Unit, merge_thin_pages
from app.sensors.documents.errors import DocumentRefused

MAX_PAGES = 1_000
MAX_OUTLINE = 5_000


def _outline(reader: Any) -> list[tuple[int, int, str]]:
    """(0-based page, level, title) of the outline's entries, in order (a broken one skipped)."""
    out: list[tuple[int, int, str]] = []
    stack: list[tuple[list[Any], int]] = [(list(reader.outline or []), 0)]
    while stack and len(out) < MAX_OUTLINE:  # no recursion: an outline can nest deeply
        items, level = stack.pop()
        pending: list[tuple[list[Any], int]] = []
        for item in items:
            if isinstance(item, list):
                pending.append((item, level + 1))
                continue
            try:
                number = reader.get_destination_page_number(item)
                title = " ".join(str(item.title or "").split())
            except Exception:  # noqa: BLE001 - one bad bookmark never stops the document
                continue
            if number is not None and number >= 0 and title:
                out.append((number, level, title[:200]))
        stack.extend(reversed(pending))
    return sorted(out, key=lambda e: (e[0], e[1]))


def _headings(outline: list[tuple[int, int, str]], pages: int) -> list[list[str]]:
    """Each page's heading path (outermost first)."""
    paths: list[list[str]] = []
    current: list[str] = []
    at = 0
    for page in range(pages):
        while at < len(outline) and outline[at][0] <= page:
            _, level, title = outline[at]
            current = [*current[:level], title]
            at += 1
        paths.append(list(current))
    return paths


def _page_lines(reader: Any, n: int, name: str, broken: list[str]) -> list[str]:
    """The text lines of page ``n`` (0-based); a page pypdf cannot read is noted in ``broken``
    and gives none, except one whose objects pass pypdf's size limits, which refuses the file (and
    one that runs out of memory, which the capped child reports)."""
    from pypdf.errors import LimitReachedError

    try:
        text = reader.pages[n].extract_text() or ""
    except RecursionError:
        raise DocumentRefused(f"{name}: page {n + 1} is nested too deeply to be read") from None
    except LimitReachedError:
        raise DocumentRefused(f"{name}: page {n + 1} holds an object too large to read") from None
    except MemoryError:  # past the reading child's memory cap: the child says so in one line
        raise
    except Exception as exc:  # noqa: BLE001 - a broken page is skipped, the rest is read
        broken.append(f"page {n + 1}: {type(exc).__name__}")
        text = ""
    lines = [" ".join(line.split()) for line in text.splitlines()]
    return [line for line in lines if line]


def _open(data: bytes, name: str) -> Any:
    import pypdf

    logging.getLogger("pypdf").setLevel(logging.ERROR)
    try:
        reader = pypdf.PdfReader(io.BytesIO(data), strict=False)
    except Exception as exc:  # noqa: BLE001 - any parser failure is the file's
        raise DocumentRefused(f"{name} is not a readable PDF ({type(exc).__name__}: {str(exc)[:120]})") from None
    if reader.is_encrypted:
        try:
            opened = reader.decrypt("")
        except Exception:  # noqa: BLE001 - an unsupported cipher is still "encrypted"
            opened = 0
        if not opened:
            raise DocumentRefused(f"{name} is encrypted (password-protected); it cannot be read without its password")
    return reader


def read_pdf(data: bytes, name: str, progress: Callable[..., None]) -> tuple[list[Unit], dict[str, Any]]:
    """The pages of a PDF as units and facts about it (``pages``, ``outline``)."""
    reader = _open(data, name)
    try:
        count = len(reader.pages)
    except Exception as exc:  # noqa: BLE001
        raise DocumentRefused(f"{name} is not a readable PDF ({type(exc).__name__})") from None
    if count > MAX_PAGES:
        raise DocumentRefused(f"{name} has {count:,} pages; at most {MAX_PAGES:,} pages can be read (split the file)")
    outline = _outline(reader)
    headings = _headings(outline, count)
    units: list[Unit] = []
    broken: list[str] = []
    for n in range(count):
        units.append(Unit(f"page:{n + 1}", headings[n], _page_lines(reader, n, name, broken), page=n + 1))
        progress(done=n + 1, total=count, unit="pages")
    if not any(u.lines for u in units):
        if broken:
            raise DocumentRefused(f"{name} could not be read: {broken[0]}")
        raise DocumentRefused(f"{name} has no text layer (a scan?); OCR is not supported")
    facts = {"pages": count, "outline": [{"page": p + 1, "level": lv, "title": t} for p, lv, t in outline[:200]]}
    return merge_thin_pages(units), facts
