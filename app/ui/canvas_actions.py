"""What the canvas's gestures and node menu do to the session's branches.

``CanvasActions`` is an object the main window holds: a dropped turn is re-anchored, a dropped
pending input takes the target as its anchor, a moved node keeps its place, and the node menu's
actions (checkpoint, focus, inject, collapse, undo re-anchor, answer again as a new version) go to
the engine through the controller; the turn panel's ‹ › shows another version of a turn.
Re-anchoring and injecting are ``QUndoCommand``s on the window's undo stack (Ctrl+Z). It is made
with the widgets it acts on and connects their signals itself; of the window it needs only which
turn is selected and a way to show a turn (``CanvasHost``).
"""

from __future__ import annotations

import asyncio
import inspect
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from PySide6.QtGui import QUndoCommand, QUndoStack
from PySide6.QtWidgets import QInputDialog

from app.core.session import versions
from app.ui.canvas.overlay import ACTION_TEXT
from app.ui.canvas.scene import CanvasScene
from app.ui.composer import ComposerWidget, RoutingBanner
from app.ui.controller import EngineController
from app.ui.detail_actions import DetailActions
from app.ui.panels.inspector import InspectorPanel
from app.ui.status_line import StatusLine

if TYPE_CHECKING:
    from app.core.engine.facade import Injected, Reanchored, Restored


class ReanchorCommand(QUndoCommand):
    """Re-anchoring a turn, undoable: redo asks the engine to re-anchor, undo to restore."""

    def __init__(self, controller: EngineController, turn_id: str, target: str | None, text: str) -> None:
        super().__init__(text)
        self.controller, self.turn_id, self.target = controller, turn_id, target

    def redo(self) -> None:
        self.controller.reanchor(self.turn_id, self.target)

    def undo(self) -> None:
        self.controller.undo_reanchor(self.turn_id)


class InjectCommand(QUndoCommand):
    """Injecting results into a branch, undoable: undo retires the ``merges`` edges it added
    (once the inject itself has landed)."""

    def __init__(self, controller: EngineController, session_id: str, sources: list[str], target: str, text: str) -> None:
        super().__init__(text)
        self.controller, self.session_id, self.sources, self.target = controller, session_id, sources, target
        self.injected: Injected | None = None
        self._task: asyncio.Task[Any] | None = None

    def redo(self) -> None:
        self.injected, self._task, engine = None, None, self.controller.engine
        if engine is None:  # redone while the models reload
            self.controller.error.emit("The models are still loading.")
            return
        self._task = self.controller.call("Injecting", engine.inject, self.session_id, self.sources,
                                          self.target, then=self._landed)

    def _landed(self, injected: Injected) -> None:
        self.injected = injected

    def undo(self) -> None:
        task, engine = self._task, self.controller.engine

        async def take_back() -> Any:
            if task is not None:
                await asyncio.wait([task])  # an inject still running lands first
            if self.injected is None or engine is None:  # it failed (and said so): nothing to take back
                return None
            return await engine.undo_inject(self.injected)

        self.controller.call("Undoing the inject", take_back)


class CanvasHost(Protocol):
    """What the canvas actions need of the window: the turn it shows, and a way to show one."""

    @property
    def selected_turn(self) -> str | None: ...

    async def show_turn(self, turn_id: str) -> None: ...


