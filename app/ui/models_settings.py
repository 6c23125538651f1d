"""Settings → Models: the chat models on this machine, the servers running on it, downloads.

A tab of the Settings dialog over ``ModelAccess`` (plain callables that ``app/desktop.py`` fills in
from ``app.model_library``; the ui never imports adapters). Three tables:

* **On this machine**: the GGUF files of ``models/`` and of other apps' folders (LM Studio,
  GPT4All, llama.cpp's cache, Ollama), with size, quantisation, context, parameters, licence, the
  chat-template check and the speed measured on their answers so far. "Use" puts the selected
  one in the General tab's chat model field: Save checks it and loads it, as for any choice there.
* **Running servers**: Ollama, LM Studio or a llama.cpp server answering on its usual loopback
  port, one row per model it lists; "Answer with it" adds it as a provider and makes it the
  default (at once, for the running app too).
* **Download**: the recommended models by memory size, with size, licence and what each is good
  at; "Download" fetches the selected one from the hub with progress (resumed when it was
  stopped, checksum and free disk space checked), "Cancel" stops it. Offline, one line says so.

Listing, probing and downloading run off the UI thread; a timer polls their results.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import (
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.config import Settings
from app.core.errors import CoreError
from app.core.ports import CancelToken
from app.ui.panels.widgets import fill_table, make_table, set_role
from app.ui.services import ModelAccess

FILE_COLUMNS = ["", "Model", "Where", "Size", "Quant", "Context", "Params", "Licence", "Chat template", "Speed"]
SERVER_COLUMNS = ["Server", "Endpoint", "Model"]
CATALOG_COLUMNS = ["Model", "", "Params", "Size", "Memory", "Licence", "Good at"]


def human_size(n: float) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.0f} MB"


def speed_text(row: dict[str, Any]) -> str:
    first, rate = row.get("first_token_ms"), row.get("tokens_per_s")
    if first is None:
        return "measured on first use"
    return f"first token {first / 1000:.1f} s" + (f", {rate:.0f} tokens/s" if rate else "")


class _Job:
    """A blocking call on the tab's worker, polled from the UI thread."""

    def __init__(self, future: Future[Any], done: Callable[[Future[Any]], None]) -> None:
        self.future, self.done = future, done


