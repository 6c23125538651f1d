"""Progressive detail in the window: the Context tab's Detail row, and what a collapsed node shows.

``DetailActions`` is an object the main window holds (over the controller, the scene, the
inspector and the status line). A part made more or less detailed, or a branch brought in or
taken out (``ContextTabWidget.detail_requested``), goes to ``Engine.detail`` through the
controller; the turn's new record replaces the shown one in the inspector (the
Context tab stays open) and the status bar says what changed and what the context costs now
("More detail: turns 0-31 are now shown in full (412 of 1024 tokens)"). An action that cannot
apply (``DetailError``) is said in one plain line. The branches offered to bring in are the
session's other branches as they were when the turn was answered (the latest turn of each).

A node collapsed on the canvas shows what its hidden subtree says (``Engine.subtree_summary``),
also for the nodes a session opens with collapsed, and again when a turn lands below one.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from app.core.pipeline.detail import HIDDEN, RAW, Detail, DetailAction, DetailError
from app.core.session import versions
from app.core.types import BlockType, NodeKind
from app.ui.canvas.scene import CanvasScene
from app.ui.controller import EngineController
from app.ui.panels.detail_row import LEVEL_WORDS, Branch, unseen
from app.ui.panels.inspector import InspectorPanel
from app.ui.panels.widgets import short_id
from app.ui.status_line import StatusLine

if TYPE_CHECKING:
    from app.core.engine.detail import Detailed, SubtreeSummary
    from app.core.pipeline.record import TurnRecord
    from app.core.session.state import SessionState

TITLES = {"expand": "More detail", "collapse": "Less detail"}
NAME_CHARS = 40


def detailed_line(done: Detailed, label: str, before_label: str, order: list[str]) -> str:
    """The status line for a detail change: what changed, and the context's tokens now
    (``label``: the branch brought in; ``before_label``: the one there before; ``order``: the
    session's message ids by index, to tell how many of a part's turns fit)."""
    revisions = done.record.revisions
    before = Detail.model_validate(revisions[-1].build.detail) if revisions else Detail()
    after, ctx = done.detail, done.record.build.context
    missing = unseen(done.record)
    raw = {r.evidence_id for b in ctx.blocks if b.block_type == BlockType.CONVERSATION for r in b.refs}
    changed = []
    for span, level in after.spans.items():
        if before.spans.get(span) == level:
            continue
        said = f"turns {span} are now {LEVEL_WORDS.get(level, level)}"
        if span in missing and level != HIDDEN:
            said += ", but that does not fit the budget, so the context leaves it out"
        elif level == RAW:
            first, _, last = span.partition("-")
            part = order[int(first):int(last) + 1] if first.isdigit() and last.isdigit() else []
            fit = sum(1 for m in part if m in raw)
            said += f"; {fit} of its {len(part)} turns fit the budget" if part and fit < len(part) else ""
        changed.append(said)
    if after.through is not None and after.through != before.through:
        changed.append(f"turns up to {after.through} are now folded into the summary")
    if after.focus != before.focus:
        changed.append(f"the branch “{label}” is now part of this context" if after.focus
                       else f"the branch “{before_label}” is out of this context again")
    title = TITLES.get(done.action.kind) or ("Bring in" if done.action.node_id else "Take out")
    return f"{title}: {'; '.join(changed) or 'nothing changed'} ({ctx.tokens} of {ctx.budget} tokens)"


def collapsed_text(found: SubtreeSummary | None, hidden: int) -> str:
    """What a collapsed node shows: "Summary of N hidden turns:" over the summary ("" when nothing
    continues it)."""
    if found is None or not found.text.strip():
        return ""
    return f"Summary of {hidden} hidden turn{'s' if hidden != 1 else ''}:\n{found.text.strip()}"


class DetailActions:
    """The window's progressive-detail actions (see the module doc).

    It connects its slots when made: the window makes it after connecting its own, so that on
    ``session_opened`` and ``turn_finished`` the canvas already shows the graph these read.
    """

    def __init__(self, controller: EngineController, scene: CanvasScene, inspector: InspectorPanel,
                 status: StatusLine) -> None:
        self.controller, self.scene, self.inspector, self.status = controller, scene, inspector, status
        context = inspector.context
        context.detail_requested.connect(self.request_detail)
        context.branch_lookup = self._other_branches
        context.label_lookup = self._branch_name
        controller.session_opened.connect(self._on_session_opened_collapsed)
        controller.turn_finished.connect(self._on_turn_below_collapsed)

    # ------------------------------------------------------------------ the Context tab

    def request_detail(self, turn_id: str, action: DetailAction) -> asyncio.Task[Any] | None:
        """Change the detail of the turn's context (in the background)."""
        title = TITLES.get(action.kind) or ("Bringing in a branch" if action.node_id else "Taking the branch out")
        self.status.say(f"{title}: recompiling the context…")
        return self.controller.call(title, self._detail, turn_id, action, then=self._on_detailed)

    async def _detail(self, turn_id: str, action: DetailAction) -> Detailed | None:
        engine = self.controller.engine
        assert engine is not None  # controller.call runs only once the engine is loaded
        try:
            return await engine.detail(turn_id, action)
        except DetailError as exc:
            self.status.error(str(exc))
            return None

    def _on_detailed(self, done: Detailed | None) -> None:
        if done is None:
            return
        shown = self.inspector.record
        if shown is not None and shown.turn_id == done.turn_id:
            self.inspector.show_record(done.record)
        revisions = done.record.revisions
        before = revisions[-1].build.detail.get("focus") if revisions else None
        order = self.controller.state.order if self.controller.state is not None else []
        self.status.say(detailed_line(done, self._branch_name(done.detail.focus or ""),
                                      self._branch_name(before or ""), order), 12000)

    def _branch_name(self, node_id: str) -> str:
        """The name of ``node_id``'s branch: the label of its first node."""
        state = self.controller.state
        if state is None or node_id not in state.graph:
            return short_id(node_id) if node_id else ""
        labels = self.controller.labels()
        name = labels.get(state.graph.root_of(node_id)) or labels.get(node_id) or short_id(node_id)
        return name if len(name) <= NAME_CHARS else name[:NAME_CHARS - 1].rstrip() + "…"

    def _other_branches(self, record: TurnRecord) -> list[Branch]:
        """The session's branches besides the turn's own, as they were when it was answered:
        (the latest turn of each, its name and size), in the order they began."""
        state = self.controller.state
        node = (record.node_id or state.node_of(record.turn_id) or "") if state is not None else ""
        if state is None or node not in state.graph:
            return []
        graph, order = state.graph, state.turn_order
        own = graph.root_of(node)
        upto = order.index(record.turn_id) + 1 if record.turn_id in order else len(order)
        tips: dict[str, list[str]] = {}
        for turn_id in order[:upto]:
            tip = state.node_of(turn_id)
            if tip is None or tip not in graph or graph.node(tip).attrs.get(versions.HIDDEN):
                continue
            root = graph.root_of(tip)
            if root != own:
                tips.setdefault(root, []).append(tip)
        return [(nodes[-1], f"{self._branch_name(root)} ({len(nodes)} turn{'s' if len(nodes) != 1 else ''})")
                for root, nodes in tips.items()]

    # ------------------------------------------------------------------ collapsed nodes

    def show_subtree_summary(self, node_id: str, collapsed: bool) -> asyncio.Task[Any] | None:
        """A node just collapsed shows its subtree's summary (expanded: the scene restores its own)."""
        if not collapsed:
            return None
        return self.controller.call("Summarizing the collapsed branch", self._subtree_summary, node_id)

    async def _subtree_summary(self, node_id: str) -> None:
        engine, state = self.controller.engine, self.controller.state
        if engine is None or state is None or node_id not in state.graph:
            return
        found = await engine.subtree_summary(state.session_id, node_id)
        if self.controller.state is not state or not self.scene.is_collapsed(node_id):
            return  # another session opened, or the node was expanded meanwhile
        hidden = sum(1 for n in state.graph.descendants(node_id) if state.graph.node(n).kind == NodeKind.TURN)
        self.scene.set_node_summary(node_id, collapsed_text(found, hidden))

    def _on_session_opened_collapsed(self, state: SessionState) -> None:
        collapsed = [n.node_id for n in state.graph.nodes() if n.attrs.get("collapsed")]
        if collapsed:
            self.controller.spawn(self._summaries_of(collapsed), "Summarizing the collapsed branches")

    async def _summaries_of(self, node_ids: list[str]) -> None:
        for node_id in node_ids:
            await self._subtree_summary(node_id)

    def _on_turn_below_collapsed(self, _turn_id: str, record: TurnRecord) -> None:
        """A turn answered under a collapsed node: the node's summary now includes it."""
        state = self.controller.state
        if state is None or not record.node_id or record.node_id not in state.graph:
            return
        above = [n for n in state.graph.chain_back(record.node_id) if n != record.node_id and self.scene.is_collapsed(n)]
        if above:
            self.controller.spawn(self._summaries_of(above), "Summarizing the collapsed branch")
