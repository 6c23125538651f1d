"""The Timing tab: milliseconds per stage of the build and of the answer, with bars, the plan's
time limits beside them, the answer's token counts and speed, and who answered it — marked when
it was answered off the machine (from ``TurnRecord.usage``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from PySide6.QtGui import QColor
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from app.ui import theme
from app.ui.panels.widgets import (
    MeterWidget,
    RawJsonWidget,
    SortableItem,
    fill_table,
    fit_height,
    fmt_ms,
    make_table,
    scroll_page,
    section_label,
)

if TYPE_CHECKING:
    from app.core.pipeline.record import TurnRecord

# (label, StageTiming field, group, the plan timeout that applies); bars are scaled within a group.
STAGES: tuple[tuple[str, str, str, str], ...] = (
    ("embed query", "embed_ms", "build", ""),
    ("intent", "intent_ms", "build", ""),
    ("plan", "plan_ms", "build", ""),
    ("route", "route_ms", "build", ""),
    ("recall", "recall_ms", "build", "recall"),  # the plan's limit bounds each index channel
    ("compile", "compile_ms", "build", ""),
    ("build (total)", "build_ms", "build", ""),
    ("first token", "first_token_ms", "answer", ""),
    ("answer", "answer_ms", "answer", ""),
)


def provider_rows(usage: dict[str, Any]) -> list[list[str]]:
    """Who answered and where: the provider, "off the machine" when the prompt left it, the cost
    of a priced call, and what the provider registry skipped or retried on the way."""
    if not usage.get("provider"):
        return []
    rows = [["provider", str(usage["provider"])],
            ["answered", "OFF THE MACHINE (the prompt was sent out)" if usage.get("off_machine") else "on this machine"]]
    if usage.get("cost"):
        rows.append(["cost", f"{float(usage['cost']):.4f}"])
    rows.extend(["provider note", str(note)] for note in usage.get("notes") or [])
    return rows


def tokens_per_second(usage: dict[str, Any]) -> float | None:
    """Completion tokens ÷ answer time in seconds, or None without usage (no answer yet)."""
    tokens = usage.get("completion_tokens")
    latency = usage.get("latency_ms")
    if not tokens or not latency or float(latency) <= 0:
        return None
    return float(tokens) / (float(latency) / 1000.0)


class TimingTabWidget(QWidget):
    """Shows where the time of one turn went."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        page, layout = scroll_page(self)
        outer.addWidget(page)
        self.stages = make_table(["Stage", "Time", "", "Plan limit"])
        self.answer = make_table(["", "Value"])
        self.note = QLabel("The LLM intent call (when asked) runs between “embed query” and “intent” and is "
                           "not timed separately; “first token” and “answer” come from the model's usage record.")
        self.note.setWordWrap(True)
        self.raw = RawJsonWidget("Raw timing and usage JSON")
        for widget in (section_label("Stages"), self.stages, self.note, section_label("Answer"), self.answer,
                       self.raw):
            layout.addWidget(widget)
        layout.addStretch(1)

    def show_record(self, record: TurnRecord | None) -> None:
        """Fill the stage and answer tables from ``record`` (clear them for None)."""
        if record is None:
            self.stages.setRowCount(0)
            self.answer.setRowCount(0)
            self.raw.set_data({})
            return
        timing = record.timing.model_dump()
        limits = record.build.plan.get("budget", {}).get("timeouts_ms", {})
        scale: dict[str, float] = {}
        for _, field, group, _limit in STAGES:
            value = timing.get(field)
            scale[group] = max(scale.get(group, 0.0), float(value or 0.0))
        colors = theme.colors_for()
        rows = []
        for label, field, _group, limit in STAGES:
            value = timing.get(field)
            cell = SortableItem(fmt_ms(value), -1.0 if value is None else float(value))
            cap = limits.get(limit) if limit else None
            if value is not None and cap is not None and float(value) > float(cap):
                cell.setForeground(QColor(colors.error))
                cell.setToolTip(f"over the plan's limit of {cap} ms")
            rows.append([label, cell, "", "—" if cap is None else f"{cap} ms"])
        fill_table(self.stages, rows)
        for r, (_label, field, group, _limit) in enumerate(STAGES):
            value = timing.get(field)
            if value is not None:
                color = theme.BAR_COLOR if group == "build" else theme.SEGMENT_COLORS["evidence"]
                self.stages.setCellWidget(r, 2, MeterWidget(float(value), scale[group] or 1.0, color))
        self.stages.setColumnWidth(2, 220)
        fit_height(self.stages, len(STAGES))
        usage = record.usage
        rate = tokens_per_second(usage)
        answer_rows = [
            ["model", record.model or usage.get("model", "") or "—"],
            ["finish", record.finish_reason or "(still running or not answered)"],
            ["prompt tokens", str(usage.get("prompt_tokens", "—"))],
            ["completion tokens", str(usage.get("completion_tokens", "—"))],
            ["tokens / s", "—" if rate is None else f"{rate:.1f}"],
        ]
        answer_rows.extend(provider_rows(usage))
        if usage.get("error"):
            answer_rows.append(["error", str(usage["error"])])
        fill_table(self.answer, answer_rows)
        fit_height(self.answer, len(answer_rows) + 1)
        self.raw.set_data({"timing": timing, "usage": usage, "params": record.params})
