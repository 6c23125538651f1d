"""The inspector: everything one turn's context was built from, read from its recorded trace.

Tabs: Turn (input, answer with citations, context lines), Intent, Plan (CRS), Evidence (recall,
channels, conflicts, routing), Context (budget, blocks, dropped, exact prompt) and Timing. Every
tab is filled from the ``TurnRecord`` alone, so a stored turn inspects exactly as it ran. A node
that is not a turn (env event, task, memory, artifact) gets a page of its own (``node_page``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QEvent, Signal
from PySide6.QtWidgets import QLabel, QStackedWidget, QTabWidget, QVBoxLayout, QWidget

from app.ui.panels.context_tab import ContextTabWidget
from app.ui.panels.evidence_tab import EvidenceTabWidget
from app.ui.panels.intent_tab import IntentTabWidget
from app.ui.panels.node_page import NodePage
from app.ui.panels.plan_tab import PlanTabWidget
from app.ui.panels.timing_tab import TimingTabWidget
from app.ui.panels.turn import TurnPanel
from app.ui.panels.widgets import HoverTracker, empty_label, restyle, set_role, short_id

if TYPE_CHECKING:
    from app.core.pipeline.record import TurnRecord

EMPTY_HINT = "Select a turn on the canvas to see how its context was built: intent, plan, evidence, context and timing."
def history_note(speaker: str, text: str, at: str) -> str:
    """What the inspector says of an imported history turn (no context was built for it)."""
    said = text if len(text) <= 400 else text[:400] + "…"
    return (f"Imported history{' from ' + speaker if speaker else ''}, {at[:10]}:\n\n“{said}”\n\n"
            "No context was built for it: its text is evidence that later turns recall and cite.")


UNBUILT_NOTE = ("Interrupted: the app stopped before this turn's context was built. Its input is kept in the "
                "session; ask it again to get an answer.")


class InspectorPanel(QWidget):
    """Tabs that explain one recorded turn. ``evidence_hovered`` carries the evidence ids under the
    mouse in any tab (``[]`` when it leaves them), for the canvas to highlight."""

    evidence_hovered = Signal(list)

    TAB_TITLES: tuple[str, ...] = ("Turn", "Intent", "Plan", "Evidence", "Context", "Timing")

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._record: TurnRecord | None = None
        self._restyling = True  # no re-colouring until the tabs exist
        self.turn = TurnPanel()
        self.intent = IntentTabWidget()
        self.plan = PlanTabWidget()
        self.evidence = EvidenceTabWidget()
        self.context = ContextTabWidget()
        self.timing = TimingTabWidget()
        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        for title, page in zip(self.TAB_TITLES, self._pages(), strict=True):
            self.tabs.addTab(page, title)
        self.title = set_role(QLabel(), "muted")
        self.empty = empty_label(EMPTY_HINT)
        self.stack = QStackedWidget()
        self.stack.addWidget(self.empty)
        self.stack.addWidget(self.tabs)
        self.node_page = NodePage()
        self.stack.addWidget(self.node_page)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.title)
        layout.addWidget(self.stack)
        self.turn.evidence_hovered.connect(self.evidence_hovered)
        trackers = (self.evidence.candidate_hover, self.evidence.conflict_hover,
                    self.context.block_hover, self.context.dropped_hover)
        for tracker in trackers:
            tracker.hovered.connect(self.evidence_hovered)
        self._trackers: tuple[HoverTracker, ...] = trackers
        self.show_record(None)
        self._restyling = False

    def _pages(self) -> tuple[TurnPanel, IntentTabWidget, PlanTabWidget, EvidenceTabWidget, ContextTabWidget,
                              TimingTabWidget]:
        return (self.turn, self.intent, self.plan, self.evidence, self.context, self.timing)

    @property
    def record(self) -> TurnRecord | None:
        """The turn shown, or None."""
        return self._record

    def show_record(self, record: TurnRecord | None) -> None:
        """Show ``record`` in every tab (None: the "select a turn" hint). The open tab stays open."""
        self._record = record
        for page in self._pages():
            page.show_record(record)
        if record is None:
            self.title.setText("")
            self.title.setVisible(False)
            self.empty.setText(EMPTY_HINT)
            self.stack.setCurrentWidget(self.empty)
            return
        self.title.setText(f"Turn {short_id(record.turn_id)} · session {short_id(record.session_id)} · "
                           f"node {short_id(record.node_id)}")
        self.title.setVisible(True)
        self.stack.setCurrentWidget(self.tabs)

    def show_node(self, title: str, lines: list[tuple[str, str]], content: str) -> None:
        """Show a node that is not a turn (``node_page.node_details`` says what)."""
        self._record = None
        self.title.setVisible(False)
        self.node_page.show_details(title, lines, content)
        self.stack.setCurrentWidget(self.node_page)

    def show_note(self, text: str) -> None:
        """Say ``text`` where a turn's tabs would be (a turn with no recorded build)."""
        self.empty.setText(text)
        self.stack.setCurrentWidget(self.empty)

    def set_streaming_text(self, text: str, turn_id: str | None = None) -> None:
        """Show ``text`` as the answer of the shown turn while it streams (see ``TurnPanel``)."""
        self.turn.set_streaming_text(text, turn_id)

    def changeEvent(self, event: QEvent) -> None:
        """On a theme switch, colour everything again for the new palette."""
        super().changeEvent(event)
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange) and not getattr(self, "_restyling", True):
            self._restyling = True
            try:
                restyle(self)
                streaming = self.turn.streaming_text()
                self.show_record(self._record)
                if streaming is not None:
                    self.turn.set_streaming_text(streaming)
            finally:
                self._restyling = False
