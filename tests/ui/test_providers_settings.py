"""Settings → Providers: add (an off-machine endpoint only once confirmed), order, limits, test,
remove — written to providers.json and applied to the running registry at once."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from app.desktop import provider_access
from app.llm.fakes import ScriptedChatModel
from app.llm.providers import build_registry
from app.llm.providers.settings import load_providers
from app.ui.providers_settings import ProvidersSettingsWidget


def _ids(widget: ProvidersSettingsWidget) -> list[str]:
    return [widget.table.item(r, 1).text() for r in range(widget.table.rowCount())]


def _select(widget: ProvidersSettingsWidget, provider_id: str) -> None:
    widget.table.setCurrentCell(_ids(widget).index(provider_id), 1)


def test_the_providers_tab_edits_the_file_and_the_running_registry(qtbot: Any, tmp_path: Path) -> None:
    answers: list[bool] = [False, True]
    asked: list[str] = []

    def confirm(host: str) -> bool:
        asked.append(host)
        return answers.pop(0)

    registry = build_registry(tmp_path, ScriptedChatModel())
    engine = SimpleNamespace(chat=registry)  # what apply() reads of the running engine
    widget = ProvidersSettingsWidget(provider_access(), tmp_path, lambda: engine, confirm=confirm)
    qtbot.addWidget(widget)
    assert _ids(widget) == ["llama.cpp"]
    assert widget.add({"id": "lab", "provider": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m"}) is True
    assert asked == [] and _ids(widget) == ["llama.cpp", "lab"]
    cloud = {"id": "cloud", "provider": "openai", "base_url": "https://api.example.com/v1", "model": "big",
             "api_key_env": "CLOUD_KEY", "price_in_per_1k": 0.2}
    assert widget.add(cloud) is False and asked == ["api.example.com"]
    assert "stay on this machine" in widget.message.text() and "cloud" not in _ids(widget)
    assert widget.add(cloud) is True and "cloud" in _ids(widget)
    assert "OFF THE MACHINE" in widget.table.item(_ids(widget).index("cloud"), 4).text()
    _select(widget, "lab")
    widget.default_button.click()
    assert _ids(widget)[0] == "lab" and load_providers(tmp_path).default == "lab"
    assert [p.id for p in registry.providers] == ["lab", "cloud", "llama.cpp"]  # applied while running
    widget.daily.setText("0.5")
    widget.limits_button.click()
    assert load_providers(tmp_path).daily_limit == 0.5
    _select(widget, "lab")
    widget.test_button.click()
    qtbot.waitUntil(lambda: "not reachable" in widget.message.text(), timeout=15000)
    _select(widget, "cloud")
    widget.remove_button.click()
    assert "cloud" not in _ids(widget) and "cloud" not in [p.id for p in registry.providers]
    _select(widget, "llama.cpp")
    widget.remove_button.click()
    assert "last resort" in widget.message.text()


def test_the_settings_dialog_has_a_providers_tab(qtbot: Any, tmp_path: Path) -> None:
    from app.config import Settings
    from app.ui.dialogs import SettingsDialog

    tab = ProvidersSettingsWidget(provider_access(), tmp_path)
    dialog = SettingsDialog(Settings(data_dir=tmp_path), chat_models=[], embed_models=[],
                            verify_chat_model=lambda _value: None, providers=tab)
    qtbot.addWidget(dialog)
    titles = [dialog.tabs.tabText(i) for i in range(dialog.tabs.count())]
    assert titles == ["General", "Environment", "Providers"]
