"""``pcm mcp`` through the official MCP client: a real server process over stdio and over
streamable HTTP (bearer token), on a data folder written by the real engine (SQLite, LanceDB, the
real embedder). The tools answer with text within their limit and structured content bound to
evidence, session and turn ids; bad arguments are MCP errors naming the field; nothing deletes."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from app import main as wiring
from app.config import Settings
from app.core.types import EdgeKind, EnvEvent, Message, Role
from tests.conftest import stored

pytestmark = pytest.mark.model  # the real embedder, in this process and in the server's

ROOT = Path(__file__).resolve().parents[2]
TOOLS = {"get_context_summary", "get_relevant_snippets", "configure_llm_provider", "record_event",
         "add_profile_statement", "attach_file", "search_memory", "search_facts", "list_sessions", "get_status",
         "start_task", "get_task_status", "control_task"}
KYOTO = "We visit the Fushimi Inari shrine in Kyoto on day two of the trip"
PYTHON = "My script raises KeyError: 'user_id' when the JSON has no user field"
RAIL = "The JR rail pass for seven days costs 50,000 yen; buy it before leaving"
# seed 004 §6: each tool's parameters with their defaults (None: required or no default)
SPEC = {
    "get_context_summary": ({"query": None, "conversationIds": None, "timeRange": None, "maxTokens": 2000,
                             "level": "standard"}, ["query"]),
    "get_relevant_snippets": ({"query": None, "maxTokens": 1000, "strategy": "mixed", "expandContext": True},
                              ["query"]),
    "configure_llm_provider": ({"provider": None, "config": None, "setAsDefault": False}, ["provider", "config"]),
}
ENUMS = {("get_context_summary", "level"): ["brief", "standard", "detailed"],
         ("get_relevant_snippets", "strategy"): ["relevance", "recency", "mixed"],
         ("configure_llm_provider", "provider"): ["ollama", "openai", "anthropic", "google"]}


def _enum(schema: dict[str, Any]) -> list[str] | None:
    if "enum" in schema:
        return list(schema["enum"])
    for option in schema.get("anyOf", []):
        if "enum" in option:
            return list(option["enum"])
    return None


def _check_schemas(tools: list[Any]) -> None:
    by_name = {t.name: t.input_schema for t in tools}
    for name, (params, required) in SPEC.items():
        schema = by_name[name]
        assert set(schema["properties"]) == set(params), name
        assert sorted(schema.get("required", [])) == sorted(required), name
        for param, default in params.items():
            if default is not None:
                assert schema["properties"][param].get("default") == default, (name, param)
    for (name, param), values in ENUMS.items():
        assert _enum(by_name[name]["properties"][param]) == values, (name, param)
    config = by_name["configure_llm_provider"]
    defs = config.get("$defs", {})
    fields = next(iter(d["properties"] for d in defs.values() if "apiKeyEnv" in d["properties"]))
    assert set(fields) == {"endpoint", "model", "apiKeyEnv", "maxTokens", "temperature"}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two sessions (a trip, a Python error) and a fact stated twice, by the real engine."""
    data = tmp_path_factory.mktemp("mcp") / "data"
    engine = wiring.build_engine(Settings.load(data), chat=False, counter="words")

    async def write() -> dict[str, Any]:
        await engine.start()
        trip = await engine.open_session(None, title="Kyoto trip")
        bug = await engine.open_session(None, title="Python error")
        kyoto = Message(role=Role.USER, content=KYOTO)
        await engine.ingest(trip.session_id, [kyoto, Message(role=Role.ASSISTANT, content="Go before 8: it is quiet.")])
        await engine.ingest(trip.session_id, [Message(role=Role.USER, content="my hotel is the Gion Hatanaka")])
        await engine.ingest(trip.session_id, [Message(role=Role.USER, content="my hotel is the Ryokan Motonago now")])
        await engine.ingest(bug.session_id, [Message(role=Role.USER, content=PYTHON)])
        await engine.ingest_env(trip.session_id, [EnvEvent(kind="file", source="/notes", uri="/notes/rail.md",
                                                           title="rail.md", content=RAIL)])
        await engine.close()
        return {"data": data, "trip": trip.session_id, "bug": bug.session_id, "kyoto": kyoto.message_id}

    watched = data.parent / "watched"  # the folder the user watches: what an agent may attach from
    watched.mkdir()
    (watched / "ferry.md").write_text("# Ferry\nThe Miyajima ferry leaves Hiroshima port at 9:10.\n", encoding="utf-8")
    (data.parent / "secret.txt").write_text("not for agents", encoding="utf-8")
    (watched / "link.txt").symlink_to(data.parent / "secret.txt")
    settings = Settings.load(data)
    settings.watched_folders = [watched]
    settings.save()

    return asyncio.run(write())


