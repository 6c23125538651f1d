"""HTML to plain text with the standard library (no bleach, no bs4), hidden content left out.

Feed summaries and content, and HTML files in watched folders, arrive as HTML. The session only
ever sees the text a reader would see: scripts, styles and other non-content elements are
dropped with their contents, entities are unescaped, block elements become line breaks, list
items get a dash, and whitespace is collapsed.

Hidden content is dropped too, never stored as ordinary text (a page can carry instructions
for a model that no reader sees): an element with the ``hidden`` attribute or
``aria-hidden="true"``; an inline style or a ``<style>`` rule (simple class, id and tag
selectors) with ``display:none``, ``visibility:hidden|collapse``, ``opacity:0``, a zero or tiny
``font-size``, a transparent ``color``, a zero size with ``overflow:hidden``, a clip to
nothing, ``transform:scale(0)`` or a position far off screen; the common utility classes
(``hidden``, ``d-none``, ``sr-only``, ``visually-hidden``, ...); a ``<dialog>`` that is not open;
and the fallback text of ``<template>``, ``<noscript>``, ``<iframe>``, ``<object>``, ``<audio>``,
``<video>`` and ``<canvas>``. :func:`html_text` says how many hidden elements it left out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

# Elements whose *content* is never text for a reader (not counted as hidden).
_NON_CONTENT = frozenset({"script", "style", "head", "svg", "math"})
# Elements whose content is fallback or inert text a reader does not see (counted as hidden).
_FALLBACK = frozenset({"noscript", "template", "iframe", "object", "audio", "video", "canvas", "frameset",
                       "frame", "applet", "datalist"})
# Elements that start a new line (their end too).
_BLOCK = frozenset({
    "p", "div", "br", "li", "ul", "ol", "dl", "dt", "dd", "tr", "table", "thead", "tbody", "section",
    "article", "header", "footer", "aside", "nav", "blockquote", "pre", "hr", "figure", "figcaption",
    "h1", "h2", "h3", "h4", "h5", "h6", "address", "main", "form", "fieldset", "details", "summary",
})
_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
_VOID = frozenset({"br", "hr", "img", "input", "meta", "link", "area", "base", "col", "embed", "source", "wbr",
                   "param", "track", "keygen"})
HIDDEN_CLASSES = frozenset({"hidden", "d-none", "sr-only", "visually-hidden", "visuallyhidden", "screen-reader-text",
                            "invisible", "hide", "is-hidden", "u-hidden", "offscreen", "hidden-text"})

_NUMBER = re.compile(r"^(-?\d*\.?\d+)\s*([a-z%]*)$")
_STYLE_BLOCK = re.compile(r"<style\b[^>]*>(.*?)</style\s*>", re.IGNORECASE | re.DOTALL)
_CSS_RULE = re.compile(r"([^{}]+)\{([^{}]*)\}")
_CSS_COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)


def _number(value: str) -> tuple[float, str] | None:
    match = _NUMBER.match(value.strip())
    return (float(match.group(1)), match.group(2)) if match else None


def _declarations(style: str) -> dict[str, str]:
    out = {}
    for part in style.split(";"):
        name, sep, value = part.partition(":")
        if sep:
            out[name.strip().lower()] = value.replace("!important", "").strip().lower()
    return out


def _tiny(value: str, limit_px: float) -> bool:
    number = _number(value)
    if number is None:
        return False
    size, unit = number
    return size <= 0 or (unit in ("px", "pt", "") and size < limit_px) or (unit in ("em", "rem") and size < 0.1)


def _far_off(value: str) -> bool:
    number = _number(value)
    return number is not None and number[0] <= -999


def style_hides(style: str) -> bool:
    """Whether CSS declarations (an inline ``style`` or a rule's body) hide an element's text."""
    d = _declarations(style)
    if d.get("display") == "none" or d.get("visibility") in ("hidden", "collapse"):
        return True
    opacity = _number(d.get("opacity", "1"))
    if opacity is not None and (opacity[0] <= 0.05 if opacity[1] != "%" else opacity[0] <= 5):
        return True
    if _tiny(d.get("font-size", "16px"), 2) or d.get("color", "").replace(" ", "") in ("transparent", "rgba(0,0,0,0)"):
        return True
    if d.get("overflow") == "hidden" and any(_tiny(d.get(p, "1px"), 1) for p in ("height", "max-height", "width", "max-width")):
        return True
    if d.get("clip", "").replace(" ", "").startswith("rect(0") or d.get("clip-path", "").replace(" ", "") in (
            "inset(50%)", "inset(100%)", "circle(0)", "circle(0px)"):
        return True
    if d.get("transform", "").replace(" ", "") in ("scale(0)", "scale(0,0)", "scalex(0)", "scaley(0)"):
        return True
    if _far_off(d.get("text-indent", "0")):
        return True
    return d.get("position") in ("absolute", "fixed") and any(_far_off(d.get(p, "0")) for p in ("left", "top", "right"))


@dataclass
class HiddenRules:
    """Class, id and tag selectors that a page's own ``<style>`` rules hide."""

    classes: set[str] = field(default_factory=set)
    ids: set[str] = field(default_factory=set)
    tags: set[str] = field(default_factory=set)

    @classmethod
    def from_html(cls, html: str) -> HiddenRules:
        rules = cls()
        for css in _STYLE_BLOCK.findall(html):
            for selectors, body in _CSS_RULE.findall(_CSS_COMMENT.sub("", css)):
                if style_hides(body):
                    for selector in selectors.split(","):
                        rules.add(selector)
        return rules

    def add(self, selector: str) -> None:
        """Take the last simple part of a selector (``div .note`` → ``.note``): over-hiding a
        descendant rule is the safe side."""
        last = re.split(r"[\s>+~]+", selector.strip())[-1] if selector.strip() else ""
        for token in re.findall(r"[.#]?[\w-]+", last):
            if token.startswith("."):
                self.classes.add(token[1:])
            elif token.startswith("#"):
                self.ids.add(token[1:])
            elif last == token:
                self.tags.add(token.lower())


def is_hidden(tag: str, attrs: list[tuple[str, str | None]], rules: HiddenRules) -> bool:
    """Whether an element is hidden by its attributes, its inline style or the page's rules."""
    a = {k.lower(): (v or "") for k, v in attrs}
    if "hidden" in a or a.get("aria-hidden", "").strip().lower() == "true":
        return True
    if (tag == "dialog" and "open" not in a) or tag in rules.tags:
        return True
    if "style" in a and style_hides(a["style"]):
        return True
    classes = a.get("class", "").split()
    return any(c in rules.classes or c.lower() in HIDDEN_CLASSES for c in classes) or a.get("id", "") in rules.ids


class _TextExtractor(HTMLParser):
    """Visible text of a page: a stack of open elements knows which of them hide their content."""

    def __init__(self, rules: HiddenRules, headings: bool = False) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.rules = rules
        self.headings = headings  # h1-h6 start with "# " … "###### " (the document readers' sections)
        self._stack: list[tuple[str, bool]] = []  # open elements: (tag, hides its content)
        self._hiding = 0  # open elements that hide
        self.hidden = 0  # hidden elements left out (outermost ones)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _VOID:
            if not self._hiding and tag in _BLOCK:
                self.parts.append("\n")
            return
        hides = tag in _NON_CONTENT or tag in _FALLBACK or is_hidden(tag, attrs, self.rules)
        if hides and not self._hiding and tag not in _NON_CONTENT:
            self.hidden += 1
        self._stack.append((tag, hides))
        if hides:
            self._hiding += 1
            return
        if self._hiding:
            return
        if tag in _BLOCK:
            self.parts.append("\n")
        if self.headings and tag in _HEADINGS:
            self.parts.append("\n" + "#" * int(tag[1]) + " ")
        if tag == "li":
            self.parts.append("- ")
        elif tag in ("td", "th"):
            self.parts.append(" ")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if not self._hiding and tag in _BLOCK and not is_hidden(tag, attrs, self.rules):
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in _VOID:
            return
        at = next((i for i in range(len(self._stack) - 1, -1, -1) if self._stack[i][0] == tag), None)
        if at is None:  # a stray end tag closes nothing (and never ends a hidden element)
            return
        for _, hides in self._stack[at:]:
            self._hiding -= hides
        del self._stack[at:]
        if not self._hiding and tag in _BLOCK and tag != "li":  # the next item starts its own line
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._hiding:
            self.parts.append(data)


_SPACES = re.compile(r"[ \t\r\f\v\u00a0]+")
_BLANKS = re.compile(r"\n{3,}")


def html_text(html: str, *, max_chars: int = 20_000, headings: bool = False) -> tuple[str, int]:
    """(plain text, hidden elements left out) of an HTML fragment or page: non-content and
    hidden elements removed, entities unescaped, whitespace collapsed (paragraphs kept as
    blank-line separated), cut to ``max_chars``. With ``headings`` a heading's line starts
    with ``#`` per level, as in Markdown."""
    hidden = 0
    if "<" not in html and "&" not in html:
        text = html
    else:
        parser = _TextExtractor(HiddenRules.from_html(html) if "<style" in html.lower() else HiddenRules(), headings)
        parser.feed(html)
        parser.close()
        text, hidden = "".join(parser.parts), parser.hidden
    lines = [_SPACES.sub(" ", line).strip() for line in text.split("\n")]
    text = _BLANKS.sub("\n\n", "\n".join(lines)).strip()
    if len(text) > max_chars:
        text = text[: max_chars - 1].rstrip() + "…"
    return text, hidden


def html_to_text(html: str, *, max_chars: int = 20_000) -> str:
    """The plain, visible text of an HTML fragment (see :func:`html_text`)."""
    return html_text(html, max_chars=max_chars)[0]
