"""PCM's context as an MCP server (the official MCP Python SDK), over one engine.

Tools with the names, parameters and defaults of the design's §6 (``get_context_summary``,
``get_relevant_snippets``, ``configure_llm_provider``) and what agents using memory servers rely
on (``record_event``, ``add_profile_statement``, ``attach_file``, ``search_memory``,
``search_facts``, ``list_sessions``, ``get_status``), the task tools (``start_task``,
``get_task_status``, ``control_task``: ``tasks.TaskTools``); resources ``pcm://sessions`` and ``pcm://sessions/{session_id}``
and ``pcm://turns/{turn_id}``. Each tool returns text within its token limit and structured content
with evidence, session and turn ids (``service.ContextService``). A bad argument is an MCP error
naming the field. Nothing deletes: a prohibition closes the permission it contradicts, keeping it.
Transports: stdio (``pcm mcp``) and streamable HTTP on 127.0.0.1 behind a bearer token
(``pcm mcp --http``, ``http.serve``).
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel, ConfigDict, Field

from app.core.errors import CoreError, NoRecordError
from app.mcp.service import ContextService
from app.mcp.tasks import TaskTools

INSTRUCTIONS = (
    "PCM Canvas keeps every input, answer and environment event of the user's sessions, and "
    "compiles budgeted contexts whose every line names its evidence. Use get_relevant_snippets "
    "for passages, get_context_summary for a compiled context about a question, search_facts for "
    "what the user stated (with validity times), record_event to add what happened, attach_file "
    "for a text file in a folder the user watches, start_task / get_task_status / control_task to "
    "have PCM carry out a task in steps and steer it."
)


class TimeRange(BaseModel):
    model_config = ConfigDict(extra="forbid")
    start: str | None = Field(None, description="ISO 8601 date-time, inclusive")
    end: str | None = Field(None, description="ISO 8601 date-time, inclusive")


class ProviderConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")  # an inline apiKey is refused, naming the field
    endpoint: str | None = Field(None, description="base URL, e.g. http://127.0.0.1:11434/v1")
    model: str | None = None
    apiKeyEnv: str | None = Field(None, description="name of the environment variable holding the key")
    maxTokens: int | None = None
    temperature: float | None = None


async def _run(call: Any) -> CallToolResult:
    """The tool result: the text for a model to read, and the structured content beside it."""
    try:
        text, data = await call
    except CoreError as exc:  # a one-line reason naming the field: an MCP error, never a crash
        raise ToolError(str(exc)) from None
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


def build_server(service: ContextService) -> MCPServer:
    """The MCP server with every tool and resource bound to ``service``."""
    mcp = MCPServer("pcm-canvas", instructions=INSTRUCTIONS)

    @mcp.tool()
    async def get_context_summary(
        query: Annotated[str, Field(description="Query to contextualize the summary")],
        conversationIds: Annotated[list[str] | None, Field(description="Specific conversations to summarize")] = None,
        timeRange: TimeRange | None = None,
        maxTokens: Annotated[int, Field(description="Maximum tokens for the summary")] = 2000,
        level: Literal["brief", "standard", "detailed"] = "standard",
    ) -> CallToolResult:
        """Get a summary of conversations for a query: the context PCM compiles for it in each
        conversation (the session used last when none is named), every line bound to its evidence."""
        span = timeRange or TimeRange()
        return await _run(service.summary(query, conversationIds, span.start, span.end, maxTokens, level))

    @mcp.tool()
    async def get_relevant_snippets(
        query: Annotated[str, Field(description="Query to find relevant snippets")],
        maxTokens: Annotated[int, Field(description="Maximum tokens to return")] = 1000,
        strategy: Literal["relevance", "recency", "mixed"] = "mixed",
        expandContext: Annotated[bool, Field(description="Include surrounding context")] = True,
    ) -> CallToolResult:
        """Get relevant conversation snippets from every session, within a token budget."""
        return await _run(service.snippets(query, maxTokens, strategy, expandContext))

    @mcp.tool()
    async def configure_llm_provider(
        provider: Literal["ollama", "openai", "anthropic", "google"],
        config: ProviderConfig,
        setAsDefault: bool = False,
    ) -> CallToolResult:
        """Configure an LLM provider (an OpenAI-compatible endpoint). API keys are never passed or
        stored: name the environment variable (apiKeyEnv). An endpoint off this machine can only be
        added by the user (pcm providers add --yes-send-off-machine)."""
        values = {k: v for k, v in config.model_dump().items() if v is not None}
        return await _run(service.configure_provider(provider, values, setAsDefault))

    @mcp.tool()
    async def record_event(
        text: Annotated[str, Field(description="What was said or observed")],
        sessionId: Annotated[str | None, Field(description="Session to add it to (default: the one used last)")] = None,
        kind: Literal["input", "observation"] = "input",
        author: Annotated[str, Field(description="Who said or saw it")] = "",
    ) -> CallToolResult:
        """Record an input or an observation into a session. Returns at once with the ids it will
        have; the events are stored in the order they arrive."""
        return await _run(service.record_event(text, sessionId, kind, author))

    @mcp.tool()
    async def add_profile_statement(
        text: Annotated[str, Field(description='What the user wants from now on: "I prefer…", "Never…", "You may…"')],
        sessionId: Annotated[str | None, Field(description="Session that keeps the record (default: the one used last)")] = None,
    ) -> CallToolResult:
        """Add the user's lasting preferences, prohibitions or permissions; every session's context
        carries them from now on. One already held is not written again; a prohibition closes the
        permission it contradicts (closed, not deleted)."""
        return await _run(service.add_profile(text, sessionId))

    @mcp.tool()
    async def attach_file(
        path: Annotated[str, Field(description="A text file in a folder the user watches: absolute, or relative "
                                               "to a watched folder")],
        sessionId: Annotated[str | None, Field(description="Session to attach it to (default: the one used last)")] = None,
    ) -> CallToolResult:
        """Attach a text file as evidence of a session, as the user's "Attach file…" does: recalled
        like a watched file, a question about any line of it gets that line. Changed text is the next
        version; the same text records nothing. Only files inside the folders the user watches
        (Settings → Environment) may be attached."""
        return await _run(service.attach_file(path, sessionId))

    @mcp.tool()
    async def search_memory(query: str, limit: int = 10) -> CallToolResult:
        """Search stored notes: memory fragments and environment events (files, feeds) of every session."""
        return await _run(service.memory(query, limit))

    @mcp.tool()
    async def search_facts(query: str = "", sessionId: str | None = None) -> CallToolResult:
        """Facts the user stated ("my X is Y"), each with valid_from and, once replaced, valid_to."""
        return await _run(service.facts(query, sessionId))

    @mcp.tool()
    async def list_sessions(includeArchived: bool = False) -> CallToolResult:
        """The sessions, oldest first, with titles and turn counts."""
        return await _run(service.sessions(includeArchived))

    @mcp.tool()
    async def get_status() -> CallToolResult:
        """Sessions, turns, indexed records, the chat model, events waiting to be stored."""
        return await _run(service.status())

    _add_task_tools(mcp, TaskTools(service.engine))
    _add_resources(mcp, service)
    return mcp


def _add_task_tools(mcp: MCPServer, tools: TaskTools) -> None:
    """start_task, get_task_status, control_task (``tasks.TaskTools``)."""

    @mcp.tool()
    async def start_task(
        text: Annotated[str, Field(description="What the task is, e.g. 'Plan and draft the offsite agenda'")],
        sessionId: Annotated[str | None, Field(description="Session to run it in (default: the one used last)")] = None,
    ) -> CallToolResult:
        """Start a task: PCM splits it into 2-7 steps and runs them in order with its local model.
        Returns once the plan is made, with the task id; get_task_status follows it."""
        return await _run(tools.start(text, sessionId))

    @mcp.tool()
    async def get_task_status(
        taskId: str,
        sessionId: Annotated[str | None, Field(description="The task's session (default: the one used last)")] = None,
    ) -> CallToolResult:
        """A task's state (pending, active, paused, complete, failed), its steps with their states and
        dependencies, and its result once complete."""
        return await _run(tools.status(taskId, sessionId))

    @mcp.tool()
    async def control_task(
        taskId: str,
        action: Literal["pause", "resume", "amend", "cancel"],
        text: Annotated[str, Field(description="amend: what to add to the task's constraints")] = "",
        sessionId: Annotated[str | None, Field(description="The task's session (default: the one used last)")] = None,
    ) -> CallToolResult:
        """Steer a task: pause it (its work so far kept), resume it from there, amend it (the text joins
        its constraints and takes effect at its next step or by restarting the running one) or cancel it."""
        return await _run(tools.control(taskId, action, text, sessionId))


def _add_resources(mcp: MCPServer, service: ContextService) -> None:
    engine = service.engine

    @mcp.resource("pcm://sessions", mime_type="application/json")
    async def sessions() -> str:
        """Every session (id, title, times, turn count)."""
        return json.dumps((await service.sessions(True))[1], indent=1)

    @mcp.resource("pcm://sessions/{session_id}", mime_type="text/plain")
    async def session(session_id: str) -> str:
        """A session's messages in order, each with its id, time and speaker."""
        known = {r["session_id"] for r in await engine.list_sessions(archived=True)}
        if session_id not in known:
            raise ResourceNotFoundError(f"session_id: no session {session_id!r}")
        messages = await engine.records().messages(session_id)
        return "\n".join(f"[{m.message_id[:8]} · {m.at[:16]} · {m.role.value}] {m.content}" for m in messages)

    @mcp.resource("pcm://turns/{turn_id}", mime_type="application/json")
    async def turn(turn_id: str) -> str:
        """A turn's record: input, answer, the evidence its context cited, routing, plan."""
        try:
            record = await engine.turn_record(turn_id)
        except NoRecordError as exc:
            raise ResourceNotFoundError(f"turn_id: {exc}") from None
        b = record.build
        return json.dumps({"turn_id": turn_id, "session_id": record.session_id, "input": b.text,
                           "answer": record.output, "evidence_ids": b.context.source_ids(),
                           "anchor_node": b.anchor_node, "intent": b.intent.get("mode"),
                           "budget": b.budget, "tokens": b.context.tokens}, indent=1)
