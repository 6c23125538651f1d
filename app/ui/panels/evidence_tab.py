"""The Evidence tab: recall candidates (sortable, per channel), channel runs, conflicts, routing.

Built from ``BuildRecord.recall`` (``RecallResult``), ``BuildRecord.context.conflicts`` and
``BuildRecord.routing`` (a ``RoutingDecision`` dumped to a dict, plus ``override``). Candidate
texts come from the context lines that showed them (the record keeps no other text). A candidate
that is a document's part says where it is ("Where": page 12, section “Budget”, sheet Q3, A1:F20,
as the context cited it); selecting it shows its text under the table with a button that opens
the file there (``DocumentPartView``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QLabel, QWidget

from app.core.context.channel_names import CHANNELS
from app.core.session.membership import SOFT
from app.core.session.selectors import describe
from app.ui import theme
from app.ui.panels.citations import citation_map, evidence_texts
from app.ui.panels.document_part import DocumentPartView
from app.ui.panels.plain import evidence_sentence
from app.ui.panels.widgets import (
    IDS_ROLE,
    HoverTracker,
    RawJsonWidget,
    ScrollTab,
    SortableItem,
    fill_table,
    fit_height,
    make_table,
    section_label,
    set_role,
    short_id,
)

if TYPE_CHECKING:
    from app.core.pipeline.record import TurnRecord
    from app.core.session.state import NoteView

CANDIDATE_COLUMNS = ("Rank", "[n]", "Id", "Text", "Where", "Kind", *CHANNELS, "Fused", "Grade", "Relation", "Kept",
                     "Reason")
MISSING = 10**9  # sort key of "not found by this channel": after every real rank


class EvidenceTabWidget(ScrollTab):
    """Shows why each recalled item was kept or not, how each channel ran, and the routing."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        #: Text of an evidence id the context did not show (the window looks it up in the session).
        self.text_lookup: Callable[[str], str | None] | None = None
        #: The session's recall note of an id (a document's part carries its file and selector).
        self.note_lookup: Callable[[str], NoteView | None] | None = None
        self.part = DocumentPartView(self)
        layout = self.column
        self.candidates = make_table(CANDIDATE_COLUMNS, sortable=True)
        self.candidates.setMinimumHeight(320)
        self.channels = make_table(["Channel", "Size asked", "Hits", "Elapsed", "Error"], sortable=True)
        self.conflicts = make_table(["Key", "Using", "From", "Also stated", "Rule"])
        self.no_conflicts = set_role(QLabel("No conflicting statements in this context."), "muted")
        self.routing = QLabel()
        self.routing.setWordWrap(True)
        self.routes = make_table(["", "Node", "Score", "Group"], sortable=True)
        self.raw = RawJsonWidget("Raw recall and routing JSON")
        self.candidate_hover = HoverTracker(self.candidates)
        self.candidates.currentCellChanged.connect(self._on_candidate_changed)
        self.conflict_hover = HoverTracker(self.conflicts)
        self.summary.setTextFormat(Qt.TextFormat.PlainText)  # it quotes the user's words
        for widget in (
            self.summary, section_label("Recall candidates (click a header to sort)"), self.candidates, self.part,
            section_label("Channels"), self.channels, section_label("Conflicts"), self.no_conflicts, self.conflicts,
            section_label("Routing: which node this turn continues"), self.routing, self.routes, self.raw,
        ):
            layout.addWidget(widget)
        layout.addStretch(1)

    def show_record(self, record: TurnRecord | None) -> None:
        """Fill every table from ``record`` (clear them for None)."""
        if record is None:
            for table in (self.candidates, self.channels, self.conflicts, self.routes):
                table.setRowCount(0)
            self.summary.setText("")
            self.routing.setText("")
            self.raw.set_data({})
            return
        recall = record.build.recall
        kept = sum(1 for c in recall.candidates if c.kept)
        self.summary.setText(evidence_sentence(str(record.build.recall_request.get("query", "")),
                                               len(recall.candidates), kept, recall.gate))
        self._fill_candidates(record)
        self._fill_channels(record)
        self._fill_conflicts(record)
        self._fill_routing(record.build.routing, record.build.anchor_node)
        self.raw.set_data({"recall_request": record.build.recall_request,
                           "recall": record.build.recall.model_dump(mode="json"), "routing": record.build.routing})

    def _fill_candidates(self, record: TurnRecord) -> None:
        colors = theme.colors_for()
        texts = evidence_texts(record)
        citations = citation_map(record).values()
        numbers = {c.evidence_id: c.number for c in citations}
        where = {c.evidence_id: describe(c.selector) for c in citations if c.selector}
        dropped = {d.item_id: d.reason for d in record.build.context.dropped}
        rows = []
        for cand in record.build.recall.candidates:
            ident = SortableItem(short_id(cand.id), cand.id)
            ident.setToolTip(cand.id)
            ident.setData(IDS_ROLE, [cand.id])
            text = texts.get(cand.id, "")
            known = (self.text_lookup(cand.id) or "") if not text and self.text_lookup is not None else ""
            if text:
                shown = text
            elif cand.id in dropped:
                shown = f"(not sent: {dropped[cand.id]}) {known}".rstrip()
            else:
                shown = f"{'(not sent)' if not cand.kept else '(not in the context)'} {known}".rstrip()
            text_item = SortableItem(shown, text or known)
            text_item.setToolTip(text or known)
            if not text:
                text_item.setForeground(QColor(colors.muted))
            row: list[SortableItem | str] = [
                SortableItem(str(cand.rank) if cand.kept else "—", cand.rank if cand.kept else MISSING),
                SortableItem(f"[{numbers[cand.id]}]" if cand.id in numbers else "", numbers.get(cand.id, MISSING)),
                ident, text_item, where.get(cand.id, ""), cand.kind,
            ]
            for channel in CHANNELS:
                hit = cand.channels.get(channel)
                if hit is None:
                    row.append(SortableItem("", MISSING))
                else:
                    shown = f"#{hit.rank} · {hit.score:.3f}" if hit.rank else f"marked · {hit.score:.3f}"
                    cell = SortableItem(shown, hit.rank)
                    cell.setToolTip(f"{channel}: rank {hit.rank}, score {hit.score}")
                    row.append(cell)
            row.append(SortableItem(f"{cand.fused:.4f}", cand.fused))
            row.append(SortableItem("" if cand.grade is None else f"{cand.grade:.2f}",
                                    -1.0 if cand.grade is None else cand.grade))
            row.append(cand.relation)
            mark = SortableItem("✓" if cand.kept else "✗", 0 if cand.kept else 1)
            mark.setForeground(QColor(colors.ok if cand.kept else colors.error))
            row.append(mark)
            row.append(cand.reason)
            rows.append(row)
        fill_table(self.candidates, rows)
        self.candidates.setColumnWidth(3, 260)

    def _on_candidate_changed(self, row: int, *_: int) -> None:
        """Show the selected candidate's text and place in its file when it is a document's part."""
        item = self.candidates.item(row, 2) if row >= 0 else None
        ids = item.data(IDS_ROLE) if item is not None else None
        note = self.note_lookup(ids[0]) if ids and self.note_lookup is not None else None
        self.part.show_part(note)

    def _fill_channels(self, record: TurnRecord) -> None:
        colors = theme.colors_for()
        rows = []
        for run in record.build.recall.channels:
            error = SortableItem(run.error or "")
            if run.error:  # a failure, or a channel skipped past the plan's time limit
                error.setForeground(QColor(colors.error))
            # a sub-question's or the loop's second round's run says what it searched
            name = f"{run.channel} (round {run.round}: {run.query})" if run.query else run.channel
            rows.append([name, SortableItem(str(run.size), run.size), SortableItem(str(len(run.hits)), len(run.hits)),
                         SortableItem(f"{run.elapsed_ms:.2f} ms", run.elapsed_ms), error])
        fill_table(self.channels, rows)
        fit_height(self.channels, 8)

    def _fill_conflicts(self, record: TurnRecord) -> None:
        conflicts = record.build.context.conflicts
        rows = []
        for c in conflicts:
            others = "; ".join(f"“{o.get('value', '')}” ({short_id(o.get('evidence_id'))})" for o in c.others)
            source = SortableItem(short_id(c.chosen_evidence))
            source.setToolTip(c.chosen_evidence)
            source.setData(IDS_ROLE, [c.chosen_evidence, *(o.get("evidence_id", "") for o in c.others)])
            rows.append([c.key, c.chosen, source, others, c.rule])
        fill_table(self.conflicts, rows)
        self.conflicts.setVisible(bool(conflicts))
        self.no_conflicts.setVisible(not conflicts)
        fit_height(self.conflicts, 6)

    def _fill_routing(self, routing: dict[str, Any], anchor: str | None) -> None:
        self.routing.setText(_routing_summary(routing, anchor))
        self._fill_routes(list(routing.get("candidates", [])), anchor)

    def _fill_routes(self, candidates: list[dict[str, Any]], anchor: str | None) -> None:
        """One row per anchor candidate: its role, score and each score component."""
        features: list[str] = []
        for c in candidates:
            for name in c.get("components", {}):
                if name not in features:
                    features.append(name)
        self.routes.setColumnCount(4 + len(features))
        self.routes.setHorizontalHeaderLabels(["", "Node", "Score", *features, "Group"])
        rows = []
        for n, c in enumerate(candidates):
            node = c.get("node_id", "")
            role = "✓ anchor" if node == anchor else ("top score" if n == 0 else f"runner-up #{n + 1}")
            ident = SortableItem(short_id(node), node)
            ident.setToolTip(node)
            row: list[SortableItem | str] = [SortableItem(role, n), ident, SortableItem(f"{float(c.get('score', 0.0)):.3f}", float(c.get("score", 0.0)))]
            for name in features:
                value = float(c.get("components", {}).get(name, 0.0))
                row.append(SortableItem(f"{value:.3f}", value))
            row.append(short_id(c.get("group")))
            rows.append(row)
        fill_table(self.routes, rows)
        fit_height(self.routes, 8)


