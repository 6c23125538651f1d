"""What the File menu does: export and import a session, the settings (with the theme) and the
open session's own settings (temperature, answer length, standing instruction); attaching a file
is ``attach_actions``.

``FileActions`` is an object the main window holds, like ``canvas_actions.CanvasActions``: made
with the controller, the services, the scene and the composer it acts on, the status line, the
window as the parent of its dialogs, and a callback that refreshes the window's status labels.
The settings in use are the controller's (the window reads them there too). Export and import
go through the controller to the engine facade (``Engine.export_session``/``import_session``);
reading and writing the document file happen off the UI thread. A problem the user can fix
(a file that is not JSON, a document the store refuses) is shown as one line; anything else is
"something went wrong" and is logged with its traceback.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path

from PySide6.QtWidgets import QApplication, QFileDialog, QMessageBox, QWidget

from app.config import Settings, remember_data_dir
from app.core.errors import CoreError, user_line
from app.core.ports import SessionGeneration
from app.ui.canvas.scene import CanvasScene
from app.ui.composer import ComposerWidget
from app.ui.controller import EngineController, report
from app.ui.dialogs import SettingsDialog
from app.ui.generation import GenerationDialog
from app.ui.services import Services
from app.ui.status_line import StatusLine
from app.ui.theme import apply_theme


def write_document(path: Path, text: str) -> None:
    """Write ``text`` (a document as strict JSON, ``Services.document_text``) as UTF-8
    atomically (a crash never leaves half a file); a ``CoreError`` naming the file when it
    cannot be written."""
    tmp = path.with_name(path.name + ".part")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as err:
        raise CoreError(f"{path} cannot be written ({err.strerror or err})") from None


class FileActions:
    """The window's File menu actions (see the module doc)."""

    def __init__(self, controller: EngineController, services: Services, scene: CanvasScene,
                 composer: ComposerWidget, status: StatusLine, parent: QWidget,
                 refresh_labels: Callable[[], None]) -> None:
        self.controller, self.services, self.scene, self.composer = controller, services, scene, composer
        self.status, self.parent, self.refresh_labels = status, parent, refresh_labels
        self.generation_dialog: GenerationDialog | None = None  # the dialog last shown (tests reach it)

    @property
    def settings(self) -> Settings:
        """The settings in use (the controller's)."""
        return self.controller.settings

    # ------------------------------------------------------------------ export / import

    def ask_export(self) -> None:
        """Choose a file and export the open session to it (a non-modal dialog)."""
        if self.controller.session_id is None:
            self.status.error("No session is open yet.")
            return
        dialog = QFileDialog(self.parent, "Export session",
                             str(Path.home() / f"session-{self.controller.session_id[:8]}.json"),
                             "Context model JSON (*.json)")
        dialog.setAcceptMode(QFileDialog.AcceptMode.AcceptSave)
        dialog.fileSelected.connect(lambda path: self.controller.spawn(self.export_to(Path(path)), "Export"))
        dialog.open()

    def ask_import(self) -> None:
        """Choose a document and import it as a new session (a non-modal dialog)."""
        dialog = QFileDialog(self.parent, "Import session", str(Path.home()), "Context model JSON (*.json)")
        dialog.setFileMode(QFileDialog.FileMode.ExistingFile)
        dialog.fileSelected.connect(lambda path: self.controller.spawn(self.import_from(Path(path)), "Import"))
        dialog.open()

    async def export_to(self, path: Path) -> Path:
        """Write the open session as a structured context model document."""
        doc = await self.controller.export_session()
        await asyncio.get_running_loop().run_in_executor(
            None, lambda: write_document(path, self.services.document_text(doc)))
        self.status.say(f"Exported {len(doc['session']['messages'])} messages to {path}", 10000)
        return path

    async def import_from(self, path: Path) -> str | None:
        """Validate and import a document as a new session and open it; errors are shown, nothing written."""
        c = self.controller
        try:
            data = await asyncio.get_running_loop().run_in_executor(None, self.services.read_document, path)
            session_id = await c.import_session(data)
        except Exception as exc:  # noqa: BLE001 - shown to the user; a bug is also logged
            report(exc, f"importing {path.name}")
            message = f"Could not import {path.name}: {user_line(exc)}"
            self.status.error(message)
            box = QMessageBox(QMessageBox.Icon.Warning, "Import failed", message, QMessageBox.StandardButton.Ok,
                              self.parent)
            box.open()
            return None
        await c.open_session(session_id)
        self.status.say(f"Imported {path.name} as a new session", 10000)
        return session_id

    async def import_when_ready(self, path: Path) -> str | None:
        """Import ``path`` once the models are loaded (a later start handed it over); nothing when
        they failed to load (the status bar says why)."""
        c = self.controller
        while not c.ready and not c.load_error and not c.closed:
            await asyncio.sleep(0.2)
        return await self.import_from(path) if c.ready else None

    async def load_and_import(self, session_id: str | None, path: Path) -> str | None:
        """Start with a document to open (``pcm-canvas FILE``: a double-click on an exported
        session): load the models, then import ``path`` as a new session and open it."""
        if not await self.controller.load(session_id):
            return None
        return await self.import_from(path)

    # ------------------------------------------------------------------ settings and theme

    def open_settings(self, tab: str = "") -> SettingsDialog:
        """The Settings dialog, on the tab named ``tab`` when given ("Models")."""
        holder: list[SettingsDialog] = []
        dialog = SettingsDialog(
            self.settings,
            chat_models=self.services.chat_models(self.settings),
            embed_models=self.services.embed_models(self.settings),
            verify_chat_model=lambda value: self.services.verify_chat_model(self.settings, value),
            parent=self.parent,
            providers=self._providers_tab(),
            models=self._models_tab(lambda value: holder[0].set_chat_model(value)),
            tools=self._tools_tab(),
        )
        holder.append(dialog)
        for i in range(dialog.tabs.count()):
            if tab and dialog.tabs.tabText(i) == tab:
                dialog.tabs.setCurrentIndex(i)
        dialog.settings_accepted.connect(self._on_settings_accepted)
        dialog.open()
        return dialog

    def open_models(self) -> SettingsDialog:
        """Settings → Models: the models on this machine, running servers, downloads."""
        return self.open_settings("Models")

    def _models_tab(self, use: Callable[[str], None]) -> QWidget | None:
        access = self.services.models
        if access is None:
            return None
        from app.ui.models_settings import ModelsSettingsWidget

        c = self.controller
        return ModelsSettingsWidget(access, self.settings, lambda: c.engine, use)

    def open_session_settings(self) -> None:
        """The open session's temperature, answer length and standing instruction."""
        engine, session_id = self.controller.engine, self.controller.session_id
        if engine is None or session_id is None:
            self.status.error("The models are still loading.")
            return

        async def show() -> None:
            current = await engine.generation(session_id)
            rows = [r for r in await engine.list_sessions(archived=True) if r["session_id"] == session_id]
            title = (rows[0].get("title") if rows else "") or "this session"
            access = self.services.providers
            providers = [str(r["id"]) for r in access.listing(self.settings.data_dir)["providers"]] if access else []
            dialog = GenerationDialog(current, engine.default_generation(), title, self.parent, providers)
            dialog.saved.connect(lambda new: self.controller.spawn(self._save_generation(session_id, new),
                                                                   "Saving the session settings"))
            dialog.open()
            self.generation_dialog = dialog  # tests reach the dialog shown

        self.controller.spawn(show(), "Reading the session settings")

    async def _save_generation(self, session_id: str, new: SessionGeneration) -> None:
        assert self.controller.engine is not None
        await self.controller.engine.set_generation(session_id, new)
        self.status.say("Session settings saved: they apply from the next input.", 8000)

    def _providers_tab(self) -> QWidget | None:
        access = self.services.providers
        if access is None:
            return None
        from app.ui.providers_settings import ProvidersSettingsWidget

        c = self.controller
        return ProvidersSettingsWidget(access, self.settings.data_dir, lambda: c.engine)

    def _tools_tab(self) -> QWidget | None:
        access = self.services.tool_servers
        if access is None:
            return None
        from app.ui.tools_settings import ToolsSettingsWidget

        c = self.controller
        return ToolsSettingsWidget(access, self.settings.data_dir, lambda: c.engine, c.spawn)

    def _on_settings_accepted(self, new: Settings) -> None:
        old = self.settings
        # The folder in use stays in use until the next start; it keeps the new settings too.
        self.controller.settings = new.model_copy(update={"data_dir": old.data_dir})
        try:
            self.settings.save()
        except OSError as exc:
            self.status.error(f"Settings not saved: {exc}")
        self.composer.budget.setValue(new.default_budget)
        if new.theme != old.theme:
            self._apply_theme()
        if new.data_dir != old.data_dir:
            try:
                remember_data_dir(new.data_dir)  # the home data folder from now on: its settings are
                new.save()  # the config folder's (app.config.settings_file), these ones
            except OSError as exc:
                self.status.error(f"Cannot use {new.data_dir}: {exc}")
                return
            self.status.say(f"The data folder {new.data_dir} is used from the next start.", 10000)
        models = ("chat_model", "embed_model", "context_size", "n_threads")
        sensing = ("watched_folders", "ignore_patterns", "max_file_bytes", "coalesce_ms", "feeds", "apis")
        if any(getattr(new, f) != getattr(old, f) for f in sensing) and self.controller.ready:
            self.controller.spawn(self.controller.start_sensors(), "Restarting the sensors")
        if new.mcp_port != old.mcp_port and self.controller.ready:
            self.controller.spawn(self.controller.start_mcp(), "Restarting the MCP server")
        changed = any(getattr(new, f) != getattr(old, f) for f in models)
        if changed and not self.controller.closed and (self.controller.ready or self.controller.engine is None):
            self.controller.spawn(self._reload(), "Reloading the models")
        self.refresh_labels()

    async def _reload(self) -> None:
        """Load the models again (after a settings change, or to retry a failed load)."""
        session_id = self.controller.session_id
        self.controller.ready = False
        await self.controller.close()
        self.controller.engine = None
        self.controller.closed = False
        self.controller.ready = False
        await self.controller.load(session_id)
        self.refresh_labels()

    def _apply_theme(self) -> None:
        dark = self.settings.theme == "dark"
        app = QApplication.instance()
        if isinstance(app, QApplication):
            apply_theme(app, dark)
        self.scene.set_theme(dark)

    def toggle_theme(self) -> None:
        """Switch between the light and the dark theme (and keep the choice in the settings)."""
        theme = "light" if self.settings.theme == "dark" else "dark"
        self._on_settings_accepted(self.settings.model_copy(update={"theme": theme}))