class ModelsSettingsWidget(QWidget):
    """The Models tab (module doc). ``use_file(value)`` puts a file in the chat model field."""

    def __init__(self, access: ModelAccess, settings: Settings, engine: Callable[[], Any] = lambda: None,
                 use_file: Callable[[str], None] | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._access, self._settings, self._engine = access, settings, engine
        self._use_file = use_file or (lambda _value: None)
        self._listing: dict[str, Any] = {"files": [], "servers": [], "catalog": []}
        self._server_rows: list[tuple[dict[str, Any], str]] = []
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="pcm-models")
        self._jobs: list[_Job] = []
        self._cancel: CancelToken | None = None
        self._progress_value: tuple[int, int] = (0, 0)  # written by the download thread, read by the timer
        self._select_name = ""  # a file to select once the listing is back (one just downloaded)
        self._then_say = ""  # the line to show once the listing is back instead of the count
        said = access.note(settings)
        self.note = set_role(QLabel(f"In use: {settings.chat_model}" + (f" — {said}" if said else "")), "muted")
        self.note.setWordWrap(True)
        self.offline = set_role(QLabel(""), "error")
        self.offline.setVisible(False)
        self.files = make_table(FILE_COLUMNS)
        self.servers = make_table(SERVER_COLUMNS)
        self.catalog = make_table(CATALOG_COLUMNS)
        self.use_button, self.refresh_button = QPushButton("Use this model"), QPushButton("Look again")
        self.server_button = QPushButton("Answer with this server")
        self.download_button, self.cancel_button = QPushButton("Download"), QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.progress = QProgressBar()
        self.progress.setMinimumWidth(320)
        self.progress.setVisible(False)
        self.message = set_role(QLabel(""), "muted")
        self.message.setWordWrap(True)
        layout = QVBoxLayout(self)
        self.servers.setMaximumHeight(110)
        layout.addWidget(self.note)
        layout.addWidget(self._group("On this machine", self.files, self.use_button, self.refresh_button), 2)
        layout.addWidget(self._group("Running servers (Ollama :11434, LM Studio :1234, llama.cpp server :8080)",
                                     self.servers, self.server_button), 1)
        layout.addWidget(self._group("Download a better model", self.catalog, self.download_button,
                                     self.cancel_button, self.progress, top=self.offline), 3)
        layout.addWidget(self.message)
        self._poll = QTimer(self)
        self._poll.setInterval(100)
        self._poll.timeout.connect(self._on_poll)
        self.use_button.clicked.connect(self._on_use)
        self.refresh_button.clicked.connect(lambda: self.refresh(servers=True))
        self.server_button.clicked.connect(self._on_server)
        self.download_button.clicked.connect(self._on_download)
        self.cancel_button.clicked.connect(self._on_cancel)
        self.refresh(servers=True)
        self._run(access.reachable, self._on_reachable)

    @staticmethod
    def _group(title: str, table: QWidget, *buttons: QWidget, top: QWidget | None = None) -> QGroupBox:
        box = QGroupBox(title)
        inner = QVBoxLayout(box)
        if top is not None:
            inner.addWidget(top)
        inner.addWidget(table)
        row = QHBoxLayout()
        for button in buttons:
            row.addWidget(button)
        row.addStretch(1)
        inner.addLayout(row)
        return box

    # ------------------------------------------------------------------ background work

    def _run(self, fn: Callable[..., Any], done: Callable[[Future[Any]], None], *args: Any) -> None:
        self._jobs.append(_Job(self._pool.submit(fn, *args), done))
        self._poll.start()

    def _on_poll(self) -> None:
        if self._cancel is not None:
            done, total = self._progress_value
            if total:
                self.progress.setRange(0, 1000)
                self.progress.setValue(int(1000 * done / total))
                self.progress.setFormat(f"{human_size(done)} of {human_size(total)}")
        for job in [j for j in self._jobs if j.future.done()]:
            self._jobs.remove(job)
            job.done(job.future)
        if not self._jobs:
            self._poll.stop()

    @property
    def busy(self) -> bool:
        return bool(self._jobs)

    # ------------------------------------------------------------------ listing

    def refresh(self, *, servers: bool = True) -> None:
        """List the files, servers and downloads again (off the UI thread)."""
        self.message.setText("Looking for models…")
        self._run(self._access.listing, self._on_listing, self._settings, servers)

    def _on_listing(self, future: Future[Any]) -> None:
        error = future.exception()
        if error is not None:
            self.message.setText(f"Could not list the models: {error}")
            return
        self._listing = future.result()
        in_use = self._settings.chat_model
        fill_table(self.files, [[
            "★" if in_use in (f["name"], f["path"]) else "", Path(f["name"]).name, f["source"],
            human_size(f["size_bytes"]),
            f["quantisation"], str(f["context_length"] or ""), f["parameters"], f["licence"],
            f["problem"] or f["template"], speed_text(f)] for f in self._listing["files"]])
        for r, f in enumerate(self._listing["files"]):  # where it is: a file of another app is used where it lies
            if (cell := self.files.item(r, 1)) is not None:
                cell.setToolTip(f["path"])
        self._server_rows = [(s, m) for s in self._listing["servers"] for m in (s["models"] or [""])]
        fill_table(self.servers, [[s["name"], s["base_url"], m or "(lists no model)"] for s, m in self._server_rows])
        fill_table(self.catalog, [[
            c["name"], "downloaded" if c["present"] else "", c["parameters"], human_size(c["size_bytes"]),
            f"~{c['memory_gb']:g} GB", c["licence"].split(" (")[0], c["good_at"]] for c in self._listing["catalog"]])
        for r, c in enumerate(self._listing["catalog"]):  # the whole licence and description on hover
            for col in (5, 6):
                if (cell := self.catalog.item(r, col)) is not None:
                    cell.setToolTip(f"{c['licence']}\n{c['good_at']}")
        names = [Path(f["path"]).name for f in self._listing["files"]]
        if self._select_name in names:
            self.files.setCurrentCell(names.index(self._select_name), 1)
        found = len(self._listing["files"])
        self.message.setText(self._then_say or f"{found} model file(s) on this machine, "
                                               f"{len(self._listing['servers'])} server(s) running.")
        self._select_name = self._then_say = ""

    def _on_reachable(self, future: Future[Any]) -> None:
        line = None if future.exception() is not None else future.result()
        self.offline.setText(line or "")
        self.offline.setVisible(bool(line))

    # ------------------------------------------------------------------ actions

    def _on_use(self) -> None:
        row = self.files.currentRow()
        files = self._listing["files"]
        if not 0 <= row < len(files):
            self.message.setText("Select a model first")
            return
        chosen = files[row]
        if chosen["problem"]:
            self.message.setText(f"{chosen['name']} cannot be used: {chosen['problem']}")
            return
        self._use_file(chosen["name"])
        self.message.setText(f"{chosen['name']} is in the chat model field: Save to check and load it.")

    def _on_server(self) -> None:
        row = self.servers.currentRow()
        if not 0 <= row < len(self._server_rows) or not self._server_rows[row][1]:
            self.message.setText("Select a server's model first")
            return
        server, model = self._server_rows[row]
        try:
            provider_id = self._access.use_server(self._settings, server, model)
        except CoreError as exc:
            self.message.setText(str(exc))
            return
        self._access.apply(self._engine(), self._settings.data_dir)
        self.message.setText(f"{model} on {server['name']} answers from now on (provider {provider_id}; "
                             "the in-process model stays the fallback).")

    def _on_download(self) -> None:
        row = self.catalog.currentRow()
        entries = self._listing["catalog"]
        if self._cancel is not None:
            return
        if not 0 <= row < len(entries):
            self.message.setText("Select a model to download first")
            return
        name = entries[row]["name"]
        self._cancel = CancelToken()
        self._progress_value = (0, 0)
        self.progress.setRange(0, 0)
        self.progress.setVisible(True)
        self.download_button.setEnabled(False)
        self.cancel_button.setEnabled(True)
        self.message.setText(f"Downloading {name}…")

        def progress(done: int, total: int) -> None:  # on the download thread: touches no Qt object
            self._progress_value = (done, total)

        self._run(self._access.download, lambda f: self._on_downloaded(f, name), self._settings, name, progress,
                  self._cancel)

    def _on_cancel(self) -> None:
        if self._cancel is not None:
            self._cancel.cancel()
            self.message.setText("Stopping the download…")

    def _on_downloaded(self, future: Future[Any], name: str) -> None:
        self._cancel = None
        self.progress.setVisible(False)
        self.download_button.setEnabled(True)
        self.cancel_button.setEnabled(False)
        error = future.exception()
        if error is not None:
            self.message.setText(str(error))
            return
        self._select_name = Path(str(future.result())).name
        self.refresh(servers=False)
        self._then_say = f"{name} downloaded and verified: it is selected above; click Use this model, then Save."

    def closeEvent(self, event: Any) -> None:  # noqa: N802 - Qt's name
        if self._cancel is not None:
            self._cancel.cancel()
        self._poll.stop()
        self._pool.shutdown(wait=False, cancel_futures=True)
        super().closeEvent(event)
