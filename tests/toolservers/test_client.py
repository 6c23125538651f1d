"""McpToolServers over the real reference servers (stdio, the official client): tools listed for
real with their annotations, calls, a time limit per call, a server killed mid-call (one line,
then it is started again), a command that does not exist (failed, one line), shutdown."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from app.core.errors import ToolServerError
from app.toolservers.client import McpToolServers
from app.toolservers.config import ToolServerConfig, ToolServerSettings
from tests.toolservers.servers import command, kill

pytestmark = pytest.mark.slow


def _servers(tmp_path: Path, *names: str, **extra: object) -> McpToolServers:
    configs = []
    for name in names:
        args = {"filesystem": [str(tmp_path)], "everything": ["stdio"]}.get(name, [])
        env = {"MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")} if name == "memory" else {}
        configs.append(ToolServerConfig(name=name, command=command(name), args=args, env=env, cwd=str(tmp_path)))
    return McpToolServers(configs, log_dir=tmp_path / "logs", **extra).start()  # type: ignore[arg-type]


def test_the_reference_servers_list_their_tools_and_answer(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha\n", encoding="utf-8")
    servers = _servers(tmp_path, "filesystem", "memory", "everything", "time")
    changes: list[int] = []
    servers.watch(lambda: changes.append(1))
    try:
        assert servers.wait_settled(60)
        states = {s.name: s for s in servers.states()}
        assert {n: (s.status, s.tools) for n, s in states.items()} == {
            "filesystem": ("ready", 14), "memory": ("ready", 9), "everything": ("ready", 13), "time": ("ready", 2)}
        tools = {f"{t.server}.{t.name}": t for t in servers.tools()}
        assert len(tools) == 38 and changes
        assert tools["filesystem.read_text_file"].read_only and not tools["filesystem.write_file"].read_only
        assert not tools["memory.create_entities"].read_only and tools["memory.search_nodes"].read_only
        assert tools["time.get_current_time"].input_schema["required"] == ["timezone"]

        async def calls() -> None:
            read = await servers.call_tool("filesystem", "read_text_file", {"path": "a.txt"}, 10)
            assert read.parts[0].text.strip() == "alpha" and not read.is_error
            now = await servers.call_tool("time", "get_current_time", {"timezone": "UTC"}, 10)
            assert json.loads(now.parts[0].text)["timezone"] == "UTC"
            image = await servers.call_tool("everything", "get-tiny-image", {}, 10)
            assert any(p.kind == "image" and "not shown" in p.text for p in image.parts)
            missing = await servers.call_tool("filesystem", "read_text_file", {"path": "nope.txt"}, 10)
            assert missing.is_error  # the tool's own failure is a result the engine records as an error

        asyncio.run(calls())
    finally:
        servers.close_now()
    assert servers.states()[0].status in ("ready", "failed", "starting")  # no thread left to change it


def test_a_call_has_a_time_limit_and_a_killed_server_is_one_line_then_restarted(tmp_path: Path) -> None:
    servers = _servers(tmp_path, "everything", probe_s=0.5)
    try:
        assert servers.wait_settled(60)

        async def run() -> None:
            started = time.perf_counter()
            with pytest.raises(ToolServerError, match="gave no result within 1 s") as slow:
                await servers.call_tool("everything", "trigger-long-running-operation", {"duration": 8, "steps": 4}, 1.0)
            assert time.perf_counter() - started < 3 and "\n" not in str(slow.value)
            echo = await servers.call_tool("everything", "echo", {"message": "still here"}, 10)
            assert "still here" in echo.parts[0].text

            async def killer() -> None:
                await asyncio.sleep(1.0)
                assert kill("mcp-server-everything")

            task = asyncio.create_task(killer())
            started = time.perf_counter()
            with pytest.raises(ToolServerError) as crashed:
                await servers.call_tool("everything", "trigger-long-running-operation", {"duration": 20, "steps": 4}, 30)
            await task
            assert time.perf_counter() - started < 10
            assert str(crashed.value).startswith("tool server everything:") and "\n" not in str(crashed.value)
            for _ in range(200):  # noticed, marked failed, started again
                state = servers.states()[0]
                if state.status == "ready" and state.restarts >= 1:
                    break
                await asyncio.sleep(0.1)
            assert state.status == "ready" and state.restarts >= 1
            again = await servers.call_tool("everything", "echo", {"message": "back"}, 10)
            assert "back" in again.parts[0].text

        asyncio.run(run())
    finally:
        servers.close_now()


def test_a_command_that_does_not_exist_fails_with_one_line(tmp_path: Path) -> None:
    servers = McpToolServers([ToolServerConfig(name="ghost", command=str(tmp_path / "no-such-server"))]).start()
    try:
        assert servers.wait_settled(30)
        [state] = servers.states()
        assert state.status == "failed" and state.error.startswith("tool server ghost:") and "\n" not in state.error
        with pytest.raises(ToolServerError, match="ghost"):
            asyncio.run(servers.call_tool("ghost", "x", {}, 5))
    finally:
        servers.close_now()


def test_reload_follows_the_settings(tmp_path: Path) -> None:
    files = ToolServerConfig(name="filesystem", command=command("filesystem"), args=[str(tmp_path)])
    clock = ToolServerConfig(name="time", command=command("time"))
    settings = [files]
    servers = McpToolServers(settings, source=lambda: ToolServerSettings(servers=list(settings))).start()
    try:
        assert servers.wait_settled(60)
        settings[:] = [files, clock]
        asyncio.run(servers.reload())
        assert servers.wait_settled(60)
        assert {s.name: s.status for s in servers.states()} == {"filesystem": "ready", "time": "ready"}
        settings[:] = [clock, files.model_copy(update={"enabled": False})]
        asyncio.run(servers.reload())
        assert servers.wait_settled(60)
        assert [(s.name, s.status) for s in servers.states()] == [("time", "ready"), ("filesystem", "stopped")]
        assert {t.server for t in servers.tools()} == {"time"}
    finally:
        servers.close_now()
