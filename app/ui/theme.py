"""Light and dark themes: the application palette, a small style sheet and the panels' colours.

``apply_theme(app, dark)`` sets the Fusion style with a palette and a style sheet that are both
readable. Panels that paint or colour text ask :func:`colors_for` with their own palette, so the
same panel reads well in either theme; the fill colours (segments, channels) are mid-tone and
work on both backgrounds. Node-kind colours of the canvas live with the canvas.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtGui import QColor, QFont, QFontDatabase, QPalette
from PySide6.QtWidgets import QApplication, QStyleFactory

# Fill colours of the context segments (budget bar, block table), in the compiler's template order.
SEGMENT_COLORS: dict[str, str] = {
    "instruction": "#8a94a6",
    "plan": "#9b6fd1",
    "state": "#d9912f",
    "conversation": "#3f8fd8",
    "evidence": "#36a57f",
    "memory": "#d0598a",
}
# Fill colours of the recall channels.
CHANNEL_COLORS: dict[str, str] = {
    "vector": "#3f8fd8",
    "fulltext": "#d9912f",
    "structured": "#9b6fd1",
    "graph": "#36a57f",
    "recent": "#8a94a6",
    "memory": "#d0598a",
}
BAR_COLOR = "#4a90d9"  # neutral bars (timings)
FALLBACK_COLOR = "#8a94a6"


@dataclass(frozen=True, slots=True)
class ThemeColors:
    """Text and accent colours that keep their contrast on one theme's background."""

    ok: str
    warn: str
    error: str
    muted: str
    accent: str
    track: str  # the empty part of a bar
    grid: str  # thin lines and outlines


LIGHT = ThemeColors(ok="#1e7b45", warn="#9a5b00", error="#c62828", muted="#6b7280", accent="#1a5fb4",
                    track="#e3e6eb", grid="#b8bec8")
DARK = ThemeColors(ok="#5fd08f", warn="#f0b45a", error="#ff7b7b", muted="#9aa3b2", accent="#7fb2ff",
                   track="#3a3d44", grid="#5a5f69")

LLM_STATUS = {"ok": "ok", "late": "warn", "invalid": "error", "error": "error", "skipped": "muted"}


def is_dark(palette: QPalette) -> bool:
    """True when the palette's window background is dark."""
    return palette.color(QPalette.ColorRole.Window).lightness() < 128


def colors_for(palette: QPalette | None = None) -> ThemeColors:
    """The colour set of the theme in use: the application's palette when there is an application
    (a widget's own palette follows a theme switch only once Qt re-polishes it, which may come
    after the widget is redrawn), else ``palette``."""
    app = QApplication.instance()
    if isinstance(app, QApplication):
        palette = app.palette()
    return DARK if palette is not None and is_dark(palette) else LIGHT


def status_color(status: str, palette: QPalette) -> str:
    """The colour of an LLM signal or stream status (ok / late / invalid / skipped / …)."""
    colors = colors_for(palette)
    return str(getattr(colors, LLM_STATUS.get(status, "muted")))


def confidence_color(value: float, palette: QPalette) -> str:
    """Green from 0.7, amber from 0.4, red below: the plan's confidence bands."""
    colors = colors_for(palette)
    if value >= 0.7:
        return colors.ok
    return colors.warn if value >= 0.4 else colors.error


def segment_color(segment: str) -> QColor:
    """The fill colour of a context segment."""
    return QColor(SEGMENT_COLORS.get(segment, FALLBACK_COLOR))


def monospace_font(point_delta: int = 0) -> QFont:
    """The system's fixed-width font, optionally a little larger or smaller."""
    font = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
    if point_delta and font.pointSize() > 0:
        font.setPointSize(max(6, font.pointSize() + point_delta))
    return font


def _palette(dark: bool) -> QPalette:
    style = QStyleFactory.create("Fusion")
    palette = QPalette(style.standardPalette()) if style is not None else QPalette()
    if not dark:
        palette.setColor(QPalette.ColorRole.Link, QColor(LIGHT.accent))
        palette.setColor(QPalette.ColorRole.Highlight, QColor("#3d7ad6"))
        palette.setColor(QPalette.ColorRole.HighlightedText, QColor("#ffffff"))
        return palette
    roles = {
        QPalette.ColorRole.Window: "#2b2d31",
        QPalette.ColorRole.WindowText: "#e6e8eb",
        QPalette.ColorRole.Base: "#1e1f22",
        QPalette.ColorRole.AlternateBase: "#26282c",
        QPalette.ColorRole.ToolTipBase: "#1e1f22",
        QPalette.ColorRole.ToolTipText: "#e6e8eb",
        QPalette.ColorRole.PlaceholderText: "#8b919c",
        QPalette.ColorRole.Text: "#e6e8eb",
        QPalette.ColorRole.Button: "#35373c",
        QPalette.ColorRole.ButtonText: "#e6e8eb",
        QPalette.ColorRole.BrightText: "#ff7b7b",
        QPalette.ColorRole.Light: "#4a4d54",
        QPalette.ColorRole.Midlight: "#3e4147",
        QPalette.ColorRole.Mid: "#55585f",
        QPalette.ColorRole.Dark: "#18191b",
        QPalette.ColorRole.Shadow: "#0d0e0f",
        QPalette.ColorRole.Highlight: "#3d7ad6",
        QPalette.ColorRole.HighlightedText: "#ffffff",
        QPalette.ColorRole.Link: DARK.accent,
        QPalette.ColorRole.LinkVisited: "#c3a6ff",
    }
    for role, color in roles.items():
        palette.setColor(role, QColor(color))
    for role in (QPalette.ColorRole.Text, QPalette.ColorRole.WindowText, QPalette.ColorRole.ButtonText):
        palette.setColor(QPalette.ColorGroup.Disabled, role, QColor("#7c818b"))
    return palette


def style_sheet(dark: bool) -> str:
    """The small style sheet on top of the palette: error/empty/muted labels, headers, tabs."""
    colors = DARK if dark else LIGHT
    return f"""
QLabel[role="error"] {{ color: {colors.error}; }}
QLabel[role="ok"] {{ color: {colors.ok}; }}
QLabel[role="muted"] {{ color: {colors.muted}; }}
QLabel[role="empty"] {{ color: {colors.muted}; font-style: italic; padding: 24px; }}
QLabel[role="section"] {{ font-weight: bold; padding-top: 6px; }}
QHeaderView::section {{ padding: 3px 6px; }}
QTabBar::tab {{ padding: 4px 10px; }}
QToolTip {{ border: 1px solid {colors.grid}; }}
"""


def apply_theme(app: QApplication, dark: bool) -> None:
    """Switch the whole application to the light or the dark theme."""
    app.setStyle("Fusion")
    app.setPalette(_palette(dark))
    app.setStyleSheet(style_sheet(dark))
