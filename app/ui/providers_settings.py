"""Settings → Providers: which models answer, in which order, at what price, within which limits.

A tab of the Settings dialog over ``ProviderAccess`` (plain callables the desktop composition
root fills in from ``app.llm.providers``; the ui never imports adapters). Each action writes the
data folder's ``providers.json`` at once and is applied to the running engine's provider
registry; an endpoint that is not this machine is added only after the user confirms that
prompts will be sent there. "Test" runs off the UI thread.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMessageBox,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.core.errors import CoreError
from app.ui.panels.widgets import fill_table, make_table, set_role
from app.ui.services import ProviderAccess

COLUMNS = ["", "Provider", "Kind", "Model", "Where", "Price in / out per 1k", "Spent today / month"]


class AddProviderDialog(QDialog):
    """The fields of a new OpenAI-compatible or Ollama provider."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Add a provider")
        self.provider_id = QLineEdit()
        self.kind = QComboBox()
        self.kind.addItems(["openai", "ollama", "anthropic", "google"])
        self.base_url = QLineEdit()
        self.base_url.setPlaceholderText("http://127.0.0.1:8080/v1 (empty: the kind's usual endpoint)")
        self.model = QLineEdit()
        self.api_key_env = QLineEdit()
        self.api_key_env.setPlaceholderText("the NAME of an environment variable, e.g. OPENAI_API_KEY")
        self.price_in, self.price_out = _money(), _money()
        form = QFormLayout()
        for label, field in (("Id", self.provider_id), ("Kind", self.kind), ("Endpoint", self.base_url),
                             ("Model", self.model), ("Key variable", self.api_key_env),
                             ("Price in per 1k tokens", self.price_in), ("Price out per 1k tokens", self.price_out)):
            form.addRow(label, field)
        note = set_role(QLabel("Keys are never stored: name the environment variable that holds one."), "muted")
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(note)
        layout.addWidget(buttons)

    def config(self) -> dict[str, Any]:
        values = {"id": self.provider_id.text().strip() or None, "provider": self.kind.currentText(),
                  "base_url": self.base_url.text().strip() or None, "model": self.model.text().strip(),
                  "api_key_env": self.api_key_env.text().strip() or None,
                  "price_in_per_1k": self.price_in.value(), "price_out_per_1k": self.price_out.value()}
        return {k: v for k, v in values.items() if v is not None}


def _money() -> QDoubleSpinBox:
    box = QDoubleSpinBox()
    box.setRange(0.0, 1000.0)
    box.setDecimals(4)
    box.setSingleStep(0.01)
    return box


