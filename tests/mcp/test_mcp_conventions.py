"""The MCP server's conventions, through the official client in-process (the handshake-era
``initialize``) on a real store and index with the scripted embedder: ``initialize`` and the
listings are answered before the engine is ready and the tools wait for it; serverInfo carries the
version; only tools and resources are advertised (a prompt request is "method not found");
every tool has annotations and an output schema its results meet; bad arguments are one line
naming the field; "nothing fits within maxTokens" is told apart from "nothing matches"; a
client's mistake is logged in one line, without a traceback."""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from app import __version__
from app.core.engine.facade import Engine
from app.core.types import Message, Role
from app.mcp.ready import ServiceGate
from app.mcp.run import ClientMistakes
from app.mcp.server import build_server
from app.mcp.service import ContextService
from tests.conftest import EngineFactory

READING = {"get_context_summary", "get_relevant_snippets", "search_memory", "search_facts", "list_sessions",
           "get_status", "get_task_status"}
WRITING = {"configure_llm_provider", "record_event", "add_profile_statement", "attach_file", "start_task",
           "control_task"}
LONG = ("The Fushimi Inari shrine in Kyoto has thousands of vermilion torii gates climbing the mountain behind "
        "it, and the walk to the summit and back takes two to three hours at an easy pace.")


async def _with_session(engine: Engine) -> str:
    state = await engine.open_session(None, title="Kyoto trip")
    await engine.ingest(state.session_id, [Message(role=Role.USER, content=LONG),
                                           Message(role=Role.ASSISTANT, content="Go early: it is quiet.")])
    return state.session_id


def test_initialize_is_answered_before_the_engine_is_ready_and_tools_wait(make_engine: EngineFactory) -> None:
    async def body(engine: Engine) -> None:
        await _with_session(engine)
        gate = ServiceGate()  # no engine yet: pcm mcp while the embedder and the index load
        async with Client(build_server(gate), mode="legacy") as client:
            assert client.server_info is not None and client.server_info.version == __version__
            caps = client.server_capabilities
            assert caps.tools is not None and caps.resources is not None
            assert caps.prompts is None and caps.logging is None and caps.completions is None
            assert {t.name for t in (await client.list_tools()).tools} == READING | WRITING
            call = asyncio.create_task(client.call_tool("get_status", {}))
            await asyncio.sleep(0.3)
            assert not call.done()  # waiting for the engine
            gate.set(ContextService(engine))
            status = await asyncio.wait_for(call, 30)
            assert not status.is_error and status.structured_content["sessions"] == 1
            with pytest.raises(MCPError) as caught:
                await client.get_prompt("summarize")
            assert caught.value.error.code == -32601  # no prompts here: method not found, not code 0

    make_engine.run(body)


def test_an_engine_that_could_not_load_is_one_line_for_every_call() -> None:
    async def body() -> None:
        gate = ServiceGate()
        gate.fail("settings file /x/settings.json: context_size: Input should be a valid integer")
        async with Client(build_server(gate), mode="legacy") as client:
            result = await client.call_tool("list_sessions", {})
            assert result.is_error and "PCM could not start: settings file" in result.content[0].text

    asyncio.run(body())


def test_annotations_and_output_schemas(make_engine: EngineFactory) -> None:
    async def body(engine: Engine) -> None:
        sid = await _with_session(engine)
        async with Client(build_server(ContextService(engine)), mode="legacy") as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            for name in READING:
                assert tools[name].annotations.read_only_hint is True, name
            for name in WRITING:
                hints = tools[name].annotations
                assert hints.read_only_hint is False and hints.destructive_hint is False, name
            for name, tool in tools.items():
                assert tool.output_schema and tool.output_schema.get("type") == "object", name
            snippets = tools["get_relevant_snippets"].input_schema["properties"]["maxTokens"]
            assert (snippets["minimum"], snippets["maximum"]) == (16, 32000)
            limit = tools["search_memory"].input_schema["properties"]["limit"]
            assert (limit["minimum"], limit["maximum"]) == (1, 100)
            for name, args in [("list_sessions", {}), ("get_status", {}), ("search_facts", {}),
                               ("get_relevant_snippets", {"query": "torii gates"}),
                               ("get_context_summary", {"query": "torii gates", "conversationIds": [sid]}),
                               ("search_memory", {"query": "torii gates"})]:
                result = await client.call_tool(name, args)
                assert not result.is_error, (name, result.content)
                required = tools[name].output_schema.get("required", [])
                assert set(required) <= set(result.structured_content), name

    make_engine.run(body)


