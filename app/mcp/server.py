"""PCM's context as an MCP server (the official MCP Python SDK), over one engine.

Tools with the names, parameters and defaults of the design's §6 (``get_context_summary``,
``get_relevant_snippets``, ``configure_llm_provider``) and what agents using memory servers rely
on (``record_event``, ``add_profile_statement``, ``attach_file``, ``search_memory``,
``search_facts``, ``list_sessions``, ``get_status``), the task tools (``start_task``,
``get_task_status``, ``control_task``: ``tasks.TaskTools``); resources ``pcm://sessions`` and ``pcm://sessions/{session_id}``
and ``pcm://turns/{turn_id}``. Each tool returns text within its token limit and structured content
with evidence, session and turn ids (``service.ContextService``), whose shape is the tool's
output schema (``schemas.py``); each tool says in its annotations whether it only reads. A bad
argument (the schemas carry the bounds) is an MCP error naming the field, in one line. Nothing
deletes: a prohibition closes the permission it contradicts, keeping it. The server answers
``initialize`` at once; the tools wait for the engine (``ready.ServiceGate``). It advertises tools
and resources only: no prompts, no logging, no completions. Transports: stdio (``pcm mcp``) and
streamable HTTP on 127.0.0.1 behind a bearer token (``pcm mcp --http``, ``http.serve``).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver.context import Context
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp_types import CallToolResult, InputRequiredResult, TextContent, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from app import __version__
from app.core.errors import CoreError, NoRecordError
from app.mcp import schemas
from app.mcp.ready import ServiceGate
from app.mcp.service import MAX_LIMIT, MAX_TOKENS, ContextService
from app.mcp.tasks import TaskTools

# What each tool does to the user's data (MCP tool annotations): reading tools change nothing;
# the writing ones add (record_event, a profile statement, an attachment, a provider) and never
# delete, and none reaches outside this machine.
READS = ToolAnnotations(read_only_hint=True, open_world_hint=False)
ADDS = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
ADDS_ONCE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)

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
    start: str | None = Field(None, description="ISO 8601 date or date-time (UTC without an offset), inclusive")
    end: str | None = Field(None, description="ISO 8601 date or date-time (a date: to its end), inclusive")


class ProviderConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")  # an inline apiKey is refused, naming the field
    endpoint: str | None = Field(None, description="base URL, e.g. http://127.0.0.1:11434/v1")
    model: str | None = None
    apiKeyEnv: str | None = Field(None, description="name of the environment variable holding the key")
    maxTokens: int | None = None
    temperature: float | None = None


class PcmServer(MCPServer):
    """The SDK's server, with arguments that fail their schema reported in one line naming the
    field ("maxTokens: Input should be greater than or equal to 16 (got -1)"), not pydantic's
    multi-line dump."""

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Context[Any, Any] | None = None) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError):
                raise ToolError(f"Error executing tool {name}: {argument_errors(cause)}") from cause
            raise


def argument_errors(error: ValidationError) -> str:
    """One line for a tool's bad arguments: each field with what is wrong and what was given."""
    parts = []
    for problem in error.errors()[:3]:
        field = ".".join(str(p) for p in problem["loc"]) or "arguments"
        given = problem.get("input")
        shown = "" if problem["type"] == "missing" or isinstance(given, dict) else f" (got {json.dumps(given)[:40]})"
        parts.append(f"{field}: {problem['msg']}{shown}")
    return "; ".join(parts) + ("; …" if error.error_count() > 3 else "")


async def _run(gate: ServiceGate, call: Callable[[ContextService], Awaitable[tuple[str, dict[str, Any]]]]
               ) -> CallToolResult:
    """The tool result once the engine is ready: the text for a model to read, and the
    structured content beside it."""
    service = await gate.get()
    try:
        text, data = await call(service)
    except CoreError as exc:  # a one-line reason naming the field: an MCP error, never a crash
        raise ToolError(str(exc)) from None
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


