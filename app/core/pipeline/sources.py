"""What a build reads: the caller's request, and everything else through one interface.

A build (``app.core.pipeline.builder.ContextBuilder.build``) reads the session state, the
request (``BuildRequest``: what its caller chooses — the text, time and budget, the stored input's
id, an anchor override, the focus, ids to keep out of recall, and for an evaluation or an
environment push its own query vector, routing shares, trigger and pinned lines) and, through
``BuildSources``, everything else. The engine implements the sources (``app.core.engine.sources``):

- ``LiveSources`` asks the engine's services now (a turn, an evaluation question);
- ``RecordedSources`` answers from a recorded build (``BuildRecord``) what was an observation of
  the outside or a choice then — the index channels' hits, the model's intent JSON, the tools,
  the tool filter's signals and the tools' results, the task stack, the branch summaries offered, the standing instruction, the
  workspace the plan's scope saw, the model limits, the user's progressive detail — and is its
  live twin for the rest, which replay recomputes (DESIGN.md §4 "Replay");
- ``PushSources`` is what an environment push reads (the index and the profile, nothing of a turn).

Each input is one method of the protocol; its replay twin is the method of the same name in
``RecordedSources``. The builder reads every source once per build, into ``BuildInputs``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Protocol

import numpy as np

from app.core.context.compiler import Fact, Item
from app.core.context.recall_model import ChannelRun, SearchPort
from app.core.context.retrieval import TopicSearch
from app.core.intent.decision import InputReading
from app.core.intent.model import EnvEventRef, Intent
from app.core.intent.profile import UserProfile
from app.core.pipeline.detail import Detail
from app.core.pipeline.summary_items import Offered
from app.core.plan.model import ContextPlan
from app.core.plan.tools import ToolSignals, ToolSpec
from app.core.session.membership import RoutedShares
from app.core.session.state import NoteView, SessionState
from app.core.tasks.stack import TaskInputs
from app.core.tools.model import ToolRound

#: The LLM intent signal as observed: (the model's output or None, status — ``IntentContext.llm_status``).
LlmSignal = tuple[Any, str]


@dataclass(frozen=True)
class BuildRequest:
    """What the caller of a build chooses."""

    text: str
    at: str
    budget: int
    input_id: str = "input"  # the stored id of the input message, when there is one
    anchor_override: str | None = None  # a node id, or ``builder.NEW_ROOT``; None lets the router decide
    # The node the user works on (recorded as ``routing["focus"]``): their choice on the canvas
    # (``focus_chosen``), else the latest turn's node. Only a chosen focus raises the focus
    # feature above a frontier's: the implicit one would tilt every input towards the latest
    # turn (SESSION_DEFAULT's thresholds were set without that; a mixed input stops being ambiguous).
    focus_node: str | None = None
    focus_chosen: bool = False
    exclude_ids: tuple[str, ...] = ()  # kept out of recall and routing (another version's messages)
    # The caller's own query vector (an evaluation's, an environment push's: the text with the
    # event's label); None: the text's embedding (``BuildSources.query_vector``).
    query_vector: Sequence[float] | None = None
    # How routing split the input over branch trees (``session.membership``); None: the build's own
    # routing's (an override is sure). An evaluation routing by its own router passes its shares.
    routed: RoutedShares | None = None
    # An environment push (mode push): what triggered the build, the events it is about, and
    # items that must be in the context whatever recall finds (the event, the task it touches).
    trigger: str = "user"  # "user" | "env"
    env_events: tuple[EnvEventRef, ...] = ()
    pinned: tuple[Item, ...] = ()
    # The text as the intent rules read it, when the caller has read it already (a scheduler
    # stream, to guess the input's path when it was queued); None: the build reads it.
    reading: InputReading | None = None


@dataclass(frozen=True)
class BuildInputs(BuildRequest):
    """The request and what the sources gave for it: everything the stages read besides the state
    (made once per build by ``ContextBuilder``; ``query_vector`` and ``reading`` are then the ones
    the build uses)."""

    profile: UserProfile = field(default_factory=UserProfile)
    facts: tuple[Fact, ...] = ()  # keyed statements the user made earlier in the session
    overrides: tuple[tuple[str, str], ...] = ()  # (earlier input text, node chosen by the user)
    tools: tuple[ToolSpec, ...] = ()
    tool_signals: ToolSignals = field(default_factory=ToolSignals)  # what the plan's tool filter reads besides the intent
    # The session's tasks as the build sees them (app.core.tasks.stack): the stack, the running streams'
    # output so far, and the id a task-mode input's new task gets.
    tasks: TaskInputs = field(default_factory=TaskInputs)
    llm_output: Any = None
    llm_status: str = "skipped"
    system_prompt: str = ""  # the user's standing instruction for the session ("" when none)
    other_sessions: int = 0  # how many other sessions the workspace has (the plan's recall scope reads it)
    ablate: tuple[str, ...] = ()  # mechanisms an evaluation closed (``types.Ablation``) or recall channels off
    tuning: tuple[tuple[str, float], ...] = ()  # recall weights an evaluation set (``RecallRequest.tuning``)
    # The branch summaries on offer (root node → level → summary; ``pipeline/summary_items``).
    summaries: Offered = field(default_factory=dict)
    detail: Detail = field(default_factory=Detail)  # the progressive detail the user set (``pipeline/detail``)

    @classmethod
    def of(cls, request: BuildRequest, **given: Any) -> BuildInputs:
        """The inputs of ``request`` with what the sources ``given``."""
        return cls(**{f.name: getattr(request, f.name) for f in fields(BuildRequest)} | given)


#: Runs the turn's tools once intent and plan are known (concurrently with recall): the live round,
#: or the recorded one fed back (``app.core.engine.tools.ToolService``).
ToolStep = Callable[[SessionState, BuildInputs, Intent, ContextPlan], Awaitable[ToolRound]]


class BuildSources(Protocol):
    """Everything a build reads besides the session state and the request (see the module doc)."""

    # -- recomputed on replay as they are live

    @property
    def index(self) -> SearchPort | None:
        """The search index the vector, full-text and memory channels query (None: none)."""
        ...

    async def run_blocking(self, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        """``fn(*args, **kw)`` off the event loop (an index query)."""
        ...

    async def query_vector(self, text: str) -> Sequence[float] | None:
        """The embedding of the input's text (None without an embedder)."""
        ...

    async def vectors(self, ids: Sequence[str]) -> Mapping[str, Sequence[float] | np.ndarray]:
        """The stored vectors of these messages (routing compares the input with recent turns)."""
        ...

    def profile(self, state: SessionState) -> UserProfile: ...

    def facts(self, state: SessionState) -> tuple[Fact, ...]: ...

    def overrides(self, state: SessionState) -> tuple[tuple[str, str], ...]:
        """The user's routing corrections in force: (earlier input text, node chosen)."""
        ...

    def topics(self) -> TopicSearch | None:
        """The topic channel's search (None: no topic channel)."""
        ...

    async def outside_notes(self, state: SessionState, ids: Sequence[str]) -> list[NoteView]:
        """Other sessions' messages among ``ids`` as notes of ``state`` (workspace recall)."""
        ...

    def ablate(self) -> tuple[str, ...]:
        """The mechanisms an evaluation closed (``app.core.types.Ablation``) and recall channels off."""
        ...

    def tuning(self) -> tuple[tuple[str, float], ...]:
        """The recall weights an evaluation set in place of the strategy's (``RecallRequest.tuning``)."""
        ...

    # -- observations of the outside and the user's choices: live now, as recorded on replay

    def limits(self, state: SessionState) -> tuple[int, int] | None:
        """(context size, answer reserve) the build fits into (None: the builder's own)."""
        ...

    async def tasks(self, state: SessionState) -> TaskInputs:
        """The session's task stack as the build sees it."""
        ...

    async def llm_intent(self, text: str, fast: Callable[[], Intent]) -> LlmSignal:
        """The chat model's intent JSON for ``text``: asked for when the fast intent (``fast()``:
        from the input's reading, its vector and the running tasks; inferred only when needed) is
        unsure, or as recorded."""
        ...

    def tools(self) -> tuple[tuple[ToolSpec, ...], ToolStep | None]:
        """The tool specs the plan sees and the step that runs (or feeds back) the turn's tools."""
        ...

    async def tool_signals(self, state: SessionState, query_vector: Sequence[float] | None) -> ToolSignals:
        """What the plan's tool filter reads besides the intent: the request's similarity to each
        tool's description and the session's tool history."""
        ...

    def system_prompt(self, state: SessionState) -> str: ...

    def other_sessions(self, state: SessionState) -> int: ...

    def summaries(self, state: SessionState) -> Offered:
        """The branch summaries on offer (root node → level → summary)."""
        ...

    def detail(self) -> Detail: ...

    def channels(self) -> Mapping[str, ChannelRun]:
        """Index channels as observed, used instead of being run (live: none)."""
        ...
