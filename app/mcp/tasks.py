"""The MCP task tools' logic over the engine facade: start a task, read its status, steer it.

``start``: the text becomes a task in a session (the one used last, or a new one) — planned into
steps and run in the server's engine, like a task the user types (``Engine.run_task``); the call
returns once the plan is made, with the task's id and steps. ``status``: the task with its steps
(``task_report``), and its result text once complete. ``control``: pause (its work so far kept),
resume (it continues from its checkpoint), amend (the text joins its constraints) or cancel.
Each returns (text, structured content) like ``service.ContextService``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.core.engine.facade import Engine
from app.core.errors import CoreError
from app.core.tasks.report import task_lines, task_report
from app.core.tasks.stack import TaskError
from app.mcp.service import ToolArgumentError

CONTROLS = ("pause", "resume", "amend", "cancel")


@dataclass
class TaskTools:
    """See the module doc."""

    engine: Engine

    async def _session(self, session_id: str | None) -> str:
        if session_id is not None:
            known = {r["session_id"] for r in await self.engine.list_sessions(archived=True)}
            if session_id not in known:
                raise ToolArgumentError(f"sessionId: no session {session_id!r} (list_sessions gives the ids)")
            return session_id
        return await self.engine.last_used_session() or (await self.engine.open_session(None)).session_id

    async def _report(self, session_id: str, task_id: str) -> dict[str, Any]:
        tasks = await self.engine.list_tasks(session_id)
        if not any(t.task_id == task_id and not t.step for t in tasks):
            raise ToolArgumentError(f"taskId: no task {task_id!r} in session {session_id}")
        return {"session_id": session_id, **task_report(tasks, task_id)}

    async def start(self, text: str, session_id: str | None = None) -> tuple[str, dict[str, Any]]:
        """Make ``text`` a task, plan it and start its steps; return once it is planned."""
        if not text.strip():
            raise ToolArgumentError("text: say what the task is")
        if self.engine.model_name is None:
            raise ToolArgumentError("text: this server has no chat model to run tasks with (start it as `pcm mcp --chat`)")
        sid = await self._session(session_id)
        await self.engine.open_session(sid)
        handle = self.engine.run_task(sid, text)
        record = await handle.done
        if handle.task_id is None:
            raise CoreError(f"no task was made ({record.finish_reason if record else 'no answer'})")
        report = await self._report(sid, handle.task_id)
        return (record.output if record else "") + "\n" + "\n".join(task_lines(report)), report

    async def status(self, task_id: str, session_id: str | None = None) -> tuple[str, dict[str, Any]]:
        """The task, its steps and their states; its whole result once it is complete."""
        sid = await self._session(session_id)
        report = await self._report(sid, task_id)
        result = await self.engine.task_result(sid, task_id) if report["status"] == "complete" else ""
        text = "\n".join(task_lines(report)) + (f"\n\n{result}" if result else "")
        return text, {**report, "result_text": result}

    async def control(self, task_id: str, action: str, text: str = "",
                      session_id: str | None = None) -> tuple[str, dict[str, Any]]:
        """Pause, resume, amend (``text``: the amendment) or cancel the task."""
        if action not in CONTROLS:
            raise ToolArgumentError(f"action: one of {', '.join(CONTROLS)}")
        if action == "amend" and not text.strip():
            raise ToolArgumentError("text: say what the amendment adds")
        sid = await self._session(session_id)
        await self._report(sid, task_id)
        try:
            if action == "pause":
                steered = await self.engine.pause_task(sid, task_id)
            elif action == "resume":
                steered = await self.engine.resume_task(sid, task_id)
            elif action == "amend":
                steered = await self.engine.amend_task(sid, task_id, text)
            else:
                steered = await self.engine.cancel_task(sid, task_id)
        except TaskError as exc:
            raise ToolArgumentError(f"taskId: {exc}") from None
        return steered.line, {**await self._report(sid, task_id), "effect": steered.effect}
