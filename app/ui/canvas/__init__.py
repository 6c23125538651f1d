"""The session canvas: the task graph drawn as lanes of cards (issue 4).

``CanvasScene`` mirrors a ``SessionGraph`` as items and reports what the user does through Qt
signals; ``CanvasView`` pans, zooms and selects; ``layout`` is the pure lane layout; ``bench``
measures pan/zoom frame times.
"""

from app.ui.canvas.edges import EdgeItem
from app.ui.canvas.items import NodeItem
from app.ui.canvas.layout import LaneGeometry, LaneLayout, LayoutEdge, LayoutNode, lay_out
from app.ui.canvas.scene import PENDING_MIME, CanvasScene
from app.ui.canvas.style import legend_items
from app.ui.canvas.view import CanvasView

__all__ = [
    "PENDING_MIME", "CanvasScene", "CanvasView", "EdgeItem", "LaneGeometry", "LaneLayout",
    "LayoutEdge", "LayoutNode", "NodeItem", "lay_out", "legend_items",
]
