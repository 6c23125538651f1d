"""The child process of the document readers: one file's bytes in, its parts out (JSON lines).

Started by :func:`app.sensors.documents.read_document` through the capped-child runner
(:mod:`app.sensors.child`): the request names the file and its format, the body is the file.
Progress goes out as it reads (``done``/``total`` pages, paragraphs or sheets); the outcome is
``{"kind": "ok", "parts": [{selector, heading, text}], "facts": {...}}`` or ``{"kind":
"refused", "message"}`` (one line naming the file).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from app.sensors.child import child_main
from app.sensors.documents.chunks import parts_of
from app.sensors.documents.errors import DocumentRefused

MAX_TEXT_CHARS = 20_000_000


def _text(data: bytes, name: str) -> str:
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16", errors="replace")
    if b"\x00" in data:
        raise DocumentRefused(f"{name} is a binary file, not text")
    return data.decode("utf-8-sig", errors="replace")


def _reader(fmt: str) -> Callable[[Any, str, Callable[..., None]], tuple[list[Any], dict[str, Any]]]:
    from app.sensors.documents import markup, office, pdf, sheets

    binary = {"pdf": pdf.read_pdf, "docx": office.read_docx, "odt": office.read_odt, "xlsx": sheets.read_xlsx}
    textual = {"csv": sheets.read_csv, "markdown": markup.read_markdown, "html": markup.read_html,
               "code": markup.read_code}
    if fmt in binary:
        return binary[fmt]
    read = textual[fmt]
    return lambda data, name, progress: read(_text(data, name), name, progress)


def _throttled(progress: Callable[..., None], every_s: float = 0.2) -> Callable[..., None]:
    """``progress`` at most every ``every_s`` seconds (and always for the last step)."""
    last = [0.0]

    def send(**values: Any) -> None:
        now = time.monotonic()
        if now - last[0] >= every_s or values.get("done") == values.get("total"):
            last[0] = now
            progress(**values)

    return send


def handle(request: dict[str, Any], body: bytes, progress: Callable[..., None]) -> dict[str, Any]:
    """Read the document (in the child)."""
    name, fmt = str(request["name"]), str(request["format"])
    try:
        units, facts = _reader(fmt)(body, name, _throttled(progress))
    except DocumentRefused as refused:
        return {"kind": "refused", "message": str(refused)}
    parts = parts_of(units)
    if sum(len(p["text"]) for p in parts) > MAX_TEXT_CHARS:
        return {"kind": "refused", "message": f"{name} holds more than {MAX_TEXT_CHARS // 1_000_000} million "
                                              "characters of text; too large to read"}
    if not parts:
        return {"kind": "refused", "message": f"{name} holds no text"}
    return {"kind": "ok", "parts": parts, "facts": facts}


def _failed(request: dict[str, Any], exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, RecursionError):
        return {"kind": "refused", "message": f"{request['name']} is nested too deeply to be read"}
    return {"kind": "refused", "message": f"{request['name']} could not be read ({type(exc).__name__}: "
                                          f"{' '.join(str(exc).split())[:160]})"}


def main() -> int:
    return child_main(handle, _failed)
