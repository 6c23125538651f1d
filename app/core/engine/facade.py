"""The engine facade: the one object the UI, the CLI, the MCP server and the evaluation talk to.

``Engine`` builds one ``EngineContext`` (ports, executors, configuration, shared session state)
and composes the services over it; every public method delegates to one of them:

==============  ===========================================================================
sessions        open a session, history ingest, the user's facts and profile (``sessions.py``)
turns           build, submit, answer, read and replay turns (``turns.py``)
branches        re-anchor, focus, inject, checkpoints, collapse, versions shown, positions (``branches.py``)
tasks           the task stack, its revisions and their replay (``tasks.py``)
streams         the scheduler's host: Q&A, task and interruption streams (``streams.py``)
tools           the tool registry, watched folders, a turn's tool round (``tools.py``)
tool servers    the MCP servers' tools in the registry, kept in step (``tool_servers.py``)
environment     env events: store, index, route, push (``environment.py``)
attachments     a file the user attaches: an env event and a versioned artifact node (``attachments.py``)
recovery        after a crash: interrupted turns, the index caught up (``recovery.py``)
memory          the background writer, topics; revoke/pin/edit a memory, add to the profile (``memory.py``)
summaries       session, branch, task and topic summaries at three levels, in the background (``summaries.py``)
details         progressive detail: expand, collapse, focus a turn's context; a subtree's summary (``detail.py``)
==============  ===========================================================================

Everything runs on one event loop; blocking work goes to the named executors (DESIGN.md §3):
``store`` (the one SQLite connection), ``embed`` (the embedder, also LanceDB writes that embed),
``index`` (LanceDB queries), ``llm`` (the chat model). A user's input is committed durably before
anything else happens with it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from app.core.context.compiler import Fact
from app.core.context.ranking import rrf
from app.core.engine.attachments import Attached, AttachmentService
from app.core.engine.branches import BranchService, FocusChanged, Injected, Reanchored
from app.core.engine.context import EngineConfig, EngineContext
from app.core.engine.detail import Detailed, DetailService, SubtreeSummary
from app.core.engine.environment import EnvironmentService, EnvRouted
from app.core.engine.memory import MemoryService, ProfileAdded
from app.core.engine.recovery import RecoveryReport, RecoveryService
from app.core.engine.sessions import SessionService
from app.core.engine.streams import EngineStreams
from app.core.engine.summaries import SummaryService
from app.core.engine.tasks import TaskChange, TaskService
from app.core.engine.tool_servers import ServersSynced, ServerToolService
from app.core.engine.tools import ToolService
from app.core.engine.turns import TurnRun, TurnService
from app.core.errors import NoRecordError
from app.core.intent.engine import IntentEngine, PrototypeBank
from app.core.intent.profile import UserProfile
from app.core.memory.topics import TopicIndex
from app.core.pipeline.builder import ContextBuilder
from app.core.pipeline.detail import DetailAction
from app.core.pipeline.record import BuildRecord, StageTiming, TurnRecord
from app.core.plan.builder import PlanBuilder
from app.core.ports import (
    ChatModel,
    Embedder,
    FileReader,
    SearchIndex,
    ServerState,
    SessionGeneration,
    SessionStore,
    TokenCounter,
    ToolServers,
)
from app.core.routing.anchor import AnchorRouter
from app.core.runtime.executors import Executors
from app.core.runtime.scheduler import SessionScheduler, StreamHandle
from app.core.session.graph import GraphChange
from app.core.session.state import SessionState
from app.core.tools.builtin import FolderFilesFactory
from app.core.tools.governance import ToolApprover
from app.core.tools.registry import ToolRegistry
from app.core.types import EnvEvent, Evidence, MemoryFragment, Message, SummaryRecord, Task

T = TypeVar("T")


class Engine:
    """One engine per data folder; sessions are loaded on first use and kept in memory.

    ``folder_files`` makes the ``FolderFiles`` the ``read_file`` tool reads through for a set of
    watched folders (the composition root passes ``app.sensors.confined.ConfinedFolders``, the
    one confined opener); without it ``read_file`` refuses every call (the core does no I/O).
    ``file_reader`` reads the files the user attaches (``app.sensors.attach.read_attachment``);
    without it ``attach_file`` refuses.
    """

    def __init__(
        self,
        *,
        store: SessionStore,
        index: SearchIndex | None,
        embedder: Embedder | None,
        chat: ChatModel | None,
        counter: TokenCounter,
        executors: Executors,
        config: EngineConfig | None = None,
        folder_files: FolderFilesFactory | None = None,
        file_reader: FileReader | None = None,
        tool_servers: ToolServers | None = None,
    ) -> None:
        config = config or EngineConfig()
        builder = ContextBuilder(intents=IntentEngine(None), planner=PlanBuilder(), router=AnchorRouter(config.routing),
                                 counter=counter, answer_reserve=config.answer_reserve, context_size=config.context_size)
        self.ctx = ctx = EngineContext(store=store, index=index, embedder=embedder, chat=chat, counter=counter,
                                       ex=executors, config=config, builder=builder)
        self.sessions = SessionService(ctx)
        self.tasks = TaskService(ctx, self.sessions)
        self.tools = ToolService(ctx, self.tasks.writer(), folder_files=folder_files)
        self.server_tools = ServerToolService(ctx, self.tools, tool_servers)
        self.turns = TurnService(ctx, self.sessions, self.tasks, self.tools)
        self.branches = BranchService(ctx, self.sessions, self.turns)
        self.streams = EngineStreams(ctx, self.sessions, self.turns, self.tasks)
        self.environment = EnvironmentService(ctx, self.sessions, self.tools)
        self.attachments = AttachmentService(ctx, self.sessions, self.environment, file_reader)
        self.recovery = RecoveryService(ctx)
        self.memory = MemoryService(ctx, self.sessions, enabled=config.memory_writer)
        self.summaries = SummaryService(ctx, self.sessions, enabled=config.summaries)
        self.details = DetailService(ctx, self.sessions, self.turns)
        self.environment.env_ingested.connect(self.memory.on_env_ingested)
        self.env_ingested = self.environment.env_ingested
        self.env_pushed = self.environment.env_pushed
        self.env_failed = self.environment.env_failed
        self.index_progress = self.recovery.index_progress  # (what, done, total) while the index catches up

    # ------------------------------------------------------------------ the ports, for adapters and tests

    @property
    def store(self) -> SessionStore:
        return self.ctx.store

    @property
    def index(self) -> SearchIndex | None:
        return self.ctx.index

    @property
    def embedder(self) -> Embedder | None:
        return self.ctx.embedder

    @property
    def chat(self) -> ChatModel | None:
        return self.ctx.chat

    @property
    def counter(self) -> TokenCounter:
        return self.ctx.counter

    @property
    def ex(self) -> Executors:
        return self.ctx.ex

    @property
    def config(self) -> EngineConfig:
        return self.ctx.config

    @property
    def model_name(self) -> str | None:
        """The chat model's name (None without a chat model)."""
        return None if self.ctx.chat is None else self.ctx.chat.name

    @property
    def registry(self) -> ToolRegistry:
        """The tools the plan may offer (the built-ins and any registered later)."""
        return self.tools.registry

    async def with_store(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(store, *args)`` on the store thread: how adapter functions the composition root
        hands the UI (export, import, list sessions) reach the system of record."""
        return await self.ctx.on_store(fn, self.ctx.store, *args)

    async def embed(self, texts: list[str]) -> np.ndarray | None:
        """Embeddings of ``texts`` on the embed executor (None without an embedder)."""
        return await self.ctx.embed(texts)

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> RecoveryReport:
        """Recover from an earlier crash and embed the intent prototypes once; return what the
        recovery did. Turns a crash interrupted are marked "interrupted" (their partial answers
        kept), an interrupted index rebuild is finished before this returns, and the rows the
        index lacks are embedded in the background (``index_progress``). Call it before opening
        any session."""
        report = await self.recovery.start()
        await self.memory.load_topics()  # the topic channel answers from the first build
        embedder = self.ctx.embedder
        if embedder is not None:
            bank = await self.ctx.ex.run("embed", PrototypeBank.from_embed, lambda texts: embedder.embed(texts))
            self.ctx.builder.intents = IntentEngine(bank)
        await self.server_tools.start()  # the tools of the servers ready now; the others join when ready
        return report

    async def close(self) -> None:
        """Stop the scheduler's streams, let running answers finish their bookkeeping, stop the
        index catch-up between two batches, close the store, then stop the executors."""
        await self.streams.close()
        await self.server_tools.close()
        await self.memory.idle()
        await self.summaries.idle()
        await self.recovery.close()
        await self.ctx.on_store(self.ctx.store.close)  # on its own thread; gives up the run lease
        self.ctx.ex.shutdown(wait=True)

    # ------------------------------------------------------------------ memory

    async def memories(self) -> list[tuple[str, MemoryFragment]]:
        """Every memory of the workspace with the id of the session it came from (closed, merged
        and revoked ones too: nothing is deleted), in the order they were recorded."""
        return await self.memory.list()

    async def revoke_memory(self, memory_id: str) -> MemoryFragment:
        """Revoke a memory: it is kept (closed, marked revoked) and never reaches a context again."""
        return await self.memory.revoke(memory_id)

    async def pin_memory(self, memory_id: str, pinned: bool = True) -> MemoryFragment:
        return await self.memory.pin(memory_id, pinned)

    async def edit_memory(self, memory_id: str, content: str) -> MemoryFragment:
        """A new revision of a memory's content; the earlier one is kept in its ``revisions``."""
        return await self.memory.edit(memory_id, content)

    async def add_profile(self, text: str, session_id: str) -> ProfileAdded | None:
        """Add the profile statements of ``text`` ("I prefer…", "Never…", "You may…") for every
        session; ``session_id`` (the session open in the window) keeps their record. None when
        ``text`` states no preference, prohibition or permission (``MemoryService.add_profile``)."""
        return await self.memory.add_profile(session_id, text)

    async def topics(self) -> TopicIndex:
        """The workspace's topic index (topics, aliases, mentions, the merge/split log)."""
        return await self.memory.load_topics()

    async def memory_idle(self) -> None:
        """Wait for the background memory writer to finish what it was given."""
        await self.memory.idle()

    async def summarize(self, session_id: str) -> list[SummaryRecord]:
        """Bring the session's summaries up to date now, however few messages wait; return the
        new versions written (none when nothing changed: the cache answers)."""
        await self.summaries.idle()
        return await self.summaries.update(session_id, flush=True)

    async def session_summaries(self, session_id: str) -> list[SummaryRecord]:
        """The latest summary of the session, each branch and task at each level."""
        await self.summaries.idle()
        if not self.summaries.current(session_id):
            return await self.ctx.on_store(self.ctx.store.list_summaries, session_id)
        return self.summaries.current(session_id)

    # ------------------------------------------------------------------ sessions

    async def open_session(self, session_id: str | None = None, *, title: str = "") -> SessionState:
        """The session's state, loaded on first use; a missing (or None) id creates the session.
        It becomes the last used session (``last_used_session``)."""
        state = await self.sessions.open(session_id, title=title)
        await self.ctx.on_store(self.ctx.store.mark_session_opened, state.session_id)
        return state

    async def session_state(self, session_id: str) -> SessionState:
        """A stored session's state for reading: loaded on first use, never created, and not
        counted as the user opening it (``last_used_session`` is unchanged)."""
        if session_id not in self.ctx.sessions and await self.ctx.on_store(self.ctx.store.get_session, session_id) is None:
            raise NoRecordError(f"no session {session_id!r}")
        return await self.sessions.open(session_id)

    async def list_sessions(self, *, archived: bool = False) -> list[dict[str, Any]]:
        """Stored sessions (id, title, times, counts) in creation order; ``archived`` lists the
        archived ones too."""
        return await self.ctx.on_store(lambda: self.ctx.store.list_sessions(archived=archived))

    async def search_sessions(self, text: str, *, archived: bool = False) -> list[str]:
        """Ids of the sessions whose title or messages contain ``text`` (any case)."""
        return await self.ctx.on_store(lambda: self.ctx.store.search_sessions(text, archived=archived))

    async def rename_session(self, session_id: str, title: str) -> str:
        """Give the session a new title (one line, trimmed); returns the title stored."""
        title = " ".join(title.split())
        await self.ctx.on_store(lambda: self.ctx.store.update_session(session_id, title=title))
        return title

    async def archive_session(self, session_id: str, archived: bool = True) -> None:
        """Hide the session from the list (``archived=False`` brings it back); nothing is deleted."""
        await self.ctx.on_store(self.ctx.store.set_session_archived, session_id, archived)

    async def set_generation(self, session_id: str, settings: SessionGeneration) -> None:
        """Give the session its own temperature, answer length and standing instruction (they
        apply from its next turn; each build records the instruction it used)."""
        state = await self.sessions.open(session_id)
        await self.ctx.on_store(self.ctx.store.set_session_generation, session_id,
                                settings.model_dump(mode="json", exclude_defaults=True))
        state.generation = settings

    async def generation(self, session_id: str) -> SessionGeneration:
        """The session's own generation settings (fields left None use the app's defaults)."""
        return (await self.sessions.open(session_id)).generation

    async def search(self, query: str, k: int = 10, *, kinds: Sequence[str] = ("message",),
                     since: str | None = None, until: str | None = None) -> list[tuple[str, float]]:
        """Stored records of every session most relevant to ``query``: the vector and the full-text
        index fused by reciprocal rank (best first, with the fused score). Read-only; other tools
        reach the sessions through it (``app.mcp``)."""
        index = self.ctx.index
        if index is None or not query.strip():
            return []
        pool = max(k * 3, 20)
        found = {}
        for name, search in (("vector", index.search_vector), ("fulltext", index.search_text)):
            hits = await self.ctx.on_index(lambda s=search: s(query, pool, kinds=list(kinds), since=since, until=until))
            found[name] = [item for item, _ in hits]
        fused = rrf(found)
        return sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))[:k]

    async def last_used_session(self) -> str | None:
        """The session opened most recently and not archived (see ``SessionCatalog``), or None."""
        return await self.ctx.on_store(self.ctx.store.last_used_session_id)

    async def ingest(self, session_id: str, messages: Sequence[Message], *, chain: bool = True,
                     parents: Mapping[str, str | None] | None = None, routed: Mapping[str, float] | None = None) -> int:
        """Store messages as history turns, linked along ``continues`` (or to ``parents``, as sure as
        ``routed`` says), and index them."""
        return await self.sessions.ingest(session_id, messages, chain=chain, parents=parents, routed=routed)

    def facts(self, state: SessionState) -> tuple[Fact, ...]:
        return self.sessions.facts(state)

    def profile(self, state: SessionState) -> UserProfile:
        return self.sessions.profile(state)

    # ------------------------------------------------------------------ turns

    async def build(self, session_id: str, text: str, *, budget: int | None = None, at: str | None = None,
                    anchor_override: str | None = None) -> tuple[BuildRecord, StageTiming]:
        """Build the context for ``text`` without generating or recording (evaluation uses it)."""
        return await self.turns.build(session_id, text, budget=budget, at=at, anchor_override=anchor_override)

    async def submit(self, session_id: str, text: str, *, budget: int | None = None,
                     anchor_override: str | None = None, on_token: Callable[[str], None] | None = None) -> TurnRun:
        """Record the input, build and attach its context, start the answer (``TurnService.submit``)."""
        return await self.turns.submit(session_id, text, budget=budget, anchor_override=anchor_override,
                                       on_token=on_token)

    async def answer_again(self, session_id: str, node_id: str, *, budget: int | None = None,
                           on_token: Callable[[str], None] | None = None) -> TurnRun:
        """Regenerate: answer ``node_id``'s input again as a new version of its turn, shown in place
        of the others (``TurnService.answer_again``)."""
        return await self.turns.answer_again(session_id, node_id, budget=budget, on_token=on_token)

    async def show_version(self, session_id: str, node_id: str) -> GraphChange:
        """Show this version of its turn; the others are put away (``app.core.session.versions``)."""
        return await self.branches.show_version(session_id, node_id)

    async def turn_statuses(self, session_id: str) -> dict[str, str]:
        """turn id → stored status ("answered", "failed", "interrupted", ...) of the session's turns."""
        return await self.ctx.on_store(self.ctx.store.turn_statuses, session_id)

    async def reload_providers(self) -> bool:
        """Re-read the chat providers' settings (changed by ``pcm providers``, the Settings dialog or
        MCP's configure_llm_provider) from the next model call on; False when the chat model is
        not a provider registry."""
        reload = getattr(self.ctx.chat, "reload", None)
        if not callable(reload):
            return False
        return bool(await asyncio.to_thread(reload))

    async def off_machine_turns(self, session_id: str) -> list[str]:
        """Ids of the session's turns answered by a provider off this machine (their cards say so)."""
        return await self.ctx.on_store(self.ctx.store.off_machine_turns, session_id)

    async def turn_record(self, turn_id: str) -> TurnRecord:
        """The turn's stored record; ``NoRecordError`` if there is none."""
        return await self.turns.record(turn_id)

    async def replay(self, turn_id: str) -> list[str]:
        """Rebuild a turn from the stored state as it was; return the differences (none: exact)."""
        return await self.turns.replay(turn_id)

    async def detail(self, turn_id: str, action: DetailAction) -> Detailed:
        """Expand, collapse or focus the turn's context and recompile it (``detail.py``)."""
        return await self.details.detail(turn_id, action)

    async def subtree_summary(self, session_id: str, node_id: str) -> SubtreeSummary | None:
        """What a collapsed node shows: the brief summary of what continues it."""
        return await self.details.subtree_summary(session_id, node_id)

    # ------------------------------------------------------------------ branch actions of the canvas

    async def reanchor(self, turn_id: str, anchor_node: str | None) -> Reanchored:
        return await self.branches.reanchor(turn_id, anchor_node)

    async def undo_reanchor(self, turn_id: str) -> Reanchored:
        return await self.branches.undo_reanchor(turn_id)

    async def inject(self, session_id: str, source_node_ids: Sequence[str], target_node: str) -> Injected:
        return await self.branches.inject(session_id, source_node_ids, target_node)

    async def undo_inject(self, injected: Injected) -> GraphChange:
        return await self.branches.undo_inject(injected)

    async def set_focus(self, session_id: str, node_id: str | None) -> FocusChanged:
        return await self.branches.set_focus(session_id, node_id)

    async def checkpoint(self, session_id: str, node_id: str, label: str = "", *, remove: bool = False) -> GraphChange:
        return await self.branches.checkpoint(session_id, node_id, label, remove=remove)

    async def set_collapsed(self, session_id: str, node_id: str, collapsed: bool) -> GraphChange:
        return await self.branches.set_collapsed(session_id, node_id, collapsed)

    async def move_nodes(self, session_id: str, positions: Sequence[tuple[str, float, float]]) -> GraphChange:
        return await self.branches.move_nodes(session_id, positions)

    # ------------------------------------------------------------------ streams and tasks

    def scheduler(self, session_id: str) -> SessionScheduler:
        """The session's stream scheduler: submit inputs, stop, reprioritise, watch its signals."""
        return self.streams.scheduler(session_id)

    async def resume_inputs(self, session_id: str) -> list[StreamHandle]:
        """Queue again the inputs that were waiting when the app last stopped."""
        return await self.streams.resume_inputs(session_id)

    async def list_tasks(self, session_id: str) -> list[Task]:
        """The session's tasks in creation order (the export's ``todo_list.tasks`` mirrors them)."""
        return await self.tasks.tasks(session_id)

    async def create_task(self, session_id: str, name: str, *, parent_task_id: str | None = None,
                          acceptance: str = "", turn_id: str | None = None) -> TaskChange:
        return await self.tasks.create_task(session_id, name, parent_task_id=parent_task_id, acceptance=acceptance,
                                            turn_id=turn_id)

    async def start_task(self, session_id: str, task_id: str) -> TaskChange:
        return await self.tasks.start_task(session_id, task_id)

    async def block_task(self, session_id: str, task_id: str, note: str) -> TaskChange:
        return await self.tasks.block_task(session_id, task_id, note)

    async def complete_task(self, session_id: str, task_id: str, result: str, *,
                            evidence: Evidence | None = None) -> TaskChange:
        return await self.tasks.complete_task(session_id, task_id, result, evidence=evidence)

    async def fail_task(self, session_id: str, task_id: str, reason: str) -> TaskChange:
        return await self.tasks.fail_task(session_id, task_id, reason)

    async def recover_tasks(self, session_id: str) -> TaskChange | None:
        return await self.tasks.recover_tasks(session_id)

    async def replay_state(self, session_id: str) -> list[str]:
        """The task state rebuilt from its event log, compared with the store and the live state."""
        return await self.tasks.replay_state(session_id)

    # ------------------------------------------------------------------ environment and tools

    async def ingest_env(self, session_id: str, events: Sequence[EnvEvent]) -> list[EnvRouted]:
        """Store, index, draw and route a batch of env events; push those touching an active task."""
        return await self.environment.ingest_env(session_id, events)

    async def attach_file(self, session_id: str, path: str | Path, *, watched_only: bool = False) -> Attached:
        """Attach a local text file to the session: its text becomes evidence recalled like a
        watched file's (an env event), and an artifact node "Attached: name v1" bound to it.
        The same path attached again with changed text is the next version; with the same text
        nothing is recorded (``Attached.changed`` False). ``AttachError`` when the file is
        missing, a folder, binary, empty or over ``EngineConfig.attach_max_bytes``. With
        ``watched_only`` (an agent attaching, not the user) it is read as ``read_file`` reads:
        through the confined opener, inside the watched folders only."""
        reader = self.tools.confined_reader() if watched_only else None
        return await self.attachments.attach(session_id, str(path), reader)

    async def env_failures(self, session_id: str) -> list[dict[str, Any]]:
        """Env events the session could not store or index, with why (oldest first)."""
        return await self.environment.env_failures(session_id)

    async def env_events(self, session_id: str) -> list[EnvEvent]:
        """The session's stored env events, in order."""
        return await self.ctx.on_store(self.ctx.store.list_env_events, session_id)

    def set_watched_folders(self, paths: Sequence[str | Path]) -> tuple[Path, ...]:
        """Set the folders ``read_file`` may read in (settings' ``watched_folders``); returns them."""
        return self.tools.set_watched_folders(paths)

    # ------------------------------------------------------------------ tool servers (MCP) and confirmation

    def tool_server_states(self) -> list[ServerState]:
        """Each configured tool server's state: status, last error, tools listed, restarts."""
        return self.server_tools.states()

    async def sync_tool_servers(self, wait_s: float = 0.0, *, reload: bool = False) -> ServersSynced:
        """Bring the tools in step with the servers now: after waiting up to ``wait_s`` for those
        starting, or after reading their settings again (``reload``: Settings → Tools changed them)."""
        if reload:
            await self.server_tools.reload()
        return await self.server_tools.sync(wait_s)

    def set_tool_approver(self, approver: ToolApprover | None) -> None:
        """Who confirms a tool that changes things (None: nobody; such calls are refused)."""
        self.tools.gate.approver = approver