def test_bad_arguments_are_one_line_naming_the_field(make_engine: EngineFactory) -> None:
    async def body(engine: Engine) -> None:
        sid = await _with_session(engine)
        async with Client(build_server(ContextService(engine)), mode="legacy") as client:
            for tool, args, words in [
                ("get_relevant_snippets", {"query": "x", "maxTokens": -1}, "maxTokens: Input should be greater"),
                ("get_relevant_snippets", {"query": "x", "maxTokens": 10**9}, "maxTokens: Input should be less"),
                ("get_relevant_snippets", {"query": ""}, "query: String should have at least 1 character"),
                ("search_memory", {"query": "x", "limit": -1}, "limit: Input should be greater than or equal to 1"),
                ("search_memory", {"query": "x", "limit": 1000}, "limit: Input should be less than or equal to 100"),
                ("get_context_summary", {"query": "x", "conversationIds": [sid],
                                         "timeRange": {"start": "last tuesday-ish"}}, "timeRange.start: not an ISO"),
                ("get_context_summary", {"query": "x", "conversationIds": [sid],
                                         "timeRange": {"start": "2026-05-02", "end": "2026-05-01"}},
                 "timeRange: start (2026-05-02) is after end"),
                ("get_context_summary", {"query": "x", "timeRange": {"from": "2026"}}, "timeRange.from: Extra inputs"),
                ("record_event", {}, "text: Field required"),
            ]:
                bad = await client.call_tool(tool, args)
                text = bad.content[0].text
                assert bad.is_error and words in text and "\n" not in text, (tool, text)
            fine = await client.call_tool("get_context_summary", {
                "query": "torii gates", "conversationIds": [sid], "timeRange": {"start": "2000-01-01", "end": "2999-12-31"}})
            assert not fine.is_error and "torii" in fine.content[0].text

    make_engine.run(body)


def test_nothing_fits_is_told_apart_from_nothing_matches(make_engine: EngineFactory) -> None:
    async def body(engine: Engine) -> None:
        await _with_session(engine)
        service = ContextService(engine)
        text, data = await service.snippets("Fushimi Inari torii gates", max_tokens=16, expand=False)
        assert data["matched"] >= 1 and not data["snippets"] and data["fits"] is False
        assert "match, but none fits within maxTokens=16" in text and "Nothing stored matches" not in text
        text, data = await service.snippets("Fushimi Inari torii gates", max_tokens=400, expand=False)
        assert data["snippets"] and data["fits"] is True and "torii" in text
        text, data = await service.snippets("zxqv wbbl", max_tokens=400)
        if not data["matched"]:  # the scripted embedder may still find a nearest row
            assert text == "Nothing stored matches." and data["fits"] is True

    make_engine.run(body)


def test_a_clients_mistake_is_one_line_without_a_traceback() -> None:
    def record(name: str) -> logging.LogRecord:
        try:
            raise ValueError("Invalid JSON: EOF while parsing")
        except ValueError:
            info: Any = sys.exc_info()
        return logging.LogRecord(name, logging.ERROR, __file__, 1, "handler for %r raised", ("tools/call",), info)

    mistake = record("mcp.shared.jsonrpc_dispatcher")
    assert ClientMistakes().filter(mistake) and mistake.exc_info is None
    line = logging.Formatter().format(mistake)
    assert "Traceback" not in line and "\n" not in line and "Invalid JSON" in line and "--log-level debug" in line
    ours = record("mcp.server.mcpserver.server")  # a tool of ours crashed: a bug, its traceback stays
    assert ClientMistakes().filter(ours) and ours.exc_info is not None
    assert "Traceback" in logging.Formatter().format(ours)


def test_a_client_that_went_away_mid_request_is_one_line() -> None:
    """What uvicorn logged for each request whose client closed its session before the answer
    (the SDK then answers on a finished response): one line; any other failure keeps its traceback."""
    import anyio

    def record(cause: BaseException) -> logging.LogRecord:
        try:
            try:
                raise cause
            except BaseException as exc:
                raise RuntimeError("Unexpected ASGI message 'http.response.start' sent, after response "
                                   "already completed.") from exc
        except RuntimeError:
            info: Any = sys.exc_info()
        return logging.LogRecord("uvicorn.error", logging.ERROR, __file__, 1, "Exception in ASGI application", (), info)

    gone = record(anyio.ClosedResourceError())
    assert ClientMistakes().filter(gone) and gone.exc_info is None and gone.levelno == logging.INFO
    line = logging.Formatter().format(gone)
    assert "Traceback" not in line and "\n" not in line and "Exception in ASGI application" in line
    assert "the client went away" in line
    assert not ClientMistakes(logging.WARNING).filter(record(anyio.ClosedResourceError()))  # quiet by default
    ours = record(KeyError("session_id"))  # not a client leaving: a bug somewhere, its traceback stays
    assert ClientMistakes().filter(ours) and ours.exc_info is not None