def _env(data: Path) -> dict[str, str]:
    return {**os.environ, "PCM_DATA_DIR": str(data), "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}


async def _until_found(client: Client, query: str, wanted: str, timeout: float = 30.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        result = await client.call_tool("get_relevant_snippets", {"query": query, "expandContext": False})
        if any(s["evidence_id"] == wanted for s in result.structured_content["snippets"]):
            return result.structured_content
        assert time.monotonic() < deadline, f"{wanted} never became searchable"
        await asyncio.sleep(0.3)


def test_the_tools_over_stdio_answer_from_the_sessions_with_their_evidence(folder: dict[str, Any]) -> None:
    server = StdioServerParameters(command=sys.executable, args=["-m", "app.cli", "mcp"], env=_env(folder["data"]),
                                   cwd=str(ROOT))

    async def main() -> None:
        async with Client(server, read_timeout_seconds=120) as client:
            tools = (await client.list_tools()).tools
            assert {t.name for t in tools} == TOOLS
            _check_schemas(tools)
            found = await client.call_tool("get_relevant_snippets", {"query": "Fushimi Inari shrine", "maxTokens": 120})
            assert not found.is_error
            first = found.structured_content["snippets"][0]
            assert (first["evidence_id"], first["session_id"]) == (folder["kyoto"], folder["trip"])
            assert first["turn_id"] and len(found.content[0].text.split()) <= 120
            assert any(s["role"] == "assistant" for s in found.structured_content["snippets"])  # expandContext
            assert not any(s["session_id"] == folder["bug"] for s in found.structured_content["snippets"][:2])

            summary = await client.call_tool("get_context_summary", {
                "query": "Why does my script raise KeyError?", "conversationIds": [folder["bug"]], "level": "brief"})
            assert not summary.is_error and "KeyError" in summary.content[0].text
            assert all(b["session_id"] == folder["bug"] for b in summary.structured_content["blocks"])

            facts = (await client.call_tool("search_facts", {"query": "hotel"})).structured_content["facts"]
            hotels = sorted((f for f in facts if "hotel" in f["key"]), key=lambda f: f["valid_from"])
            assert len(hotels) == 2 and "gion" in hotels[0]["value"].lower() and "motonago" in hotels[1]["value"].lower()
            assert hotels[0]["valid_to"] == hotels[1]["valid_from"] and hotels[-1]["valid_to"] is None  # closed, kept

            queued = await client.call_tool("record_event", {"text": "The tea ceremony is booked for Thursday",
                                                             "sessionId": folder["trip"]})
            assert queued.structured_content["queued"] and queued.structured_content["session_id"] == folder["trip"]
            await _until_found(client, "tea ceremony booked", queued.structured_content["message_id"])

            rule = {"text": "Never book trains before 7 am.", "sessionId": folder["trip"]}
            added = (await client.call_tool("add_profile_statement", rule)).structured_content
            assert [m["type"] for m in added["added"]] == ["prohibition"] and added["session_id"] == folder["trip"]
            assert added["added"][0]["pending"]  # an agent proposes; it does not speak for the user
            again = (await client.call_tool("add_profile_statement", rule)).structured_content
            assert not again["added"] and again["held"][0]["memory_id"] == added["added"][0]["memory_id"]
            ask = {"query": "Which train do we take on day two?", "conversationIds": [folder["bug"]]}
            assert "before 7 am" not in (await client.call_tool("get_context_summary", ask)).content[0].text
            accepted = subprocess.run([sys.executable, "-m", "app.cli", "--data-dir", str(folder["data"]), "memory",
                                       "accept", added["added"][0]["memory_id"]], env=_env(folder["data"]),
                                      cwd=str(ROOT), capture_output=True, text=True, timeout=120)
            assert accepted.returncode == 0 and "accepted" in accepted.stdout, accepted.stderr
            brief = await client.call_tool("get_context_summary", ask)  # the running server takes it in
            assert "before 7 am" in brief.content[0].text  # accepted: a profile holds in every session

            ferry = {"path": "ferry.md", "sessionId": folder["trip"]}  # relative to the watched folder
            attached = (await client.call_tool("attach_file", ferry)).structured_content
            assert attached["changed"] and attached["version"] == 1 and attached["session_id"] == folder["trip"]
            again = await client.call_tool("attach_file", {**ferry, "path": str(folder["data"].parent / "watched/ferry.md")})
            assert not again.structured_content["changed"] and "Unchanged" in again.content[0].text
            timetable = (await client.call_tool("search_memory", {"query": "Miyajima ferry departure"})).structured_content
            assert any(m["evidence_id"] == attached["evidence_id"] for m in timetable["memories"])
            for path, why in [(str(folder["data"].parent / "secret.txt"), "outside the watched folders"),
                              ("link.txt", "link out of the watched folder"), ("nothing.md", "no file")]:
                refused = await client.call_tool("attach_file", {"path": path})
                assert refused.is_error and "path: " in refused.content[0].text and why in refused.content[0].text

            notes = (await client.call_tool("search_memory", {"query": "rail pass price"})).structured_content
            assert notes["memories"][0]["kind"] == "env" and "50,000 yen" in notes["memories"][0]["content"]
            assert notes["memories"][0]["session_id"] == folder["trip"]
            sessions = (await client.call_tool("list_sessions", {})).structured_content["sessions"]
            assert {s["session_id"] for s in sessions} == {folder["trip"], folder["bug"]}
            text = (await client.read_resource(f"pcm://sessions/{folder['trip']}")).contents[0].text
            assert KYOTO in text and "tea ceremony" in text

            for tool, args, field in [
                ("get_relevant_snippets", {"query": "x", "strategy": "fastest"}, "strategy"),
                ("get_relevant_snippets", {"query": "x", "maxTokens": 3}, "maxTokens"),
                ("get_context_summary", {"query": "x", "conversationIds": ["nope"]}, "conversationIds"),
                ("get_context_summary", {"query": "x", "level": "everything"}, "level"),
                ("record_event", {"text": "x", "sessionId": "nope"}, "sessionId"),
                ("record_event", {}, "text"),
                ("add_profile_statement", {"text": "the weather is nice"}, "text"),
                ("add_profile_statement", {"text": "Never x", "sessionId": "nope"}, "sessionId"),
                ("search_facts", {"sessionId": "nope"}, "sessionId"),
                ("attach_file", {"path": "ferry.md", "sessionId": "nope"}, "sessionId"),
                ("configure_llm_provider", {"provider": "acme", "config": {}}, "provider"),
            ]:
                bad = await client.call_tool(tool, args)
                assert bad.is_error and field in bad.content[0].text, (tool, bad.content[0].text)
            local = {"endpoint": "http://127.0.0.1:11434/v1", "model": "qwen2.5:7b", "apiKeyEnv": "OLLAMA_KEY"}
            added = await client.call_tool("configure_llm_provider", {"provider": "ollama", "config": local})
            assert not added.is_error and added.structured_content["provider"]["model"] == "qwen2.5:7b"
            assert added.structured_content["provider"]["id"] == "mcp-ollama"  # a new entry, named as the client's
            saved = (folder["data"] / "providers.json").read_text(encoding="utf-8")
            assert "qwen2.5:7b" in saved and "OLLAMA_KEY" in saved
            default = await client.call_tool("configure_llm_provider", {"provider": "ollama", "config": local,
                                                                        "setAsDefault": True})
            assert default.is_error and "only the user makes a provider the default" in default.content[0].text
            away = await client.call_tool("configure_llm_provider", {
                "provider": "openai", "config": {"endpoint": "https://api.example.com/v1", "model": "m"}})
            assert away.is_error and "not this machine" in away.content[0].text
            inline = await client.call_tool("configure_llm_provider", {
                "provider": "openai", "config": {"endpoint": "http://127.0.0.1:1/v1", "model": "m", "apiKey": "sk-1"}})
            assert inline.is_error and "apiKey" in inline.content[0].text
            status = (await client.call_tool("get_status", {})).structured_content
            assert status["sessions"] == 2 and status["indexed_records"] >= 7

    asyncio.run(main())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_streamable_http_needs_the_bearer_token(folder: dict[str, Any]) -> None:
    port, token = _free_port(), "test-token-123"
    env = {**_env(folder["data"]), "PCM_MCP_TOKEN": token}
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "mcp", "--http", "--port", str(port)], env=env,
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                refused = httpx2.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, timeout=5)
                break
            except httpx2.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read().decode()[-2000:]
                time.sleep(0.3)
        assert refused.status_code == 401
        wrong = httpx2.post(url, json={}, headers={"Authorization": "Bearer nope"}, timeout=5)
        assert wrong.status_code == 401

        async def main() -> None:
            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
            async with http, Client(streamable_http_client(url, http_client=http)) as client:
                assert {t.name for t in (await client.list_tools()).tools} == TOOLS
                found = await client.call_tool("get_relevant_snippets", {"query": "KeyError user_id"})
                assert found.structured_content["snippets"][0]["session_id"] == folder["bug"]

        asyncio.run(main())
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_record_event_stores_in_order_on_the_branch_the_router_picks(tmp_path: Path) -> None:
    from app.mcp.service import ContextService

    engine = wiring.build_engine(Settings.load(tmp_path / "data"), chat=False, counter="words")

    async def main() -> None:
        await engine.start()
        state = await engine.open_session(None, title="two topics")
        trip, bug = Message(role=Role.USER, content=KYOTO), Message(role=Role.USER, content=PYTHON)
        await engine.ingest(state.session_id, [trip, bug], parents={trip.message_id: None, bug.message_id: None})
        service = ContextService(engine)
        texts = ["Why does the KeyError for user_id only happen with some JSON files?",
                 "Should we see the Fushimi Inari shrine gates at sunrise on the Kyoto trip?"]
        ids = [(await service.record_event(t, state.session_id))[1]["message_id"] for t in texts]
        await service.drain()
        assert list(service.written) == ids  # stored in arrival order
        before = await engine.last_used_session()
        other = await stored(engine, lambda store: store.create_session("other"))
        await service.facts("", other)  # reading a session is not opening it
        assert await engine.last_used_session() == before
        graph = state.graph
        parent_of = {}
        for mid, root in zip(ids, (bug, trip), strict=True):
            node = state.node_of(state.messages[mid].turn_id)
            edges = graph.out_edges(node, EdgeKind.CONTINUES)
            parent_of[mid] = graph.node(edges[0].dst).ref_id if edges else None
            assert parent_of[mid] == root.turn_id, (mid, parent_of)
        await engine.close()

    asyncio.run(main())


def test_the_cold_start_bench_times_initialize_then_the_first_tool_call() -> None:
    """``pcm bench startup``'s part for ``pcm mcp``: real processes through the official client,
    the first start on the fresh folder apart; a tool call is answered after the greeting."""
    from app.mcp.bench import bench_cold_start, format_cold_start

    said: list[str] = []
    report = bench_cold_start(1, say=said.append)
    assert report["runs"] == 1 and len(said) == 2 and said[0].startswith("pcm mcp: first start")
    for figures in (report["first"], {k: report[k]["p50"] for k in ("initialize_s", "first_call_s")}):
        assert 0 < figures["initialize_s"] <= figures["first_call_s"] < 300
    assert "to the first tool call answered" in format_cold_start(report)
