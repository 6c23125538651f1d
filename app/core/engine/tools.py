"""The engine's tools: the registry with the built-ins, watched folders, and one turn's tool round.

``ToolService.specs`` are the tool specs a live build's planner sees, ``signals`` what the plan's
tool filter reads besides the intent (the similarity of the request to each tool's description,
embedded once when the tool is registered, and the session's tool history), and ``step`` the step
the pipeline runs once intent and plan are known (``engine/sources.py`` hands them to the build):
the subset the plan's tool filter offered (``ToolRegistry.offer``), calls chosen by the rules or,
when they are unsure, by the local model under a grammar that can only name offered tools (and,
for a tool of several arguments, a second grammar made from its input schema), each call made
through ``ToolRegistry.call`` (refusals, validation, confirmation by the ``ToolGate``, time
limit, records). Replay gets the recorded round back instead (``replayed``): the offer is the
recorded plan's, the calls and their evidence come from the record and the store; nothing is
called.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from app.core.engine.context import EngineContext
from app.core.errors import AttachError
from app.core.intent.model import Intent
from app.core.plan.model import ContextPlan
from app.core.plan.tool_filter import description_text, similarities
from app.core.plan.tools import ToolSignals, ToolSpec
from app.core.ports import FileReader, GenerationParams, LocalFile
from app.core.runtime.executors import ChatStream
from app.core.session.state import SessionState
from app.core.tools.builtin import (
    FIND_LIMIT,
    FolderFiles,
    FolderFilesFactory,
    TaskWriter,
    builtin_tools,
    newest_feed_items,
)
from app.core.tools.governance import ToolGate
from app.core.tools.model import ToolChoice, ToolNotFound, ToolOutcome, ToolRefused, ToolRound
from app.core.tools.registry import Tool, ToolRegistry, choice_names
from app.core.tools.selection import (
    argument_messages,
    argument_schema,
    file_readers,
    parse_arguments,
    parse_model_choice,
    path_mentions,
    rules_unsure,
    select_by_rules,
    tool_choice_messages,
    tool_choice_schema,
)
from app.core.types import EnvEvent, Evidence, ToolCall

if TYPE_CHECKING:
    from app.core.pipeline.sources import BuildInputs, ToolStep


@dataclass
class ToolConfig:
    """How tools are chosen. ``llm_choice``: ask the chat model when the rules are unsure —
    "auto", "off", or "inherit" (follow ``EngineConfig.llm_intent``: one switch for the model's
    control-plane signals)."""

    llm_choice: Literal["inherit", "auto", "off"] = "inherit"
    llm_timeout_s: float = 2.0
    # A tool server's tools make a longer list (and the arguments a second call): the model has longer.
    llm_timeout_server_s: float = 10.0
    ask_above: float = 0.5  # a tool server's tool scoring this much makes the model worth asking
    read_max_bytes: int = 64_000


class ToolService:
    """The tool registry with the built-ins, the watched folders ``read_file`` may read, and one
    turn's tool round."""

    def __init__(self, ctx: EngineContext, tasks: TaskWriter, config: ToolConfig | None = None,
                 folder_files: FolderFilesFactory | None = None) -> None:
        self.ctx = ctx
        self.config = config or ToolConfig()
        self.watched_folders: tuple[Path, ...] = ()
        self.task_writer = tasks
        self._folder_files = folder_files
        self.files: FolderFiles | None = None
        self.registry = ToolRegistry(recorder=self._record_tool_call)
        self.gate = ToolGate()  # per call or once per tool and session: the tool servers' setting
        self._vectors: dict[str, np.ndarray] = {}  # tool name → its description's embedding
        for tool in builtin_tools(files=lambda: self.files, search=self._search_memory,
                                  feed=self._feed_items, tasks=tasks, max_bytes=self.config.read_max_bytes):
            self.registry.register(tool)

    # ------------------------------------------------------------------ what the filter reads

    async def embed_tools(self) -> int:
        """Embed the descriptions of the registered tools that have no vector yet (once per tool,
        when it is registered: never per turn); drop the vectors of tools gone. Returns how many."""
        specs = {t.name: t.spec for t in self.registry.all()}
        for name in [n for n in self._vectors if n not in specs]:
            del self._vectors[name]
        missing = [s for n, s in specs.items() if n not in self._vectors]
        if not missing:
            return 0
        vecs = await self.ctx.embed([description_text(s) for s in missing])
        if vecs is not None:
            self._vectors.update({s.name: np.asarray(v, dtype=np.float32) for s, v in zip(missing, vecs)})
        return len(missing)

    def forget_vector(self, name: str) -> None:
        """Drop a tool's embedding (its description changed: ``embed_tools`` makes it again)."""
        self._vectors.pop(name, None)

    async def signals(self, session_id: str, query_vector: Sequence[float] | None) -> ToolSignals:
        """The tool filter's signals for one input: similarity of the request to each tool's
        description, and how often this session called each tool before."""
        names = [n for n in self._vectors if self.registry.get(n) is not None]
        matrix = np.stack([self._vectors[n] for n in names]) if names else None
        calls = await self.ctx.on_store(self.ctx.store.list_tool_calls, session_id)
        history: dict[str, int] = {}
        for call in calls:
            if call.status == "success":
                history[call.tool] = history.get(call.tool, 0) + 1
        return ToolSignals(similarity=similarities(names, matrix, query_vector), history=dict(sorted(history.items())))

    def set_watched_folders(self, paths: Sequence[str | Path]) -> tuple[Path, ...]:
        """Set the folders ``read_file`` may read in (settings' ``watched_folders``); returns them.
        Reads go through the injected ``FolderFiles`` (the confined opener); without one, or
        without folders, ``read_file`` refuses."""
        self.watched_folders = tuple(Path(p).expanduser() for p in paths)
        factory = self._folder_files
        self.files = factory(self.watched_folders) if factory is not None and self.watched_folders else None
        return self.watched_folders

    def confined_reader(self) -> FileReader:
        """A ``FileReader`` reading as ``read_file`` does: through the ``FolderFiles`` port (the
        confined opener), inside the watched folders only — what an agent may attach. Every
        refusal is an ``AttachError`` in plain words."""
        files = self.files

        def read(path: str, max_bytes: int, **_progress: Any) -> LocalFile:
            if files is None:
                raise AttachError("no folder is watched, so no file may be attached this way (the user "
                                  "chooses watched folders in Settings → Environment)")
            try:
                got = files.read_text(path, max_bytes)
            except (ToolRefused, ToolNotFound) as exc:
                raise AttachError(str(exc)) from None
            if got.truncated:
                raise AttachError(f"{got.label} is {got.size} bytes; files up to {max_bytes} bytes can be attached")
            return LocalFile(path=got.uri, size=got.size, text=got.text, hidden_removed=got.hidden_removed)

        return read

    # ------------------------------------------------------------------ ports of the built-ins

    async def _record_tool_call(self, session_id: str, call: ToolCall, evidences: list[Evidence]) -> None:
        store = self.ctx.store

        def write() -> None:
            with store.transaction():
                for evidence in evidences:
                    store.add_evidence(session_id, evidence)
                store.add_tool_call(session_id, call)

        await self.ctx.on_store(write)

    async def _search_memory(self, session_id: str, query: str, k: int) -> list[tuple[str, str, str, str]]:
        """Index search (vector + full text, fused by rank) over the session's messages, memory
        notes and env events; hits as (id, kind, at, text) from the session state."""
        ctx = self.ctx
        state, index = ctx.sessions.get(session_id), ctx.index
        if state is None or index is None:
            return []
        vecs = await ctx.embed([query])
        lists: list[list[tuple[str, float]]] = [await ctx.on_index(index.search_text, query, k * 2, session_id=session_id)]
        if vecs is not None:
            lists.append(await ctx.on_index(index.search_vector, vecs[0], k * 2, session_id=session_id))
        fused: dict[str, float] = {}
        for hits in lists:
            for rank, (item, _) in enumerate(hits, start=1):
                fused[item] = fused.get(item, 0.0) + 1.0 / (60 + rank)
        out = []
        for item in sorted(fused, key=lambda i: (-fused[i], i)):
            if item in state.messages:
                view = state.messages[item]
                out.append((item, "message", view.at, view.render()))
            elif item in state.notes:
                note = state.notes[item]
                out.append((item, note.kind, note.at, note.render()))
            if len(out) >= k:
                break
        return out

    async def _feed_items(self, session_id: str, n: int) -> list[EnvEvent]:
        events = await self.ctx.on_store(self.ctx.store.list_env_events, session_id)
        return newest_feed_items(events, n)

    # ------------------------------------------------------------------ a turn's tool round

    def specs(self) -> tuple[ToolSpec, ...]:
        """The specs of the registered tools (what a live build's plan sees)."""
        return self.registry.specs()

    def step(self, turn_id: str) -> ToolStep:
        """The step that runs turn ``turn_id``'s tool round (a failing lookup costs the turn its
        tools, not the turn)."""
        async def live(state: SessionState, inp: BuildInputs, intent: Intent, plan: ContextPlan) -> ToolRound:
            try:
                return await self._tool_round(state, inp, intent, plan, turn_id=turn_id)
            except Exception as exc:  # noqa: BLE001 - a failing lookup costs the turn its tools, not the turn
                return ToolRound(notes=[f"tools skipped: {type(exc).__name__}: {exc}"[:300]])
        return live

    def replayed(self, recorded: ToolRound) -> ToolStep:
        """The step that feeds a recorded round back: the offer is the recorded plan's, the calls and
        their evidence come from the record and the store."""
        async def replayed(_state: SessionState, _inp: BuildInputs, _intent: Intent, plan: ContextPlan) -> ToolRound:
            return await self._replay_round(plan, recorded)
        return replayed

    async def _replay_round(self, plan: ContextPlan, recorded: ToolRound) -> ToolRound:
        store = self.ctx.store
        offered = [n for n in plan.tools.allowed if n not in plan.tools.blocked]
        ids = [i for o in recorded.calls for i in o.call.result_evidence_ids]
        found = await self.ctx.on_store(lambda: {i: store.get_evidence(i) for i in ids})
        calls = []
        for outcome in recorded.calls:
            copy = outcome.model_copy(deep=True)
            copy.evidences = [e for i in outcome.call.result_evidence_ids if (e := found.get(i)) is not None]
            calls.append(copy)
        return recorded.model_copy(update={"offered": offered, "calls": calls})

    def _llm_tools_on(self) -> bool:
        mode = self.config.llm_choice
        if mode == "inherit":
            mode = "auto" if self.ctx.config.llm_intent == "auto" else "off"
        return mode == "auto" and self.ctx.chat is not None

    async def _tool_round(self, state: SessionState, inp: BuildInputs, intent: Intent, plan: ContextPlan,
                          *, turn_id: str) -> ToolRound:
        """Offer, choose and run this turn's tools; returns the round (never raises for a tool)."""
        offered_tools = self.registry.offer(plan)
        offered = [t.name for t in offered_tools]
        round_ = ToolRound(offered=offered)
        limit = plan.budget.tool_calls
        if not offered or limit <= 0 or plan.needs_clarification:
            round_.notes.append("no tools this turn" if not offered else f"tool calls limited to {limit}")
            return round_
        mentions = path_mentions(inp.text, intent) if "read_file" in offered else []
        files: dict[str, str] = {}
        folder_files = self.files
        if mentions and folder_files is not None:
            files = await asyncio.to_thread(folder_files.find, mentions, FIND_LIMIT)
        tasks = await self.task_writer.list_tasks(state.session_id) if "update_task" in offered else []
        readers = file_readers([(t.name, t.spec.server, t.primary_arg) for t in offered_tools])
        choices = select_by_rules(inp.text, intent, offered, files=files, tasks=tasks, readers=readers)
        strong = any(t.spec.server and plan.tools.scores.get(t.name, 0.0) >= self.config.ask_above
                     for t in offered_tools)
        if choices:
            round_.selection = "rules"
        elif self._llm_tools_on() and rules_unsure(inp.text, intent, offered, choices, strong=strong):
            choice, round_.model = await self._choose_by_model(inp.text, offered_tools, (state.session_id, turn_id))
            if choice is not None:
                choices, round_.selection = [choice], "model"
        for choice in choices[:limit]:
            round_.notes.append(f"{choice.tool}: {choice.reason}")
            round_.calls.append(await self._call(choice, plan, offered, state.session_id, turn_id))
        if len(choices) > limit:
            round_.notes.append(f"{len(choices) - limit} more call(s) left out: the plan allows {limit}")
        return round_

    async def _call(self, choice: ToolChoice, plan: ContextPlan, offered: list[str], session_id: str,
                    turn_id: str) -> ToolOutcome:
        return await self.registry.call(choice.tool, choice.args, policy=plan.tools, offered=offered,
                                        session_id=session_id, turn_id=turn_id, chosen_by=choice.chosen_by,
                                        reason=choice.reason, approve=self.gate.check)

    async def _choose_by_model(self, text: str, offered: Sequence[Tool],
                               turn: tuple[str, str]) -> tuple[ToolChoice | None, dict[str, Any]]:
        """Ask the chat model to pick one offered tool (or none) within the time limit, and for a
        tool server's tool of several arguments to fill them under a grammar made from its input
        schema; never raises. ``turn`` is (session id, turn id): the calls are recorded in model_usage."""
        names = choice_names(offered)
        messages = tool_choice_messages(text, [(t.name, t.spec.description, t.primary_arg) for t in offered])
        timeout = self.config.llm_timeout_server_s if any(t.spec.server for t in offered) else self.config.llm_timeout_s
        status, parsed = await self._ask_json(messages, tool_choice_schema(names), "tool_call", turn, timeout)
        if status["status"] != "ok":
            return None, status
        choice = parse_model_choice(parsed, {t.name: t.primary_arg for t in offered})
        tool = next((t for t in offered if choice is not None and t.name == choice.tool), None)
        if choice is not None and tool is not None and not choice.args and tool.input_schema:
            filled = await self._fill_arguments(text, tool, turn, status)  # a tool of several arguments
            if filled is not None:
                choice = filled
            elif tool.input_schema.get("required"):
                choice = None  # without the arguments it requires a call could only fail: none is made
        return choice, status

    async def _fill_arguments(self, text: str, tool: Tool, turn: tuple[str, str],
                              status: dict[str, Any]) -> ToolChoice | None:
        """The chosen tool's arguments, asked for under its input schema (a tool server's tool
        that takes more than one string); None when it has none to fill or the answer lacks one."""
        schema = argument_schema(tool.input_schema or {})
        if schema is None:
            return None
        messages = argument_messages(text, tool.name, tool.spec.description, schema)
        filled, parsed = await self._ask_json(messages, schema, "tool_args", turn, self.config.llm_timeout_server_s,
                                              max_tokens=256)
        status["arguments"] = filled if filled["status"] != "ok" else {"status": "ok", "output": parsed}
        args = parse_arguments(parsed, schema) if filled["status"] == "ok" else None
        if args is None:
            return None
        return ToolChoice(tool=tool.name, args=args, chosen_by="model", reason="chosen and filled in by the model")

    async def _ask_json(self, messages: list[dict[str, str]], schema: dict[str, Any], stage: str,
                        turn: tuple[str, str], timeout_s: float, max_tokens: int = 96) -> tuple[dict[str, Any], Any]:
        """One model call for JSON under ``schema`` within ``timeout_s``: ({"status": ok|invalid|
        late|error, "output": …}, the parsed value or None). Never raises."""
        assert self.ctx.chat is not None
        stream = ChatStream(self.ctx.ex, self.ctx.chat, messages, stage=stage,
                            params=GenerationParams(max_tokens=max_tokens, temperature=0.0), json_schema=schema,
                            on_result=self.ctx.usage_recorder(*turn))
        try:
            result = await asyncio.wait_for(stream.wait(), timeout_s)
        except asyncio.TimeoutError:
            stream.stop()
            return {"status": "late"}, None
        except Exception as exc:  # noqa: BLE001 - the model's choice only ever degrades
            return {"status": "error", "detail": str(exc)[:200]}, None
        if result.parsed is None:
            return {"status": "invalid", "output": result.text[:200]}, None
        return {"status": "ok", "output": result.parsed}, result.parsed
