"""Core data types: the structured context model of DESIGN.md §4 and the session graph records.

Every type here is a pydantic model or a ``StrEnum``; they are what the store persists, what
export/import writes, and what the engine passes around. Field names follow DESIGN.md §4 and
../shared/seeds/002 exactly, so an exported session reads as that document describes.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from enum import StrEnum
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

SCHEMA_VERSION: Literal["1.1"] = "1.1"  # 1.1: memory objects and topics in ``pcm``; 1.0 still imports


def new_id() -> str:
    """Return a fresh opaque identifier (uuid4 hex)."""
    return uuid.uuid4().hex


def utc_now() -> str:
    """Return the current UTC time as an ISO 8601 string with microseconds and a 'Z' suffix."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def json_diff(recorded: Any, replayed: Any, path: str = "") -> list[str]:
    """Paths where two JSON-like values differ (empty when identical), e.g. ``.a[2].b: 1 != 2``."""
    if type(recorded) is not type(replayed):
        return [f"{path or '.'}: {recorded!r} != {replayed!r}"[:300]]
    if isinstance(recorded, dict):
        out: list[str] = []
        for key in sorted(set(recorded) | set(replayed)):
            if key not in recorded or key not in replayed:
                out.append(f"{path}.{key}: missing on one side")
            else:
                out.extend(json_diff(recorded[key], replayed[key], f"{path}.{key}"))
        return out
    if isinstance(recorded, list):
        if len(recorded) != len(replayed):
            return [f"{path}: {len(recorded)} items != {len(replayed)} items"]
        out = []
        for i, (a, b) in enumerate(zip(recorded, replayed)):
            out.extend(json_diff(a, b, f"{path}[{i}]"))
        return out
    return [] if recorded == replayed else [f"{path}: {recorded!r} != {replayed!r}"[:300]]


