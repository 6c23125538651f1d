"""A session's automatic title: the start of its first input, cut at a word, on one line."""

from __future__ import annotations

MAX_TITLE_CHARS = 48


def title_from(text: str, limit: int = MAX_TITLE_CHARS) -> str:
    """The first non-empty line of ``text``, whitespace collapsed and cut at a word boundary to at
    most ``limit`` characters (an ellipsis marks the cut); "" for a blank text."""
    line = next((" ".join(part.split()) for part in text.splitlines() if part.strip()), "")
    if len(line) <= limit:
        return line
    cut = line[: limit - 1]
    if " " in cut[limit // 2:]:  # keep whole words when a space falls in the second half
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(" ,.;:-") + "…"
