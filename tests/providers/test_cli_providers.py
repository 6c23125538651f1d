"""``pcm providers``: help that explains, an off-machine endpoint refused without --yes-send-off-machine,
and the list in the order providers are tried."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main


def test_help_names_every_action_and_the_confirmation_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["providers", "add", "--help"])
    out = capsys.readouterr().out
    assert "--yes-send-off-machine" in out and "--api-key-env" in out and "never stored" in out
    with pytest.raises(SystemExit):
        main(["providers", "--help"])
    out = capsys.readouterr().out
    for action in ("list", "add", "test", "default", "remove", "limits"):
        assert action in out


def test_add_refuses_off_machine_then_list_shows_the_order(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = ["--data-dir", str(tmp_path)]
    assert main([*data, "providers", "add", "cloud", "--kind", "openai", "--model", "big",
                 "--api-key-env", "CLOUD_KEY"]) == 2
    assert "--yes-send-off-machine" in capsys.readouterr().err
    assert main([*data, "providers", "add", "cloud", "--kind", "openai", "--model", "big", "--api-key-env",
                 "CLOUD_KEY", "--price-in", "0.2", "--yes-send-off-machine"]) == 0
    assert "OFF THE MACHINE" in capsys.readouterr().out
    assert main([*data, "providers", "add", "box", "--kind", "ollama", "--model", "llama3.2", "--default"]) == 0
    assert main([*data, "providers", "limits", "--daily", "0.5"]) == 0
    capsys.readouterr()
    assert main([*data, "providers", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [p["id"] for p in listed["providers"]] == ["box", "cloud", "llama.cpp"]
    assert listed["daily_limit"] == 0.5 and listed["providers"][1]["off_machine"] is True
    assert main([*data, "providers", "remove", "box"]) == 0
    assert main([*data, "providers", "remove", "llama.cpp"]) == 2
    assert "last resort" in capsys.readouterr().err