def _shares_summary(shares: dict[str, Any], anchor: str | None) -> list[str]:
    """How sure routing was of the branch, and the other branches whose turns the context also
    reads for that (``app.core.session.membership``); nothing when it was sure."""
    wide = [(node, float(share)) for node, share in shares.get("alternatives", []) if float(share) >= SOFT.threshold]
    if not wide:
        return []
    sure = f"{float(shares.get('share', 1.0)):.0%} sure of " + ("this branch" if anchor else "a new branch")
    return [sure + "; so the context also reads " + ", ".join(
        f"the branch of {short_id(node)} ({share:.0%})" for node, share in wide)]


def _routing_summary(routing: dict[str, Any], anchor: str | None) -> str:
    """The routing decision in rich text: where the turn went and why, and what was unsure."""
    colors = theme.colors_for()
    if anchor is None:
        decision = "<b>new task root</b> (no candidate scored high enough)"
    else:
        decision = f"continues <b>{short_id(anchor)}</b>"
    override = routing.get("override")
    if override == "":
        decision += " — <b>the user asked for a new root</b>"
    elif override:
        decision += f" — <b>moved by the user</b> to {short_id(override)}"
    parts = [decision]
    if routing.get("focus"):
        parts.append(f"focus {short_id(routing['focus'])}" + (" (chosen on the canvas)" if routing.get("focus_chosen") else ""))
    if routing.get("ambiguous"):
        parts.append(f"<b style='color:{colors.warn}'>ambiguous</b> (best guess {short_id(routing.get('best_guess'))})")
    parts.append(f"margin {float(routing.get('margin', 0.0)):.3f}")
    parts.extend(_shares_summary(routing.get("shares") or {}, anchor))
    if routing.get("strategy"):
        parts.append(f"weights “{routing['strategy']}”")
    text = " · ".join(parts)
    if routing.get("reason"):
        text += f"<br>{routing['reason']}"
    if routing.get("clarification"):
        text += f"<br>Would ask: “{routing['clarification']}”"
    return text
