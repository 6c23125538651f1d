"""Settings → Tools: the MCP servers whose tools PCM may use, their state, and when to ask.

A tab of the Settings dialog over ``ToolServerAccess`` (plain callables the desktop composition
root fills in from ``app.toolservers``; the ui never imports adapters). Each action writes the
data folder's ``tool_servers.json`` at once, and the running engine follows it
(``Engine.sync_tool_servers(reload=True)``: servers started, stopped or restarted). A URL that is not this
machine is added only after the user confirms that tool calls will send session text there. The
table shows each server's live state (starting, ready with N tools, failed with its line),
refreshed every second while the tab is shown. Dialogs open with ``open()``, never ``exec()``.
"""

from __future__ import annotations

import shlex
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from PySide6.QtCore import QTimer, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMessageBox,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.core.errors import CoreError
from app.ui.panels.widgets import fill_table, make_table, set_role
from app.ui.services import ToolServerAccess

COLUMNS = ["On", "Server", "Status", "Tools", "Where"]


class AddServerDialog(QDialog):
    """The fields of a new server: a command line (stdio) or a URL (streamable HTTP)."""

    added = Signal(dict)

    def __init__(self, url: bool, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.url_mode = url
        self.setWindowTitle("Add a tool server (URL)" if url else "Add a tool server (command)")
        self.name = QLineEdit()
        self.name.setPlaceholderText("a short name: its tools are named NAME.tool")
        self.target = QLineEdit()
        self.target.setPlaceholderText("http://127.0.0.1:8931/mcp" if url else
                                       "npx -y @modelcontextprotocol/server-filesystem /home/me/notes")
        self.extra = QLineEdit()
        self.extra.setPlaceholderText("NAME of an environment variable holding a bearer token" if url else
                                      "the folder the server runs in (relative paths resolve there)")
        self.env = QPlainTextEdit()
        self.env.setPlaceholderText("NAME=value, one per line")
        self.env.setMaximumHeight(70)
        form = QFormLayout()
        form.addRow("Name", self.name)
        form.addRow("URL" if url else "Command", self.target)
        form.addRow("Token variable" if url else "Working folder", self.extra)
        if not url:
            form.addRow("Environment", self.env)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self._on_ok)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(buttons)

    def config(self) -> dict[str, Any]:
        """The server entry as typed (checked when it is added)."""
        name, target, extra = self.name.text().strip(), self.target.text().strip(), self.extra.text().strip()
        if self.url_mode:
            return {"name": name, "url": target, "bearer_env": extra}
        words = shlex.split(target) if target else []
        env = dict(line.split("=", 1) for line in self.env.toPlainText().splitlines() if "=" in line)
        return {"name": name, "command": words[0] if words else "", "args": words[1:], "cwd": extra,
                "env": {k.strip(): v.strip() for k, v in env.items()}}

    def _on_ok(self) -> None:
        self.added.emit(self.config())
        self.accept()


