"""The session canvas: the task graph drawn as conversations of cards (issues 4 and 33).

``CanvasScene`` mirrors a ``SessionGraph`` as items and reports what the user does through Qt
signals; ``CanvasView`` pans, zooms and selects; ``layout`` is the pure tidy layout; ``bench``
measures pan/zoom frame times, ``legibility`` how readable a laid out session is.
"""

from app.ui.canvas.edges import EdgeItem
from app.ui.canvas.items import NodeItem
from app.ui.canvas.layout import LayoutEdge, LayoutNode, TidyGeometry, TidyLayout, lay_out
from app.ui.canvas.scene import PENDING_MIME, CanvasScene
from app.ui.canvas.style import legend_items
from app.ui.canvas.view import CanvasView

__all__ = [
    "PENDING_MIME", "CanvasScene", "CanvasView", "EdgeItem", "LayoutEdge", "LayoutNode", "NodeItem",
    "TidyGeometry", "TidyLayout", "lay_out", "legend_items",
]
