"""Settings → Models through pytest-qt: the files found (models/ and other apps' folders), a server,
a download from a local hub with progress, the offline line, and "Use" filling the chat model field."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from app import model_library
from app.config import Settings
from app.desktop import model_access
from app.llm.hub import CatalogEntry
from app.ui.dialogs import SettingsDialog
from app.ui.models_settings import ModelsSettingsWidget
from app.ui.services import ModelAccess
from tests.llm.gguf_util import gguf_bytes, write_gguf
from tests.llm.hub_server import LocalHub

REPO_MODELS = Path(__file__).resolve().parents[2] / "models"
DATA = gguf_bytes(metadata={"general.architecture": "llama", "general.file_type": 15,
                            "llama.context_length": 32768, "general.license": "apache-2.0"},
                  tensors=[("w", (1024, 512))])


@pytest.fixture()
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Settings, LocalHub]:
    """A models folder with the manifest and a catalog of one model served by a local hub; a home
    folder where LM Studio keeps one model."""
    models = tmp_path / "models"
    models.mkdir()
    shutil.copy(REPO_MODELS / "manifest.json", models / "manifest.json")
    hub = LocalHub().start()
    hub.add("org/Better-1.5B-GGUF", "better-1.5b-q4_k_m.gguf", DATA)
    entry = CatalogEntry(name="Better-1.5B", repo="org/Better-1.5B-GGUF", file="better-1.5b-q4_k_m.gguf",
                         size_bytes=len(DATA), parameters="1.5B", quantisation="Q4_K_M", memory_gb=3,
                         licence="Apache-2.0", good_at="answers from a context")
    (models / "catalog.json").write_text(json.dumps([entry.model_dump()]), encoding="utf-8")
    lms = tmp_path / "home" / ".lmstudio" / "models" / "pub" / "Repo-GGUF"
    lms.mkdir(parents=True)
    write_gguf(lms / "lmstudio-model-Q4_K_M.gguf", metadata={"general.architecture": "llama"})
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
    yield Settings(data_dir=tmp_path / "data", models_dir=models), hub
    hub.stop()


def access(**changes: Any) -> ModelAccess:
    real = model_access()
    values = {name: getattr(real, name) for name in ("listing", "download", "use_server", "reachable", "note",
                                                     "apply")}
    values["listing"] = lambda settings, _servers: model_library.listing(settings, servers=False)
    return ModelAccess(**{**values, **changes})


def _column(table: Any, col: int) -> list[str]:
    return [table.item(r, col).text() for r in range(table.rowCount())]


def test_the_models_tab_lists_downloads_and_hands_a_model_to_the_chat_field(qtbot: Any, setup: Any) -> None:
    settings, hub = setup
    chosen: list[str] = []
    server = {"name": "llama.cpp server", "kind": "openai", "base_url": "http://127.0.0.1:8080/v1", "models": ["m"]}
    fake_listing = model_library.listing

    def listing(s: Settings, _servers: bool) -> dict[str, Any]:
        return {**fake_listing(s, servers=False), "servers": [server]}

    widget = ModelsSettingsWidget(access(listing=listing), settings, use_file=chosen.append)
    qtbot.addWidget(widget)
    qtbot.waitUntil(lambda: not widget.busy, timeout=30000)
    assert "SmolLM2-135M-Instruct" in widget.note.text() and "File → Models gets a better one" in widget.note.text()
    assert not widget.offline.isVisibleTo(widget)
    names = _column(widget.files, 1)
    assert any(n.endswith("lmstudio-model-Q4_K_M.gguf") for n in names)
    assert "LM Studio" in _column(widget.files, 2)
    assert _column(widget.servers, 2) == ["m"]
    assert _column(widget.catalog, 0) == ["Better-1.5B"] and _column(widget.catalog, 1) == [""]
    widget.catalog.setCurrentCell(0, 0)
    widget.download_button.click()
    assert widget.progress.isVisibleTo(widget) and widget.cancel_button.isEnabled()
    qtbot.waitUntil(lambda: "downloaded and verified" in widget.message.text(), timeout=60000)
    qtbot.waitUntil(lambda: not widget.busy, timeout=30000)
    assert (settings.models_dir / "better-1.5b-q4_k_m.gguf").read_bytes() == DATA
    assert _column(widget.catalog, 1) == ["downloaded"]
    row = widget.files.currentRow()
    assert widget.files.item(row, 1).text() == "better-1.5b-q4_k_m.gguf", "the new file is selected"
    assert widget.files.item(row, 4).text() == "Q4_K_M" and widget.files.item(row, 5).text() == "32768"
    widget.use_button.click()
    assert chosen == ["better-1.5b-q4_k_m.gguf"]
    assert any(m == "GET" for m, _, _ in hub.requests)


def test_offline_is_one_line_and_a_failed_download_says_why(qtbot: Any, setup: Any) -> None:
    settings, hub = setup
    hub.files.clear()  # the hub no longer has the file
    widget = ModelsSettingsWidget(access(reachable=lambda: "Offline: https://huggingface.co cannot be reached"),
                                  settings)
    qtbot.addWidget(widget)
    qtbot.waitUntil(lambda: not widget.busy, timeout=30000)
    assert widget.offline.isVisibleTo(widget) and widget.offline.text().startswith("Offline:")
    widget.catalog.setCurrentCell(0, 0)
    widget.download_button.click()
    qtbot.waitUntil(lambda: "has no better-1.5b" in widget.message.text(), timeout=60000)
    assert widget.download_button.isEnabled() and not widget.progress.isVisibleTo(widget)


def test_the_settings_dialog_shows_the_models_tab_and_use_fills_the_field(qtbot: Any, setup: Any) -> None:
    settings, _hub = setup
    holder: list[SettingsDialog] = []
    tab = ModelsSettingsWidget(access(), settings, use_file=lambda v: holder[0].set_chat_model(v))
    dialog = SettingsDialog(settings, chat_models=[], embed_models=[], verify_chat_model=lambda _v: None, models=tab)
    holder.append(dialog)
    qtbot.addWidget(dialog)
    assert [dialog.tabs.tabText(i) for i in range(dialog.tabs.count())] == ["General", "Environment", "Models"]
    qtbot.waitUntil(lambda: not tab.busy, timeout=30000)
    tab.files.setCurrentCell(0, 1)
    tab.use_button.click()
    # the field names the chosen file: by its name in models/, by its whole path where another app keeps it
    assert Path(dialog.chat_model.currentText()).name == tab.files.item(0, 1).text()