class ToolsSettingsWidget(QWidget):
    """The Tools tab (module doc). ``engine`` gives the running engine (None while loading);
    ``run`` runs one of its coroutines on the app's loop (the controller's ``spawn``)."""

    def __init__(self, access: ToolServerAccess, data_dir: Path, engine: Callable[[], Any] = lambda: None,
                 run: Callable[[Awaitable[Any], str], Any] | None = None, parent: QWidget | None = None, *,
                 confirm: Callable[[str], bool] | None = None) -> None:
        super().__init__(parent)
        self._access, self._data_dir, self._engine, self._run = access, data_dir, engine, run
        self._confirm = confirm or self._ask
        self._rows: list[dict[str, Any]] = []
        self.dialog: AddServerDialog | None = None
        self.table = make_table(COLUMNS)
        self.add_command, self.add_url = QPushButton("Add command…"), QPushButton("Add URL…")
        self.import_button, self.toggle_button = QPushButton("Import…"), QPushButton("Enable / disable")
        self.remove_button = QPushButton("Remove")
        self.each_call = QCheckBox("Ask before every call of a tool that changes things (not once per session)")
        self.message = set_role(QLabel(""), "muted")
        self.message.setWordWrap(True)
        buttons = QHBoxLayout()
        for button in (self.add_command, self.add_url, self.import_button, self.toggle_button, self.remove_button):
            buttons.addWidget(button)
        layout = QVBoxLayout(self)
        layout.addWidget(set_role(QLabel("MCP servers whose tools the plan may offer. Tools that only read run "
                                         "when chosen; the others ask you first."), "muted"))
        layout.addWidget(self.table)
        layout.addLayout(buttons)
        layout.addWidget(self.each_call)
        layout.addWidget(self.message)
        self._poll = QTimer(self)
        self._poll.setInterval(1000)
        self._poll.timeout.connect(self.refresh_states)
        self.add_command.clicked.connect(lambda: self._open_add(url=False))
        self.add_url.clicked.connect(lambda: self._open_add(url=True))
        self.import_button.clicked.connect(self._on_import)
        self.toggle_button.clicked.connect(self._on_toggle)
        self.remove_button.clicked.connect(self._on_remove)
        self.each_call.toggled.connect(self._on_each_call)
        self.reload()
        self._poll.start()

    # ------------------------------------------------------------------ state

    def reload(self) -> None:
        """Show the file's servers with the running engine's state of each."""
        try:
            listing = self._access.listing(self._data_dir)
        except CoreError as exc:
            self.message.setText(str(exc))
            return
        self._rows = list(listing["servers"])
        self.each_call.blockSignals(True)
        self.each_call.setChecked(bool(listing.get("confirm_each_call")))
        self.each_call.blockSignals(False)
        self.refresh_states()

    def refresh_states(self) -> None:
        engine = self._engine()
        states = {s.name: s for s in engine.tool_server_states()} if engine is not None else {}
        rows = []
        for row in self._rows:
            state = states.get(row["name"])
            status = ("disabled" if not row.get("enabled", True) else state.status if state is not None
                      else "not running")
            if state is not None and state.error and state.error != "disabled":
                status += f": {state.error}"
            where = ("OFF THE MACHINE: " if row.get("off_machine") else "") + str(row.get("where", ""))
            rows.append(["✓" if row.get("enabled", True) else "", row["name"], status,
                         str(state.tools) if state is not None and state.status == "ready" else "", where])
        fill_table(self.table, rows)

    def selected_name(self) -> str | None:
        row = self.table.currentRow()
        return str(self._rows[row]["name"]) if 0 <= row < len(self._rows) else None

    def _changed(self, line: str) -> None:
        """After a write: the running engine follows the file; show it, say it."""
        engine = self._engine()
        if engine is not None and self._run is not None:  # servers and the confirmation setting alike
            self._run(engine.sync_tool_servers(reload=True), "Restarting the tool servers")
        self.reload()
        self.message.setText(line)

    # ------------------------------------------------------------------ actions

    def _ask(self, host: str) -> bool:
        answer = QMessageBox.question(
            self, "Send session text off this machine?",
            f"{host} is not this machine. Tool calls will send text of your sessions there. Add it?")
        return answer == QMessageBox.StandardButton.Yes

    def add(self, config: dict[str, Any]) -> bool:
        """Add ``config``; a URL off the machine only after ``confirm``. True when added."""
        url = str(config.get("url") or "")
        allow = False
        if url.startswith(("http://", "https://")) and not self._access.is_loopback(url):
            allow = self._confirm(urlsplit(url).hostname or url)
            if not allow:
                self.message.setText("Not added: session text stays on this machine")
                return False
        try:
            saved = self._access.add(self._data_dir, config, allow)
        except CoreError as exc:
            self.message.setText(str(exc))
            return False
        self._changed(f"Added {getattr(saved, 'name', config.get('name', ''))}")
        return True

    def import_file(self, path: Path) -> bool:
        """Add every server of another client's JSON (all or none)."""
        try:
            added = self._access.import_file(self._data_dir, path, False)
        except CoreError as exc:
            if "not this machine" not in str(exc) or not self._confirm(path.name):
                self.message.setText(str(exc))
                return False
            try:
                added = self._access.import_file(self._data_dir, path, True)
            except CoreError as again:
                self.message.setText(str(again))
                return False
        self._changed(f"Imported {len(added)} server(s): {', '.join(getattr(s, 'name', '') for s in added)}")
        return True

    def _open_add(self, url: bool) -> None:
        self.dialog = AddServerDialog(url, self)
        self.dialog.added.connect(self.add)
        self.dialog.open()

    def _on_import(self) -> None:
        picker = QFileDialog(self, "Import MCP servers (a JSON with mcpServers)")
        picker.setNameFilter("JSON (*.json)")
        picker.fileSelected.connect(lambda path: self.import_file(Path(path)))
        picker.open()

    def _act(self, action: Callable[[str], Any], done: str) -> None:
        name = self.selected_name()
        if name is None:
            self.message.setText("Select a server first")
            return
        try:
            action(name)
        except CoreError as exc:
            self.message.setText(str(exc))
            return
        self._changed(f"{name} {done}")

    def _on_toggle(self) -> None:
        name = self.selected_name()
        row = next((r for r in self._rows if r["name"] == name), None)
        enabled = not bool(row.get("enabled", True)) if row is not None else True
        self._act(lambda n: self._access.set_enabled(self._data_dir, n, enabled), "enabled" if enabled else "disabled")

    def _on_remove(self) -> None:
        self._act(lambda n: self._access.remove(self._data_dir, n), "was removed")

    def _on_each_call(self, checked: bool) -> None:
        try:
            self._access.set_confirm_each_call(self._data_dir, checked)
        except CoreError as exc:
            self.message.setText(str(exc))
            return
        self._changed("Tools that change things ask " + ("at every call" if checked else "once per session"))

    def closeEvent(self, event: Any) -> None:  # noqa: N802 - Qt's name
        self._poll.stop()
        super().closeEvent(event)
