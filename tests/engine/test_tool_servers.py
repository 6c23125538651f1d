"""Tools from real MCP servers, end to end through the engine (the real MiniLM embedder, real
SQLite + LanceDB, the reference servers over stdio through the official client):

- a question answered from a file the filesystem server read, its result cited and kept as an
  artifact on the canvas; the turn's record lists what was offered and called; replay is exact
  and calls nothing;
- a memory server write asks for confirmation (once per tool and session, or at each call by
  setting); refused, it does not run;
- a server killed mid-call is one line and the turn is answered;
- a tool the profile prohibits is blocked: never offered, never called.

The model's choices are scripted by stage (``tool_call``, ``tool_args``, ``answer``): what is
tested is what the engine does with them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app.config import default_models_dir
from app.core.engine.facade import Engine
from app.core.ports import ServerCallResult, ServerState, ServerTool
from app.core.tools.governance import ApprovalRequest
from app.core.types import Message, NodeKind, Role
from app.llm.fakes import ScriptedChatModel
from app.toolservers.client import McpToolServers
from app.toolservers.config import ToolServerConfig
from tests.conftest import EngineFactory
from tests.toolservers.servers import command, kill

pytestmark = [pytest.mark.slow, pytest.mark.model]

PLAN = "# Launch plan\n\nThe public launch date is 14 March 2027.\nMarketing starts two weeks before.\n"


@pytest.fixture(scope="module")
def embedder() -> Any:
    model_dir = default_models_dir() / "all-MiniLM-L6-v2"
    if not model_dir.is_dir():
        pytest.skip("the MiniLM embedder is not fetched (pcm models fetch)")
    from app.llm.embedder import SentenceEmbedder

    return SentenceEmbedder(model_dir)


class _StageChat(ScriptedChatModel):
    """Answers each call with the next scripted reply of its stage ("tool_call", "tool_args",
    "answer", ...); a stage with no script left answers "OK."."""

    def __init__(self, script: dict[str, list[str]]) -> None:
        super().__init__(["OK."])
        self.script = {stage: list(replies) for stage, replies in script.items()}

    def chat(self, messages: Any, **kw: Any) -> Any:  # type: ignore[override]
        replies = self.script.get(kw.get("stage", "answer")) or []
        self._replies, self._next = [replies.pop(0) if replies else "OK."], 0
        return super().chat(messages, **kw)


class _Counting:
    """The ToolServers port around real servers, counting the calls that reach them."""

    def __init__(self, servers: McpToolServers) -> None:
        self.servers, self.calls = servers, 0

    def states(self) -> list[ServerState]:
        return self.servers.states()

    def tools(self) -> list[ServerTool]:
        return self.servers.tools()

    def watch(self, listener: Callable[[], None]) -> None:
        self.servers.watch(listener)

    def confirm_each_call(self) -> bool:
        return self.servers.confirm_each_call()

    async def call_tool(self, server: str, tool: str, arguments: dict[str, Any], timeout_s: float) -> ServerCallResult:
        self.calls += 1
        return await self.servers.call_tool(server, tool, arguments, timeout_s)

    async def settled(self, timeout_s: float) -> bool:
        return await self.servers.settled(timeout_s)

    async def reload(self) -> None:
        await self.servers.reload()

    async def close(self) -> None:
        await self.servers.close()


def _server(tmp_path: Path, name: str, **extra: Any) -> ToolServerConfig:
    args = {"filesystem": [str(tmp_path / "files")], "everything": ["stdio"]}.get(name, [])
    env = {"MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")} if name == "memory" else {}
    return ToolServerConfig(name=name, command=command(name), args=args, env=env, cwd=str(tmp_path / "files"), **extra)


def _engine(make_engine: EngineFactory, tmp_path: Path, embedder: Any, names: tuple[str, ...],
            script: dict[str, list[str]], **extra: Any) -> tuple[Engine, _Counting]:
    (tmp_path / "files" / "notes").mkdir(parents=True, exist_ok=True)
    (tmp_path / "files" / "notes" / "plan.md").write_text(PLAN, encoding="utf-8")
    servers = _Counting(McpToolServers([_server(tmp_path, n, **extra) for n in names],
                                       log_dir=tmp_path / "logs", probe_s=0.5).start())
    engine = make_engine(data_dir=tmp_path / "data", embedder=embedder, chat=_StageChat(script),
                         tool_servers=servers, llm_intent="auto")
    engine._ctx.config.llm_intent_below = 0.0  # the intent is read by rules and prototypes; the tool choice is asked
    return engine, servers


def test_a_question_is_answered_from_a_file_the_filesystem_server_read_and_cited(
        tmp_path: Path, make_engine: EngineFactory, embedder: Any) -> None:
    engine, servers = _engine(make_engine, tmp_path, embedder, ("filesystem",),
                              {"answer": ["The public launch is on 14 March 2027 [1]."]})

    async def body(engine: Engine) -> None:
        await engine.sync_tool_servers(wait_s=60)
        state = await engine.open_session(None)
        run = await engine.submit(state.session_id, "What does notes/plan.md say about the launch date?")
        record = await run.done
        tools = record.build.tools
        assert tools is not None and tools.selection == "rules" and len(tools.offered) <= 10
        [outcome] = tools.calls
        assert outcome.call.tool in tools.offered and outcome.call.tool.startswith("filesystem.read")
        assert outcome.status == "success" and outcome.call.provider.kind == "mcp"
        [evidence_id] = outcome.call.result_evidence_ids
        # fenced, numbered and bound to its evidence in the context; the answer cites it
        assert f"[1] [tool {outcome.call.tool}]\n<<< notes/plan.md\n# Launch plan" in record.build.context.text()
        assert any(evidence_id in [r.evidence_id for r in b.refs] for b in record.build.context.blocks)
        messages = await engine._ctx.ex.run("store", engine._ctx.store.list_messages, state.session_id)
        answer = next(m for m in messages if m.message_id == record.answer_message_id)
        assert evidence_id in [r.evidence_id for r in answer.refs] and "14 March 2027" in answer.content
        stored = await engine._ctx.ex.run("store", engine._ctx.store.get_evidence, evidence_id)
        assert stored.metadata["server"] == "filesystem" and stored.metadata["tool_call_id"] == outcome.call.tool_call_id
        # `pcm show turn --json`: build.tools lists what was offered and called
        shown = (await engine.turn_record(run.turn_id)).model_dump(mode="json")["build"]
        assert shown["tools"]["offered"] == tools.offered and shown["tools"]["calls"][0]["call"]["tool"] == outcome.call.tool
        assert shown["plan"]["tools"]["allowed"] == tools.offered and set(shown["plan"]["tools"]["why"]) == set(tools.offered)
        assert shown["tool_signals"]["similarity"]
        # the result is an artifact on the canvas, derived from the turn
        [artifact] = [n for n in state.graph.nodes(NodeKind.ARTIFACT) if n.attrs.get("server") == "filesystem"]
        assert artifact.ref_id == evidence_id and artifact.label == f"Tool: {outcome.call.tool}"
        # replay is exact, from the recorded result: nothing reaches the server again
        calls = servers.calls
        (tmp_path / "files" / "notes" / "plan.md").write_text("changed\n", encoding="utf-8")
        assert await engine.replay(run.turn_id) == []
        assert servers.calls == calls == 1

    _run(engine, body)


def _run(engine: Engine, body: Any) -> None:
    async def main() -> None:
        await engine.start()
        try:
            await body(engine)
        finally:
            await engine.close()

    asyncio.run(main())


CREATE = '{"tool": "memory.create_entities", "argument": ""}'


def _entity(name: str) -> str:
    return json.dumps({"entities": [{"name": name, "entityType": "person", "observations": ["works at Acme"]}]})


def test_a_memory_server_write_asks_for_confirmation_once_per_tool_and_session(
        tmp_path: Path, make_engine: EngineFactory, embedder: Any) -> None:
    engine, servers = _engine(make_engine, tmp_path, embedder, ("memory",),
                              {"tool_call": [CREATE] * 4, "tool_args": [_entity(n) for n in ("Anna", "Bo", "Cy", "Di")]})
    asked: list[ApprovalRequest] = []
    answers = iter([True, True, False])

    async def approve(request: ApprovalRequest) -> bool:
        asked.append(request)
        return next(answers)

    async def body(engine: Engine) -> None:
        await engine.sync_tool_servers(wait_s=60)
        engine.set_tool_approver(approve)
        state = await engine.open_session(None)

        async def add(name: str) -> Any:
            record = await (await engine.submit(state.session_id, f"Create an entity for {name} in the knowledge "
                                                                  "graph: a person who works at Acme")).done
            assert "memory.create_entities" in record.build.tools.offered
            [outcome] = record.build.tools.calls
            return outcome

        first = await add("Anna")
        assert first.status == "success", first.error
        assert first.chosen_by == "model" and len(asked) == 1
        assert asked[0].tool == "memory.create_entities" and asked[0].server == "memory" and not asked[0].destructive
        assert asked[0].arguments["entities"][0]["name"] == "Anna"
        second = await add("Bo")  # the same tool in the same session: not asked again
        assert second.status == "success" and len(asked) == 1
        servers.servers.each_call = True  # the servers' setting: ask at every call (Settings → Tools)
        await engine.sync_tool_servers()
        third = await add("Cy")
        assert third.status == "success" and len(asked) == 2
        refused = await add("Di")
        assert refused.status == "forbidden" and refused.error == "you did not allow memory.create_entities to run"
        graph = (tmp_path / "memory.jsonl").read_text(encoding="utf-8")
        assert all(f'"name":"{n}"' in graph for n in ("Anna", "Bo", "Cy")) and '"Di"' not in graph
        assert servers.calls == 3

    _run(engine, body)


def test_a_server_killed_mid_call_is_one_line_and_the_turn_is_answered(
        tmp_path: Path, make_engine: EngineFactory, embedder: Any) -> None:
    engine, _ = _engine(make_engine, tmp_path, embedder, ("everything",),
                        {"tool_call": ['{"tool": "everything.trigger-long-running-operation", "argument": ""}'],
                         "tool_args": ['{"duration": 30, "steps": 5}'],
                         "answer": ["The operation could not finish: its server stopped."]})

    async def body(engine: Engine) -> None:
        await engine.sync_tool_servers(wait_s=60)
        state = await engine.open_session(None)

        async def killer() -> None:
            await asyncio.sleep(2.0)
            assert kill("mcp-server-everything")

        task = asyncio.create_task(killer())
        run = await engine.submit(state.session_id, "Start a long running operation with progress updates")
        record = await run.done
        await task
        [outcome] = record.build.tools.calls
        assert outcome.call.tool == "everything.trigger-long-running-operation" and outcome.status == "error"
        assert outcome.error.startswith("tool server everything:") and "\n" not in outcome.error
        assert record.finish_reason == "stop" and record.output == "The operation could not finish: its server stopped."
        assert "Tool everything.trigger-long-running-operation was not run (error)" in record.build.context.text()
        assert record.timing.tools_ms < 15_000
        for _ in range(100):  # started again in the background
            if any(s.status == "ready" and s.restarts for s in engine.tool_server_states()):
                break
            await asyncio.sleep(0.1)
        assert any(s.status == "ready" and s.restarts for s in engine.tool_server_states())

    _run(engine, body)


def test_a_prohibited_tool_is_blocked(tmp_path: Path, make_engine: EngineFactory, embedder: Any) -> None:
    engine, servers = _engine(make_engine, tmp_path, embedder, ("memory",),
                              {"tool_call": [CREATE], "tool_args": [_entity("Anna")]})
    asked: list[ApprovalRequest] = []

    async def approve(request: ApprovalRequest) -> bool:
        asked.append(request)
        return True

    async def body(engine: Engine) -> None:
        await engine.sync_tool_servers(wait_s=60)
        engine.set_tool_approver(approve)
        state = await engine.open_session(None)
        await engine.ingest(state.session_id, [Message(role=Role.USER, content="Never use the memory server.")])
        record = await (await engine.submit(state.session_id, "Create an entity for Anna in the knowledge graph: "
                                                              "a person who works at Acme")).done
        tools = record.build.plan["tools"]
        assert "memory.create_entities" in tools["blocked"] and "memory.create_entities" not in record.build.tools.offered
        assert "memory.create_entities: prohibited (never use the memory server)" in tools["notes"]
        assert all(not name.startswith("memory.") for name in record.build.tools.offered)
        assert record.build.tools.calls == [] and asked == [] and servers.calls == 0
        calls = await engine._ctx.ex.run("store", engine._ctx.store.list_tool_calls, state.session_id)
        assert calls == [] and not (tmp_path / "memory.jsonl").exists()

    _run(engine, body)
