"""The MCP task tools' logic (``app.mcp.tasks.TaskTools``) over an engine with the scripted agent
model: a task started, followed to its end and steered; bad arguments name their field. Over
the official client and the real model: ``test_start_task_over_stdio_runs_to_the_end``."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest

from app.core.engine.facade import Engine
from app.mcp.service import ToolArgumentError
from app.mcp.tasks import TaskTools
from tests.conftest import EngineFactory
from tests.engine.agent_model import PLAN, AgentModel


async def _until(tools: TaskTools, task_id: str, states: tuple[str, ...], timeout: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        _, status = await tools.status(task_id)
        if status["state"] in states:
            return status
        assert time.monotonic() < deadline, status
        await asyncio.sleep(0.02)


def test_a_task_started_over_mcp_runs_to_its_end_and_is_steered(make_engine: EngineFactory) -> None:
    async def body(engine: Engine) -> None:
        tools = TaskTools(engine)
        text, started = await tools.start("Plan and draft the team offsite with numbered steps")
        assert "Plan for" in text and [s["name"] for s in started["steps"]] == [s["name"] for s in PLAN["steps"]]
        assert [s["depends_on"] for s in started["steps"]] == [[], [1], [1]]
        done = await _until(tools, started["task_id"], ("complete", "failed"))
        assert done["state"] == "complete" and done["result_text"].startswith(started["name"])
        assert all(s["state"] == "complete" for s in done["steps"])

        _, second = await tools.start("Write the packing list for the trip with numbered steps")
        await _until(tools, second["task_id"], ("active",))
        line, paused = await tools.control(second["task_id"], "pause")
        assert "Paused" in line and paused["state"] == "paused"
        _, amended = await tools.control(second["task_id"], "amend", "also add a budget section")
        assert amended["constraints"] == ["add a budget section"] and amended["effect"]
        await tools.control(second["task_id"], "resume")
        done = await _until(tools, second["task_id"], ("complete", "failed"))
        assert done["state"] == "complete" and "As asked: add a budget section." in done["result_text"], (done["error"], done["steps"])
        _, third = await tools.start("Draft the newsletter with numbered steps")
        _, cancelled = await tools.control(third["task_id"], "cancel")
        assert cancelled["state"] == "failed" and cancelled["error"] == "cancelled by the user"

        for call, field in [(tools.start(""), "text"), (tools.status("nope"), "taskId"),
                            (tools.control(second["task_id"], "stop"), "action"),
                            (tools.control(second["task_id"], "amend", " "), "text"),
                            (tools.control(second["task_id"], "pause"), "taskId"),
                            (tools.status(second["task_id"], "nope"), "sessionId")]:
            with pytest.raises(ToolArgumentError, match=field):
                await call

    make_engine.run(body, chat=AgentModel(delay=0.003), max_streams=2)


def test_the_task_tools_results_meet_their_output_schemas_over_the_client(make_engine: EngineFactory) -> None:
    """Through the official client in-process: the SDK checks each result against the tool's
    output schema (``schemas.TaskReport``, ``TaskStatus``, ``TaskSteered``) before it leaves."""
    from mcp import Client

    from app.mcp.server import build_server
    from app.mcp.service import ContextService

    async def body(engine: Engine) -> None:
        async with Client(build_server(ContextService(engine)), mode="legacy") as client:
            schemas = {t.name: t.output_schema for t in (await client.list_tools()).tools}
            started = await client.call_tool("start_task", {"text": "Plan and draft the team offsite with numbered steps"})
            assert not started.is_error, started.content[0].text
            task_id = started.structured_content["task_id"]
            assert set(schemas["start_task"]["required"]) <= set(started.structured_content)
            for _ in range(3000):
                status = await client.call_tool("get_task_status", {"taskId": task_id})
                assert not status.is_error, status.content[0].text
                if status.structured_content["state"] in ("complete", "failed"):
                    break
                await asyncio.sleep(0.02)
            assert status.structured_content["state"] == "complete" and status.structured_content["result_text"]
            assert set(schemas["get_task_status"]["required"]) <= set(status.structured_content)
            steered = await client.call_tool("control_task", {"taskId": task_id, "action": "pause"})
            assert steered.is_error and "taskId" in steered.content[0].text  # a complete task has nothing to pause
            _, second = await TaskTools(engine).start("Write the packing list for the trip with numbered steps")
            steered = await client.call_tool("control_task", {"taskId": second["task_id"], "action": "cancel"})
            assert not steered.is_error, steered.content[0].text
            assert steered.structured_content["state"] == "failed" and "effect" in steered.structured_content

    make_engine.run(body, chat=AgentModel(delay=0.003), max_streams=2)


@pytest.mark.model
@pytest.mark.slow
def test_start_task_over_stdio_runs_to_the_end(tmp_path: Path) -> None:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    from tests.mcp.test_mcp_server import ROOT, _env

    server = StdioServerParameters(command=sys.executable, args=["-m", "app.cli", "mcp", "--chat"],
                                   env=_env(tmp_path / "data"), cwd=str(ROOT))

    async def main() -> None:
        async with Client(server, read_timeout_seconds=600) as client:
            started = await client.call_tool("start_task", {"text": "Book the venue and send the invitations"})
            assert not started.is_error, started.content[0].text
            task_id = started.structured_content["task_id"]
            assert len(started.structured_content["steps"]) >= 2
            deadline = time.monotonic() + 900
            while True:
                status = (await client.call_tool("get_task_status", {"taskId": task_id})).structured_content
                if status["state"] in ("complete", "failed"):
                    break
                assert time.monotonic() < deadline, status
                await asyncio.sleep(1.0)
            assert status["state"] == "complete" and status["result_text"]

    asyncio.run(main())
