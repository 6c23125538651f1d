"""HTML to plain text with the standard library (no bleach, no bs4).

Feed summaries and content arrive as HTML. The session only ever sees plain text: scripts,
styles and other non-content elements are dropped with their contents, entities are unescaped,
block elements become line breaks, list items get a dash, and whitespace is collapsed.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

# Elements whose *content* is never text for a reader.
_DROP = frozenset({"script", "style", "noscript", "template", "head", "svg", "math", "iframe", "object"})
# Elements that start a new line (their end too).
_BLOCK = frozenset({
    "p", "div", "br", "li", "ul", "ol", "dl", "dt", "dd", "tr", "table", "thead", "tbody", "section",
    "article", "header", "footer", "aside", "nav", "blockquote", "pre", "hr", "figure", "figcaption",
    "h1", "h2", "h3", "h4", "h5", "h6", "address", "main", "form", "fieldset",
})
_VOID = frozenset({"br", "hr", "img", "input", "meta", "link", "area", "base", "col", "embed", "source", "wbr"})


class _TextExtractor(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skip = 0  # depth inside dropped elements

    def handle_starttag(self, tag: str, _attrs: list[tuple[str, str | None]]) -> None:
        if tag in _DROP:
            if tag not in _VOID:
                self._skip += 1
            return
        if self._skip:
            return
        if tag in _BLOCK:
            self.parts.append("\n")
        if tag == "li":
            self.parts.append("- ")
        elif tag in ("td", "th"):
            self.parts.append(" ")

    def handle_startendtag(self, tag: str, _attrs: list[tuple[str, str | None]]) -> None:
        if not self._skip and tag in _BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in _DROP:
            self._skip = max(0, self._skip - 1)
            return
        if not self._skip and tag in _BLOCK and tag != "li":  # the next item starts its own line
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)


_SPACES = re.compile(r"[ \t\r\f\v\u00a0]+")
_BLANKS = re.compile(r"\n{3,}")


def html_to_text(html: str, *, max_chars: int = 20_000) -> str:
    """Plain text of an HTML fragment: dropped elements removed, entities unescaped, whitespace
    collapsed (paragraphs kept as blank-line separated), cut to ``max_chars``."""
    if "<" not in html and "&" not in html:
        text = html
    else:
        parser = _TextExtractor()
        parser.feed(html)
        parser.close()
        text = "".join(parser.parts)
    lines = [_SPACES.sub(" ", line).strip() for line in text.split("\n")]
    text = _BLANKS.sub("\n\n", "\n".join(lines)).strip()
    if len(text) > max_chars:
        text = text[: max_chars - 1].rstrip() + "…"
    return text
