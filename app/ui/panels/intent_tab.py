"""The Intent tab: every intent field with its confidence and doubts, and the signals behind it.

Built from ``BuildRecord.intent`` (an ``Intent`` dumped to a dict) and ``BuildRecord.llm_intent``
(the LLM signal as observed: its output and status ok / late / invalid / error / skipped).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QPlainTextEdit, QWidget

from app.ui import theme
from app.ui.panels.plain import Details, intent_sentence
from app.ui.panels.widgets import (
    MeterWidget,
    RawJsonWidget,
    ScrollTab,
    SortableItem,
    fill_table,
    fit_height,
    fmt_value,
    make_table,
    section_label,
    set_role,
)

if TYPE_CHECKING:
    from app.core.pipeline.record import TurnRecord

# Fields in reading order; the first three carry a per-field confidence.
FIELDS: tuple[str, ...] = (
    "mode", "task_type", "goal", "urgency", "risk", "needs_clarification", "acceptance", "constraints",
    "prohibitions", "entities", "sub_questions", "plan_hints",
)
CONFIDENT_FIELDS = ("mode", "task_type", "goal")
SIGNAL_ORDER = ("rules", "embedding", "structure", "env", "profile", "llm")
# Which field an uncertainty reason code is about (the rest concern the intent as a whole).
REASON_FIELDS: dict[str, str] = {
    "low_mode_confidence": "mode", "low_task_confidence": "task_type", "ambiguous_task": "task_type",
    "vague_goal": "goal", "empty_input": "goal", "high_risk_action": "risk",
    "prohibition_conflict": "prohibitions", "no_acceptance": "acceptance",
}


def reasons_by_field(reasons: list[str]) -> dict[str, list[str]]:
    """Uncertainty reasons grouped by the field they concern ("" = the intent as a whole)."""
    out: dict[str, list[str]] = {}
    for reason in reasons:
        code, _, detail = reason.partition(":")
        field = REASON_FIELDS.get(code, "")
        if code == "signal_conflict":
            field = detail.strip().split(" ", 1)[0]
        out.setdefault(field, []).append(reason)
    return out


def rule_side(signals: list[dict[str, Any]], field: str) -> tuple[str, float]:
    """The label the non-LLM signals favour for ``field`` and its share of their total weight."""
    sums: dict[str, float] = {}
    for s in signals:
        if s.get("field") == field and s.get("name") != "llm":
            sums[s["label"]] = sums.get(s["label"], 0.0) + float(s["weight"]) * float(s["score"])
    total = sum(sums.values())
    if not sums or total <= 0:
        return "—", 0.0
    label = max(sorted(sums), key=lambda k: sums[k])
    return label, sums[label] / total


class IntentTabWidget(ScrollTab):
    """Shows the intent of one recorded turn: fields, confidences, doubts, signals, LLM signal."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = self.column
        self.fields = make_table(["Field", "Value", "Confidence", "Why uncertain", "Evidence in the input"])
        self.reasons = QLabel()
        self.reasons.setWordWrap(True)
        self.signals = make_table(["Field", "Label", *SIGNAL_ORDER, "Final"], sortable=True)
        self.llm_status = QLabel()
        self.llm_status.setWordWrap(True)
        self.compare = make_table(["Field", "Rules + embeddings", "LLM", "Final"])
        self.llm_output = QPlainTextEdit()
        self.llm_output.setReadOnly(True)
        self.llm_output.setFont(theme.monospace_font())
        self.llm_output.setMaximumHeight(110)
        self.raw = RawJsonWidget("Raw intent JSON")
        self.details = Details([
            section_label("Fields"), self.fields, section_label("Uncertainty reasons"), self.reasons,
            section_label("Rules & embeddings vs the LLM signal"), self.llm_status, self.compare,
            section_label("LLM output as received"), self.llm_output,
            section_label("Signal contributions (weight × score per label)"), self.signals, self.raw,
        ])
        self.summary.setTextFormat(Qt.TextFormat.PlainText)  # it quotes the user's words
        layout.addWidget(self.summary)
        layout.addWidget(self.details)
        layout.addStretch(1)

    def show_record(self, record: TurnRecord | None) -> None:
        """Fill every section from ``record`` (clear them for None)."""
        if record is None:
            self.summary.setText("")
            for table in (self.fields, self.signals, self.compare):
                table.setRowCount(0)
            self.reasons.setText("")
            self.llm_status.setText("")
            self.llm_output.setPlainText("")
            self.raw.set_data({})
            return
        intent = record.build.intent
        self.summary.setText(intent_sentence(intent))
        self._fill_fields(intent)
        reasons = list(intent.get("uncertainty_reasons", []))
        self.reasons.setText("\n".join(f"• {r}" for r in reasons) if reasons else "None: no field was in doubt.")
        set_role(self.reasons, "muted" if not reasons else "")
        self._fill_signals(intent)
        self._fill_llm(intent, record.build.llm_intent)
        self.raw.set_data({"intent": intent, "llm_intent": record.build.llm_intent})

    def _fill_fields(self, intent: dict[str, Any]) -> None:
        confidence = intent.get("confidence", {})
        by_field = reasons_by_field(list(intent.get("uncertainty_reasons", [])))
        spans: dict[str, list[str]] = {}
        for span in intent.get("evidence_spans", []):
            spans.setdefault(span.get("field", ""), []).append(f"“{span.get('span', '')}”")
        rows = []
        for field in FIELDS:
            doubt = "; ".join(by_field.get(field, []))
            conf = "—" if field not in CONFIDENT_FIELDS else f"{float(confidence.get(field, 0.0)):.0%}"
            rows.append([field, fmt_value(intent.get(field)), conf, doubt, ", ".join(spans.get(field, []))])
        fill_table(self.fields, rows)
        for r, field in enumerate(FIELDS):
            if field in CONFIDENT_FIELDS:
                value = float(confidence.get(field, 0.0))
                meter = MeterWidget(value, 1.0, theme.confidence_color(value, self.palette()), f"{value:.0%}")
                self.fields.setCellWidget(r, 2, meter)
        self.fields.setColumnWidth(2, 150)
        fit_height(self.fields, len(FIELDS))

    def _fill_signals(self, intent: dict[str, Any]) -> None:
        signals = list(intent.get("signals", []))
        distribution: dict[str, dict[str, float]] = intent.get("distribution", {})
        cells: dict[tuple[str, str], dict[str, tuple[float, float]]] = {}
        for s in signals:
            cells.setdefault((s["field"], s["label"]), {})[s["name"]] = (float(s["weight"]), float(s["score"]))
        for field, dist in distribution.items():
            for label in dist:
                cells.setdefault((field, label), {})
        rows = []
        for (field, label), by_name in sorted(cells.items(), key=lambda kv: (kv[0][0], -distribution.get(kv[0][0], {}).get(kv[0][1], 0.0))):
            row: list[SortableItem | str] = [field, label]
            for name in SIGNAL_ORDER:
                if name in by_name:
                    weight, score = by_name[name]
                    item = SortableItem(f"{weight * score:.3f}", weight * score)
                    item.setToolTip(f"weight {weight} × score {score}")
                    row.append(item)
                else:
                    row.append(SortableItem("", -1.0))
            final = distribution.get(field, {}).get(label)
            row.append(SortableItem("—" if final is None else f"{final:.1%}", -1.0 if final is None else final))
            rows.append(row)
        fill_table(self.signals, rows)
        fit_height(self.signals, 16)

    def _fill_llm(self, intent: dict[str, Any], observed: dict[str, Any]) -> None:
        status = str(observed.get("status") or intent.get("llm", {}).get("status", "skipped"))
        detail = intent.get("llm", {}).get("detail", "")
        color = theme.status_color(status, self.palette())
        explain = {
            "skipped": "not asked (the rules and embeddings were confident, or the LLM signal is off)",
            "ok": "answered in time with valid JSON",
            "late": "did not answer within the time limit; the turn went on without it",
            "invalid": "answered, but not with usable intent JSON",
            "error": "the call failed",
        }.get(status, "")
        self.llm_status.setText(
            f"LLM signal: <b style='color:{color}'>{status}</b> — {explain}" + (f" ({detail})" if detail else "")
        )
        output = observed.get("output")
        llm_fields = output if isinstance(output, dict) else {}
        signals = list(intent.get("signals", []))
        rows = []
        for field in ("mode", "task_type", "goal", "urgency", "risk"):
            label, share = rule_side(signals, field)
            rules = f"{label} ({share:.0%} of the weight)" if label != "—" else "—"
            llm_value = llm_fields.get(field)
            rows.append([field, rules, "—" if llm_value is None else fmt_value(llm_value), fmt_value(intent.get(field))])
        fill_table(self.compare, rows)
        fit_height(self.compare, 6)
        if output is None:
            self.llm_output.setPlainText("(no output)")
        elif isinstance(output, (dict, list)):
            self.llm_output.setPlainText(json.dumps(output, indent=2, ensure_ascii=False))
        else:
            self.llm_output.setPlainText(str(output))

