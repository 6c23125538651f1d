"""``pcm tools``: add (a command after --, a URL; off the machine only when confirmed), import
another client's JSON, list the real servers' state and tools, remove, confirm; and the CLI's
answer when a tool that changes things asks (the --allow-tool line)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from app.cli import main
from app.cli_tools import cli_approver
from app.core.tools.governance import ApprovalRequest
from app.toolservers.config import load_servers
from tests.toolservers.servers import command


def test_add_import_remove_and_confirm(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = ["--data-dir", str(tmp_path)]
    assert main([*data, "tools", "add", "files", "--cwd", "/notes", "--env", "A=1", "--",
                 "npx", "-y", "@modelcontextprotocol/server-filesystem", "--flag", "/notes"]) == 0
    server = load_servers(tmp_path).get("files")
    assert (server.command, server.args, server.cwd, server.env) == (
        "npx", ["-y", "@modelcontextprotocol/server-filesystem", "--flag", "/notes"], "/notes", {"A": "1"})
    assert main([*data, "tools", "add", "far", "--url", "https://tools.example.com/mcp"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not this machine" in err and "--yes-off-machine" in err
    assert main([*data, "tools", "add", "far", "--url", "https://tools.example.com/mcp", "--yes-off-machine"]) == 0
    assert "OFF THE MACHINE" in capsys.readouterr().out
    config = tmp_path / "claude.json"
    config.write_text(json.dumps({"mcpServers": {"time": {"command": "uvx", "args": ["mcp-server-time"]}}}))
    assert main([*data, "tools", "import", str(config)]) == 0
    assert [s.name for s in load_servers(tmp_path).servers] == ["files", "far", "time"]
    assert main([*data, "tools", "remove", "far"]) == 0 and main([*data, "tools", "disable", "time"]) == 0
    assert main([*data, "tools", "confirm", "each-call"]) == 0
    settings = load_servers(tmp_path)
    assert [s.name for s in settings.servers] == ["files", "time"] and settings.confirm_each_call
    assert not settings.get("time").enabled
    assert main([*data, "tools", "add", "x"]) == 2 and "after --" in capsys.readouterr().err


@pytest.mark.slow
def test_list_starts_the_servers_and_shows_their_state(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = ["--data-dir", str(tmp_path)]
    assert main([*data, "tools", "add", "fs", "--", command("filesystem"), str(tmp_path)]) == 0
    assert main([*data, "tools", "add", "ghost", "--", str(tmp_path / "missing-server")]) == 0
    capsys.readouterr()
    assert main([*data, "tools", "list", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    rows = {r["name"]: r for r in listing["servers"]}
    assert rows["fs"]["status"] == "ready" and len(rows["fs"]["tools"]) == 14
    assert {t["name"]: t["read_only"] for t in rows["fs"]["tools"]}["write_file"] is False
    assert rows["ghost"]["status"] == "failed" and rows["ghost"]["error"].startswith("tool server ghost:")
    assert main([*data, "tools", "list"]) == 0
    out = capsys.readouterr().out
    assert "fs.read_text_file\treads only" in out and "fs.write_file\tasks first" in out


def test_the_cli_answers_for_the_user_or_says_how_to_allow(capsys: pytest.CaptureFixture[str]) -> None:
    request = ApprovalRequest(session_id="s", tool="memory.create_entities", server="memory")
    assert asyncio.run(cli_approver(["memory.create_entities"])(request)) is True
    assert asyncio.run(cli_approver()(request)) is False  # stdin is not a terminal under pytest
    assert "run again with --allow-tool memory.create_entities" in capsys.readouterr().err
