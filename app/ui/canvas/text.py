"""Fast word wrapping for card texts: greedy, with the width of every word measured once.

``QTextLayout`` costs ~100 µs per card; a turn's answer is re-wrapped on every streamed token
batch and thousands of cards are wrapped when a session opens, so cards use this instead
(kerning across word boundaries is ignored, which a few pixels of margin absorb).
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QFontMetricsF

ELLIPSIS = "\u2026"
_CACHE_LIMIT = 50_000


def sample_length(max_lines: int) -> int:
    """How much of a text ``wrap`` looks at for ``max_lines`` lines (the rest cannot show)."""
    return max_lines * 120 + 60


class WordWrapper:
    """Wraps text in one font; remembers word widths."""

    def __init__(self, metrics: QFontMetricsF) -> None:
        self.metrics = metrics
        self._widths: dict[str, float] = {}
        self.space = metrics.horizontalAdvance(" ")

    def width(self, word: str) -> float:
        found = self._widths.get(word)
        if found is None:
            if len(self._widths) > _CACHE_LIMIT:
                self._widths.clear()
            found = self._widths[word] = self.metrics.horizontalAdvance(word)
        return found

    def measure(self, line: str) -> float:
        """Width of a line made by ``wrap`` (from the cached word widths)."""
        words = line.split()
        return sum(self.width(w) for w in words) + self.space * max(0, len(words) - 1)

    def centred(self, text: str, left: float, top: float, width: float, height: float,
                max_lines: int) -> list[tuple[float, float, str]]:
        """``text`` wrapped into at most ``max_lines`` lines, each centred in the box: a list of
        (x, baseline y, line) for ``QPainter.drawText(QPointF, str)``."""
        lines, _ = self.wrap(text, width, max_lines)
        if not lines:
            return []
        m = self.metrics
        line_height = m.height()
        y = top + (height - line_height * len(lines)) / 2 + m.ascent()
        out = []
        for line in lines:
            out.append((left + (width - self.measure(line)) / 2, y, line))
            y += line_height
        return out

    def wrap(self, text: str, width: float, max_lines: int) -> tuple[list[str], bool]:
        """At most ``max_lines`` lines of ``text`` no wider than ``width``; when text is left over
        the last line ends with an ellipsis. Returns (lines, truncated)."""
        sample = text[: sample_length(max_lines)]
        paragraphs = sample.replace("\r\n", "\n").split("\n")
        lines: list[str] = []
        space = self.space
        for index, paragraph in enumerate(paragraphs):
            current: list[str] = []
            used = 0.0
            for word in paragraph.split():
                w = self.width(word)
                if w > width:  # a word longer than a line: cut it
                    word = self.metrics.elidedText(word, Qt.TextElideMode.ElideRight, width)
                    w = width
                if current and used + space + w > width:
                    lines.append(" ".join(current))
                    if len(lines) == max_lines:
                        return self._finish(lines, True, width)
                    current, used = [word], w
                else:
                    used = used + space + w if current else w
                    current.append(word)
            lines.append(" ".join(current))
            if len(lines) == max_lines:
                rest = any(p.strip() for p in paragraphs[index + 1 :])
                return self._finish(lines, rest or len(sample) < len(text), width)
        return self._finish(lines, len(sample) < len(text), width)

    def _finish(self, lines: list[str], truncated: bool, width: float) -> tuple[list[str], bool]:
        while lines and not lines[-1]:
            lines.pop()
        if truncated and lines:
            lines[-1] = self.metrics.elidedText(f"{lines[-1]} {ELLIPSIS}", Qt.TextElideMode.ElideRight, width)
        return lines, truncated
