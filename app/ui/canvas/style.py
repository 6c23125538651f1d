"""Colours, pens, fonts, glyphs and sizes of the canvas, made once and shared by every item.

Painting reads prebuilt objects from one ``CanvasStyle`` (no allocation per paint); ``apply``
switches the light/dark palette in place, so items keep their reference to the style.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QFont, QFontMetricsF, QPainterPath, QPen

from app.core.types import EdgeKind, NodeKind
from app.ui.canvas.layout import CARD_HEIGHT, NODE_SIZES
from app.ui.canvas.text import WordWrapper

# Semantic zoom (the painter's scale): from LOD_FULL a card shows its title, a preview and its
# badges (reading zoom); from BLOCK_SCALE its title alone, large enough to read (middle zoom);
# below, each conversation is one labelled block (``blocks.ConversationBlockItem``).
LOD_FULL = 0.66
BLOCK_SCALE = 0.22
LOD_LABEL = BLOCK_SCALE  # views paint the batched overview below this (``overview.OVERVIEW_SCALE``)
MIN_TITLE_PIXELS = 10.0  # a title is drawn at least this tall on screen, at every zoom it shows
TITLE_SIZES = (15, 17, 20, 23, 27, 32, 38, 46)  # title font sizes (scene px): the smallest readable one is used

# Node sizes in scene units (``layout`` holds them: it lays out at these sizes).
TURN_MIN_HEIGHT = TURN_MAX_HEIGHT = CARD_HEIGHT  # every turn card has the same size
TURN_HEADER = 50.0  # title area; the preview starts below it
BODY_LINE = 15.0  # preview line height
BODY_MAX_LINES = 4
TASK_SIZE = NODE_SIZES[NodeKind.TASK]
ENV_SIZE = NODE_SIZES[NodeKind.ENV]
MEMORY_SIZE = NODE_SIZES[NodeKind.MEMORY]
ARTIFACT_SIZE = NODE_SIZES[NodeKind.ARTIFACT]
PORT_Y = 22.0  # curved edges (a dragged end) meet a turn card at this height


def title_size(scale: float) -> int:
    """The title font size (scene px) at ``scale``: the smallest of ``TITLE_SIZES`` drawn at
    least ``MIN_TITLE_PIXELS`` tall on screen (the largest when none is)."""
    for size in TITLE_SIZES:
        if size * scale >= MIN_TITLE_PIXELS:
            return size
    return TITLE_SIZES[-1]

SHAPE_NAMES: dict[NodeKind, str] = {
    NodeKind.TURN: "card",
    NodeKind.TASK: "hexagon",
    NodeKind.ENV: "pill",
    NodeKind.MEMORY: "ellipse",
    NodeKind.ARTIFACT: "document",
}

STATUSES = ("building", "streaming", "answered", "stopped", "failed", "interrupted", "ambiguous")


@dataclass(frozen=True)
class _Palette:
    background: str
    text: str
    muted: str
    accent: str
    highlight: str
    kinds: dict[NodeKind, tuple[str, str]]  # (fill, border/glyph)
    edges: dict[EdgeKind, str]
    status: dict[str, str]


_LIGHT = _Palette(
    background="#f6f7f9", text="#1d2330", muted="#5b6474", accent="#2f6fed", highlight="#f08c00",
    kinds={
        NodeKind.TURN: ("#ffffff", "#4a78c2"),
        NodeKind.TASK: ("#fff7e6", "#c27a12"),
        NodeKind.ENV: ("#e8f6ee", "#2e8b57"),
        NodeKind.MEMORY: ("#f3ecfb", "#7d4fc0"),
        NodeKind.ARTIFACT: ("#eef3f7", "#52677a"),
    },
    edges={
        EdgeKind.CONTINUES: "#6b7a90", EdgeKind.REFERENCES: "#8e98a8", EdgeKind.DERIVED_FROM: "#a0703c",
        EdgeKind.SPAWNED: "#7d4fc0", EdgeKind.RESOLVES: "#2e8b57", EdgeKind.MERGES: "#0f8f8f",
    },
    status={
        "building": "#8792a2", "streaming": "#2f6fed", "answered": "#2e9d5b", "stopped": "#c98a00",
        "failed": "#d23c3c", "interrupted": "#a8511a", "ambiguous": "#e8590c", "pending": "#8792a2", "active": "#2f6fed",
        "blocked": "#c98a00", "paused": "#c98a00", "complete": "#2e9d5b", "off_machine": "#7048e8",
    },
)

_DARK = _Palette(
    background="#1b1e24", text="#e6e9ef", muted="#9aa3b2", accent="#5b9bff", highlight="#ffa94d",
    kinds={
        NodeKind.TURN: ("#262b34", "#6f9be0"),
        NodeKind.TASK: ("#33291a", "#e0a043"),
        NodeKind.ENV: ("#1d3326", "#5cc28a"),
        NodeKind.MEMORY: ("#2d2440", "#ad86ee"),
        NodeKind.ARTIFACT: ("#252d35", "#8aa2b8"),
    },
    edges={
        EdgeKind.CONTINUES: "#8b98ad", EdgeKind.REFERENCES: "#6f7888", EdgeKind.DERIVED_FROM: "#c59461",
        EdgeKind.SPAWNED: "#ad86ee", EdgeKind.RESOLVES: "#5cc28a", EdgeKind.MERGES: "#3cc7c7",
    },
    status={
        "building": "#8792a2", "streaming": "#5b9bff", "answered": "#4cc27c", "stopped": "#e0a800",
        "failed": "#ff6b6b", "interrupted": "#e0894a", "ambiguous": "#ff922b", "pending": "#8792a2", "active": "#5b9bff",
        "blocked": "#e0a800", "paused": "#e0a800", "complete": "#4cc27c", "off_machine": "#9775fa",
    },
)

# (look, dash pattern in pen widths). Sparse patterns on purpose: a dashed cosmetic pen costs one
# segment per dash over the edge's whole length, and references to the env lane can be long.
_EDGE_DASH: dict[EdgeKind, tuple[str, list[float] | None]] = {
    EdgeKind.CONTINUES: ("solid", None),
    EdgeKind.REFERENCES: ("dotted", [1.5, 5.0]),
    EdgeKind.DERIVED_FROM: ("dashed", [6.0, 4.0]),
    EdgeKind.SPAWNED: ("dash-dot", [8.0, 4.0, 1.5, 4.0]),
    EdgeKind.RESOLVES: ("solid", None),
    EdgeKind.MERGES: ("double", None),
}
_EDGE_WIDTH: dict[EdgeKind, float] = {
    EdgeKind.CONTINUES: 1.6, EdgeKind.REFERENCES: 1.2, EdgeKind.DERIVED_FROM: 1.2,
    EdgeKind.SPAWNED: 1.4, EdgeKind.RESOLVES: 1.6, EdgeKind.MERGES: 3.2,
}
# Edges drawn with an arrow head at the end they point to.
ARROW_KINDS = frozenset({EdgeKind.CONTINUES, EdgeKind.SPAWNED, EdgeKind.RESOLVES, EdgeKind.MERGES})


def node_kind(kind: str) -> NodeKind:
    """``kind`` as a ``NodeKind`` (cheap when it already is one: pydantic records hold members)."""
    return kind if type(kind) is NodeKind else NodeKind(kind)


def edge_kind(kind: str) -> EdgeKind:
    """``kind`` as an ``EdgeKind`` (cheap when it already is one)."""
    return kind if type(kind) is EdgeKind else EdgeKind(kind)


def _font(pixels: int, bold: bool = False) -> QFont:
    font = QFont()
    font.setPixelSize(pixels)
    font.setBold(bold)
    return font


def _cosmetic(color: QColor, width: float, style: Qt.PenStyle = Qt.PenStyle.SolidLine) -> QPen:
    pen = QPen(color, width, style)
    pen.setCosmetic(True)  # the same width on screen at every zoom
    return pen


def _glyph(kind: str) -> QPainterPath:
    """A 16 x 16 line icon for a node kind (or env source kind), drawn stroked."""
    path = QPainterPath()
    if kind == NodeKind.TURN:  # speech bubble
        path.addRoundedRect(QRectF(0, 1, 16, 11), 3, 3)
        path.moveTo(4, 12)
        path.lineTo(3, 16)
        path.lineTo(8, 12)
    elif kind == NodeKind.TASK:  # checkbox with a tick
        path.addRect(QRectF(0, 0, 16, 16))
        path.moveTo(3.5, 8.5)
        path.lineTo(6.5, 11.5)
        path.lineTo(12.5, 4.5)
    elif kind == NodeKind.MEMORY:  # bookmark
        path.moveTo(3, 0)
        path.lineTo(13, 0)
        path.lineTo(13, 16)
        path.lineTo(8, 11)
        path.lineTo(3, 16)
        path.closeSubpath()
    elif kind in (NodeKind.ARTIFACT, "file"):  # page with a folded corner and text lines
        path.moveTo(2, 0)
        path.lineTo(10, 0)
        path.lineTo(14, 4)
        path.lineTo(14, 16)
        path.lineTo(2, 16)
        path.closeSubpath()
        path.moveTo(10, 0)
        path.lineTo(10, 4)
        path.lineTo(14, 4)
        for y in (8.0, 11.0):
            path.moveTo(5, y)
            path.lineTo(11, y)
    elif kind == "feed":  # a dot and two arcs
        path.addEllipse(QPointF(3, 13), 1.6, 1.6)
        path.moveTo(2, 7)
        path.arcTo(QRectF(-7, 7 - 9, 18, 18), 90, -90)
        path.moveTo(2, 2)
        path.arcTo(QRectF(-12, 2, 28, 28), 90, -90)
    elif kind == "api":  # < / >
        path.moveTo(5, 3)
        path.lineTo(0, 8)
        path.lineTo(5, 13)
        path.moveTo(11, 3)
        path.lineTo(16, 8)
        path.lineTo(11, 13)
        path.moveTo(9.5, 2)
        path.lineTo(6.5, 14)
    else:  # env of another kind: a lightning bolt
        path.moveTo(9, 0)
        path.lineTo(3, 9)
        path.lineTo(8, 9)
        path.lineTo(6, 16)
        path.lineTo(13, 6)
        path.lineTo(8, 6)
        path.closeSubpath()
    return path


class CanvasStyle:
    """Every pen, brush, font and glyph the canvas paints with, for the current theme."""

    def __init__(self, dark: bool = False) -> None:
        self.font_label = _font(15, bold=True)  # = TITLE_SIZES[0]
        self.font_body = _font(12)
        self.font_small = _font(10, bold=True)
        self.metrics_label = QFontMetricsF(self.font_label)
        self.metrics_body = QFontMetricsF(self.font_body)
        self.metrics_small = QFontMetricsF(self.font_small)
        self.wrap_body = WordWrapper(self.metrics_body)
        self.wrap_label = WordWrapper(self.metrics_label)
        self.title_fonts = {size: _font(size, bold=True) for size in TITLE_SIZES}
        self.wrap_title = {size: WordWrapper(QFontMetricsF(font)) for size, font in self.title_fonts.items()}
        self.glyphs: dict[str, QPainterPath] = {
            k: _glyph(k) for k in (*NodeKind, "file", "feed", "api", "other")
        }
        self.dark = dark
        self.apply(dark)

    def apply(self, dark: bool) -> None:
        """Rebuild the colour objects for the light or dark palette."""
        self.dark = dark
        p = _DARK if dark else _LIGHT
        self.palette = p
        self.background = QBrush(QColor(p.background))
        self.text_pen = QPen(QColor(p.text))
        self.muted_pen = QPen(QColor(p.muted))
        self.no_pen = QPen(Qt.PenStyle.NoPen)
        self.white_pen = QPen(QColor("#ffffff"))
        self.white_brush = QBrush(QColor("#ffffff"))
        self.background_pen = QPen(QColor(p.background), 1.5)
        self.accent = QColor(p.accent)
        self.highlight = QColor(p.highlight)
        self.selected_pen = _cosmetic(self.accent, 2.6)
        self.highlight_pen = _cosmetic(self.highlight, 3.2)
        self.fill: dict[NodeKind, QBrush] = {}
        self.border: dict[NodeKind, QPen] = {}
        self.glyph_pen: dict[NodeKind, QPen] = {}
        self.solid: dict[NodeKind, QBrush] = {}
        for kind, (fill, border) in p.kinds.items():
            self.fill[kind] = QBrush(QColor(fill))
            self.border[kind] = QPen(QColor(border), 1.6)
            glyph_pen = QPen(QColor(border), 1.5)
            glyph_pen.setJoinStyle(Qt.PenJoinStyle.RoundJoin)
            self.glyph_pen[kind] = glyph_pen
            self.solid[kind] = QBrush(QColor(border))
        self.edge_color = {kind: QColor(c) for kind, c in p.edges.items()}
        self.edge_pen: dict[EdgeKind, QPen] = {}
        for ekind, color in self.edge_color.items():
            pen = _cosmetic(color, _EDGE_WIDTH[ekind])
            pattern = _EDGE_DASH[ekind][1]
            if pattern:
                pen.setDashPattern(pattern)
            pen.setCapStyle(Qt.PenCapStyle.FlatCap if pattern else Qt.PenCapStyle.RoundCap)
            self.edge_pen[ekind] = pen
        self.merge_inner_pen = _cosmetic(QColor(p.background), 1.0)
        self.status_brush = {name: QBrush(QColor(c)) for name, c in p.status.items()}
        self.progress_back = QBrush(QColor("#3a404c" if dark else "#e4e7ec"))
        self.candidate_pen = _cosmetic(QColor(p.muted), 1.4)
        self.candidate_pen.setDashPattern([5.0, 4.0])
        self.chosen_pen = _cosmetic(self.accent, 3.0)
        self.chosen_pen.setDashPattern([4.0, 2.5])
        self.dim_brush = QBrush(QColor("#3a404c" if dark else "#d5d9e0"))
        self.block_brush = QBrush(QColor("#28303d" if dark else "#e8eef8"))  # a conversation shown as one block
        self.folded_brush = QBrush(QColor("#22262e" if dark else "#eceef2"))  # ...and one folded away by a focus
        plate = QColor(p.background)
        plate.setAlpha(215)
        self.plate_brush = QBrush(plate)
        self.overview_edge_pen = _cosmetic(QColor("#4b5363" if dark else "#b4bcc8"), 1.0)

    def status_brush_for(self, status: str) -> QBrush:
        return self.status_brush.get(status, self.status_brush["building"])


def legend_items(style: CanvasStyle | None = None) -> list[tuple[str, str, str]]:
    """(group, name, colour) rows describing node shapes and edge styles, for a legend panel."""
    style = style or CanvasStyle()
    rows = [("node", f"{kind.value} ({SHAPE_NAMES[kind]})", style.palette.kinds[kind][1]) for kind in NodeKind]
    for kind in EdgeKind:
        look = _EDGE_DASH[kind][0]
        arrow = ", arrow" if kind in ARROW_KINDS else ""
        rows.append(("edge", f"{kind.value} ({look}{arrow})", style.palette.edges[kind]))
    return rows
