"""tool_servers.json: adding, replacing, removing and importing servers; what is refused, in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.core.errors import ToolServerError
from app.toolservers.config import (
    add_server,
    from_client_config,
    import_servers,
    load_servers,
    remove_server,
    set_confirm_each_call,
    set_enabled,
)


def test_add_replace_remove_and_the_file(tmp_path: Path) -> None:
    add_server(tmp_path, {"name": "files", "command": "npx", "args": ["-y", "server-filesystem", "/notes"]})
    add_server(tmp_path, {"name": "lab", "url": "http://127.0.0.1:8931/mcp"})
    add_server(tmp_path, {"name": "files", "command": "node", "args": ["fs.js"], "timeout_s": 5})  # replaced
    settings = load_servers(tmp_path)
    assert [(s.name, s.transport, s.where()) for s in settings.servers] == [
        ("lab", "http", "http://127.0.0.1:8931/mcp"), ("files", "stdio", "node fs.js")]
    assert settings.get("files").timeout_s == 5 and not settings.get("lab").off_machine
    set_enabled(tmp_path, "lab", False)
    set_confirm_each_call(tmp_path, True)
    settings = load_servers(tmp_path)
    assert settings.get("lab").enabled is False and settings.confirm_each_call
    remove_server(tmp_path, "lab")
    assert [s.name for s in load_servers(tmp_path).servers] == ["files"]
    with pytest.raises(ToolServerError, match="no tool server 'lab'"):
        remove_server(tmp_path, "lab")


@pytest.mark.parametrize(("config", "message"), [
    ({"name": "x.y", "command": "a"}, "letters, digits"),
    ({"name": "both", "command": "a", "url": "http://127.0.0.1/mcp"}, "not both"),
    ({"name": "none"}, "command to run or a URL"),
    ({"name": "ftp", "url": "ftp://127.0.0.1/x"}, "not an http"),
    ({"name": "far", "url": "https://tools.example.com/mcp"}, "not this machine"),
])
def test_bad_servers_are_one_line(tmp_path: Path, config: dict, message: str) -> None:
    with pytest.raises(ToolServerError, match=message) as err:
        add_server(tmp_path, config)
    assert "\n" not in str(err.value)
    assert not (tmp_path / "tool_servers.json").exists()


def test_a_url_off_the_machine_needs_confirmation(tmp_path: Path) -> None:
    saved = add_server(tmp_path, {"name": "far", "url": "https://tools.example.com/mcp"}, allow_off_machine=True)
    assert saved.off_machine and load_servers(tmp_path).get("far").off_machine


def test_import_the_json_other_desktop_clients_use(tmp_path: Path) -> None:
    doc = {"mcpServers": {
        "filesystem": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/home/me"]},
        "memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"],
                   "env": {"MEMORY_FILE_PATH": "/home/me/memory.jsonl"}},
        "local http": {"type": "http", "url": "http://localhost:3001/mcp"},
        "off": {"command": "uvx", "args": ["mcp-server-time"], "disabled": True},
    }}
    added = import_servers(tmp_path, doc)
    assert [s.name for s in added] == ["filesystem", "memory", "local-http", "off"]
    assert added[1].env == {"MEMORY_FILE_PATH": "/home/me/memory.jsonl"} and not added[3].enabled
    # all or nothing: an entry off the machine refuses the whole import, naming it
    with pytest.raises(ToolServerError, match="remote"):
        import_servers(tmp_path / "other", {"mcpServers": {"ok": {"command": "a"},
                                                            "remote": {"url": "https://x.example/mcp"}}})
    assert not (tmp_path / "other" / "tool_servers.json").exists()
    with pytest.raises(ToolServerError, match="SSE"):
        from_client_config({"mcpServers": {"old": {"type": "sse", "url": "http://127.0.0.1:1/sse"}}})
    with pytest.raises(ToolServerError, match="no servers found"):
        from_client_config({"mcpServers": {}})


def test_a_broken_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "tool_servers.json").write_text(json.dumps({"servers": [{"name": 3}]}), encoding="utf-8")
    with pytest.raises(ToolServerError, match="cannot be read"):
        load_servers(tmp_path)
