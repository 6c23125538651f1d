"""The structured content each MCP tool returns, as pydantic models: the SDK publishes each as the
tool's ``outputSchema`` and checks every result against it before it leaves the server
(``Annotated[CallToolResult, Model]`` in ``server.py``). The fields are what ``service.py``
returns; a result that disagrees is a bug of this server, never sent."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class SnippetItem(BaseModel):
    evidence_id: str
    session_id: str
    turn_id: str | None
    role: str
    at: str = Field(description="ISO 8601 time of the message")
    text: str
    score: float


class Snippets(BaseModel):
    query: str
    strategy: str
    snippets: list[SnippetItem] = Field(description="What fits within maxTokens, best first")
    matched: int = Field(description="How many stored records matched the query (with expandContext, and their "
                                     "partners); more than len(snippets) when maxTokens cut the rest")
    fits: bool = Field(description="False when records matched but not even the best fits within maxTokens")


class SummaryBlock(BaseModel):
    session_id: str
    block_type: str
    evidence_ids: list[str]
    content: str


class ContextSummary(BaseModel):
    query: str
    level: str
    sessions: list[str]
    blocks: list[SummaryBlock]
    fits: bool = Field(description="False when relevant lines were found but none fits within maxTokens")


class ProviderSaved(BaseModel):
    provider: dict[str, Any]


class EventQueued(BaseModel):
    session_id: str
    message_id: str
    evidence_id: str
    queued: bool


class ProfileMemory(BaseModel):
    memory_id: str
    type: str
    content: str


class ProfileAdded(BaseModel):
    session_id: str
    added: list[ProfileMemory]
    held: list[ProfileMemory] = Field(description="Statements already held: not written again")
    closed: list[ProfileMemory] = Field(description="Memories the new ones contradict: closed, kept")


class FileAttached(BaseModel):
    session_id: str
    evidence_id: str
    node_id: str | None
    name: str
    path: str
    version: int
    changed: bool = Field(description="False when the same text was attached before: nothing recorded")
    lines: int
    bytes: int


class MemoryItem(BaseModel):
    evidence_id: str
    kind: str = Field(description="memory or env (a file, feed item or API value)")
    session_id: str | None
    at: str
    content: str
    score: float


class Memories(BaseModel):
    memories: list[MemoryItem]


class FactItem(BaseModel):
    key: str
    value: str
    valid_from: str
    valid_to: str | None = Field(description="When a later statement replaced it; null while it holds")
    evidence_id: str | None
    session_id: str


class Facts(BaseModel):
    facts: list[FactItem]


class SessionItem(BaseModel):
    session_id: str
    title: str | None
    created_at: str | None
    opened_at: str | None
    archived_at: str | None
    turn_count: int | None
    message_count: int | None


class Sessions(BaseModel):
    sessions: list[SessionItem]


class Status(BaseModel):
    sessions: int
    turns: int
    indexed_records: int
    chat_model: str | None
    token_counter: str
    pending_events: int


class TaskStep(BaseModel):
    step: int = Field(description="Its number in the task's plan, from 1")
    task_id: str
    name: str
    acceptance: str = Field(description="When the step is done")
    state: str = Field(description="pending, active, paused, complete or failed")
    depends_on: list[int] = Field(description="The numbers of the steps it needs first")
    attempts: int
    result: str = Field(description="A summary of its output once complete")
    error: str


class TaskReport(BaseModel):
    session_id: str
    task_id: str
    name: str
    state: str = Field(description="pending, active, paused, complete or failed")
    status: str
    paused: bool
    constraints: list[str] = Field(description="What amendments added to the task")
    error: str = Field(description="Why it failed; empty otherwise")
    result: str = Field(description="A summary of the result once complete")
    result_evidence_ids: list[str]
    checkpoint_id: str | None = Field(description="The evidence holding the work kept at the last pause")
    card: str = Field(description="The line the task's card shows")
    updated_at: str
    steps: list[TaskStep]


class TaskStatus(TaskReport):
    result_text: str = Field(description="The whole result once the task is complete; empty before")


class TaskSteered(TaskReport):
    effect: str = Field(description="amend: where it takes effect (next_step, restart, on_resume); else empty")
