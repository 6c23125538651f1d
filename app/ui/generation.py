"""Session settings: the open session's temperature, answer length and standing instruction.

A window-modal dialog opened with ``open()`` (never ``exec()``: the app runs on an asyncio loop);
Save hands a ``SessionGeneration`` to ``saved``. "Default" (the spin boxes' lowest value) leaves
a value to the app's default; "Answered by" picks the provider asked first in this session (a
server added from Settings → Models, say), the others staying its fallback.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QLabel,
    QPlainTextEdit,
    QSpinBox,
    QWidget,
)

from app.core.ports import GenerationParams, SessionGeneration

MAX_PROMPT = 4000


class GenerationDialog(QDialog):
    """Edits one session's ``SessionGeneration``; emits ``saved`` with the new one."""

    saved = Signal(object)

    def __init__(self, current: SessionGeneration, defaults: GenerationParams, title: str,
                 parent: QWidget | None = None, providers: Sequence[str] = ()) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"Session settings — {title}")
        self.temperature = QDoubleSpinBox(self)
        self.temperature.setRange(-0.1, 2.0)  # -0.1 shows "Default"
        self.temperature.setSingleStep(0.1)
        self.temperature.setDecimals(2)
        self.temperature.setSpecialValueText(f"Default ({defaults.temperature:g})")
        self.temperature.setValue(-0.1 if current.temperature is None else current.temperature)
        self.max_tokens = QSpinBox(self)
        self.max_tokens.setRange(63, 8192)  # 63 shows "Default"
        self.max_tokens.setSingleStep(64)
        self.max_tokens.setSpecialValueText(f"Default ({defaults.max_tokens})")
        self.max_tokens.setValue(63 if current.max_tokens is None else current.max_tokens)
        self.provider = QComboBox(self)  # who answers this session first (Settings → Providers lists them)
        self.provider.addItem("Default (the order of Settings → Providers)", "")
        for provider_id in dict.fromkeys([*providers, *([current.provider] if current.provider else [])]):
            self.provider.addItem(provider_id, provider_id)
        self.provider.setCurrentIndex(max(0, self.provider.findData(current.provider)))
        self.prompt = QPlainTextEdit(self)
        self.prompt.setPlaceholderText("For example: answer in French; keep answers short; I use Python 3.11.")
        self.prompt.setPlainText(current.system_prompt)
        self.count = QLabel(self)
        self.prompt.textChanged.connect(self._counted)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel,
                                        parent=self)
        self.buttons.accepted.connect(self._save)
        self.buttons.rejected.connect(self.reject)
        form = QFormLayout(self)
        form.addRow("Temperature (higher: more varied)", self.temperature)
        form.addRow("Longest answer (tokens)", self.max_tokens)
        form.addRow("Answered by", self.provider)
        form.addRow(QLabel("Standing instruction — in every context of this session:", self))
        form.addRow(self.prompt)
        form.addRow(self.count)
        form.addRow(self.buttons)
        self._counted()
        self.resize(520, 380)

    def values(self) -> SessionGeneration:
        return SessionGeneration(
            temperature=None if self.temperature.value() < 0 else round(self.temperature.value(), 2),
            max_tokens=None if self.max_tokens.value() < 64 else self.max_tokens.value(),
            system_prompt=self.prompt.toPlainText().strip(),
            provider=str(self.provider.currentData() or ""),
        )

    def _counted(self) -> None:
        n = len(self.prompt.toPlainText().strip())
        self.count.setText(f"{n:,} of {MAX_PROMPT:,} characters" + (" — too long to save" if n > MAX_PROMPT else ""))
        self.buttons.button(QDialogButtonBox.StandardButton.Save).setEnabled(n <= MAX_PROMPT)

    def _save(self) -> None:
        self.saved.emit(self.values())
        self.accept()
