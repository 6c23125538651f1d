"""Dialogs of the desktop app. None of them is run with a modal ``exec()`` (the app runs on qasync,
where a nested event loop inside a coroutine fails): open them with ``open()`` or ``show()`` and
listen to their signals.

``SettingsDialog`` edits a copy of ``Settings``. A changed chat model is verified before the
dialog accepts — by the ``verify_chat_model`` callable the composition root passes in (it may
load the file in a child process and take seconds), run on a worker thread while the dialog
shows progress; an error it returns is shown in red by the field and Save is refused.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.config import Settings
from app.ui.env_settings import EnvironmentSettingsWidget
from app.ui.panels.widgets import set_role

VerifyModel = Callable[[str], str | None]
THEMES: tuple[tuple[str, str], ...] = (("light", "Light"), ("dark", "Dark"))


def _spin(low: int, high: int, value: int, step: int = 1, suffix: str = "") -> QSpinBox:
    box = QSpinBox()
    box.setRange(low, high)
    box.setSingleStep(step)
    box.setValue(max(low, min(high, value)))
    if suffix:
        box.setSuffix(suffix)
    return box


def _row(*widgets: QWidget) -> QWidget:
    holder = QWidget()
    layout = QHBoxLayout(holder)
    layout.setContentsMargins(0, 0, 0, 0)
    for widget in widgets:
        layout.addWidget(widget, 1 if isinstance(widget, (QComboBox, QLineEdit)) else 0)
    return holder


class SettingsDialog(QDialog):
    """Edits the settings; emits ``settings_accepted`` with a new ``Settings`` when saved.

    Cancel (or closing the window) emits nothing and leaves the given settings untouched.
    """

    settings_accepted = Signal(object)

    def __init__(
        self,
        settings: Settings,
        *,
        chat_models: Sequence[str],
        embed_models: Sequence[str],
        verify_chat_model: VerifyModel,
        parent: QWidget | None = None,
        poll_ms: int = 50,
        providers: QWidget | None = None,
        models: QWidget | None = None,
        tools: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Settings")
        self.setMinimumWidth(560)
        self._settings = settings
        self._verify = verify_chat_model
        self._future: Future[str | None] | None = None
        self._pending = ""  # the chat model being verified
        self._verified = ""  # the last chat model that passed verification
        self.file_dialog: QFileDialog | None = None

        self.chat_model = QComboBox()
        self.chat_model.setEditable(True)
        self.chat_model.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        self.chat_model.addItems(_with_current(chat_models, settings.chat_model))
        self.chat_model.setCurrentText(settings.chat_model)
        self.chat_model.setToolTip("A model name from the manifest, or the path of a .gguf file")
        self.browse = QPushButton("Browse…")
        self.chat_error = set_role(QLabel(), "error")
        self.chat_error.setWordWrap(True)
        self.chat_error.setVisible(False)
        self.progress = QProgressBar()
        self.progress.setRange(0, 0)  # busy
        self.progress.setMaximumHeight(10)
        self.progress.setTextVisible(False)
        self.progress_label = set_role(QLabel("Verifying model… (loading it in a test process)"), "muted")
        self.progress_row = _row(self.progress_label, self.progress)
        self.progress_row.setVisible(False)

        self.embed_model = QComboBox()
        self.embed_model.addItems(_with_current(embed_models, settings.embed_model))
        self.embed_model.setCurrentText(settings.embed_model)
        self.context_size = _spin(512, 131072, settings.context_size, 256, " tokens")
        self.default_budget = _spin(128, 32768, settings.default_budget, 64, " tokens")
        self.concurrency = _spin(1, 8, settings.max_concurrent_streams)
        self.concurrency.setToolTip("How many answers may stream at the same time")
        self.mcp_port = _spin(0, 65535, settings.mcp_port)
        self.mcp_port.setSpecialValueText("Off")
        self.mcp_port.setToolTip("Serve this app's sessions to MCP clients (coding assistants, agents) over HTTP on "
                                 "127.0.0.1 at this port, with the token `pcm mcp --print-token` shows")
        self.theme = QComboBox()
        for value, title in THEMES:
            self.theme.addItem(title, value)
        self.theme.setCurrentIndex(max(0, self.theme.findData(settings.theme)))
        self.data_dir = QLineEdit(str(settings.data_dir))
        self.choose_dir = QPushButton("Choose…")
        data_note = set_role(QLabel("A new data location applies after a restart."), "muted")

        form = QFormLayout()
        form.addRow("Chat model", _row(self.chat_model, self.browse))
        form.addRow("", self.chat_error)
        form.addRow("", self.progress_row)
        form.addRow("Embedder", self.embed_model)
        form.addRow("Context size", self.context_size)
        form.addRow("Default budget", self.default_budget)
        form.addRow("Concurrent answers", self.concurrency)
        form.addRow("Serve to MCP clients on port", self.mcp_port)
        form.addRow("Theme", self.theme)
        form.addRow("Data location", _row(self.data_dir, self.choose_dir))
        form.addRow("", data_note)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel)
        self.save_button = self.buttons.button(QDialogButtonBox.StandardButton.Save)
        general = QWidget(self)
        general.setLayout(form)
        self.environment = EnvironmentSettingsWidget(settings, self)
        self.tabs = QTabWidget(self)
        self.tabs.addTab(general, "General")
        self.tabs.addTab(self.environment, "Environment")
        self.models = models  # Settings → Models: "Use" fills the chat model field above
        if models is not None:
            self.tabs.addTab(models, "Models")
        self.providers = providers  # Settings → Providers: its changes are saved as they are made
        if providers is not None:
            self.tabs.addTab(providers, "Providers")
        self.tools = tools  # Settings → Tools (MCP servers): saved as they are made, like Providers
        if tools is not None:
            self.tabs.addTab(tools, "Tools")
        layout = QVBoxLayout(self)
        layout.addWidget(self.tabs)
        layout.addWidget(self.buttons)

        self._poll = QTimer(self)
        self._poll.setInterval(poll_ms)
        self._poll.timeout.connect(self._on_poll)
        self.buttons.accepted.connect(self._on_save)
        self.buttons.rejected.connect(self.reject)
        self.browse.clicked.connect(self._on_browse)
        self.choose_dir.clicked.connect(self._on_choose_dir)
        self.chat_model.editTextChanged.connect(self._on_chat_edited)

    # ------------------------------------------------------------------ state

    @property
    def verifying(self) -> bool:
        """True while a chat model is being verified."""
        return self._future is not None

    def values(self) -> Settings:
        """The settings as edited (not yet verified)."""
        return self._settings.model_copy(update={
            "chat_model": self.chat_model.currentText().strip(),
            "embed_model": self.embed_model.currentText(),
            "context_size": self.context_size.value(),
            "default_budget": self.default_budget.value(),
            "max_concurrent_streams": self.concurrency.value(),
            "mcp_port": self.mcp_port.value(),
            "theme": str(self.theme.currentData()),
            "data_dir": Path(self.data_dir.text().strip()).expanduser() if self.data_dir.text().strip()
            else self._settings.data_dir,
            **self.environment.values(),
        })

    def set_chat_model(self, value: str) -> None:
        """Put ``value`` (a model name or a .gguf path) in the chat model field."""
        self.chat_model.setCurrentText(value)

    def error_text(self) -> str:
        """The chat model error shown ("" when none)."""
        return self.chat_error.text() if self.chat_error.isVisibleTo(self) else ""

    def save(self) -> None:
        """What the Save button does: verify a changed chat model, then emit and close."""
        self._on_save()

    # ------------------------------------------------------------------ save and verify

    def _on_save(self) -> None:
        if self.verifying:
            return
        if self.environment.problems():
            self.tabs.setCurrentWidget(self.environment)
            return
        chat = self.chat_model.currentText().strip()
        if not chat:
            self._show_error("Choose a chat model: a name from the list or a .gguf file.")
            return
        if chat != self._settings.chat_model and chat != self._verified:
            self._start_verify(chat)
            return
        self._finish()

    def _start_verify(self, chat: str) -> None:
        self._show_error("")
        self._pending = chat
        future: Future[str | None] = Future()
        verify = self._verify

        def work() -> None:  # on the worker thread: touches no Qt object
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(verify(chat))
            except BaseException as exc:  # reported on the UI thread by _on_poll
                future.set_exception(exc)

        # A daemon thread: a probe still running when the app quits must not hold the exit.
        threading.Thread(target=work, name="verify-chat-model", daemon=True).start()
        self._future = future
        self._set_busy(True)
        self._poll.start()

    def _on_poll(self) -> None:
        future = self._future
        if future is None or not future.done():
            return
        self._poll.stop()
        self._future = None
        try:
            error = future.result()
        except Exception as exc:  # a verifier that raises is reporting a failure
            error = f"{type(exc).__name__}: {exc}"
        self._set_busy(False)
        if error:
            self._show_error(str(error))
            return
        self._verified = self._pending
        if self.chat_model.currentText().strip() == self._verified:
            self._finish()

    def _finish(self) -> None:
        self.settings_accepted.emit(self.values())
        self.accept()

    def _set_busy(self, busy: bool) -> None:
        self.progress_row.setVisible(busy)
        self.save_button.setEnabled(not busy)
        self.chat_model.setEnabled(not busy)
        self.browse.setEnabled(not busy)

    def _show_error(self, text: str) -> None:
        self.chat_error.setText(text)
        self.chat_error.setVisible(bool(text))

    def _on_chat_edited(self, _text: str) -> None:
        if not self.verifying:
            self._show_error("")

    # ------------------------------------------------------------------ pickers (never modal exec)

    def _on_browse(self) -> None:
        start = str(self._settings.models_dir) if Path(self._settings.models_dir).is_dir() else str(Path.home())
        dialog = QFileDialog(self, "Choose a chat model", start, "GGUF models (*.gguf);;All files (*)")
        dialog.setFileMode(QFileDialog.FileMode.ExistingFile)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.fileSelected.connect(self._on_model_file_chosen)
        self.file_dialog = dialog
        dialog.open()

    def _on_model_file_chosen(self, path: str) -> None:
        if path:
            self.chat_model.setCurrentText(path)

    def _on_choose_dir(self) -> None:
        dialog = QFileDialog(self, "Choose the data location", self.data_dir.text() or str(Path.home()))
        dialog.setFileMode(QFileDialog.FileMode.Directory)
        dialog.setOption(QFileDialog.Option.ShowDirsOnly, True)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.fileSelected.connect(self._on_dir_chosen)
        self.file_dialog = dialog
        dialog.open()

    def _on_dir_chosen(self, path: str) -> None:
        if path:
            self.data_dir.setText(path)

    # ------------------------------------------------------------------ teardown

    def done(self, result: int) -> None:
        """Close (saved or cancelled); a verification still running is abandoned, not awaited."""
        self._poll.stop()
        self._future = None
        super().done(result)


def _with_current(names: Sequence[str], current: str) -> list[str]:
    """The offered names with the current value first when it is not among them."""
    out = list(dict.fromkeys(names))
    if current and current not in out:
        out.insert(0, current)
    return out
