"""The tool registry: tools with descriptions and input schemas, offered by the plan, called safely.

A ``Tool`` is a ``ToolSpec`` (name, description, tags, action flag) plus a pydantic input model
(its JSON schema is the tool's input schema), a provider name and an async implementation.
``ToolRegistry.offer(plan)`` is the subset the plan's tool filter chose for one turn (its
``tools.allowed``, best first; blocked tools are never offered). ``ToolRegistry.call`` is the only way
a tool runs: it refuses blocked or not-offered tools, validates the arguments, enforces the time
limit, turns the result into labelled, delimited evidence and records every call, refused ones too.

Why the policy cannot be changed by content: the plan (and its tool policy) is built from the
user's input and profile before any tool runs; results come back only as ``Evidence`` records
whose text is fenced (``[tool read_file]``, ``<<< notes/plan.md``, the text, ``>>>``), and nothing
here or in the pipeline reads a result back into the intent, the profile or the plan.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from app.core.errors import CoreError
from app.core.plan.model import ContextPlan, ToolPolicy
from app.core.plan.tools import ToolSpec
from app.core.text.quoting import fence
from app.core.tools.model import (
    ChosenBy,
    ToolNotFound,
    ToolOutcome,
    ToolRefused,
    ToolResultItem,
    args_digest,
)
from app.core.tools.schema import schema_problems
from app.core.types import (
    Evidence,
    EvidenceSource,
    EvidenceType,
    Provider,
    SourceKind,
    ToolCall,
    new_id,
    utc_now,
)


@dataclass(frozen=True)
class ToolContext:
    """Who a call is for: the session, and the turn or task that made it."""

    session_id: str
    turn_id: str | None = None
    task_id: str | None = None


ToolImpl = Callable[[Any, ToolContext], Awaitable[list[ToolResultItem]]]
#: (tool, arguments, context) → None to let the call run, or the reason it may not (not confirmed).
Approve = Callable[["Tool", dict[str, Any], ToolContext], Awaitable[str | None]]
#: Stores a call and its result evidences (one transaction); the engine runs it on the store executor.
ToolRecorder = Callable[[str, ToolCall, list[Evidence]], Awaitable[None]]


@dataclass(frozen=True)
class Tool:
    """A registered tool. ``run(args, ctx)`` gets validated ``input_model`` arguments and returns
    result items; it raises ``ToolRefused`` / ``ToolNotFound`` for "forbidden" / "not_found".
    Blocking work inside ``run`` belongs on an executor. ``primary_arg`` is the argument a
    one-string model choice fills (None: the tool takes no free text). ``input_schema``: a JSON
    schema the arguments are also checked against (a tool server's tool; ``schema_problems``)."""

    spec: ToolSpec
    input_model: type[BaseModel]
    run: ToolImpl
    provider: str = "builtin"
    timeout_s: float = 5.0
    primary_arg: str | None = None
    input_schema: Mapping[str, Any] | None = None

    @property
    def name(self) -> str:
        return self.spec.name


@dataclass
class ToolRegistry:
    """Every tool the app knows, by name (registration order kept)."""

    recorder: ToolRecorder | None = None
    _tools: dict[str, Tool] = field(default_factory=dict)

    def register(self, tool: Tool, *, replace: bool = False) -> Tool:
        """Add ``tool``; a second tool of the same name raises ``ValueError`` unless ``replace``."""
        if tool.name in self._tools and not replace:
            raise ValueError(f"tool {tool.name!r} is registered already")
        self._tools[tool.name] = tool
        return tool

    def unregister(self, name: str) -> Tool | None:
        """Remove the tool ``name`` (a tool server's that went away); return it, or None."""
        return self._tools.pop(name, None)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def all(self) -> list[Tool]:
        return list(self._tools.values())

    def specs(self) -> tuple[ToolSpec, ...]:
        """The specs the planner sees (name, description, tags, action), in registration order."""
        return tuple(t.spec for t in self._tools.values())

    def offer(self, plan: ContextPlan) -> list[Tool]:
        """The tools the plan offers this turn (its filter's choice), most relevant first; blocked
        and unregistered ones are never in it."""
        blocked = set(plan.tools.blocked)
        return [self._tools[n] for n in plan.tools.allowed if n in self._tools and n not in blocked]

    async def call(
        self,
        name: str,
        args: Mapping[str, Any],
        *,
        policy: ToolPolicy,
        offered: Collection[str],
        session_id: str,
        turn_id: str | None = None,
        task_id: str | None = None,
        chosen_by: ChosenBy = "rule",
        reason: str = "",
        approve: Approve | None = None,
    ) -> ToolOutcome:
        """Run one call and record it; returns its outcome (status success, forbidden, not_found,
        error or timeout). Never raises for a tool's failure: a failed call is a recorded outcome.
        ``approve`` (the engine's ``ToolGate``) may refuse a call with a reason before it runs."""
        tool = self._tools.get(name)
        started = time.perf_counter()
        call = ToolCall(tool=name, turn_id=turn_id, task_id=task_id, args_digest=args_digest(args),
                        provider=_provider(tool), called_at=utc_now())
        call.chosen_by = chosen_by  # type: ignore[attr-defined]  # an extra key of the record
        outcome = ToolOutcome(call=call, args=dict(args), chosen_by=chosen_by, reason=reason)
        if name in policy.blocked:
            return await self._finish(outcome, "forbidden", f"tool {name!r} is blocked by the plan", started, session_id)
        if name not in offered:
            return await self._finish(outcome, "forbidden", f"tool {name!r} was not offered this turn", started, session_id)
        if tool is None:
            return await self._finish(outcome, "not_found", f"no tool {name!r}", started, session_id)
        try:
            parsed = tool.input_model.model_validate(dict(args))
        except ValidationError as exc:
            msg = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'args'}: {e['msg']}" for e in exc.errors())
            return await self._finish(outcome, "error", f"invalid arguments: {msg}", started, session_id)
        problems = schema_problems(tool.input_schema, args) if tool.input_schema is not None else []
        if problems:
            return await self._finish(outcome, "error", f"invalid arguments: {'; '.join(problems)}", started, session_id)
        ctx = ToolContext(session_id, turn_id, task_id)
        refused = await approve(tool, dict(args), ctx) if approve is not None else None
        if refused is not None:
            return await self._finish(outcome, "forbidden", refused, started, session_id)
        try:
            items = await asyncio.wait_for(tool.run(parsed, ctx), tool.timeout_s)
        except asyncio.TimeoutError:
            return await self._finish(outcome, "timeout", f"no result within {tool.timeout_s:g} s", started, session_id)
        except ToolRefused as exc:
            return await self._finish(outcome, "forbidden", str(exc), started, session_id)
        except ToolNotFound as exc:
            return await self._finish(outcome, "not_found", str(exc), started, session_id)
        except CoreError as exc:  # a line meant for the user: a server down or crashed, a tool's own failure
            return await self._finish(outcome, "error", str(exc), started, session_id)
        except Exception as exc:  # noqa: BLE001 - a tool's failure is an outcome, never the turn's
            return await self._finish(outcome, "error", f"{type(exc).__name__}: {exc}", started, session_id)
        outcome.evidences = [result_evidence(tool, item, call, turn_id) for item in items]
        call.result_evidence_ids = [e.evidence_id for e in outcome.evidences]
        return await self._finish(outcome, "success", "", started, session_id)

    async def _finish(self, outcome: ToolOutcome, status: str, error: str, started: float,
                      session_id: str) -> ToolOutcome:
        outcome.call.status = status  # type: ignore[assignment]
        outcome.call.duration_ms = round((time.perf_counter() - started) * 1000, 3)
        outcome.error = error
        if error:
            outcome.call.error = error  # type: ignore[attr-defined]  # an extra key of the record
        if self.recorder is not None:
            await self.recorder(session_id, outcome.call, list(outcome.evidences))
        return outcome


def _provider(tool: Tool | None) -> Provider:
    """Who a call went to: built in, or a tool server (MCP) by name."""
    if tool is None or tool.provider == "builtin":
        return Provider(kind="builtin")
    return Provider(kind="mcp" if tool.spec.server else "other", name=tool.provider)


def result_evidence(tool: Tool, item: ToolResultItem, call: ToolCall, turn_id: str | None) -> Evidence:
    """The evidence of one result item: type tool_result, source tool, content labelled and fenced."""
    return Evidence(
        evidence_id=new_id(),
        type=EvidenceType.TOOL_RESULT,
        source=EvidenceSource(kind=SourceKind.TOOL, name=tool.name, uri=item.uri),
        content=fence(f"tool {tool.name}", item.content, item.label),
        metadata={"tool_call_id": call.tool_call_id, "tool": tool.name, "label": item.label, "turn_id": turn_id,
                  **item.metadata},
        links={"tool_call_id": call.tool_call_id},
    )


def choice_names(tools: Sequence[Tool]) -> list[str]:
    """The names a model may choose from: the offered tools and "none"."""
    return [t.name for t in tools] + ["none"]