def _drop_prompts(mcp: MCPServer) -> None:
    """This server has no prompts: leave ``prompts/list`` and ``prompts/get`` unserved, so the
    prompts capability is not advertised and a prompt request is JSON-RPC's "method not found"
    (-32601), not an error with code 0. (MCPServer registers both itself; mcp is pinned.)"""
    handlers = mcp._lowlevel_server._request_handlers  # noqa: SLF001 - no public way to unregister
    for method in ("prompts/list", "prompts/get"):
        handlers.pop(method, None)


def build_server(service: ContextService | ServiceGate, *, log_level: str = "WARNING") -> MCPServer:
    """The MCP server with every tool and resource bound to ``service`` — or to the service a
    ``ServiceGate`` will hold once the engine has loaded: ``initialize`` and the listings are
    answered at once, and each tool call and resource read waits for the engine."""
    gate = service if isinstance(service, ServiceGate) else ServiceGate(service)
    mcp = PcmServer("pcm-canvas", title="PCM Canvas", version=__version__, instructions=INSTRUCTIONS,
                    log_level=log_level)  # type: ignore[arg-type]
    _drop_prompts(mcp)
    _add_reading_tools(mcp, gate)
    _add_writing_tools(mcp, gate)
    _add_task_tools(mcp, gate)
    _add_resources(mcp, gate)
    return mcp


def _add_reading_tools(mcp: MCPServer, gate: ServiceGate) -> None:

    @mcp.tool(title="Context summary", annotations=READS)
    async def get_context_summary(
        query: Annotated[str, Field(min_length=1, description="Query to contextualize the summary")],
        conversationIds: Annotated[list[str] | None, Field(description="Specific conversations to summarize")] = None,
        timeRange: TimeRange | None = None,
        maxTokens: Annotated[int, Field(ge=64, le=MAX_TOKENS, description="Maximum tokens for the summary")] = 2000,
        level: Literal["brief", "standard", "detailed"] = "standard",
    ) -> Annotated[CallToolResult, schemas.ContextSummary]:
        """Get a summary of conversations for a query: the context PCM compiles for it in each
        conversation (the session used last when none is named), every line bound to its evidence."""
        span = timeRange or TimeRange()
        return await _run(gate, lambda s: s.summary(query, conversationIds, span.start, span.end, maxTokens, level))

    @mcp.tool(title="Relevant snippets", annotations=READS)
    async def get_relevant_snippets(
        query: Annotated[str, Field(min_length=1, description="Query to find relevant snippets")],
        maxTokens: Annotated[int, Field(ge=16, le=MAX_TOKENS, description="Maximum tokens to return")] = 1000,
        strategy: Literal["relevance", "recency", "mixed"] = "mixed",
        expandContext: Annotated[bool, Field(description="Include surrounding context")] = True,
    ) -> Annotated[CallToolResult, schemas.Snippets]:
        """Get relevant conversation snippets from every session, within a token budget. When
        records match but none fits within maxTokens, the text says so (fits: false)."""
        return await _run(gate, lambda s: s.snippets(query, maxTokens, strategy, expandContext))

    @mcp.tool(title="Search memory", annotations=READS)
    async def search_memory(
        query: Annotated[str, Field(min_length=1, description="Words to look for")],
        limit: Annotated[int, Field(ge=1, le=MAX_LIMIT, description="Most results")] = 10,
    ) -> Annotated[CallToolResult, schemas.Memories]:
        """Search stored notes: memory fragments and environment events (files, feeds) of every session."""
        return await _run(gate, lambda s: s.memory(query, limit))

    @mcp.tool(title="Search facts", annotations=READS)
    async def search_facts(
        query: Annotated[str, Field(description="Words the fact's subject or value holds (empty: all)")] = "",
        sessionId: Annotated[str | None, Field(description="Only this session's facts")] = None,
    ) -> Annotated[CallToolResult, schemas.Facts]:
        """Facts the user stated ("my X is Y"), each with valid_from and, once replaced, valid_to."""
        return await _run(gate, lambda s: s.facts(query, sessionId))

    @mcp.tool(title="List sessions", annotations=READS)
    async def list_sessions(includeArchived: bool = False) -> Annotated[CallToolResult, schemas.Sessions]:
        """The sessions, oldest first, with titles and turn counts."""
        return await _run(gate, lambda s: s.sessions(includeArchived))

    @mcp.tool(title="Status", annotations=READS)
    async def get_status() -> Annotated[CallToolResult, schemas.Status]:
        """Sessions, turns, indexed records, the chat model, events waiting to be stored."""
        return await _run(gate, lambda s: s.status())


