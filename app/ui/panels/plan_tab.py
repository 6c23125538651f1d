"""The Plan (CRS) tab: every field of the chosen plan by DESIGN §4 family, and the rejected plans.

Built from ``BuildRecord.plan`` (a ``ContextPlan`` dumped to a dict), ``plan_candidates`` and, for
the tokens each segment actually used, ``BuildRecord.context.segments``. The tool policy shows the
plan's tool filter: the tools offered with their score and why, those left out, those blocked and
why, and the calls the turn made (``BuildRecord.tools``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QTreeWidget, QTreeWidgetItem, QWidget

from app.ui.panels.plain import Details, plan_sentence
from app.ui.panels.widgets import (
    RawJsonWidget,
    ScrollTab,
    SortableItem,
    fill_table,
    fit_height,
    fmt_value,
    make_table,
    section_label,
)

if TYPE_CHECKING:
    from app.core.pipeline.record import TurnRecord
    from app.core.tools.model import ToolRound

# DESIGN §4 families → the plan keys shown under each (dotted paths pick one field of a section).
FAMILIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Intent & confidence", ("intent", "strategy", "needs_clarification", "clarification_question", "required",
                             "constraints", "prohibitions", "preferences", "sub_questions", "actions_held_back",
                             "surface_conflicts")),
    ("Retrieval", ("retrieval", "history")),
    ("Rerank & crop", ("rerank",)),
    ("Budget & latency", ("budget",)),
    ("Concurrency & interruption", ("concurrency",)),
    ("Tool policy", ("tools",)),
    ("Checks", ("candidate_id", "repairs")),
)


def family_of(plan: dict[str, Any]) -> dict[str, list[str]]:
    """Family name → the plan keys it shows; keys no family names go to "Other" (nothing is hidden)."""
    out: dict[str, list[str]] = {}
    named: set[str] = set()
    for family, keys in FAMILIES:
        out[family] = [k for k in keys if k in plan]
        named.update(keys)
    rest = [k for k in plan if k not in named]
    if rest:
        out["Other"] = rest
    return out


class PlanTabWidget(ScrollTab):
    """Shows the chosen context plan grouped by family, and every candidate plan with why."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._open: list[QTreeWidgetItem] = []  # rows kept open after filling (the tool filter's)
        layout = self.column
        self.tree = QTreeWidget()
        self.tree.setHeaderLabels(["Field", "Value"])
        self.tree.setAlternatingRowColors(True)
        self.tree.setMinimumHeight(420)
        self.candidates = make_table(
            ["Candidate", "Recall", "Asks first", "Chosen", "Violations", "Repaired", "Pruned", "Why"], sortable=True)
        self.raw = RawJsonWidget("Raw plan JSON")
        self.details = Details([section_label("Chosen plan"), self.tree,
                                section_label("Candidate plans"), self.candidates, self.raw])
        self.summary.setTextFormat(Qt.TextFormat.PlainText)  # it quotes the user's words
        layout.addWidget(self.summary)
        layout.addWidget(self.details)
        layout.addStretch(1)

    def show_record(self, record: TurnRecord | None) -> None:
        """Fill the tree and the candidates table from ``record`` (clear them for None)."""
        self.tree.clear()
        if record is None:
            self.summary.setText("")
            self.candidates.setRowCount(0)
            self.raw.set_data({})
            return
        plan = record.build.plan
        used = {name: usage.used for name, usage in record.build.context.segments.items()}
        self.summary.setText(plan_sentence(plan, record.build.context.tokens))
        self._open = []
        bold = QFont(self.tree.font())
        bold.setBold(True)
        for family, keys in family_of(plan).items():
            top = QTreeWidgetItem([family, ""])
            top.setFont(0, bold)
            self.tree.addTopLevelItem(top)
            for key in keys:
                if key == "budget":
                    self._add_budget(top, plan[key], used)
                elif key == "tools":
                    self._add_tools(top, plan[key], record.build.tools, len(record.build.tool_specs))
                else:
                    self._add(top, key, plan[key])
            top.setExpanded(True)
        self.tree.expandToDepth(1)  # resets what was expanded while filling; the tool filter's rows stay open
        for item in self._open:
            item.setExpanded(True)
        self.tree.resizeColumnToContents(0)
        self._fill_candidates(record.build.plan_candidates)
        self.raw.set_data({"plan": plan, "plan_candidates": record.build.plan_candidates})

    def _add(self, parent: QTreeWidgetItem, key: str, value: Any) -> QTreeWidgetItem:
        """One row per scalar or list of scalars; a dict (or list of dicts) becomes a sub-tree."""
        if isinstance(value, dict) and value:
            node = QTreeWidgetItem(parent, [key, ""])
            for k, v in value.items():
                self._add(node, k, v)
            node.setExpanded(True)
            return node
        if isinstance(value, list) and value and any(isinstance(v, (dict, list)) for v in value):
            node = QTreeWidgetItem(parent, [key, f"{len(value)} items"])
            for n, v in enumerate(value):
                self._add(node, str(n), v)
            return node
        item = QTreeWidgetItem(parent, [key, fmt_value(value)])
        item.setToolTip(1, fmt_value(value))
        return item

    def _add_budget(self, parent: QTreeWidgetItem, budget: dict[str, Any], used: dict[str, int]) -> None:
        node = QTreeWidgetItem(parent, ["budget", ""])
        for key, value in budget.items():
            if key == "segments" and isinstance(value, dict):
                seg = QTreeWidgetItem(node, ["tokens per segment", f"{sum(value.values())} planned"])
                for name, quota in value.items():
                    QTreeWidgetItem(seg, [name, f"{quota} planned · {used.get(name, 0)} used"])
                seg.setExpanded(True)
            elif key == "timeouts_ms" and isinstance(value, dict):
                limits = QTreeWidgetItem(node, ["timeouts (ms)", ""])
                for stage, ms in value.items():
                    QTreeWidgetItem(limits, [stage, f"{ms} ms"])
            else:
                self._add(node, key, value)
        node.setExpanded(True)

    def _add_tools(self, parent: QTreeWidgetItem, tools: dict[str, Any], round_: ToolRound | None,
                   registered: int) -> None:
        """The plan's tool filter: what it offered (score and why), what it left out, what it
        blocked and why; then the calls the turn made of them."""
        node = QTreeWidgetItem(parent, ["tools", ""])
        offered = tools.get("allowed", [])
        limit = tools.get("max_offered", 0)
        top = QTreeWidgetItem(node, ["offered", f"{len(offered)} of {registered} registered"
                                     + (f" (at most {limit})" if limit else "")])
        scores, why = tools.get("scores", {}), tools.get("why", {})
        for name in offered:
            score = scores.get(name)
            item = QTreeWidgetItem(top, [name, (f"{score:.2f} · " if score is not None else "") + why.get(name, "")])
            item.setToolTip(1, why.get(name, ""))
        self._open += [node, top]
        left = tools.get("left_out", [])
        out = QTreeWidgetItem(node, ["left out", "" if left else "(none near the limit)"])
        for line in left:
            name, _, rest = str(line).partition(" (")
            QTreeWidgetItem(out, [name, "(" + rest if rest else ""])
        notes = tools.get("notes", [])
        blocked = QTreeWidgetItem(node, ["blocked", fmt_value(tools.get("blocked", [])) if not notes else ""])
        for note in notes:
            name, _, reason = str(note).partition(": ")
            QTreeWidgetItem(blocked, [name, reason])
        if round_ is not None and round_.calls:
            called = QTreeWidgetItem(node, ["called", f"{len(round_.calls)} call(s), chosen by {round_.selection}"])
            for outcome in round_.calls:
                QTreeWidgetItem(called, [outcome.call.tool, outcome.status + (f": {outcome.error}" if outcome.error else "")])
            self._open.append(called)
        for key, value in tools.items():
            if key not in ("allowed", "blocked", "notes", "scores", "why", "left_out", "max_offered"):
                self._add(node, key, value)

    def _fill_candidates(self, candidates: list[dict[str, Any]]) -> None:
        rows = []
        for c in candidates:
            plan = c.get("plan", {})
            chosen = bool(c.get("chosen"))
            rows.append([
                c.get("candidate_id", "?"),
                plan.get("strategy", "?"),
                fmt_value(plan.get("needs_clarification", False)),
                SortableItem("✓ chosen" if chosen else "✗", 0 if chosen else 1),
                "; ".join(c.get("violations", [])) or "—",
                fmt_value(c.get("repaired", False)),
                fmt_value(c.get("pruned", False)),
                c.get("reason", ""),
            ])
        fill_table(self.candidates, rows)
        self.candidates.sortItems(3)
        for r in range(self.candidates.rowCount()):
            if self.candidates.item(r, 3).text().startswith("✓"):
                for col in range(self.candidates.columnCount()):
                    item = self.candidates.item(r, col)
                    font = item.font()
                    font.setBold(True)
                    item.setFont(font)
        fit_height(self.candidates, 8)
