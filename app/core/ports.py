"""Ports: the interfaces the engine needs from the outside world (models, stores).

``SessionStore`` is everything the engine needs of the system of record (``app.store.SqliteStore``
implements it) and ``SearchIndex`` of the search index (``app.store.index.SearchIndex``).
Adapters in ``app.llm`` and ``app.store`` implement them; scripted fakes in ``app.llm.fakes``
implement the model ports for fast unit tests. Model ports are *blocking* and are only ever called
on their own single-worker executor (see ``app.core.runtime.executors``); the engine awaits them.
"""

from __future__ import annotations

import ipaddress
import itertools
import threading
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable
from urllib.parse import urlsplit

from pydantic import BaseModel, Field

from app.core.types import (
    Author,
    ContextBlock,
    EnvEvent,
    Evidence,
    GraphEdge,
    GraphNode,
    MemoryFragment,
    Message,
    ModelUsage,
    SessionGraphData,
    SummaryRecord,
    Task,
    ToolCall,
)

if TYPE_CHECKING:
    import numpy as np


class CancelToken:
    """A thread-safe flag a long job polls; ``cancel()`` makes it stop at its next check."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()


class GenerationParams(BaseModel):
    """Sampling parameters recorded with every call (so a turn can be replayed)."""

    max_tokens: int = 256
    temperature: float = 0.2
    top_p: float = 0.95
    top_k: int = 40
    repeat_penalty: float = 1.1
    seed: int = 0
    stop: list[str] = Field(default_factory=list)
    # The provider asked first (a session's own choice; "" keeps the providers' order). A chat
    # model that is no provider registry ignores it; the registry falls back as usual.
    provider: str = ""


class SessionGeneration(BaseModel):
    """A session's own generation settings; None leaves the app's default. ``system_prompt`` is
    the user's standing instruction, put in every context of the session (recorded per build)."""

    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    max_tokens: int | None = Field(default=None, ge=64, le=8192)
    system_prompt: str = Field(default="", max_length=4000)
    provider: str = Field(default="", max_length=40)  # the provider that answers this session first

    def params(self, base: GenerationParams) -> GenerationParams:
        """``base`` with this session's temperature, answer length and provider where set."""
        update: dict[str, Any] = {}
        if self.temperature is not None:
            update["temperature"] = self.temperature
        if self.max_tokens is not None:
            update["max_tokens"] = self.max_tokens
        if self.provider:
            update["provider"] = self.provider
        return base.model_copy(update=update) if update else base


class ChatResult(BaseModel):
    """What a finished (or stopped) chat call returns."""

    text: str
    usage: ModelUsage
    finish_reason: str = "stop"  # stop | length | cancelled | error
    parsed: Any = None  # the parsed JSON value when a json_schema was given and the text parsed