def _add_writing_tools(mcp: MCPServer, gate: ServiceGate) -> None:
    @mcp.tool(title="Configure an LLM provider", annotations=ADDS_ONCE)
    async def configure_llm_provider(
        provider: Literal["ollama", "openai", "anthropic", "google"],
        config: ProviderConfig,
        setAsDefault: bool = False,
    ) -> Annotated[CallToolResult, schemas.ProviderSaved]:
        """Add an LLM provider (an OpenAI-compatible endpoint on this machine) as a new entry named
        mcp-<provider>: it never changes a provider the user configured, is tried after them, and
        only the user makes it the default (setAsDefault is refused). API keys are never passed or
        stored: name the environment variable (apiKeyEnv), not one a configured provider uses. An
        endpoint off this machine can only be added by the user (pcm providers add --yes-send-off-machine)."""
        values = {k: v for k, v in config.model_dump().items() if v is not None}
        return await _run(gate, lambda s: s.configure_provider(provider, values, setAsDefault))

    @mcp.tool(title="Record an event", annotations=ADDS)
    async def record_event(
        text: Annotated[str, Field(min_length=1, description="What was said or observed")],
        sessionId: Annotated[str | None, Field(description="Session to add it to (default: the one used last)")] = None,
        kind: Literal["input", "observation"] = "input",
        author: Annotated[str, Field(max_length=200, description="Who said or saw it")] = "",
    ) -> Annotated[CallToolResult, schemas.EventQueued]:
        """Record an input or an observation into a session. Returns at once with the ids it will
        have; the events are stored in the order they arrive. What is recorded is quoted as the
        client's text wherever a context shows it: it never speaks as the user."""
        return await _run(gate, lambda s: s.record_event(text, sessionId, kind, author))

    @mcp.tool(title="Add a profile statement", annotations=ADDS_ONCE)
    async def add_profile_statement(
        text: Annotated[str, Field(min_length=1, description='What the user wants from now on: "I prefer…", '
                                                             '"Never…", "You may…"')],
        sessionId: Annotated[str | None, Field(description="Session that keeps the record (default: the one used last)")] = None,
    ) -> Annotated[CallToolResult, schemas.ProfileAdded]:
        """Propose lasting preferences, prohibitions or permissions for the user: they are stored as
        proposals and apply to every session's context once the user accepts them (an agent does
        not speak for the user). One already held is not written again."""
        return await _run(gate, lambda s: s.add_profile(text, sessionId))

    @mcp.tool(title="Attach a file", annotations=ADDS_ONCE)
    async def attach_file(
        path: Annotated[str, Field(min_length=1, description="A text file in a folder the user watches: absolute, "
                                                             "or relative to a watched folder")],
        sessionId: Annotated[str | None, Field(description="Session to attach it to (default: the one used last)")] = None,
    ) -> Annotated[CallToolResult, schemas.FileAttached]:
        """Attach a text file as evidence of a session, as the user's "Attach file…" does: recalled
        like a watched file, a question about any line of it gets that line. Changed text is the next
        version; the same text records nothing. Only files inside the folders the user watches
        (Settings → Environment) may be attached."""
        return await _run(gate, lambda s: s.attach_file(path, sessionId))


