"""The canvas toolbar: the text filter, the topic chooser, the node-kind toggles, Fit and zoom.

The three filters combine (``GraphMirrorScene.set_filter``): a node stays undimmed when its text
matches, its kind is shown, and, with a topic chosen, the topic keeps it. Typing in the search
box (Ctrl+F) also jumps to the newest matching card and outlines it; Enter goes on to the next
older match
(``canvas.topic_filter.topic_nodes``: the turns that mention it, the tasks holding them, what
they left in memory). The chooser lists the topics the open session mentions, most mentioned
first; it is read again when a session opens and after each answered turn (once the memory
writer, which indexes topics, is done), and a topic chosen then stays chosen.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtGui import QAction
from PySide6.QtWidgets import QComboBox, QLineEdit, QToolBar, QWidget

from app.core.types import NodeKind
from app.ui.canvas.topic_filter import session_topics, topic_label, topic_messages, topic_nodes

ALL_TOPICS = "All topics"


class CanvasToolbar(QToolBar):
    """See the module docstring; ``scene`` and ``view`` are the window's canvas, ``controller``
    its ``EngineController``."""

    def __init__(self, scene: Any, view: Any, controller: Any, parent: QWidget | None = None) -> None:
        super().__init__("Canvas", parent)
        self.setObjectName("canvasToolbar")
        self.scene, self.view, self.controller = scene, view, controller
        self._index: Any = None  # the workspace's TopicIndex, once read
        self._nodes: set[str] | None = None  # what the chosen topic keeps (None: no topic chosen)
        self.search = QLineEdit(self)
        self.search.setPlaceholderText("Filter nodes by text (Ctrl+F)")
        self.search.setClearButtonEnabled(True)
        self.search.setMaximumWidth(280)
        self.search.textChanged.connect(self._on_search_changed)
        self.search.returnPressed.connect(self.next_match)
        self.addWidget(self.search)
        self._matches: list[str] = []  # the search's matches, newest first
        self._match = 0
        self.topic = QComboBox(self)
        self.topic.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.topic.setMaximumWidth(240)
        self.topic.setToolTip("Show only the turns that mention a topic, with the tasks holding them "
                              "and what they left in memory")
        self.topic.currentIndexChanged.connect(self._on_topic_chosen)
        self.addWidget(self.topic)
        self._fill([])
        self.kind_actions: dict[NodeKind, QAction] = {}
        for kind in NodeKind:
            action = QAction(kind.value, self)
            action.setCheckable(True)
            action.setChecked(True)
            action.setToolTip(f"Show {kind.value} nodes")
            action.toggled.connect(self.apply)
            self.addAction(action)
            self.kind_actions[kind] = action
        self.addSeparator()
        for text, slot, tip in (("Fit", view.fit_readable, "Fit the selected conversation, the others as blocks (F)"),
                                ("All", view.fit_all, "Show everything: every conversation (E)"),
                                ("\u2212", lambda: view.zoom_by(1 / 1.25), "Zoom out (-)"),
                                ("+", lambda: view.zoom_by(1.25), "Zoom in (+)")):
            action = QAction(text, self)
            action.setToolTip(tip)
            action.triggered.connect(slot)
            self.addAction(action)
        controller.session_opened.connect(self._on_session_opened)
        controller.turn_finished.connect(self._on_turn_finished)

    # ------------------------------------------------------------------ filtering

    def apply(self) -> list[str]:
        """Dim what the text, the kinds and the topic leave out; returns the ids left undimmed."""
        kinds = {k for k, a in self.kind_actions.items() if a.isChecked()}
        return self.scene.set_filter(self.search.text(), None if len(kinds) == len(NodeKind) else kinds, self._nodes)

    def _on_search_changed(self, text: str) -> None:
        matching = self.apply()
        self._matches = list(reversed(matching)) if text.strip() else []
        self._match = -1
        self.next_match()

    def next_match(self) -> None:
        """Jump to the next card the search matches (newest first) and outline it."""
        if not self._matches:
            self.scene.highlight(())
            return
        self._match = (self._match + 1) % len(self._matches)
        node_id = self._matches[self._match]
        self.view.reveal(node_id)
        self.scene.highlight({node_id})

    def _on_topic_chosen(self, _row: int = 0) -> None:
        topic_id = self.topic.currentData()
        state = self.controller.state
        if topic_id is None or self._index is None or state is None:
            self._nodes = None
        else:
            self._nodes = topic_nodes(state, topic_messages(self._index, topic_id, state.session_id))
        self.apply()

    # ------------------------------------------------------------------ the topic list

    def _fill(self, rows: list[tuple[str, str, int]]) -> None:
        """List ``rows`` (from ``session_topics``), keeping the chosen topic when it is still there."""
        chosen = self.topic.currentData()
        self.topic.blockSignals(True)
        self.topic.clear()
        self.topic.addItem(ALL_TOPICS, None)
        for topic_id, name, count in rows:
            self.topic.addItem(topic_label(name, count), topic_id)
        at = self.topic.findData(chosen) if chosen is not None else -1
        self.topic.setCurrentIndex(max(at, 0))
        self.topic.setEnabled(bool(rows))
        self.topic.blockSignals(False)
        if not rows:
            self.topic.setItemText(0, "No topics yet")

    def _on_session_opened(self, _state: Any = None) -> None:
        self.topic.blockSignals(True)
        self.topic.setCurrentIndex(0)  # a topic of the session left behind is not chosen here
        self.topic.blockSignals(False)
        self._nodes = None  # the scene drops it too with the graph it named nodes of
        self.refresh()

    def _on_turn_finished(self, *_args: Any) -> None:
        self.refresh()

    def refresh(self) -> None:
        """Read the topic list again (after the memory writer is done) and re-apply the topic."""
        if self.controller.engine is not None and self.controller.state is not None:
            self.controller.spawn(self._read_topics(), "Reading topics")

    async def _read_topics(self) -> None:
        engine, state = self.controller.engine, self.controller.state
        await engine.memory_idle()
        self._index = await engine.topics()
        if self.controller.state is not state:  # another session opened meanwhile: its own read follows
            return
        self._fill(session_topics(self._index, state.session_id))
        if self.topic.currentData() is not None or self._nodes is not None:
            self._on_topic_chosen()
