"""The Environment page of the settings and the Environment panel."""

from __future__ import annotations

from pathlib import Path

from app.config import Settings
from app.ui.dialogs import SettingsDialog
from app.ui.panels.env import EnvPanel, EnvRow


def _dialog(settings: Settings) -> SettingsDialog:
    return SettingsDialog(settings, chat_models=[settings.chat_model], embed_models=[settings.embed_model],
                          verify_chat_model=lambda value: None)


def test_environment_settings_round_trip_and_refuse_what_cannot_be_watched(qtbot, tmp_path: Path) -> None:
    settings = Settings.load(tmp_path / "data")
    dialog = _dialog(settings)
    qtbot.addWidget(dialog)
    accepted: list[Settings] = []
    dialog.settings_accepted.connect(accepted.append)
    env = dialog.environment
    env.add_folder(str(tmp_path / "missing"))
    env.feeds.add("ftp://nowhere/feed.xml", 60)
    dialog.save()
    assert not accepted and dialog.tabs.currentWidget() is env
    assert "missing: not a folder" in env.problem.text() and "ftp://nowhere/feed.xml" in env.problem.text()

    env.folders.clear()
    env.feeds.setRowCount(0)
    (tmp_path / "notes").mkdir()
    feed_file = tmp_path / "feed.xml"
    feed_file.write_text("<rss/>", encoding="utf-8")
    env.add_folder(str(tmp_path / "notes"))
    env.feeds.add(str(feed_file), 30)
    env.feeds.add("https://example.org/rss", 600)
    env.apis.add("http://127.0.0.1:8000/status.json", 5, "data.price")
    env.coalesce.setValue(250)
    dialog.save()
    (saved,) = accepted
    assert saved.watched_folders == [tmp_path / "notes"]
    assert [(f.url, f.interval_s) for f in saved.feeds] == [(str(feed_file), 30.0), ("https://example.org/rss", 600.0)]
    assert [(a.url, a.interval_s, a.path) for a in saved.apis] == [("http://127.0.0.1:8000/status.json", 5.0, "data.price")]
    assert saved.coalesce_ms == 250 and saved.ignore_patterns == settings.ignore_patterns


def test_env_panel_lists_newest_first_and_selects_the_node(qtbot) -> None:
    panel = EnvPanel()
    qtbot.addWidget(panel)
    panel.add_events([EnvRow("e1", "n1", "2026-11-22T06:00:01Z", "file", "plan.md", "modified", "Write the plan"),
                      EnvRow("e2", "n2", "2026-11-22T06:00:02Z", "feed", "Release 2.0", "new", "", pushed=False)])
    assert panel.table.rowCount() == 2
    assert panel.table.item(0, 2).text() == "Release 2.0" and panel.table.item(0, 4).text() == "environment lane"
    assert panel.table.item(1, 4).text() == "Write the plan"
    with qtbot.waitSignal(panel.selected) as got:
        panel.table.cellClicked.emit(1, 0)
    assert got.args == ["n1"]
