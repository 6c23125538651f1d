"""Which tool calls may run without asking: read-only tools run; a tool that changes things (an
``action`` tool: a tool server's tool without ``readOnlyHint``) runs only once the user confirmed it.

``ToolGate.check`` is the registry's ``approve`` step (after the plan's policy — a prohibited
tool is blocked before this — and the argument checks): it asks the front end's ``ToolApprover``
once per tool and session (or at every call, with ``per_call``: the servers' setting). A front
end may answer for the user beforehand (``pcm ask --allow-tool NAME``). Without an approver (a
headless run, the MCP server) an action tool is refused with a line saying how to allow it.
Asking is bounded by ``ask_timeout_s``: no answer is a refusal.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel, Field

from app.core.tools.registry import Tool, ToolContext


class ApprovalRequest(BaseModel):
    """What the user is asked to confirm: which tool (``server.tool``) of which server, what it
    does, with which arguments, and whether the server says it may destroy or reach outside."""

    session_id: str
    turn_id: str | None = None
    tool: str
    server: str = ""
    description: str = ""
    arguments: dict[str, Any] = Field(default_factory=dict)
    destructive: bool = True
    open_world: bool = True

    def question(self) -> str:
        """The one line a front end asks with."""
        where = f" on the tool server {self.server}" if self.server else ""
        return f"Allow {self.tool}{where} to run? It can change things" + (
            " and may destroy data" if self.destructive else "") + "."


#: Asks the user (a non-modal confirmation in the desktop, a prompt in the CLI); True to allow.
ToolApprover = Callable[[ApprovalRequest], Awaitable[bool]]


class ToolGate:
    """Confirmation of action tools, per tool and session (module doc)."""

    def __init__(self, *, per_call: bool = False, ask_timeout_s: float = 120.0) -> None:
        self.per_call = per_call
        self.ask_timeout_s = ask_timeout_s
        self.approver: ToolApprover | None = None
        self._granted: set[tuple[str, str]] = set()
        #: (server, tool) → the server's hints (destructive, open_world), for the question.
        self.hints: dict[str, tuple[bool, bool]] = {}

    def granted(self, session_id: str, tool: str) -> bool:
        return (session_id, tool) in self._granted

    async def check(self, tool: Tool, args: dict[str, Any], ctx: ToolContext) -> str | None:
        """None when the call may run; else the reason it may not (one line)."""
        if not tool.spec.action or (not self.per_call and self.granted(ctx.session_id, tool.name)):
            return None
        if self.approver is None:
            return (f"{tool.name} changes things and needs your confirmation; nobody was asked "
                    f"(allow it with --allow-tool {tool.name})")
        destructive, open_world = self.hints.get(tool.name, (True, True))
        request = ApprovalRequest(session_id=ctx.session_id, turn_id=ctx.turn_id, tool=tool.name,
                                  server=tool.spec.server, description=tool.spec.description, arguments=args,
                                  destructive=destructive, open_world=open_world)
        try:
            allowed = await asyncio.wait_for(self.approver(request), self.ask_timeout_s)
        except asyncio.TimeoutError:
            return f"{tool.name} was not confirmed within {self.ask_timeout_s:g} s"
        except Exception as exc:  # noqa: BLE001 - a front end that cannot ask refuses
            return f"asking about {tool.name} failed ({type(exc).__name__}), so it did not run"
        if not allowed:
            return f"you did not allow {tool.name} to run"
        if not self.per_call:
            self._granted.add((ctx.session_id, tool.name))
        return None
