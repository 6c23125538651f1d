"""The engine facade: the one object the UI, the CLI, the MCP server and the evaluation talk to.

``Engine`` builds one ``EngineContext`` (ports, executors, configuration, shared session state)
and composes the services over it, all wired in the constructor; the services and the ports are
private, and every public method delegates to one of them:

==============  ===========================================================================
sessions        open a session, history ingest, the user's facts and profile (``sessions.py``)
turns           build, submit, answer, read and replay turns (``turns.py``)
branches        re-anchor, focus, inject, collapse, versions shown, positions (``branches.py``); checkpoints
                that keep their branch's state and restore it on a sibling branch (``checkpoints.py``)
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

Two narrower doors for two audiences: ``lab()`` (``lab.py``), the switches and figures of
evaluations and benchmarks, and ``records()`` (``records.py``), stored records as programs outside
the app read them (the MCP server).

Everything runs on one event loop; blocking work goes to the named executors (DESIGN.md §3):
``store`` (the one SQLite connection), ``embed`` (the embedder, also LanceDB writes that embed),
``index`` (LanceDB queries), ``llm`` (the chat model). A user's input is committed durably before
anything else happens with it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from app.core.context.compiler import Fact
from app.core.engine.agent import Steered, TaskAgent
from app.core.engine.attachments import Attached, AttachmentService
from app.core.engine.branches import BranchService, FocusChanged, Injected, Reanchored
from app.core.engine.checkpoints import CheckpointService, Restored
from app.core.engine.context import EngineConfig, EngineContext
from app.core.engine.detail import Detailed, DetailService, SubtreeSummary
from app.core.engine.env_answers import EnvResponder
from app.core.engine.environment import EnvironmentService, EnvRouted
from app.core.engine.ids import resolve_id
from app.core.engine.index_upkeep import IndexUpkeep
from app.core.engine.lab import EngineLab
from app.core.engine.memory import MemoryService, ProfileAdded
from app.core.engine.records import StoredRecords
from app.core.engine.recovery import RecoveryReport, RecoveryService
from app.core.engine.sessions import SessionService, settle_heap
from app.core.engine.streams import EngineStreams
from app.core.engine.summaries import SummaryService
from app.core.engine.tasks import TaskChange, TaskService
from app.core.engine.tool_servers import ServersSynced, ServerToolService
from app.core.engine.tools import ToolService
from app.core.engine.turns import TurnRun, TurnService
from app.core.errors import CoreError, NoRecordError
from app.core.intent.engine import IntentEngine, PrototypeBank
from app.core.intent.profile import UserProfile
from app.core.memory.topics import TopicIndex
from app.core.pipeline.builder import ContextBuilder
from app.core.pipeline.detail import DetailAction
from app.core.pipeline.record import BuildRecord, StageTiming, TurnRecord
from app.core.pipeline.sources import BuildRequest
from app.core.plan.builder import PlanBuilder
from app.core.ports import (
    CancelToken,
    ChatModel,
    Embedder,
    FileReader,
    GenerationParams,
    ReadProgress,
    SearchIndex,
    ServerState,
    SessionExchange,
    SessionGeneration,
    SessionStore,
    TokenCounter,
    ToolServers,
)
from app.core.routing.anchor import AnchorRouter
from app.core.runtime.background import spawn
from app.core.runtime.executors import Executors
from app.core.runtime.scheduler import SessionScheduler, StreamHandle
from app.core.session.graph import GraphChange
from app.core.session.membership import RoutedShares
from app.core.session.state import SessionState
from app.core.tools.builtin import FolderFilesFactory
from app.core.tools.governance import ToolApprover
from app.core.types import EnvEvent, Evidence, MemoryFragment, Message, Origin, SummaryRecord, Task, utc_now

log = logging.getLogger(__name__)


class Engine:
    """One engine per data folder; sessions are loaded on first use and kept in memory.

    ``folder_files`` makes the ``FolderFiles`` the ``read_file`` tool reads through for a set of
    watched folders (the composition root passes ``app.sensors.confined.ConfinedFolders``, the
    one confined opener); without it ``read_file`` refuses every call (the core does no I/O).
    ``file_reader`` reads the files the user attaches (``app.sensors.attach.read_attachment``);
    without it ``attach_file`` refuses. ``exchange`` exports and imports sessions as documents
    (``app.store.exchange.StoreExchange``); without it both refuse.

    The services are private: front ends (the window, the CLI, the MCP server, the evaluation)
    call the named methods below and nothing else; the ports are never handed out.
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
        exchange: SessionExchange | None = None,
        tool_servers: ToolServers | None = None,
    ) -> None:
        config = config or EngineConfig()
        self._exchange_port = exchange
        # The intent prototypes are embedded at ``start`` (with the embedder's model), into this bank.
        self._prototypes = PrototypeBank()
        builder = ContextBuilder(intents=IntentEngine(self._prototypes), planner=PlanBuilder(),
                                 router=AnchorRouter(config.routing), counter=counter,
                                 answer_reserve=config.answer_reserve, context_size=config.context_size)
        self._ctx = ctx = EngineContext(store=store, index=index, embedder=embedder, chat=chat, counter=counter,
                                        ex=executors, config=config, builder=builder)
        self._sessions = SessionService(ctx)
        self._tasks = TaskService(ctx, self._sessions)
        self._tools = ToolService(ctx, self._tasks.writer(), folder_files=folder_files)
        self._server_tools = ServerToolService(ctx, self._tools, tool_servers)
        self._memory = MemoryService(ctx, self._sessions, enabled=config.memory_writer)
        self._summaries = SummaryService(ctx, self._sessions, self._memory.topic_messages, enabled=config.summaries)
        self._turns = TurnService(ctx, self._sessions, self._tasks, self._tools, topics=self._memory.topic_search,
                                  offer=self._summaries.offer)
        self._branches = BranchService(ctx, self._sessions, self._turns)
        self._checkpoints = CheckpointService(ctx, self._sessions, self._turns, self._tasks, self._branches,
                                              self._summaries.offer)
        self._streams = EngineStreams(ctx, self._sessions, self._turns, self._tasks, self._checkpoints.kept_offer)
        self._environment = EnvironmentService(ctx, self._sessions, self._tools)
        self._attachments = AttachmentService(ctx, self._sessions, self._environment, file_reader)
        self._recovery = RecoveryService(ctx)
        self._upkeep = IndexUpkeep(ctx, importing=self._sessions.importing)
        self._details = DetailService(ctx, self._sessions, self._turns, self._summaries.offer)
        self._warming: set[asyncio.Task[None]] = set()  # a session's read-ahead (``_warm``)
        self._lab = EngineLab(ctx, self._memory, self._summaries, self._streams, self._upkeep, self._read_ahead)
        self._records = StoredRecords(ctx)
        self._environment.env_ingested.connect(self._memory.on_env_ingested)
        self._env_answers = EnvResponder(ctx, self._tasks, self._streams.agent, self._streams.scheduler)
        self._environment.env_ingested.connect(self._env_answers.on_env_ingested)
        self.env_noticed = self._env_answers.noticed  # an env event relevant to an idle branch
        self.env_ingested = self._environment.env_ingested
        self.env_pushed = self._environment.env_pushed
        self.env_failed = self._environment.env_failed
        self.index_progress = self._recovery.index_progress  # (what, done, total) while the index catches up

    # ------------------------------------------------------------------ what front ends read besides sessions

    @property
    def model_name(self) -> str | None:
        """The chat model's name (None without a chat model)."""
        return None if self._ctx.chat is None else self._ctx.chat.name

    @property
    def counter_name(self) -> str:
        """The name of the token counter contexts are budgeted with."""
        return self._ctx.counter.name

    def count_tokens(self, text: str) -> int:
        """``text``'s tokens by the counter contexts are budgeted with."""
        return self._ctx.counter.count(text)

    def default_generation(self) -> GenerationParams:
        """The app's generation settings (a session's own override them: ``generation``), with
        the answer length every answer gets by default: the plan's answer reserve."""
        config = self._ctx.config
        return config.generation.model_copy(update={"max_tokens": config.answer_reserve})

    def recovery_report(self) -> RecoveryReport:
        """What ``start`` repaired after a crash (empty before it, or when nothing needed it)."""
        return self._recovery.report

    def lab(self) -> EngineLab:
        """The switches and figures of evaluations and benchmarks (``engine/lab.py``)."""
        return self._lab

    def records(self) -> StoredRecords:
        """Stored records as programs outside the app read them (``engine/records.py``)."""
        return self._records

    async def resolve_id(self, kind: str, text: str) -> str:
        """The full id of a "turn" or "session" a person typed: ``last``, a whole id, or its first
        characters (``engine/ids.py``); ``NoRecordError`` or ``CoreError`` when it names none or several."""
        return await self._ctx.on_store(resolve_id, self._ctx.store, kind, text)

    async def export_session(self, session_id: str) -> dict[str, Any]:
        """The session as a structured context model document (JSON-ready; ``app.store.exchange``)."""
        return await self._ctx.on_store(self._exchange().export_session, session_id)

    async def import_session(self, data: dict[str, Any]) -> str:
        """Validate a structured context model document and store it as a new session; return its
        id (nothing is written when it fails; the session is not opened)."""
        return await self._ctx.on_store(self._exchange().import_session, data)

    def _exchange(self) -> SessionExchange:
        if self._exchange_port is None:
            raise CoreError("this engine was built without export and import")
        return self._exchange_port

    async def embed(self, texts: list[str]) -> np.ndarray | None:
        """Embeddings of ``texts`` on the embed executor (None without an embedder)."""
        return await self._ctx.embed(texts)

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> RecoveryReport:
        """Recover from an earlier crash and embed the intent prototypes once; return what the
        recovery did. Turns a crash interrupted are marked "interrupted" (their partial answers
        kept), an interrupted index rebuild is finished before this returns, and the rows the
        index lacks are embedded in the background (``index_progress``). Call it before opening
        any session."""
        report = await self._recovery.start()
        self._upkeep.start()  # the ANN index trained and new rows folded in, in the background
        await self._memory.sync()  # every memory read once; later builds read only what was written since
        await self._memory.load_topics()  # the topic channel answers from the first build
        embedder = self._ctx.embedder
        if embedder is not None:
            await self._ctx.ex.run("embed", self._prototypes.fill, lambda texts: embedder.embed(texts))
        await self._server_tools.start()  # the tools of the servers ready now; the others join when ready
        return report

    async def close(self) -> None:
        """Stop the scheduler's streams, let running answers finish their bookkeeping, stop the
        index catch-up between two batches, close the store, then stop the executors."""
        await self._read_ahead()
        await self._streams.close()
        await self._server_tools.close()
        await self._memory.idle()
        await self._summaries.idle()
        await self._sessions.close()
        await self._recovery.close()
        await self._upkeep.close()
        await self._ctx.on_store(self._ctx.store.close)  # on its own thread; gives up the run lease
        self._ctx.ex.shutdown(wait=True)

    # ------------------------------------------------------------------ memory

    async def memories(self) -> list[tuple[str, MemoryFragment]]:
        """Every memory of the workspace with the id of the session it came from (closed, merged
        and revoked ones too: nothing is deleted), in the order they were recorded."""
        return await self._memory.list()

    async def revoke_memory(self, memory_id: str) -> MemoryFragment:
        """Revoke a memory: it is kept (closed, marked revoked) and never reaches a context again."""
        return await self._memory.revoke(memory_id)

    async def pin_memory(self, memory_id: str, pinned: bool = True) -> MemoryFragment:
        return await self._memory.pin(memory_id, pinned)

    async def edit_memory(self, memory_id: str, content: str) -> MemoryFragment:
        """A new revision of a memory's content; the earlier one is kept in its ``revisions``."""
        return await self._memory.edit(memory_id, content)

    async def add_profile(self, text: str, session_id: str, *, origin: Origin = "") -> ProfileAdded | None:
        """Add the profile statements of ``text`` ("I prefer…", "Never…", "You may…") for every
        session; ``session_id`` (the session open in the window) keeps their record. None when
        ``text`` states no preference, prohibition or permission (``MemoryService.add_profile``).
        ``origin`` "agent" (an MCP client's): stored pending, no one's profile until accepted."""
        return await self._memory.add_profile(session_id, text, origin=origin)

    async def accept_memory(self, memory_id: str) -> MemoryFragment:
        """The user accepts a memory from outside (an import's, an MCP client's); returns the memory
        that stands for it now (a profile statement: the user's own, ``MemoryService.accept``)."""
        return await self._memory.accept(memory_id)

    async def topics(self) -> TopicIndex:
        """The workspace's topic index (topics, aliases, mentions, the merge/split log)."""
        return await self._memory.load_topics()

    async def memory_idle(self) -> None:
        """Wait for the background memory writer to finish what it was given."""
        await self._memory.idle()

    async def summarize(self, session_id: str) -> list[SummaryRecord]:
        """Bring the session's summaries up to date now, however few messages wait; return the
        new versions written (none when nothing changed: the cache answers)."""
        await self._summaries.idle()
        return await self._summaries.update(session_id, flush=True)

    async def session_summaries(self, session_id: str) -> list[SummaryRecord]:
        """The latest summary of the session, each branch and task at each level."""
        await self._summaries.idle()
        if not self._summaries.current(session_id):
            return await self._ctx.on_store(self._ctx.store.list_summaries, session_id)
        return self._summaries.current(session_id)

    # ------------------------------------------------------------------ sessions

    async def open_session(self, session_id: str | None = None, *, title: str = "") -> SessionState:
        """The session's state, loaded on first use; a missing (or None) id creates the session.
        It becomes the last used session (``last_used_session``)."""
        await self._memory.sync()
        state = await self._sessions.open(session_id, title=title)
        await self._ctx.on_store(self._ctx.store.mark_session_opened, state.session_id)
        self._warm(state)
        return state

    def _warm(self, state: SessionState) -> None:
        """Read ahead, in the background, what the session's first build would otherwise wait for:
        its current summaries (offered to that build, not only to the next; their parts quoted),
        the vectors routing compares the input with, the index's held vectors, memory rows and
        full-text files, each speaker's messages by time, the user's facts and profile (at 10,000
        turns the first build took ~250 ms against ~50 ms for the next); then the heap is settled
        (``settle_heap``)."""
        ctx, session_id = self._ctx, state.session_id

        async def warm() -> None:
            reads: list[Awaitable[Any]] = [self._summaries.preload(state)]
            if ctx.index is not None:
                reads += [ctx.vectors_for(ctx.builder.routed_ids(state)), ctx.on_index(ctx.index.warm, session_id)]
            for failed in await asyncio.gather(*reads, return_exceptions=True):
                if isinstance(failed, Exception):  # only a read ahead: the build reads again, and says why
                    log.warning("reading ahead for session %s failed: %s", session_id, failed)
            for name in state.speakers():  # the structured channel's list for an input naming them
                state.speaker_timeline(name)  # (20,000 messages each at 100,000 turns: ~35 ms)
                await asyncio.sleep(0)
            self._sessions.facts(state)  # what the user typed here, read once
            self._sessions.profile(state)
            # What was read lives as long as the session (at 100,000 turns: lists of 100,000 ids in
            # the held vectors and in each summary's covers): out of the collector's sight, or
            # every collection of the young generations walks it (a 75-90 ms pause inside a build).
            settle_heap()

        task = spawn(warm(), name=f"warm {session_id}")
        self._warming.add(task)
        task.add_done_callback(self._warming.discard)

    async def _read_ahead(self) -> None:
        """Wait until the read-ahead of every session opened so far is done."""
        await asyncio.gather(*self._warming, return_exceptions=True)

    async def session_state(self, session_id: str) -> SessionState:
        """A stored session's state for reading: loaded on first use, never created, and not
        counted as the user opening it (``last_used_session`` is unchanged)."""
        if session_id not in self._ctx.sessions and await self._ctx.on_store(self._ctx.store.get_session, session_id) is None:
            raise NoRecordError(f"no session {session_id!r}")
        await self._memory.sync()
        return await self._sessions.open(session_id)

    async def list_sessions(self, *, archived: bool = False) -> list[dict[str, Any]]:
        """Stored sessions (id, title, times, counts) in creation order; ``archived`` lists the
        archived ones too."""
        return await self._ctx.on_store(lambda: self._ctx.store.list_sessions(archived=archived))

    async def search_sessions(self, text: str, *, archived: bool = False) -> list[str]:
        """Ids of the sessions whose title or messages contain ``text`` (any case)."""
        return await self._ctx.on_store(lambda: self._ctx.store.search_sessions(text, archived=archived))

    async def rename_session(self, session_id: str, title: str) -> str:
        """Give the session a new title (one line, trimmed); returns the title stored."""
        title = " ".join(title.split())
        await self._ctx.on_store(lambda: self._ctx.store.update_session(session_id, title=title))
        return title

    async def archive_session(self, session_id: str, archived: bool = True) -> None:
        """Hide the session from the list (``archived=False`` brings it back); nothing is deleted."""
        await self._ctx.on_store(self._ctx.store.set_session_archived, session_id, archived)

    async def set_generation(self, session_id: str, settings: SessionGeneration) -> None:
        """Give the session its own temperature, answer length and standing instruction (they
        apply from its next turn; each build records the instruction it used)."""
        state = await self._sessions.open(session_id)
        await self._ctx.on_store(self._ctx.store.set_session_generation, session_id,
                                 settings.model_dump(mode="json", exclude_defaults=True))
        state.generation = settings

    async def generation(self, session_id: str) -> SessionGeneration:
        """The session's own generation settings (fields left None use the app's defaults)."""
        return (await self._sessions.open(session_id)).generation

    async def last_used_session(self) -> str | None:
        """The session opened most recently and not archived (see ``SessionCatalog``), or None."""
        return await self._ctx.on_store(self._ctx.store.last_used_session_id)

    async def ingest(self, session_id: str, messages: Sequence[Message], *, chain: bool = True,
                     parents: Mapping[str, str | None] | None = None, routed: Mapping[str, float] | None = None) -> int:
        """Store messages as history turns, linked along ``continues`` (or to ``parents``, as sure as
        ``routed`` says), and index them."""
        return await self._sessions.ingest(session_id, messages, chain=chain, parents=parents, routed=routed)

    def facts(self, state: SessionState) -> tuple[Fact, ...]:
        return self._sessions.facts(state)

    def profile(self, state: SessionState) -> UserProfile:
        return self._sessions.profile(state)

    # ------------------------------------------------------------------ turns

    async def build(self, session_id: str, text: str, *, budget: int | None = None, at: str | None = None,
                    anchor_override: str | None = None, query_vector: Sequence[float] | None = None,
                    routed: RoutedShares | None = None) -> tuple[BuildRecord, StageTiming]:
        """Build the context for ``text`` without generating or recording (evaluation, MCP):
        ``query_vector`` and ``routed`` are an evaluation's own embedding and router's shares."""
        await self._memory.sync()  # what another process revoked or edited holds here too
        state = await self._sessions.open(session_id)
        request = BuildRequest(text, at=at or utc_now(), budget=budget or self._ctx.config.default_budget,
                               anchor_override=anchor_override, query_vector=query_vector, routed=routed)
        return await self._turns.build(state, request)

    async def submit(self, session_id: str, text: str, *, budget: int | None = None,
                     anchor_override: str | None = None, on_token: Callable[[str], None] | None = None) -> TurnRun:
        """Record the input, build and attach its context, start the answer (``TurnService.submit``);
        the memory first takes in what other processes wrote (``MemoryService.sync``)."""
        await self._memory.sync()
        return await self._turns.submit(session_id, text, budget=budget, anchor_override=anchor_override,
                                       on_token=on_token)

    async def answer_again(self, session_id: str, node_id: str, *, budget: int | None = None,
                           on_token: Callable[[str], None] | None = None) -> TurnRun:
        """Regenerate: answer ``node_id``'s input again as a new version of its turn, shown in place
        of the others (``TurnService.answer_again``)."""
        return await self._turns.answer_again(session_id, node_id, budget=budget, on_token=on_token)

    async def show_version(self, session_id: str, node_id: str) -> GraphChange:
        """Show this version of its turn; the others are put away (``app.core.session.versions``)."""
        return await self._branches.show_version(session_id, node_id)

    async def turn_statuses(self, session_id: str) -> dict[str, str]:
        """turn id → stored status ("answered", "failed", "interrupted", ...) of the session's turns."""
        return await self._ctx.on_store(self._ctx.store.turn_statuses, session_id)

    async def reload_providers(self) -> bool:
        """Re-read the chat providers' settings (changed by ``pcm providers``, the Settings dialog or
        MCP's configure_llm_provider) from the next model call on; False when the chat model is
        not a provider registry."""
        reload = getattr(self._ctx.chat, "reload", None)
        if not callable(reload):
            return False
        return bool(await asyncio.to_thread(reload))

    async def off_machine_turns(self, session_id: str) -> list[str]:
        """Ids of the session's turns answered by a provider off this machine (their cards say so)."""
        return await self._ctx.on_store(self._ctx.store.off_machine_turns, session_id)

    async def turn_record(self, turn_id: str) -> TurnRecord:
        """The turn's stored record; ``NoRecordError`` if there is none."""
        return await self._turns.record(turn_id)

    async def replay(self, turn_id: str) -> list[str]:
        """Rebuild a turn from the stored state as it was; return the differences (none: exact)."""
        return await self._turns.replay(turn_id)

    async def detail(self, turn_id: str, action: DetailAction) -> Detailed:
        """Expand, collapse or focus the turn's context and recompile it (``detail.py``)."""
        return await self._details.detail(turn_id, action)

    async def subtree_summary(self, session_id: str, node_id: str) -> SubtreeSummary | None:
        """What a collapsed node shows: the brief summary of what continues it."""
        return await self._details.subtree_summary(session_id, node_id)

    # ------------------------------------------------------------------ branch actions of the canvas

    async def reanchor(self, turn_id: str, anchor_node: str | None) -> Reanchored:
        return await self._branches.reanchor(turn_id, anchor_node)

    async def undo_reanchor(self, turn_id: str) -> Reanchored:
        return await self._branches.undo_reanchor(turn_id)

    async def inject(self, session_id: str, source_node_ids: Sequence[str], target_node: str) -> Injected:
        return await self._branches.inject(session_id, source_node_ids, target_node)

    async def undo_inject(self, injected: Injected) -> GraphChange:
        return await self._branches.undo_inject(injected)

    async def set_focus(self, session_id: str, node_id: str | None) -> FocusChanged:
        return await self._branches.set_focus(session_id, node_id)

    async def checkpoint(self, session_id: str, node_id: str, label: str = "", *, remove: bool = False) -> GraphChange:
        """Mark a node as a checkpoint keeping its branch's state: task stack, summaries, detail
        settings (``checkpoints.py``); ``remove`` clears the mark."""
        return await self._checkpoints.mark(session_id, node_id, label, remove=remove)

    async def restore_checkpoint(self, session_id: str, node_id: str) -> Restored:
        """Start a sibling branch from a checkpoint: the tasks open then, paused as they were, and
        where the branch starts with its detail settings; inputs sent from there (``detail_from``)
        and the restored tasks' runs are offered the summaries it kept (``Restored``; ``checkpoints.py``)."""
        return await self._checkpoints.restore(session_id, node_id)

    async def set_collapsed(self, session_id: str, node_id: str, collapsed: bool) -> GraphChange:
        return await self._branches.set_collapsed(session_id, node_id, collapsed)

    async def move_nodes(self, session_id: str, positions: Sequence[tuple[str, float, float]]) -> GraphChange:
        return await self._branches.move_nodes(session_id, positions)

    # ------------------------------------------------------------------ streams and tasks

    def scheduler(self, session_id: str) -> SessionScheduler:
        """The session's stream scheduler: submit inputs, stop, reprioritise, watch its signals."""
        return self._streams.scheduler(session_id)

    async def resume_inputs(self, session_id: str) -> list[StreamHandle]:
        """Queue again the inputs that were waiting when the app last stopped."""
        return await self._streams.resume_inputs(session_id)

    async def list_tasks(self, session_id: str) -> list[Task]:
        """The session's tasks in creation order (the export's ``todo_list.tasks`` mirrors them)."""
        return await self._tasks.tasks(session_id)

    async def create_task(self, session_id: str, name: str, *, parent_task_id: str | None = None,
                          acceptance: str = "", turn_id: str | None = None) -> TaskChange:
        return await self._tasks.create_task(session_id, name, parent_task_id=parent_task_id, acceptance=acceptance,
                                            turn_id=turn_id)

    async def start_task(self, session_id: str, task_id: str) -> TaskChange:
        return await self._tasks.start_task(session_id, task_id)

    async def block_task(self, session_id: str, task_id: str, note: str) -> TaskChange:
        return await self._tasks.block_task(session_id, task_id, note)

    async def complete_task(self, session_id: str, task_id: str, result: str, *,
                            evidence: Evidence | None = None) -> TaskChange:
        return await self._tasks.complete_task(session_id, task_id, result, evidence=evidence)

    async def fail_task(self, session_id: str, task_id: str, reason: str) -> TaskChange:
        return await self._tasks.fail_task(session_id, task_id, reason)

    async def recover_tasks(self, session_id: str) -> TaskChange | None:
        return await self._tasks.recover_tasks(session_id)

    async def replay_state(self, session_id: str) -> list[str]:
        """The task state rebuilt from its event log, compared with the store and the live state."""
        return await self._tasks.replay_state(session_id)

    # ------------------------------------------------------------------ the resident agent (engine/agent.py)

    def run_task(self, session_id: str, text: str, *, hold: bool = False, budget: int | None = None,
                 on_token: Callable[[str], None] | None = None) -> StreamHandle:
        """Queue ``text`` as a task (whatever its intent says) through the session's scheduler; its
        turn answers with the plan, then the steps run. ``hold``: plan it and keep it paused (edit
        its steps, then ``resume_task``). Returns the turn's handle (its ``task_id`` once built)."""
        return self._streams.submit_task(session_id, text, hold=hold, budget=budget, on_token=on_token)

    async def pause_task(self, session_id: str, task_id: str) -> Steered:
        """Pause a task: its streams stop within one token, their work kept as checkpoints."""
        return (await self._agent_ready(session_id)).pause_now(session_id, task_id)

    async def resume_task(self, session_id: str, task_id: str) -> Steered:
        """Resume a paused task: each paused step continues from its checkpoint."""
        return await (await self._agent_ready(session_id)).resume(session_id, task_id)

    async def amend_task(self, session_id: str, task_id: str, text: str) -> Steered:
        """Join an amendment to a task's constraints; ``Steered.effect`` says where it acts (the
        next step, a restart of the running step from its checkpoint, or the resume)."""
        return (await self._agent_ready(session_id)).amend_now(session_id, task_id, text)

    async def cancel_task(self, session_id: str, task_id: str) -> Steered:
        """Cancel a task: it and its open steps fail, their streams stop."""
        return (await self._agent_ready(session_id)).cancel_now(session_id, task_id)

    async def edit_steps(self, session_id: str, task_id: str, *, add: Sequence[tuple[str, str]] = (),
                         rename: Mapping[int, str] | None = None, remove: Sequence[int] = ()) -> Steered:
        """Change a task's plan before or while it runs: add steps (name, acceptance) at its end,
        rename or remove steps (by number) that have not started. ``TaskError`` for a step that has."""
        return (await self._agent_ready(session_id)).edit_steps(session_id, task_id, add=add, rename=rename or {},
                                                                remove=remove)

    async def wait_task(self, session_id: str, task_id: str, timeout: float | None = None) -> Task:
        """Wait until a task is complete, failed or paused; return it (``asyncio.TimeoutError`` past ``timeout``)."""
        return await (await self._agent_ready(session_id)).wait(session_id, task_id, timeout)

    async def task_result(self, session_id: str, task_id: str) -> str:
        """The whole result of a completed task (else the work kept at its checkpoint; "" for none)."""
        return await (await self._agent_ready(session_id)).result_text(session_id, task_id)

    def input_kind(self, session_id: str, text: str) -> str:
        """The path ``text`` would probably take in the session now, by the fast intent rules and
        its running tasks (no model): "task" (planned into steps and run), "interrupt" or "qa"
        (answered as one turn; so is a task that only states something to remember)."""
        return self._streams.kind_of(session_id, text)

    async def _agent_ready(self, session_id: str) -> TaskAgent:
        """The agent, with the session open and its task book loaded and recovered (a task an
        earlier run left streaming is failed before anything resumes it)."""
        await self._tasks.recover_tasks(session_id)
        return self._streams.agent

    # ------------------------------------------------------------------ environment and tools

    async def ingest_env(self, session_id: str, events: Sequence[EnvEvent]) -> list[EnvRouted]:
        """Store, index, draw and route a batch of env events; push those touching an active task."""
        return await self._environment.ingest_env(session_id, events)

    async def attach_file(self, session_id: str, path: str | Path, *, watched_only: bool = False,
                          on_progress: ReadProgress | None = None, cancel: CancelToken | None = None) -> Attached:
        """Attach a local text file to the session: its text becomes evidence recalled like a
        watched file's (an env event), and an artifact node "Attached: name v1" bound to it.
        The same path attached again with changed text is the next version; with the same text
        nothing is recorded (``Attached.changed`` False). ``AttachError`` when the file is
        missing, a folder, binary, empty or over ``EngineConfig.attach_max_bytes``. With
        ``watched_only`` (an agent attaching, not the user) it is read as ``read_file`` reads:
        through the confined opener, inside the watched folders only. A document (PDF, Word, a
        spreadsheet, Markdown, code) is read into parts with selectors in the background:
        ``on_progress`` hears ``{"stage", "done", "total", "unit"}`` on the loop, ``cancel`` stops
        it before anything is recorded (``AttachCancelled``)."""
        reader = self._tools.confined_reader() if watched_only else None
        return await self._attachments.attach(session_id, str(path), reader, on_progress=on_progress, cancel=cancel)

    async def env_failures(self, session_id: str) -> list[dict[str, Any]]:
        """Env events the session could not store or index, with why (oldest first)."""
        return await self._environment.env_failures(session_id)

    async def env_events(self, session_id: str) -> list[EnvEvent]:
        """The session's stored env events, in order."""
        return await self._ctx.on_store(self._ctx.store.list_env_events, session_id)

    def set_watched_folders(self, paths: Sequence[str | Path]) -> tuple[Path, ...]:
        """Set the folders ``read_file`` may read in (settings' ``watched_folders``); returns them."""
        return self._tools.set_watched_folders(paths)

    # ------------------------------------------------------------------ tool servers (MCP) and confirmation

    def tool_server_states(self) -> list[ServerState]:
        """Each configured tool server's state: status, last error, tools listed, restarts."""
        return self._server_tools.states()

    async def sync_tool_servers(self, wait_s: float = 0.0, *, reload: bool = False) -> ServersSynced:
        """Bring the tools in step with the servers now: after waiting up to ``wait_s`` for those
        starting, or after reading their settings again (``reload``: Settings → Tools changed them)."""
        if reload:
            await self._server_tools.reload()
        return await self._server_tools.sync(wait_s)

    def set_tool_approver(self, approver: ToolApprover | None) -> None:
        """Who confirms a tool that changes things (None: nobody; such calls are refused)."""
        self._tools.gate.approver = approver
