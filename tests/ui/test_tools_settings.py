"""Settings → Tools (MCP servers written to tool_servers.json, the running engine told to follow,
a URL off the machine only once confirmed, live states), the non-modal confirmation a tool that
changes things asks with, and the Plan tab's tool filter (offered with why, left out, blocked, called)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from app.core.ports import ServerState
from app.core.tools.governance import ApprovalRequest
from app.desktop import tool_server_access
from app.toolservers.config import load_servers
from app.ui.tool_approval import ToolApprovalPrompt
from app.ui.tools_settings import ToolsSettingsWidget


class _Engine:
    """What the Tools tab reads and asks of the running engine."""

    def __init__(self) -> None:
        self.states = [ServerState(name="files", status="ready", tools=14)]
        self.reloads = 0

    def tool_server_states(self) -> list[ServerState]:
        return self.states

    async def sync_tool_servers(self, _wait_s: float = 0.0, *, reload: bool = False) -> None:
        self.reloads += reload


def _names(widget: ToolsSettingsWidget) -> list[str]:
    return [widget.table.item(r, 1).text() for r in range(widget.table.rowCount())]


def test_the_tools_tab_edits_the_file_and_the_running_engine_follows(qtbot: Any, tmp_path: Path) -> None:
    engine, ran = _Engine(), []
    asked: list[str] = []
    answers = [False, True]

    def confirm(host: str) -> bool:
        asked.append(host)
        return answers.pop(0)

    def run(coro: Any, _what: str) -> None:
        ran.append(_what)
        asyncio.run(coro)

    widget = ToolsSettingsWidget(tool_server_access(), tmp_path, lambda: engine, run, confirm=confirm)
    qtbot.addWidget(widget)
    assert _names(widget) == []
    assert widget.add({"name": "files", "command": "npx", "args": ["-y", "server-filesystem", "/notes"]})
    assert _names(widget) == ["files"] and widget.table.item(0, 2).text() == "ready"
    assert widget.table.item(0, 3).text() == "14" and engine.reloads == 1
    far = {"name": "far", "url": "https://tools.example.com/mcp"}
    assert widget.add(far) is False and asked == ["tools.example.com"] and "stays on this machine" in widget.message.text()
    assert widget.add(far) is True and "OFF THE MACHINE" in widget.table.item(1, 4).text()
    assert widget.table.item(1, 2).text() == "not running"
    assert widget.add({"name": "bad", "url": "ftp://x"}) is False and "not an http" in widget.message.text()
    widget.table.setCurrentCell(1, 1)
    widget.toggle_button.click()
    assert load_servers(tmp_path).get("far").enabled is False and widget.table.item(1, 2).text() == "disabled"
    widget.table.setCurrentCell(1, 1)
    widget.remove_button.click()
    assert _names(widget) == ["files"] and [s.name for s in load_servers(tmp_path).servers] == ["files"]
    widget.each_call.setChecked(True)
    assert load_servers(tmp_path).confirm_each_call and engine.reloads == 5  # each change: the engine follows
    engine.states = [ServerState(name="files", status="failed", error="tool server files: it crashed")]
    widget.refresh_states()
    assert widget.table.item(0, 2).text() == "failed: tool server files: it crashed"
    assert ran and all(w == "Restarting the tool servers" for w in ran)


def test_importing_another_clients_json(qtbot: Any, tmp_path: Path) -> None:
    config = tmp_path / "claude_desktop_config.json"
    config.write_text('{"mcpServers": {"memory": {"command": "npx", "args": ["-y", "server-memory"]}}}',
                      encoding="utf-8")
    widget = ToolsSettingsWidget(tool_server_access(), tmp_path / "data")
    qtbot.addWidget(widget)
    assert widget.import_file(config) and _names(widget) == ["memory"]
    assert "Imported 1 server(s): memory" in widget.message.text()


@pytest.mark.usefixtures("qapp")
def test_a_tool_that_changes_things_asks_without_a_modal_loop() -> None:
    prompt = ToolApprovalPrompt()
    request = ApprovalRequest(session_id="s", tool="memory.create_entities", server="memory",
                              description="Create multiple new entities in the knowledge graph",
                              arguments={"entities": [{"name": "<b>Anna</b>"}]}, destructive=False)

    async def ask(click: str) -> bool:
        task = asyncio.ensure_future(prompt(request))
        await asyncio.sleep(0)  # the question is shown, the loop goes on
        [(box, allow)] = prompt.boxes
        assert box.isVisible() and not box.isModal()
        assert "Allow memory.create_entities on the tool server memory to run?" in box.text()
        assert "<b>Anna</b>" in box.informativeText()  # shown as text, never as markup
        if click == "allow":
            allow.click()
        else:
            box.reject()
        return await task

    assert asyncio.run(ask("allow")) is True
    assert asyncio.run(ask("close")) is False and prompt.boxes == []


def test_the_plan_tab_shows_the_tool_filter(qtbot: Any) -> None:
    from app.core.pipeline.record import TurnRecord
    from app.ui.panels.plan_tab import PlanTabWidget

    tools = {"allowed": ["fs.read_text_file", "read_file"], "blocked": ["mem.create_entities"],
             "notes": ["mem.create_entities: prohibited (never use the mem server)"], "max_offered": 8,
             "scores": {"fs.read_text_file": 1.25, "read_file": 0.4},
             "why": {"fs.read_text_file": "similar 0.61; the input names a file", "read_file": "words fil"},
             "left_out": ["fs.get_file_info (0.31): scores too low; similar 0.40"]}
    record = TurnRecord.model_validate({
        "turn_id": "t", "session_id": "s", "build": {
            "text": "x", "at": "2026-01-01T00:00:00Z", "budget": 100, "intent": {}, "routing": {},
            "anchor_node": None, "recall_request": {}, "recall": {"strategy": "pcm", "channels": [], "candidates": []},
            "context": {"blocks": [], "tokens": 0, "budget": 100, "counter": "words"}, "prompt": [],
            "plan": {"tools": tools, "budget": {"segments": {}}},
            "tool_specs": [{"name": n} for n in ("fs.read_text_file", "read_file", "mem.create_entities", "x")],
            "tools": {"offered": tools["allowed"], "selection": "rules", "calls": [
                {"call": {"tool": "fs.read_text_file", "status": "success"}}]}}})
    tab = PlanTabWidget()
    qtbot.addWidget(tab)
    tab.show_record(record)
    policy = tab.tree.findItems("tools", Qt_match())[0]
    rows = {policy.child(i).text(0): policy.child(i) for i in range(policy.childCount())}
    offered = rows["offered"]
    assert offered.text(1) == "2 of 4 registered (at most 8)"
    assert offered.child(0).text(0) == "fs.read_text_file" and offered.child(0).text(1).startswith("1.25 · similar 0.61")
    assert rows["left out"].child(0).text(0) == "fs.get_file_info"
    assert rows["blocked"].child(0).text(1) == "prohibited (never use the mem server)"
    assert rows["called"].child(0).text(1) == "success"


def Qt_match() -> Any:  # noqa: N802 - reads as the flag it returns
    from PySide6.QtCore import Qt

    return Qt.MatchFlag.MatchRecursive | Qt.MatchFlag.MatchExactly