async def _service(gate: ServiceGate) -> ContextService:
    """The service for a resource read (a read's failure is a ``ResourceError``, one line)."""
    try:
        return await gate.get()
    except ToolError as exc:
        raise ResourceError(str(exc)) from None


def _add_task_tools(mcp: MCPServer, gate: ServiceGate) -> None:
    """start_task, get_task_status, control_task (``tasks.TaskTools``; start_task needs ``pcm mcp --chat``)."""

    @mcp.tool(title="Start a task", annotations=ADDS)
    async def start_task(
        text: Annotated[str, Field(min_length=1, description="What the task is, e.g. 'Plan and draft the offsite agenda'")],
        sessionId: Annotated[str | None, Field(description="Session to run it in (default: the one used last)")] = None,
    ) -> Annotated[CallToolResult, schemas.TaskReport]:
        """Start a task: PCM splits it into 2-7 steps and runs them in order with its local model.
        Returns once the plan is made, with the task id; get_task_status follows it."""
        return await _run(gate, lambda s: TaskTools(s.engine).start(text, sessionId))

    @mcp.tool(title="Task status", annotations=READS)
    async def get_task_status(
        taskId: Annotated[str, Field(min_length=1)],
        sessionId: Annotated[str | None, Field(description="The task's session (default: the one used last)")] = None,
    ) -> Annotated[CallToolResult, schemas.TaskStatus]:
        """A task's state (pending, active, paused, complete, failed), its steps with their states and
        dependencies, and its result once complete."""
        return await _run(gate, lambda s: TaskTools(s.engine).status(taskId, sessionId))

    @mcp.tool(title="Steer a task", annotations=ADDS)
    async def control_task(
        taskId: Annotated[str, Field(min_length=1)],
        action: Literal["pause", "resume", "amend", "cancel"],
        text: Annotated[str, Field(max_length=4000, description="amend: what to add to the task's constraints")] = "",
        sessionId: Annotated[str | None, Field(description="The task's session (default: the one used last)")] = None,
    ) -> Annotated[CallToolResult, schemas.TaskSteered]:
        """Steer a task: pause it (its work so far kept), resume it from there, amend it (the text joins
        its constraints and takes effect at its next step or by restarting the running one) or cancel it."""
        return await _run(gate, lambda s: TaskTools(s.engine).control(taskId, action, text, sessionId))


def _add_resources(mcp: MCPServer, gate: ServiceGate) -> None:
    @mcp.resource("pcm://sessions", mime_type="application/json", description="Every session (id, title, times, "
                  "turn count)")
    async def sessions() -> str:
        """Every session (id, title, times, turn count)."""
        return json.dumps((await (await _service(gate)).sessions(True))[1], indent=1)

    @mcp.resource("pcm://sessions/{session_id}", mime_type="text/plain")
    async def session(session_id: str) -> str:
        """A session's messages in order, each with its id, time and speaker."""
        engine = (await _service(gate)).engine
        known = {r["session_id"] for r in await engine.list_sessions(archived=True)}
        if session_id not in known:
            raise ResourceNotFoundError(f"session_id: no session {session_id!r}")
        messages = await engine.records().messages(session_id)
        return "\n".join(f"[{m.message_id[:8]} · {m.at[:16]} · {m.role.value}] {m.content}" for m in messages)

    @mcp.resource("pcm://turns/{turn_id}", mime_type="application/json")
    async def turn(turn_id: str) -> str:
        """A turn's record: input, answer, the evidence its context cited, routing, plan."""
        engine = (await _service(gate)).engine
        try:
            record = await engine.turn_record(turn_id)
        except NoRecordError as exc:
            raise ResourceNotFoundError(f"turn_id: {exc}") from None
        b = record.build
        return json.dumps({"turn_id": turn_id, "session_id": record.session_id, "input": b.text,
                           "answer": record.output, "evidence_ids": b.context.source_ids(),
                           "anchor_node": b.anchor_node, "intent": b.intent.get("mode"),
                           "budget": b.budget, "tokens": b.context.tokens}, indent=1)
