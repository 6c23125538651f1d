"""Edge routes on the tidy layout: pure (no Qt).

Every conversation shares the layout's row grid, so the channel between two rows and the gutter
between two columns hold no card anywhere. ``route`` leaves a card down into the channel below its
row (a satellite: out of its right side into its column's gutter, then down), runs along that
channel to the gutter left of the other card's column, along the gutter to the channel above that
card's row, and into the card's top (a satellite: its right side). A satellite and its own card
are joined straight across the gap between them.
"""

from __future__ import annotations

from app.ui.canvas.layout import CARD_HEIGHT, NODE_SIZES, Point, TidyLayout


def route(layout: TidyLayout, start: str, end: str) -> list[Point] | None:
    """The corners of an edge from ``start`` to ``end``; None when an end is pinned or waits on
    top of the canvas (the canvas draws a curve)."""
    a, b = layout.cell(start), layout.cell(end)
    if a is None or b is None:
        return None
    if layout.anchor_of(start) == end or layout.anchor_of(end) == start:
        sat, card = (start, end) if layout.anchor_of(start) == end else (end, start)
        y = layout.position(sat)[1] + NODE_SIZES[layout.kind(sat)][1] / 2
        corners = [(layout.position(card)[0] + NODE_SIZES[layout.kind(card)][0], y), (layout.position(sat)[0], y)]
        return corners if start == card else corners[::-1]
    g = layout.geometry
    below_a = a[0] * g.row_pitch + CARD_HEIGHT + g.channel / 2
    above_b = b[0] * g.row_pitch - g.channel / 2
    head = _exit(layout, start, a, below_a)
    tail = _entry(layout, end, b, above_b)
    if below_a == above_b:
        return [*head, *tail]
    gutter = b[1] - g.gutter / 2
    return [*head, (gutter, below_a), (gutter, above_b), *tail]


def _exit(layout: TidyLayout, node_id: str, cell: tuple[int, float, float], channel_y: float) -> list[Point]:
    """From a node down (a satellite: out of its right side to its column's gutter) to the
    channel below its row."""
    (x, y), (w, h) = layout.position(node_id), NODE_SIZES[layout.kind(node_id)]
    if layout.anchor_of(node_id) is None:
        return [(x + w / 2, y + h), (x + w / 2, channel_y)]
    gutter = cell[1] + cell[2] - layout.geometry.gutter / 2
    return [(x + w, y + h / 2), (gutter, y + h / 2), (gutter, channel_y)]


def _entry(layout: TidyLayout, node_id: str, cell: tuple[int, float, float], channel_y: float) -> list[Point]:
    """From the channel above a node's row into its top (a satellite: its right side)."""
    (x, y), (w, h) = layout.position(node_id), NODE_SIZES[layout.kind(node_id)]
    if layout.anchor_of(node_id) is None:
        return [(x + w / 2, channel_y), (x + w / 2, y)]
    gutter = cell[1] + cell[2] - layout.geometry.gutter / 2
    return [(gutter, channel_y), (gutter, y + h / 2), (x + w, y + h / 2)]
