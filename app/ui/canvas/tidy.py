"""A tidy tree, left-aligned (Reingold–Tilford over subtree contours): pure, iterative.

``tidy_cells`` gives each node of a tree a (depth, column): depth downwards, a node above its
first child, each later child's subtree as far left as the contours of the subtrees before it
allow (one column clear at every depth), so appending a child never moves what is above or left
of it. Contours are merged small into large, so a tree of n nodes costs about n log n.
"""

from __future__ import annotations


class _Contour:
    """The leftmost and rightmost column of a subtree per depth, deepest first (so a parent is
    appended in O(1)), every entry read plus ``off``."""

    __slots__ = ("hi", "lo", "off")

    def __init__(self) -> None:
        self.lo: list[int] = [0]
        self.hi: list[int] = [0]
        self.off = 0

    def separation(self, right: _Contour) -> int:
        """The smallest shift that puts ``right`` one column clear of this contour at every depth."""
        shift = 1
        for j in range(1, min(len(self.hi), len(right.lo)) + 1):
            shift = max(shift, self.hi[-j] + self.off - right.lo[-j] - right.off + 1)
        return shift

    def merge(self, right: _Contour, shift: int) -> _Contour:
        """This contour and ``right`` shifted by ``shift``, in this one's frame (small into large)."""
        right.off += shift
        if len(self.hi) >= len(right.hi):
            for j in range(1, len(right.hi) + 1):
                self.hi[-j] = right.hi[-j] + right.off - self.off
            return self
        for j in range(1, len(self.lo) + 1):
            right.lo[-j] = self.lo[-j] + self.off - right.off
        return right

    def push_parent(self) -> None:
        """Add the parent's depth above, at column 0 of the parent's frame."""
        self.lo.append(-self.off)
        self.hi.append(-self.off)


def tidy_cells(root: str, children: dict[str, list[str]]) -> dict[str, tuple[int, int]]:
    """node id → (depth, column) of a left-aligned tidy tree under ``root`` (iterative: a
    conversation may be thousands deep)."""
    order: list[str] = []
    depth = {root: 0}
    stack = [root]
    while stack:
        node = stack.pop()
        order.append(node)
        for child in reversed(children.get(node, ())):
            depth[child] = depth[node] + 1
            stack.append(child)
    contour: dict[str, _Contour] = {}
    offset: dict[str, int] = {}
    for node in reversed(order):  # every node after all of its descendants
        kids = children.get(node, ())
        if not kids:
            contour[node] = _Contour()
            continue
        acc = contour.pop(kids[0])
        offset[kids[0]] = 0
        for kid in kids[1:]:
            other = contour.pop(kid)
            offset[kid] = acc.separation(other)
            acc = acc.merge(other, offset[kid])
        acc.push_parent()
        contour[node] = acc
    cols = {root: 0}
    for node in order:
        for kid in children.get(node, ()):
            cols[kid] = cols[node] + offset[kid]
    return {node: (depth[node], cols[node]) for node in order}