class _Model(BaseModel):
    """Base for the exchange types: unknown keys are kept, so newer documents survive a round trip."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


#: Where a stored message or memory came from: "" this app (the user typing, its own model and
#: rules), "imported" (a document read by ``pcm import``), "agent" (an MCP client's ``record_event``
#: or profile statement). Kept beside the record by the store, never part of the exchange document
#: (an import says where everything in it came from, whatever the document claims).
Origin = Literal["", "imported", "agent"]


class _Provenance(_Model):
    """A record with an origin (``Origin``), set by the store and by the code that writes it in,
    never by a document: a private attribute, so no exchange document carries or sets it."""

    _origin: Origin = PrivateAttr(default="")

    @property
    def origin(self) -> Origin:
        """"" when this app made it; "imported" or "agent" when it is outside text."""
        return self._origin

    def with_origin(self, origin: Origin) -> Self:
        """A copy with ``origin`` ("" for one the user made their own)."""
        copy = self.model_copy()
        copy._origin = origin
        return copy


# --------------------------------------------------------------------------- enums


class Role(StrEnum):
    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


class AuthorKind(StrEnum):
    USER = "user"
    AGENT = "agent"
    TOOL = "tool"
    SYSTEM = "system"


class TaskStatus(StrEnum):
    PENDING = "pending"
    ACTIVE = "active"
    BLOCKED = "blocked"
    COMPLETE = "complete"
    FAILED = "failed"


class EvidenceType(StrEnum):
    RAG_DOC = "rag_doc"
    TOOL_RESULT = "tool_result"
    SKILL_OUTPUT = "skill_output"
    LLM_OUTPUT = "llm_output"
    USER_INPUT = "user_input"
    ENV_EVENT = "env_event"
    MEMORY = "memory"
    OTHER = "other"


class SourceKind(StrEnum):
    RAG = "rag"
    TOOL = "tool"
    SKILL = "skill"
    LLM = "llm"
    USER = "user"
    SYSTEM = "system"
    ENV = "env"


class BlockType(StrEnum):
    INSTRUCTION = "instruction"
    CONVERSATION = "conversation"
    STATE = "state"
    PLAN = "plan"
    EVIDENCE = "evidence"
    MEMORY = "memory"
    SUMMARY = "summary"


class Priority(StrEnum):
    MUST = "must"
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class NodeKind(StrEnum):
    TURN = "turn"
    TASK = "task"
    ENV = "env"
    MEMORY = "memory"
    ARTIFACT = "artifact"


class EdgeKind(StrEnum):
    CONTINUES = "continues"
    REFERENCES = "references"
    DERIVED_FROM = "derived_from"
    SPAWNED = "spawned"
    RESOLVES = "resolves"
    MERGES = "merges"


class ModelRole(StrEnum):
    CHAT = "chat"
    EMBED = "embed"


class Ablation(StrEnum):
    """A mechanism an evaluation switches off (``EngineConfig.ablate``; seed 000 §8.6: one at a
    time, the rest unchanged), declared here once with what closing it does (``CLOSES``); the
    build's stages read the names (the pipeline, the prompt compiler, the summary offer). The app
    never sets them."""

    ROUTING = "routing"
    FENCES = "fences"
    PROGRESS = "progress"
    TEMPLATE = "template"
    ENV = "env"
    GATE = "gate"
    COMPRESSION = "compression"
    MEMORY = "memory"
    TOPIC = "topic"
    SUMMARIES = "summaries"
    DEADLINES = "deadlines"


#: What closing each mechanism does to a build.
CLOSES: dict[Ablation, str] = {
    Ablation.ROUTING: "anchor routing: every input continues the latest turn (no shares over branch trees)",
    Ablation.FENCES: "evidence boundaries: outside text enters without its fence (no header, no <<< >>>)",
    Ablation.PROGRESS: "progress extraction: no task stack, task results or running tasks; the dialogue only",
    Ablation.TEMPLATE: "structured template: the lines spliced plainly (no sections, day labels or edge order)",
    Ablation.ENV: "environment channel: no environment event reaches recall or the intent",
    Ablation.GATE: "relevance gate: every fused candidate may enter (threshold 0, no 'insufficient' note)",
    Ablation.COMPRESSION: "query-aware compression: a long evidence is cut from its start instead",
    Ablation.MEMORY: "memory channel: asks for nothing (no memory objects recalled)",
    Ablation.TOPIC: "topic channel: asks for nothing",
    Ablation.SUMMARIES: "summaries: no branch summary is offered",
    # not a mechanism: an evaluation's contexts do not depend on how loaded the machine is
    Ablation.DEADLINES: "recall time limit: every channel is waited for",
}

#: The mechanisms an evaluation closes one at a time (every ``Ablation`` but ``DEADLINES``).
MECHANISMS: tuple[Ablation, ...] = tuple(a for a in Ablation if a is not Ablation.DEADLINES)


# --------------------------------------------------------------------------- structured context model


class Author(_Model):
    kind: AuthorKind
    id: str = ""


class Ref(_Model):
    """A pointer from a block or message to an evidence, optionally to a part of it."""

    evidence_id: str
    selector: str = ""


class Message(_Provenance):
    """One entry of ``session.messages``; ``role=assistant`` messages are the turn's final answers.
    ``origin`` (not exported) says whether the app user typed it here or it came from outside."""

    message_id: str = Field(default_factory=new_id)
    role: Role
    content: str
    author: Author | None = None
    at: str = Field(default_factory=utc_now)
    refs: list[Ref] = Field(default_factory=list)
    turn_id: str | None = None


class MessageIndexRange(_Model):
    from_: int = Field(0, alias="from")
    to: int = 0


class Summary(_Model):
    content: str = ""
    updated_at: str = ""
    message_index_range: MessageIndexRange = Field(default_factory=MessageIndexRange)


class SummaryCovers(_Model):
    """The turns a summary covers: the first and last message index in the session, and the ids."""

    first: int = 0
    last: int = 0
    ids: list[str] = Field(default_factory=list)


class SummaryRecord(_Model):
    """A summary of a session, a branch (a root's lane), a task or a topic at one level
    (DESIGN.md §4, seed 004 §3–§4). Updated, not regenerated: a new record is ``based_on`` the
    previous one of its subject and level (which gets ``valid_to``), and keeps its ``parts``
    (one per update: ``{"first", "last", "brief", "standard", "detailed"}``), so older parts can
    be shown coarser (temporal compression) and a part can be expanded to its turns."""

    summary_id: str = Field(default_factory=new_id)
    subject: Literal["session", "branch", "task", "topic"]
    subject_id: str
    level: Literal["brief", "standard", "detailed"]
    content: str
    covers: SummaryCovers = Field(default_factory=SummaryCovers)
    parts: list[dict[str, Any]] = Field(default_factory=list)
    provider: str = "extractive"
    model: str = ""
    tokens: int = 0
    based_on: str | None = None
    created_at: str = Field(default_factory=utc_now)
    valid_to: str | None = None
    cache_key: str = ""
    _json: dict[str, Any] | None = PrivateAttr(default=None)

    def as_json(self) -> dict[str, Any]:
        """The record as JSON data, made once: a record is not changed once made, and every build
        that is offered a branch's summaries keeps them in its record (``covers.ids`` and ``parts``
        grow with the branch: thousands of entries at 10,000 turns)."""
        if self._json is None:
            self._json = self.model_dump(mode="json")
        return self._json


class Task(_Model):
    task_id: str = Field(default_factory=new_id)
    name: str
    depends_on: list[str] = Field(default_factory=list)
    status: TaskStatus = TaskStatus.PENDING
    result_evidence_ids: list[str] = Field(default_factory=list)
    error: str = ""
    parent_task_id: str | None = None
    acceptance: str = ""
    result_summary: str = ""
    created_at: str = Field(default_factory=utc_now)
    updated_at: str = Field(default_factory=utc_now)
    # Where the task lives in the session (app.core.tasks.stack): the turn that spawned it, its graph
    # node, its progress in [0, 1] and short progress notes ("waiting for 2 subtasks", ...).
    turn_id: str | None = None
    node_id: str | None = None
    progress: float = 0.0
    notes: list[str] = Field(default_factory=list)
    # The resident agent (app.core.tasks.steering): a step's place among its parent's steps
    # (1-based; 0: not a step), the amendments that joined the task's constraints, the evidence
    # holding the output kept when it was paused or restarted, whether the user paused it (its
    # status is then "blocked"), how often it was run (a failed step runs once more) and the turns
    # that ran it, and the env events that reached it while it ran (its next step's context shows them).
    step: int = 0
    constraints: list[str] = Field(default_factory=list)
    checkpoint_id: str | None = None
    paused: bool = False
    attempts: int = 0
    runs: list[str] = Field(default_factory=list)
    events: list[str] = Field(default_factory=list)


class TodoList(_Model):
    tasks: list[Task] = Field(default_factory=list)


class TaskState(_Model):
    todo_list: TodoList = Field(default_factory=TodoList)


class Provider(_Model):
    kind: Literal["builtin", "mcp", "other"] = "builtin"
    name: str = ""
    uri: str = ""


class ToolCall(_Model):
    tool_call_id: str = Field(default_factory=new_id)
    task_id: str | None = None
    turn_id: str | None = None
    tool: str
    provider: Provider = Field(default_factory=Provider)
    type: Literal["tool", "skill", "function_call"] = "tool"
    called_at: str = Field(default_factory=utc_now)
    args_digest: dict[str, Any] = Field(default_factory=dict)
    status: Literal["success", "timeout", "forbidden", "not_found", "error"] = "success"
    duration_ms: float = 0.0
    result_evidence_ids: list[str] = Field(default_factory=list)


class ToolState(_Model):
    tool_calls: list[ToolCall] = Field(default_factory=list)


class ModelUsage(_Model):
    """One model call: what ran, with which parameters, how many tokens, how fast."""

    model_usage_id: str = Field(default_factory=new_id)
    task_id: str | None = None
    turn_id: str | None = None
    stage: str = "answer"  # route | plan | intent | tool_call | answer | embed | other
    provider: str = "llama.cpp"
    model: str = ""
    params: dict[str, Any] = Field(default_factory=dict)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    first_token_latency_ms: float | None = None
    latency_ms: float = 0.0
    status: Literal["success", "error", "cancelled"] = "success"
    error: str = ""
    at: str = Field(default_factory=utc_now)
    # Which provider answered and what it cost (issue 15): ``provider`` is the provider's id,
    # ``cost`` its price for this call (0 for a local model), ``off_machine`` whether the prompt
    # left this machine, ``notes`` what the provider registry did on the way (a fallback, a
    # retry, a refused spending limit), one line each.
    cost: float = 0.0
    off_machine: bool = False
    notes: list[str] = Field(default_factory=list)


class EvidenceSource(_Model):
    kind: SourceKind
    name: str = ""
    uri: str = ""


class Evidence(_Model):
    """The single entry point for every source; blocks and messages point here by id.

    ``valid_to`` is set when a newer fact supersedes this one; the record is never deleted.
    """

    evidence_id: str = Field(default_factory=new_id)
    type: EvidenceType
    source: EvidenceSource
    content: str = ""
    confidence: float = 1.0
    metadata: dict[str, Any] = Field(default_factory=dict)
    links: dict[str, Any] = Field(default_factory=dict)
    valid_from: str = Field(default_factory=utc_now)
    valid_to: str | None = None


class ContextBlock(_Model):
    block_id: str = Field(default_factory=new_id)
    block_type: BlockType
    priority: Priority
    token_estimate: int = 0
    content: str = ""
    refs: list[Ref] = Field(default_factory=list)
    turn_id: str | None = None


class Agent(_Model):
    agent_id: str
    name: str = ""
    version: str = ""


class Actor(_Model):
    user_id: str = ""
    user_role: str = ""
    agent: Agent | None = None


class Meta(_Model):
    locale: str = ""
    created_at: str = ""
    updated_at: str = ""
    actor: Actor | None = None


# --------------------------------------------------------------------------- graph and environment


class GraphNode(_Model):
    """A node of the session graph. ``ref_id`` names the record it stands for (turn, task, ...)."""

    node_id: str = Field(default_factory=new_id)
    kind: NodeKind
    label: str = ""
    ref_id: str | None = None
    attrs: dict[str, Any] = Field(default_factory=dict)
    x: float | None = None
    y: float | None = None
    pinned: bool = False  # the user placed it; layout must keep the position
    created_at: str = Field(default_factory=utc_now)


class GraphEdge(_Model):
    edge_id: str = Field(default_factory=new_id)
    src: str
    dst: str
    kind: EdgeKind
    attrs: dict[str, Any] = Field(default_factory=dict)
    created_at: str = Field(default_factory=utc_now)


class EnvEvent(_Model):
    """A change in the environment: a file edited, a feed item, a polled value."""

    event_id: str = Field(default_factory=new_id)
    kind: Literal["file", "feed", "api", "other"]
    source: str  # watched folder, feed URL, endpoint
    uri: str = ""  # the file path or item link
    title: str = ""
    content: str = ""
    payload: dict[str, Any] = Field(default_factory=dict)
    at: str = Field(default_factory=utc_now)


MemoryType = Literal["fact", "preference", "prohibition", "permission", "decision", "commitment", "event",
                     "summary", "note"]


class MemoryFragment(_Provenance):
    """A memory object (DESIGN.md §4, after A-Mem): what was learned, from which evidence, valid when.

    Bi-temporal: ``valid_from``/``valid_to`` is when it was true (a newer contradicting fact closes
    the older one), ``recorded_at`` when it was learned. Nothing is deleted: a closed, merged or
    revoked memory keeps its row with ``valid_to`` (and ``superseded_by`` / ``revoked_at``).
    ``scope`` "workspace" memories (the user's profile and facts about the user) apply to every
    session; "session" ones belong to the session they came from (recall with workspace scope still
    finds them). ``key``/``value`` name a fact's subject and its value ("home" = "Porto").
    ``revisions`` keeps earlier context/tags a link or an edit replaced.

    ``origin`` and ``accepted_at`` are provenance the store keeps beside the record (never
    exported): a memory from outside (an import, an MCP client) is *pending* until the user
    accepts it (``accepted_at``); until then it speaks for no one (``pending``).
    """

    _accepted_at: str | None = PrivateAttr(default=None)

    fragment_id: str = Field(default_factory=new_id)
    content: str
    keywords: list[str] = Field(default_factory=list)
    importance: float = 0.5
    source_evidence_ids: list[str] = Field(default_factory=list)
    valid_from: str = Field(default_factory=utc_now)
    valid_to: str | None = None
    type: MemoryType = "note"
    context: str = ""
    entities: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    scope: Literal["session", "workspace"] = "session"
    key: str = ""
    value: str = ""
    links: list[dict[str, str]] = Field(default_factory=list)  # [{"memory_id", "reason"}]
    recorded_at: str = Field(default_factory=utc_now)
    superseded_by: str | None = None
    closed_at: str | None = None  # when we learned it was closed (``valid_to`` is when it stopped being true)
    revoked_at: str | None = None
    pinned: bool = False
    access_count: int = 0
    last_accessed_at: str | None = None
    extractor: str = "rules"
    revisions: list[dict[str, Any]] = Field(default_factory=list)

    @property
    def accepted_at(self) -> str | None:
        """When the user accepted this memory from outside (None: not accepted, or made here)."""
        return self._accepted_at

    @property
    def pending(self) -> bool:
        """From outside and not accepted by the user: never the user's profile, never shared."""
        return bool(self._origin) and self._accepted_at is None

    def accepted(self, at: str) -> MemoryFragment:
        """A copy the user accepted at ``at`` (its origin kept)."""
        copy = self.model_copy()
        copy._accepted_at = at
        return copy

    def index_text(self) -> str:
        """The text the search index embeds for this memory (content, then its keywords)."""
        return f"{self.content}\nkeywords: {', '.join(self.keywords)}" if self.keywords else self.content


class SessionGraphData(_Model):
    nodes: list[GraphNode] = Field(default_factory=list)
    edges: list[GraphEdge] = Field(default_factory=list)


class TopicMention(_Model):
    """A message of the session that mentions a topic, by which term (said in the message) and rule."""

    message_id: str = Field(min_length=1)
    term: str = Field(min_length=1)
    rule: str = ""


class TopicDoc(_Model):
    """A topic the session's messages mention (schema 1.1): its id, name, aliases (surface form →
    the rule that admitted it) and the session's mentions of it."""

    topic_id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    aliases: dict[str, str] = Field(default_factory=dict)
    mentions: list[TopicMention] = Field(default_factory=list)


class TurnDoc(_Model):
    """A turn of the session as the store keeps it (schema 1.1, optional): its status, the node
    it was anchored to and its ``TurnRecord`` (intent, plan, build, timings, output), so an
    exported session's turns keep what they saw."""

    turn_id: str = Field(min_length=1)
    input_message_id: str = Field(min_length=1)
    answer_message_id: str | None = None
    status: str = ""
    anchor_node_id: str | None = None
    created_at: str = ""
    record: dict[str, Any] | None = None


class PcmExtensions(_Model):
    """What PCM Canvas adds to the exchange document so a session round-trips completely."""

    title: str = ""
    graph: SessionGraphData = Field(default_factory=SessionGraphData)
    env_events: list[EnvEvent] = Field(default_factory=list)
    memory: list[MemoryFragment] = Field(default_factory=list)
    topics: list[TopicDoc] = Field(default_factory=list)
    turns: list[TurnDoc] = Field(default_factory=list)


class SessionDoc(_Model):
    session_id: str = Field(min_length=1)
    messages: list[Message] = Field(min_length=1)
    summary: Summary | None = None
    task_state: TaskState
    tool_state: ToolState = Field(default_factory=ToolState)
    model_usage: list[ModelUsage] = Field(default_factory=list)


class ContextDocument(_Model):
    """The structured context model (schema_version 1.1; a 1.0 document still imports): the
    export/import format of a session."""

    schema_version: Literal["1.0", "1.1"] = SCHEMA_VERSION
    meta: Meta | None = None
    session: SessionDoc
    evidences: dict[str, Evidence]
    context_blocks: list[ContextBlock]
    pcm: PcmExtensions = Field(default_factory=PcmExtensions)