def _limit(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


class ProvidersSettingsWidget(QWidget):
    """The Providers tab (module doc). ``engine`` gives the running engine (None while loading)."""

    def __init__(self, access: ProviderAccess, data_dir: Path, engine: Callable[[], Any] = lambda: None,
                 parent: QWidget | None = None, *, confirm: Callable[[str], bool] | None = None) -> None:
        super().__init__(parent)
        self._access, self._data_dir, self._engine = access, data_dir, engine
        self._confirm = confirm or self._ask
        self._rows: list[dict[str, Any]] = []
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pcm-provider-test")
        self._test: Future[str] | None = None
        self.table = make_table(COLUMNS)
        self.add_button, self.test_button = QPushButton("Add…"), QPushButton("Test")
        self.default_button, self.remove_button = QPushButton("Make default"), QPushButton("Remove")
        self.daily, self.monthly = QLineEdit(), QLineEdit()
        for box in (self.daily, self.monthly):
            box.setPlaceholderText("no limit")
        self.limits_button = QPushButton("Set limits")
        self.message = set_role(QLabel(""), "muted")
        self.message.setWordWrap(True)
        buttons = QHBoxLayout()
        for button in (self.add_button, self.test_button, self.default_button, self.remove_button):
            buttons.addWidget(button)
        limits = QHBoxLayout()
        for widget in (QLabel("Daily limit"), self.daily, QLabel("Monthly limit"), self.monthly, self.limits_button):
            limits.addWidget(widget)
        layout = QVBoxLayout(self)
        layout.addWidget(set_role(QLabel("Tried from the top; the in-process model is the last resort."), "muted"))
        layout.addWidget(self.table)
        layout.addLayout(buttons)
        layout.addLayout(limits)
        layout.addWidget(self.message)
        self._poll = QTimer(self)
        self._poll.setInterval(100)
        self._poll.timeout.connect(self._on_poll)
        self.add_button.clicked.connect(self._on_add)
        self.test_button.clicked.connect(self._on_test)
        self.default_button.clicked.connect(lambda: self._act(self._access.set_default, "is the default"))
        self.remove_button.clicked.connect(lambda: self._act(self._access.remove, "was removed"))
        self.limits_button.clicked.connect(self._on_limits)
        self.reload()

    # ------------------------------------------------------------------ state

    def reload(self) -> None:
        """Show the file's providers, in the order they are tried, with what they cost so far."""
        listing = self._access.listing(self._data_dir)
        self._rows = list(listing["providers"])
        fill_table(self.table, [[
            "★" if row.get("default") else "", row["id"], row["kind"], row.get("model") or "(the chat model)",
            "in this process" if row["kind"] == "llama.cpp" else
            ("OFF THE MACHINE: " if row.get("off_machine") else "") + str(row.get("base_url", "")),
            f"{row.get('price_in_per_1k', 0):g} / {row.get('price_out_per_1k', 0):g}",
            f"{row.get('spent_today', 0):.4f} / {row.get('spent_this_month', 0):.4f}",
        ] for row in self._rows])
        self.daily.setText(_limit(listing.get("daily_limit")))
        self.monthly.setText(_limit(listing.get("monthly_limit")))

    def selected_id(self) -> str | None:
        row = self.table.currentRow()
        return str(self._rows[row]["id"]) if 0 <= row < len(self._rows) else None

    def _changed(self, line: str) -> None:
        """After a write: apply it to the running engine, show it, say it."""
        self._access.apply(self._engine(), self._data_dir)
        self.reload()
        self.message.setText(line)

    def _act(self, action: Callable[[Path, str], Any], done: str) -> None:
        provider_id = self.selected_id()
        if provider_id is None:
            self.message.setText("Select a provider first")
            return
        try:
            action(self._data_dir, provider_id)
        except CoreError as exc:
            self.message.setText(str(exc))
            return
        self._changed(f"{provider_id} {done}")

    # ------------------------------------------------------------------ actions

    def _ask(self, host: str) -> bool:
        answer = QMessageBox.question(
            self, "Send prompts off this machine?",
            f"{host} is not this machine. Prompts — the text of your sessions — will be sent there. Add it?")
        return answer == QMessageBox.StandardButton.Yes

    def add(self, config: dict[str, Any], set_as_default: bool = False) -> bool:
        """Add ``config``; an endpoint off the machine only after ``confirm``. True when added."""
        url = str(config.get("base_url") or "")
        off = bool(url) and not self._access.is_loopback(url)
        if config.get("provider") in ("openai", "anthropic", "google") and not url:
            off = True  # the kind's usual endpoint is a hosted API
        allow = False
        if off:
            allow = self._confirm(urlsplit(url).hostname or str(config.get("provider")))
            if not allow:
                self.message.setText("Not added: prompts stay on this machine")
                return False
        try:
            saved = self._access.add(self._data_dir, config, set_as_default, allow)
        except CoreError as exc:
            self.message.setText(str(exc))
            return False
        self._changed(f"Added {getattr(saved, 'id', config.get('id', ''))}")
        return True

    def _on_add(self) -> None:
        dialog = AddProviderDialog(self)
        if dialog.exec() == QDialog.DialogCode.Accepted:
            self.add(dialog.config())

    def _on_limits(self) -> None:
        try:
            daily = float(self.daily.text()) if self.daily.text().strip() else None
            monthly = float(self.monthly.text()) if self.monthly.text().strip() else None
            self._access.set_limits(self._data_dir, daily, monthly, daily is None and monthly is None)
        except (ValueError, CoreError) as exc:
            self.message.setText(f"Limits not set: {exc}")
            return
        self._changed("Spending limits set")

    def _on_test(self) -> None:
        provider_id = self.selected_id()
        if provider_id is None or self._test is not None:
            return
        self.message.setText(f"Testing {provider_id}…")
        self._test = self._pool.submit(self._access.test, self._data_dir, provider_id)
        self._poll.start()

    def _on_poll(self) -> None:
        future = self._test
        if future is None or not future.done():
            return
        self._poll.stop()
        self._test = None
        error = future.exception()
        self.message.setText(str(error) if error is not None else future.result())

    def closeEvent(self, event: Any) -> None:  # noqa: N802 - Qt's name
        self._poll.stop()
        self._pool.shutdown(wait=False, cancel_futures=True)
        super().closeEvent(event)