class CanvasActions:
    """The window's branch actions (see the module doc)."""

    def __init__(self, controller: EngineController, scene: CanvasScene, composer: ComposerWidget,
                 inspector: InspectorPanel, banner: RoutingBanner, undo: QUndoStack, status: StatusLine,
                 details: DetailActions, host: CanvasHost) -> None:
        self.controller, self.scene, self.composer, self.inspector = controller, scene, composer, inspector
        self.banner, self.undo, self.status, self.details, self.host = banner, undo, status, details, host
        inspector.turn.version_requested.connect(self._on_version_requested)
        inspector.turn.regenerate_requested.connect(self.ask_again)
        controller.reanchored.connect(self._on_reanchored)
        banner.choice_made.connect(self.reanchor)
        scene.node_dropped.connect(self._on_node_dropped)
        scene.node_moved.connect(self._on_node_moved)
        scene.node_action.connect(self.node_action)
        scene.pending_dropped.connect(self._on_pending_dropped)

    def reanchor(self, turn_id: str, target: str | None) -> None:
        """Re-anchor ``turn_id`` onto ``target`` (None: a new branch) as an undoable command."""
        labels = self.controller.labels()
        name = f"«{labels.get(target, '')[:24]}»" if target else "a new branch"
        self.undo.push(ReanchorCommand(self.controller, turn_id, target, f"re-anchor onto {name}"))

    def _on_reanchored(self, result: Reanchored) -> None:
        """A re-anchored turn that had an answer is answered again from its new place, as a new
        version (the old answer stays, one ‹ › away); undoing shows the turn's own version again."""
        record = getattr(result, "record", None)
        if record is not None and self.host.selected_turn == record.turn_id:
            self.inspector.show_record(record)
        self.banner.hide()
        revisions = record.revisions if record is not None else []
        undone = bool(revisions) and revisions[-1].kind == "undo"
        if undone and self.controller.engine is not None:
            self.controller.call("Showing the version", self.controller.engine.show_version, result.session_id,
                                 result.node_id)
        elif record is not None and record.output and result.change.added_edges:
            self.ask_again(result.node_id)
        self.status.say(
            "Re-anchor undone." if undone else "Re-anchored: the context was re-planned for the new anchor"
            + (" and the input is being answered again (‹ › flips to the earlier answer)." if record is not None
               and record.output else "."), 8000)

    def _on_node_dropped(self, dragged: str, target: str) -> None:
        turn_id = self.controller.turn_of(dragged)
        if turn_id is None:
            self.status.error("Only turns can be re-anchored by dragging.")
            return
        self.reanchor(turn_id, target)

    def _on_node_moved(self, node_id: str, x: float, y: float) -> None:
        engine = self.controller.engine
        if self.controller.state is not None and engine is not None:
            self.controller.call("Saving the position", engine.move_nodes, self.controller.session_id, [(node_id, x, y)])

    def _on_pending_dropped(self, target: str) -> None:
        self.composer.set_anchor(target, self.controller.labels().get(target, ""))
        self.composer.edit.setFocus()

    def node_action(self, action: str, node_id: str) -> None:
        """Do what the node menu's ``action`` says to ``node_id`` (reply, checkpoint, restore a
        checkpoint, focus, inject, collapse or expand, undo the re-anchor, answer again, steer a task)."""
        c, sid = self.controller, self.controller.session_id
        engine = c.engine
        if engine is None or sid is None:
            return
        if action == "reply":
            self._on_pending_dropped(node_id)
        elif action in ("checkpoint", "restore"):
            self._checkpoint(action, sid, node_id)
        elif action == "focus":
            result = engine.set_focus(sid, node_id)
            if inspect.isawaitable(result):
                c.spawn(result, "Switching focus")
            self.status.say("Focus switched: routing now favours this branch.", 6000)
        elif action == "inject":
            self._inject_into(sid, node_id)
        elif action in ("collapse", "expand"):
            collapsed = action == "collapse"
            self.scene.set_collapsed(node_id, collapsed)
            self.details.show_subtree_summary(node_id, collapsed)  # the summary of what it hides, on the node
            c.call("Saving the collapse", engine.set_collapsed, sid, node_id, collapsed)
        elif action == "undo_reanchor":
            turn_id = c.turn_of(node_id)
            if turn_id:
                c.undo_reanchor(turn_id)
        elif action == "regenerate":
            self.ask_again(node_id)
        elif action.endswith("_task"):
            self._steer_task(action, sid, node_id)

    def _checkpoint(self, action: str, sid: str, node_id: str) -> None:
        """Mark a checkpoint keeping its branch's state (or remove the mark: the menu's "Remove
        checkpoint" on a marked card), or restore one."""
        c, engine, state = self.controller, self.controller.engine, self.controller.state
        if engine is None or state is None or node_id not in state.graph:
            return
        if action == "checkpoint":
            marked = bool(state.graph.node(node_id).attrs.get("checkpoint"))
            c.call("Checkpoint", partial(engine.checkpoint, remove=marked), sid, node_id)
        else:
            c.call("Restoring the checkpoint", engine.restore_checkpoint, sid, node_id, then=self._restored)

    def _restored(self, restored: Restored) -> None:
        """A checkpoint restored: the next input starts the new branch there, with the detail
        settings the checkpoint kept; its restored tasks are on the canvas, paused."""
        self.controller.start_branch(restored.anchor, restored.turn_id)
        self._on_pending_dropped(restored.anchor)
        self.status.say(restored.line, 8000)

    def _steer_task(self, action: str, sid: str, node_id: str) -> None:
        """Pause, resume, amend (asks for the amendment) or cancel the task of a task card; the
        engine's line about it goes to the status bar."""
        c, engine, state = self.controller, self.controller.engine, self.controller.state
        if engine is None or state is None or node_id not in state.graph:
            return
        task_id = state.graph.node(node_id).ref_id
        if not task_id:
            return
        if action == "amend_task":
            text, ok = QInputDialog.getText(self.composer, "Amend task", "What should the task also do or respect?")
            if not ok or not text.strip():
                return
            c.call("Amending the task", engine.amend_task, sid, task_id, text, then=lambda s: self.status.say(s.line, 8000))
            return
        steer = {"pause_task": engine.pause_task, "resume_task": engine.resume_task, "cancel_task": engine.cancel_task}
        c.call(ACTION_TEXT[action], steer[action], sid, task_id, then=lambda s: self.status.say(s.line, 8000))

    def _inject_into(self, sid: str, node_id: str) -> None:
        """Merge the selected results into ``node_id``'s branch, as an undoable command."""
        sources = [n for n in self.scene.selected_node_ids() if n != node_id] if hasattr(self.scene, "selected_node_ids") else []
        if not sources:
            self.status.error("Select the results to merge first (Ctrl+click), then choose Inject on the target.")
            return
        label = self.controller.labels().get(node_id, node_id[:8])
        self.undo.push(InjectCommand(self.controller, sid, sources, node_id, f"inject {len(sources)} into {label}"))

    def ask_again(self, node_id: str) -> None:
        """Answer the turn's input again: a new version of the turn, shown in its place."""
        turn_id = self.controller.turn_of(node_id)
        state = self.controller.state
        if turn_id and state is not None and turn_id in state.turns:
            first = state.turns[turn_id].message_ids[0]
            if self.controller.submit(state.messages[first].text, version_of=node_id,
                                      budget=self.composer.budget.value()) is not None:
                self.status.say("Answering again: a new version of this turn (‹ › flips between them).", 6000)

    def show_versions(self, node_id: str | None) -> None:
        """Give the turn panel the versions of ``node_id``'s turn (‹ n/m ›)."""
        state = self.controller.state
        found = versions.versions(state.graph, node_id) if state is not None and node_id and node_id in state.graph else []
        self.inspector.turn.set_versions(found, node_id or "")

    def _on_version_requested(self, node_id: str) -> None:
        """Show another version of the selected turn: on the canvas in its place, and here."""
        c = self.controller
        engine, state = c.engine, c.state
        if engine is None or state is None or node_id not in state.graph:
            return
        turn_id = state.graph.node(node_id).ref_id

        async def flip() -> None:
            await engine.show_version(state.session_id, node_id)
            if turn_id:
                await self.host.show_turn(turn_id)

        c.spawn(flip(), "Showing another version")
