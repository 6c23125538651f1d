"""Markdown, HTML and source code: sections under their headings, code by its definitions.

* Markdown: ATX headings (``#`` … ``######``) outside fenced code start sections; a part is cited
  by the file's lines (``lines:40-80``) and keeps its heading path.
* HTML: the visible text (hidden elements left out, as a watched HTML file's), its ``h1``–``h6``
  as headings; a part is cited by its section (``section:"Budget"``).
* Source code, by file type: a top-level definition (``def``/``class`` in Python; ``function``,
  ``class``, ``fn``, ``func``, ``struct``, ``impl``, ``interface``, ... in the C family, Rust, Go,
  JavaScript and others) starts a unit headed by its first line; a part is cited by its lines.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from app.core.session.selectors import section
from app.sensors.documents.chunks import Unit
from app.sensors.text import html_text

_ATX = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")

CODE_SUFFIXES = {
    ".py": "python", ".pyi": "python", ".js": "c", ".mjs": "c", ".cjs": "c", ".ts": "c", ".tsx": "c", ".jsx": "c",
    ".java": "c", ".kt": "c", ".scala": "c", ".c": "c", ".h": "c", ".cc": "c", ".cpp": "c", ".hpp": "c",
    ".cs": "c", ".go": "c", ".rs": "c", ".swift": "c", ".php": "c", ".rb": "ruby", ".sh": "shell", ".bash": "shell",
    ".sql": "sql", ".r": "c", ".lua": "ruby", ".pl": "c", ".m": "c", ".dart": "c", ".zig": "c",
}
_DEFINITION = {
    "python": re.compile(r"^(?:async\s+def|def|class)\s+\w|^@\w"),
    "c": re.compile(r"^(?:export\s+)?(?:default\s+)?(?:public|private|protected|static|async|abstract|final|pub|"
                    r"function|class|interface|struct|enum|impl|trait|fn|func|type|module|namespace|const|let|var|"
                    r"template|def|fun|object|package|[A-Za-z_][\w<>:,*& ]{0,80}\()"),
    "ruby": re.compile(r"^(?:def|class|module|function|local\s+function)\s"),
    "shell": re.compile(r"^(?:function\s+)?[A-Za-z_][\w-]*\s*\(\)\s*\{?"),
    "sql": re.compile(r"^(?:create|alter|insert|select|with|update|delete|drop)\b", re.IGNORECASE),
}


def read_markdown(text: str, _name: str, progress: Callable[..., None]) -> tuple[list[Unit], dict[str, Any]]:
    lines = text.split("\n")
    units = [Unit("", [], [], first_line=1)]
    path: list[str] = []
    fenced = False
    for n, line in enumerate(lines, 1):
        if _FENCE.match(line):
            fenced = not fenced
        m = None if fenced else _ATX.match(line)
        if m is not None and m.group(2):
            level, title = len(m.group(1)), m.group(2)[:200]
            path = [*path[:level - 1], title]
            units.append(Unit("", list(path), [], first_line=n))
        units[-1].lines.append(line)
    progress(done=1, total=1, unit="files")
    return units, {"sections": [u.heading[-1] for u in units if u.heading][:200]}


def read_html(text: str, name: str, progress: Callable[..., None]) -> tuple[list[Unit], dict[str, Any]]:
    visible, hidden = html_text(text, max_chars=max(20_000, len(text)), headings=True)
    units = [Unit(section(name), [], [])]
    path: list[str] = []
    for line in visible.split("\n"):
        m = _ATX.match(line)
        if m is not None and m.group(2):
            level, title = len(m.group(1)), m.group(2)[:200]
            path = [*path[:level - 1], title]
            units.append(Unit(section(title), list(path), [title]))
        elif line.strip():
            units[-1].lines.append(line)
    progress(done=1, total=1, unit="files")
    return units, {"sections": [u.heading[-1] for u in units if u.heading][:200], "hidden_removed": hidden}


def read_code(text: str, name: str, progress: Callable[..., None]) -> tuple[list[Unit], dict[str, Any]]:
    suffix = "." + name.rsplit(".", 1)[-1].lower() if "." in name else ""
    starts = _DEFINITION[CODE_SUFFIXES.get(suffix, "c")]
    units = [Unit("", [], [], first_line=1)]
    for n, line in enumerate(text.split("\n"), 1):
        top = line[:1] not in ("", " ", "\t", "}", ")", "]", "#", "/", "*")
        if top and starts.match(line) and units[-1].lines and not (
                CODE_SUFFIXES.get(suffix) == "python" and units[-1].lines[-1].startswith("@")):
            units.append(Unit("", [line.strip()[:120]], [], first_line=n))
        units[-1].lines.append(line)
    progress(done=1, total=1, unit="files")
    return units, {"definitions": [u.heading[0] for u in units if u.heading][:200]}