ChatMessage = dict[str, str]  # {"role": ..., "content": ...}
TokenCallback = Callable[[str], None]


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens the way the active model (or a declared estimate) does."""

    name: str

    def count(self, text: str) -> int: ...


@runtime_checkable
class ChatTokenCounter(TokenCounter, Protocol):
    """A counter that can also count a whole chat prompt (the template's own tokens included),
    so the pipeline can prove a prompt fits the model's context before sending it."""

    def count_chat(self, messages: Sequence[ChatMessage]) -> int: ...


@runtime_checkable
class ChatModel(Protocol):
    """A local chat model. Blocking; call it on the ``llm`` executor only."""

    name: str
    context_size: int

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` by the model's own tokenizer (no special tokens added)."""
        ...

    def count_chat_tokens(self, messages: Sequence[ChatMessage]) -> int:
        """Tokens of the full prompt the chat template makes of ``messages``."""
        ...

    def chat(
        self,
        messages: Sequence[ChatMessage],
        *,
        params: GenerationParams | None = None,
        stage: str = "answer",
        json_schema: dict[str, Any] | None = None,
        on_token: TokenCallback | None = None,
        cancel: CancelToken | None = None,
    ) -> ChatResult:
        """Generate a reply, calling ``on_token`` with each piece as it is produced.

        With ``json_schema`` the output is constrained by a grammar made from the schema and
        ``ChatResult.parsed`` holds the parsed value. ``cancel`` stops generation within one token
        (``finish_reason == "cancelled"``). Never raises for a cancelled call.
        """
        ...


ProviderType = Literal["local", "external"]


class ModelInfo(BaseModel):
    """What a chat provider says about itself (shown in settings, recorded with its calls)."""

    provider_id: str
    provider_name: str
    kind: str  # llama.cpp | openai | ollama | fake
    type: ProviderType
    model: str
    context_size: int
    endpoint: str = ""  # "" for a model in this process
    off_machine: bool = False  # the endpoint is not this machine: prompts leave it
    json_schema: bool = False  # can constrain output by a JSON schema
    price_in_per_1k: float = 0.0
    price_out_per_1k: float = 0.0


@runtime_checkable
class ChatProvider(ChatModel, Protocol):
    """A ``ChatModel`` that can also say who it is, whether it can answer now and what a call costs
    (seed 004 §4.1). Implementations: the in-process llama.cpp model and OpenAI-compatible HTTP
    endpoints (``app.llm.providers``). Blocking, like ``ChatModel``.

    ``chat`` raises ``ProviderError`` when the call fails before any token was streamed
    (``transient`` when trying again may help); a failure after the first token is returned as
    ``finish_reason == "error"`` with what streamed so far. ``usage.provider`` is ``id``.
    """

    id: str
    type: ProviderType

    def is_available(self) -> bool:
        """Whether the provider can answer now (a loaded model, a reachable endpoint); never raises."""
        ...

    def max_tokens(self) -> int:
        """The model's context window in tokens (prompt and answer together)."""
        ...

    def estimate_cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        """The price of a call of that size (0 for a local model)."""
        ...

    def model_info(self) -> ModelInfo: ...


@runtime_checkable
class Embedder(Protocol):
    """A sentence embedder. Blocking; call it on the ``embed`` executor only."""

    name: str
    dim: int

    def embed(self, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        """Return a float32 array of shape (len(texts), dim), rows L2-normalised."""
        ...


class LocalFile(BaseModel):
    """A local text file as a ``FileReader`` read it: its absolute path (symbolic links
    resolved), its size in bytes, when it was last modified (ISO 8601, UTC), its text (decoded;
    an HTML file's visible text), the encoding it was read in and how many hidden HTML elements
    were left out."""

    path: str
    size: int
    text: str
    modified: str = ""
    encoding: str = "utf-8"
    hidden_removed: int = 0
    # A document read into parts (PDF, Word, a spreadsheet, Markdown, code...): ``format``,
    # ``label``, ``parts`` (spans of ``text`` with their selector, heading path and hash) and
    # facts such as ``pages``; what an env event keeps as ``payload["document"]``.
    document: dict[str, Any] | None = None


#: Progress of a long read: ``{"done", "total", "unit"}`` (pages, paragraphs, sheets).
ReadProgress = Callable[[dict[str, Any]], None]


class FileReader(Protocol):
    """Reads a file the user chose (``app.sensors.attach.read_attachment``): blocking, run it in a
    worker thread. Raises ``AttachError`` with a plain reason when the file is missing, a
    folder, not a regular file, binary, or larger than ``max_bytes`` (never read then).
    ``on_progress`` hears how a long document's reading goes; ``cancelled()`` true stops it."""

    def __call__(self, path: str, max_bytes: int, *, on_progress: ReadProgress | None = None,
                 cancelled: Callable[[], bool] | None = None) -> LocalFile: ...


class ServerTool(BaseModel):
    """A tool as a tool server lists it: its name there, title, description, input JSON schema and
    the server's hints (annotations): ``read_only`` (it changes nothing), ``destructive``,
    ``open_world`` (it reaches outside: the web, other people)."""

    server: str
    name: str
    title: str = ""
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=dict)
    read_only: bool = False
    destructive: bool = True
    open_world: bool = True


ServerStatus = Literal["starting", "ready", "failed", "stopped"]


class ServerState(BaseModel):
    """A configured tool server as it is now: how it is reached (``transport``, ``where``: the
    command line or the URL), its status and last error (one line), the tools it lists, how often
    it was restarted, and the limits its calls run under."""

    name: str
    transport: Literal["stdio", "http"] = "stdio"
    where: str = ""
    status: ServerStatus = "starting"
    error: str = ""
    tools: int = 0
    restarts: int = 0
    since: str = ""
    timeout_s: float = 30.0
    result_chars: int = 20_000


class ServerResultPart(BaseModel):
    """One block of a tool server's result, as text: the text itself, a resource's text, or a
    line that stands for what cannot be shown as text (an image, audio, a binary resource)."""

    kind: Literal["text", "image", "audio", "resource", "link", "structured"] = "text"
    text: str
    uri: str = ""
    mime: str = ""


class ServerCallResult(BaseModel):
    """What a tool server answered to one call (``is_error``: the tool itself reported failure)."""

    parts: list[ServerResultPart] = Field(default_factory=list)
    is_error: bool = False


@runtime_checkable
class ToolServers(Protocol):
    """The tool servers the user configured (MCP servers: ``app.toolservers``), started with the
    app and kept connected. The servers run off the engine's loop; these methods may be called
    from it. ``call_tool`` raises ``ToolServerError`` (one line naming the server) when the server
    is down, crashes or hangs past ``timeout_s``; it never blocks the caller's loop."""

    def states(self) -> list[ServerState]: ...

    def tools(self) -> list[ServerTool]:
        """The tools of the servers that are ready, in server order."""
        ...

    def watch(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` (from any thread) whenever a server's state or tools change."""
        ...

    async def call_tool(self, server: str, tool: str, arguments: dict[str, Any],
                        timeout_s: float) -> ServerCallResult: ...

    async def settled(self, timeout_s: float) -> bool:
        """Wait until every enabled server is ready or failed (at most ``timeout_s``); True when so."""
        ...

    async def reload(self) -> None:
        """Read the servers' settings again: start added ones, stop removed ones, restart changed ones."""
        ...

    def confirm_each_call(self) -> bool:
        """Whether every call of a tool that changes things asks (a setting kept with the
        servers'), rather than once per tool and session."""
        ...

    async def close(self) -> None: ...


def is_loopback(url: str) -> bool:
    """Whether ``url``'s host is this machine (``localhost`` or a loopback address; no DNS lookup):
    what an endpoint must be for nothing to leave the machine (``ModelInfo.off_machine``, a tool
    server's URL). A name under ``.localhost`` is not taken on trust: what it resolves to is up to
    the resolver (a hosts file or DNS may send it anywhere)."""
    host = (urlsplit(url).hostname or "").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class WordTokenCounter:
    """The evaluation yardstick: ceil(1.3 × words), as in ../shared/data/README.md."""

    name = "words"

    def count(self, text: str) -> int:
        words = len(text.split())
        return -(-words * 13 // 10)


class ModelTokenCounter:
    """Adapts a ``ChatModel``'s tokenizer to the ``TokenCounter`` port, with a bounded cache
    (the same turns are counted again in every build that recalls them; an import warms it with
    every turn, so it holds a 100,000-turn history, and when full drops its older half, not all)."""

    def __init__(self, model: ChatModel, *, cache_size: int = 250_000) -> None:
        self._model = model
        self.name = f"model:{model.name}"
        self._cache: dict[str, int] = {}
        self._cache_size = cache_size

    def count(self, text: str) -> int:
        hit = self._cache.get(text)
        if hit is None:
            hit = self._model.count_tokens(text)
            if len(self._cache) >= self._cache_size:  # the older half goes (a dict keeps insertion order)
                for old in list(itertools.islice(self._cache, len(self._cache) // 2)):
                    del self._cache[old]
            self._cache[text] = hit
        return hit

    def count_chat(self, messages: Sequence[ChatMessage]) -> int:
        """Tokens of the prompt the model's chat template makes of ``messages`` (not cached:
        prompts are rarely counted twice)."""
        return self._model.count_chat_tokens(messages)

class SessionStore(Protocol):
    """The system of record as the engine uses it. Blocking; call it on the ``store`` executor only.

    Reads return ``None`` for a missing record; ``transaction()`` makes the enclosed writes atomic.
    """

    def transaction(self) -> AbstractContextManager[None]: ...
    def close(self) -> None: ...
    # sessions, messages and turns
    def create_session(self, title: str = "", session_id: str | None = None) -> str: ...
    def get_session(self, session_id: str) -> dict[str, Any] | None: ...
    def list_sessions(self, *, archived: bool = False) -> list[dict[str, Any]]: ...
    def update_session(self, session_id: str, *, title: str | None = None) -> None: ...
    def search_sessions(self, text: str, *, archived: bool = False) -> list[str]: ...
    def set_session_archived(self, session_id: str, archived: bool) -> None: ...
    def title_untitled_session(self, session_id: str, title: str) -> bool: ...
    def mark_session_opened(self, session_id: str) -> None: ...
    def set_session_generation(self, session_id: str, settings: dict[str, Any]) -> None: ...
    def session_generation(self, session_id: str) -> dict[str, Any]: ...
    def last_used_session_id(self) -> str | None: ...
    def latest_turn_id(self, session_id: str | None = None) -> str | None: ...
    def match_ids(self, kind: str, prefix: str, *, limit: int = 2) -> list[str]: ...
    def get_message(self, message_id: str) -> Message | None: ...
    def record_user_input(self, session_id: str, text: str, *, author: Author | None = None,
                          at: str | None = None) -> tuple[str, Message]: ...
    def add_message(self, session_id: str, message: Message) -> Message: ...
    def list_messages(self, session_id: str) -> list[Message]: ...
    def add_turn(self, session_id: str, turn_id: str, input_message_id: str, *,
                 answer_message_id: str | None = None, status: str = "imported",
                 created_at: str | None = None) -> None: ...
    def set_turn_answer(self, turn_id: str, message: Message) -> Message: ...
    def update_turn(self, turn_id: str, /, **fields: Any) -> dict[str, Any]: ...
    def get_turn(self, turn_id: str) -> dict[str, Any] | None: ...
    def list_turns(self, session_id: str) -> list[dict[str, Any]]: ...
    def save_intent(self, turn_id: str, intent: dict[str, Any]) -> None: ...
    def save_plan(self, turn_id: str, plan: dict[str, Any]) -> None: ...
    def add_context_blocks(self, session_id: str, turn_id: str | None, blocks: Sequence[ContextBlock]) -> Any: ...
    def add_model_usage(self, session_id: str, usage: ModelUsage) -> ModelUsage: ...
    # evidence, tools, environment, memory
    def add_evidence(self, session_id: str, evidence: Evidence) -> Evidence: ...
    def get_evidence(self, evidence_id: str) -> Evidence | None: ...
    def supersede_evidence(self, evidence_id: str, at: str | None = None) -> Evidence: ...
    def list_evidences(self, session_id: str, include_superseded: bool = False) -> list[Evidence]: ...
    def add_tool_call(self, session_id: str, call: ToolCall) -> ToolCall: ...
    def list_tool_calls(self, session_id: str, turn_id: str | None = None) -> list[ToolCall]: ...
    def add_env_event(self, session_id: str, event: EnvEvent) -> EnvEvent: ...
    def list_env_events(self, session_id: str) -> list[EnvEvent]: ...
    def list_memory(self, session_id: str, include_superseded: bool = False) -> list[MemoryFragment]: ...
    def list_memories(self) -> list[tuple[str, MemoryFragment]]: ...
    def add_memories(self, session_id: str, fragments: Sequence[MemoryFragment]) -> list[MemoryFragment]: ...
    def get_memory(self, fragment_id: str) -> MemoryFragment | None: ...
    def memory_session(self, fragment_id: str) -> str: ...
    def messages_by_ids(self, ids: Sequence[str], around: int = 0) -> list[tuple[str, int, Message]]: ...
    def save_memory(self, fragment: MemoryFragment, event: str = "memory.updated") -> MemoryFragment: ...
    def update_memory(self, fragment_id: str, change: Callable[[MemoryFragment], Sequence[MemoryFragment]],
                      event: str = "memory.updated") -> list[MemoryFragment]: ...
    def memory_revision(self) -> int: ...
    def memories_since(self, rev: int) -> tuple[list[tuple[str, MemoryFragment]], int]: ...
    def touch_memories(self, fragment_ids: Iterable[str], at: str | None = None) -> None: ...
    def save_topics(self, topics: Iterable[Any], mentions: Iterable[Any], log: Iterable[dict[str, Any]], *,
                    replace: bool = False) -> None: ...
    def move_topic_mentions(self, topic_id: str, term: str, to_topic: str) -> None: ...
    def add_summary(self, session_id: str, summary: SummaryRecord) -> SummaryRecord: ...
    def list_summaries(self, session_id: str, *, current: bool = True) -> list[SummaryRecord]: ...
    def get_summary(self, summary_id: str) -> SummaryRecord | None: ...
    def summary_by_key(self, cache_key: str) -> SummaryRecord | None: ...
    def load_topics(self) -> tuple[list[dict[str, Any]], list[tuple[str, str, str, str, str]], list[dict[str, Any]]]: ...
    # tasks
    def add_task(self, session_id: str, task: Task) -> Task: ...
    def get_task(self, task_id: str) -> Task | None: ...
    def update_task(self, task_id: str, /, **fields: Any) -> Task: ...
    def list_tasks(self, session_id: str) -> list[Task]: ...
    # the graph
    def load_graph(self, session_id: str, *, include_superseded: bool = False) -> SessionGraphData: ...
    def save_node(self, session_id: str, node: GraphNode) -> GraphNode: ...
    def save_edge(self, session_id: str, edge: GraphEdge) -> GraphEdge: ...
    def set_node_position(self, node_id: str, x: float, y: float, pinned: bool = True) -> None: ...
    # the event log
    def append_event(self, session_id: str | None, type: str, payload: dict[str, Any]) -> int: ...
    def list_events(self, session_id: str | None, after_seq: int = 0) -> list[dict[str, Any]]: ...
    def last_event(self, session_id: str, type: str) -> dict[str, Any] | None: ...
    # unfinished turns: answer checkpoints, turns a crash interrupted (app.store.recovery)
    def save_answer_checkpoint(self, turn_id: str, text: str, pieces: int) -> bool: ...
    def interrupted_turns(self) -> list[dict[str, Any]]: ...
    def interrupt_turn(self, turn_id: str, *, record: dict[str, Any] | None = None,
                       answer: Message | None = None) -> bool: ...
    def sweep_runs(self) -> int: ...
    def turn_statuses(self, session_id: str) -> dict[str, str]: ...
    def off_machine_turns(self, session_id: str) -> list[str]: ...
    # what the search index should hold (rows the index understands, each with an ``id``)
    def list_searchable(self, ids: Collection[str] | None = None) -> Sequence[Any]: ...
    def searchable_ids(self) -> set[str]: ...


class SessionExchange(Protocol):
    """Sessions as structured context documents (the export format; ``app.store.exchange``).
    Blocking; call it on the ``store`` executor only."""

    def export_session(self, session_id: str) -> dict[str, Any]: ...
    def import_session(self, data: dict[str, Any]) -> str: ...


Hits = list[tuple[str, float]]


class SearchIndex(Protocol):
    """The rebuildable search index (vectors and full text) as the engine uses it. Blocking:
    queries on the ``index`` executor, writes that embed on the ``embed`` executor."""

    def search_vector(self, query: str | Sequence[float] | np.ndarray, k: int = 10, *,
                      session_id: str | None = None, kinds: Sequence[str] | None = None,
                      since: str | None = None, until: str | None = None, exact: bool = False,
                      trace: list[str] | None = None) -> Hits: ...
    def search_text(self, query: str, k: int = 10, *, session_id: str | None = None,
                    kinds: Sequence[str] | None = None, since: str | None = None,
                    until: str | None = None) -> Hits: ...
    def vectors(self, ids: Iterable[str]) -> dict[str, np.ndarray]: ...
    def warm(self, session_id: str) -> None: ...  # read ahead what a session's first query would wait for
    def index_messages(self, session_id: str, messages: Iterable[Message],
                       vectors: Mapping[str, Sequence[float] | np.ndarray] | None = None) -> int: ...
    def embed_messages(self, session_id: str, messages: Iterable[Message]) -> dict[str, np.ndarray]: ...
    def index_memory(self, session_id: str, fragments: Iterable[MemoryFragment],
                     vectors: Mapping[str, Sequence[float] | np.ndarray] | None = None) -> int: ...
    def index_env_events(self, session_id: str, events: Sequence[EnvEvent],
                         vectors: Sequence[Sequence[float] | np.ndarray] | np.ndarray | None = None) -> int: ...
    def index_parts(self, session_id: str, parts: Sequence[Evidence],
                    vectors: Sequence[Sequence[float] | np.ndarray] | np.ndarray | None = None) -> int: ...
    # upkeep in the background: the ANN index trained, written rows folded into the indices
    upkeep_driven: bool
    @property
    def vector_path(self) -> str: ...
    def upkeep_due(self) -> bool: ...
    def upkeep_backlog(self, *, retrain: bool = True) -> int: ...
    def upkeep(self, *, force: bool = False, retrain: bool = True) -> str: ...
    # keeping up with the store: after a crash, an interrupted rebuild, another process's writes
    @property
    def needs_rebuild(self) -> bool: ...
    def ids(self) -> set[str]: ...
    def add(self, rows: Iterable[Any]) -> int: ...
    def remove(self, ids: Iterable[str]) -> int: ...
    def reconcile_rows(self, rows: Sequence[Any], *, have: set[str] | None = None,
                       on_progress: Callable[[int, int], None] | None = None,
                       cancel: CancelToken | None = None) -> int: ...
