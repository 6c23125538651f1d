"""Export and import of a session as the structured context model (schema_version "1.1"; "1.0" imports).

``export_session`` returns a JSON-ready ``ContextDocument`` dict with a deterministic key order
and record order, so ``json.dumps(doc, indent=2, ensure_ascii=False)`` of export → import →
export is byte-identical (``docfile.document_text`` writes it: strict JSON, ``allow_nan=False``).
PCM-specific data (title, graph, env events, memory) lives in ``pcm``.

``import_session`` validates the values first (``app.store.docfile.check_values``: no nesting
deeper than 64 levels, no NaN or infinity, no integer outside 64 bits, no lone surrogate; a document
file is read and parsed strictly by ``docfile.read_document_file``), then with the committed JSON
Schema, then the pydantic model, then the cross-field rules (evidence keys equal their ids; refs and evidence ids point into ``evidences``;
edges join known nodes; ids are unique). Any failure raises ``ExchangeError`` naming the offending
path (``session.messages[2].role: 'robot' is not one of [...]``); the import is one transaction,
so nothing is written on failure, and an existing session is never overwritten.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match
from pydantic import BaseModel, ValidationError

from app.core.pipeline.record import TurnRecord
from app.core.types import (
    SCHEMA_VERSION,
    ContextDocument,
    Evidence,
    EvidenceSource,
    EvidenceType,
    Message,
    MessageIndexRange,
    Meta,
    PcmExtensions,
    Role,
    SessionDoc,
    SessionGraphData,
    SourceKind,
    Summary,
    TaskState,
    TodoList,
    ToolState,
    TurnDoc,
)
from app.store.docfile import ExchangeError, check_values, format_path
from app.store.recovery import UNFINISHED
from app.store.sqlite import SqliteStore, StoreError

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
SCHEMA_ID = "https://pcm-canvas.local/schemas/context_model-1.1.json"
SCHEMA_TITLE = "PCM Canvas structured context model 1.1"
SCHEMA_PATH = (Path(__file__).resolve().parents[2] / "resources" / "schemas"
               / "context_model-1.1.json")

# What the export keeps of a turn (``pcm.turns``; the run that answered it, ``owner``, is this folder's).
TURN_FIELDS = ("turn_id", "input_message_id", "answer_message_id", "status", "anchor_node_id", "created_at",
               "record")

# Containers whose unknown keys are kept across an import (path → model in the document).
_EXTRA_PATHS = ("", "session", "session.task_state", "session.task_state.todo_list",
                "session.tool_state", "pcm", "pcm.graph")


# ---------------------------------------------------------------------------- schema


# Fields the MVP table of ../shared/seeds/002 requires that pydantic leaves optional because
# they have defaults: ($defs name or "" for the root, field).
MVP_REQUIRED: tuple[tuple[str, str], ...] = (
    ("", "schema_version"),
    ("TaskState", "todo_list"),
    ("TodoList", "tasks"),
    ("Evidence", "evidence_id"),
    ("ContextBlock", "block_id"),
)


def build_schema() -> dict[str, Any]:
    """Return the JSON Schema (draft 2020-12) of the document, generated from ``ContextDocument``.

    The fields of ``MVP_REQUIRED`` are added to their ``required`` lists; everything else is
    ``ContextDocument.model_json_schema(by_alias=True)`` as generated.
    """
    body = ContextDocument.model_json_schema(by_alias=True)
    body.pop("title", None)
    for def_name, field_name in MVP_REQUIRED:
        target = body if not def_name else body["$defs"][def_name]
        required = [name for name in target.get("required", []) if name != field_name]
        target["required"] = [field_name, *required]
    return {"$schema": SCHEMA_DIALECT, "$id": SCHEMA_ID, "title": SCHEMA_TITLE, **body}


def schema_text(schema: dict[str, Any] | None = None) -> str:
    """Return the schema as the exact text of the committed file."""
    return json.dumps(schema or build_schema(), indent=2, ensure_ascii=False) + "\n"


def write_schema(path: Path | None = None) -> Path:
    """Write the generated schema to ``path`` (default: the committed resources file)."""
    path = Path(path or SCHEMA_PATH)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(schema_text(), encoding="utf-8")
    return path


def load_schema(path: Path | None = None) -> dict[str, Any]:
    """Return the schema from ``path`` (default: the committed file); generated if it is absent.

    The fallback matters for packaged builds where resources may live elsewhere; a test keeps the
    committed file equal to the generated one, so both are the same schema.
    """
    path = Path(path or SCHEMA_PATH)
    if path.is_file():
        loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return loaded
    return build_schema()


# ---------------------------------------------------------------------------- validation


def _dangling(path: list[Any], ids: Sequence[str], evidence_ids: set[str]) -> Iterable[str]:
    for i, evidence_id in enumerate(ids):
        if evidence_id not in evidence_ids:
            yield f"{format_path([*path, i])}: {evidence_id!r} is not a key of evidences"


def _evidence_ref_problems(doc: ContextDocument, evidence_ids: set[str]) -> Iterable[str]:
    """Evidences keyed by their own id; message and block refs that name one."""
    for key, evidence in doc.evidences.items():
        if evidence.evidence_id != key:
            yield (f"{format_path(['evidences', key, 'evidence_id'])}: "
                   f"{evidence.evidence_id!r} does not equal its key {key!r}")
    for i, message in enumerate(doc.session.messages):
        for j, ref in enumerate(message.refs):
            if ref.evidence_id not in evidence_ids:
                yield (f"{format_path(['session', 'messages', i, 'refs', j, 'evidence_id'])}: "
                       f"{ref.evidence_id!r} is not a key of evidences")
    for i, block in enumerate(doc.context_blocks):
        for j, ref in enumerate(block.refs):
            if ref.evidence_id not in evidence_ids:
                yield (f"{format_path(['context_blocks', i, 'refs', j, 'evidence_id'])}: "
                       f"{ref.evidence_id!r} is not a key of evidences")


def _record_ref_problems(doc: ContextDocument, evidence_ids: set[str]) -> Iterable[str]:
    """Task dependencies and the evidence ids of tasks, tool calls and memory fragments."""
    tasks = doc.session.task_state.todo_list.tasks
    task_ids = {task.task_id for task in tasks}
    for i, task in enumerate(tasks):
        path = ["session", "task_state", "todo_list", "tasks", i]
        yield from _dangling([*path, "result_evidence_ids"], task.result_evidence_ids, evidence_ids)
        for j, dep in enumerate(task.depends_on):
            if dep not in task_ids:
                yield f"{format_path([*path, 'depends_on', j])}: {dep!r} is not a task_id of tasks"
    for i, call in enumerate(doc.session.tool_state.tool_calls):
        yield from _dangling(["session", "tool_state", "tool_calls", i, "result_evidence_ids"],
                             call.result_evidence_ids, evidence_ids)
    for i, fragment in enumerate(doc.pcm.memory):
        yield from _dangling(["pcm", "memory", i, "source_evidence_ids"],
                             fragment.source_evidence_ids, evidence_ids)


def _graph_ref_problems(doc: ContextDocument) -> Iterable[str]:
    """Edges whose ends are not nodes of the graph."""
    node_ids = {node.node_id for node in doc.pcm.graph.nodes}
    for i, edge in enumerate(doc.pcm.graph.edges):
        for end in ("src", "dst"):
            if getattr(edge, end) not in node_ids:
                yield (f"{format_path(['pcm', 'graph', 'edges', i, end])}: "
                       f"{getattr(edge, end)!r} is not a node_id of pcm.graph.nodes")


def _topic_problems(doc: ContextDocument) -> Iterable[str]:
    """Topic mentions that name no message of the session, or a term the message does not say."""
    said = {m.message_id: m.content.casefold() for m in doc.session.messages}
    for i, topic in enumerate(doc.pcm.topics):
        for j, mention in enumerate(topic.mentions):
            path = ["pcm", "topics", i, "mentions", j]
            if mention.message_id not in said:
                yield f"{format_path([*path, 'message_id'])}: {mention.message_id!r} is not a message_id of session.messages"
            elif mention.term.casefold() not in said[mention.message_id]:
                yield f"{format_path([*path, 'term'])}: message {mention.message_id!r} does not say {mention.term[:80]!r}"


def _turn_problems(doc: ContextDocument) -> Iterable[str]:
    """Turns whose messages are not the session's, and records that are not turn records."""
    messages = {m.message_id for m in doc.session.messages}
    for i, turn in enumerate(doc.pcm.turns):
        for name in ("input_message_id", "answer_message_id"):
            value = getattr(turn, name)
            if value is not None and value not in messages:
                yield f"{format_path(['pcm', 'turns', i, name])}: {value!r} is not a message_id of session.messages"
        if turn.record:
            try:
                TurnRecord.model_validate(turn.record)
            except ValidationError as err:
                first = err.errors()[0]
                yield f"{format_path(['pcm', 'turns', i, 'record', *first['loc']])}: {first['msg']}"


def _ref_problems(doc: ContextDocument) -> Iterable[str]:
    evidence_ids = set(doc.evidences)
    yield from _evidence_ref_problems(doc, evidence_ids)
    yield from _record_ref_problems(doc, evidence_ids)
    yield from _graph_ref_problems(doc)
    yield from _topic_problems(doc)
    yield from _turn_problems(doc)


def _duplicate_problems(doc: ContextDocument) -> Iterable[str]:
    collections: list[tuple[list[Any], Sequence[BaseModel], str]] = [
        (["session", "messages"], doc.session.messages, "message_id"),
        (["session", "task_state", "todo_list", "tasks"], doc.session.task_state.todo_list.tasks,
         "task_id"),
        (["session", "tool_state", "tool_calls"], doc.session.tool_state.tool_calls,
         "tool_call_id"),
        (["session", "model_usage"], doc.session.model_usage, "model_usage_id"),
        (["context_blocks"], doc.context_blocks, "block_id"),
        (["pcm", "graph", "nodes"], doc.pcm.graph.nodes, "node_id"),
        (["pcm", "graph", "edges"], doc.pcm.graph.edges, "edge_id"),
        (["pcm", "env_events"], doc.pcm.env_events, "event_id"),
        (["pcm", "memory"], doc.pcm.memory, "fragment_id"),
        (["pcm", "topics"], doc.pcm.topics, "topic_id"),
        (["pcm", "turns"], doc.pcm.turns, "turn_id"),
    ]
    for path, items, key in collections:
        seen: set[str] = set()
        for i, item in enumerate(items):
            value = getattr(item, key)
            if value in seen:
                yield f"{format_path([*path, i, key])}: duplicate id {value!r}"
            seen.add(value)


def validate_document(data: Any, schema: dict[str, Any] | None = None) -> ContextDocument:
    """Validate ``data`` (the values a store can hold — ``docfile.check_values`` — then schema,
    model, cross-field rules); return the model or raise."""
    if not isinstance(data, dict):
        raise ExchangeError(f"document: expected a JSON object, got {type(data).__name__}")
    check_values(data)
    validator = Draft202012Validator(schema or load_schema())
    error = best_match(validator.iter_errors(data))
    if error is not None:
        raise ExchangeError(f"{format_path(error.absolute_path)}: {error.message}")
    try:
        doc = ContextDocument.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        raise ExchangeError(f"{format_path(first['loc'])}: {first['msg']}") from None
    for problem in (*_ref_problems(doc), *_duplicate_problems(doc)):
        raise ExchangeError(problem)
    return doc


# ---------------------------------------------------------------------------- export


def session_summary(store: SqliteStore, session_id: str) -> Summary | None:
    """The export's ``session.summary``: the session's current standard summary (engine-made)
    with the range of message indexes it covers; None when the engine made none (an imported
    document's own summary, kept with the session, is exported instead)."""
    made = [s for s in store.list_summaries(session_id) if s.subject == "session" and s.level == "standard"]
    if not made:
        return None
    last = made[-1]
    return Summary(content=last.content, updated_at=last.created_at,
                   message_index_range=MessageIndexRange.model_validate({"from": last.covers.first,
                                                                         "to": last.covers.last}))


def export_session(store: SqliteStore, session_id: str) -> dict[str, Any]:
    """Return the session as a validated, JSON-ready ``ContextDocument`` dict."""
    info = store.get_session(session_id)
    if info is None:
        raise ExchangeError(f"no session {session_id!r}")
    messages = store.list_messages(session_id)
    if not messages:
        raise ExchangeError(f"session {session_id} has no messages; nothing to export")
    extras: dict[str, dict[str, Any]] = info["doc_extras"]

    def x(path: str) -> dict[str, Any]:
        return dict(extras.get(path, {}))

    meta = info["meta"] or Meta(created_at=info["created_at"], updated_at=info["updated_at"])
    session = SessionDoc(
        session_id=session_id,
        messages=messages,
        summary=session_summary(store, session_id) or info["summary"],
        task_state=TaskState(
            todo_list=TodoList(tasks=store.list_tasks(session_id),
                               **x("session.task_state.todo_list")),
            **x("session.task_state")),
        tool_state=ToolState(tool_calls=store.list_tool_calls(session_id),
                             **x("session.tool_state")),
        model_usage=store.list_model_usage(session_id),
        **x("session"),
    )
    graph = store.load_graph(session_id, include_superseded=True)  # nothing is dropped on export
    pcm = PcmExtensions(
        title=info["title"],
        graph=SessionGraphData(nodes=graph.nodes, edges=graph.edges, **x("pcm.graph")),
        env_events=store.list_env_events(session_id),
        memory=store.list_memory(session_id, include_superseded=True),
        topics=store.session_topics(session_id),
        turns=[TurnDoc.model_validate({k: turn[k] for k in TURN_FIELDS}) for turn in store.list_turns(session_id)],
        **x("pcm"),
    )
    evidences = {e.evidence_id: e for e in store.list_evidences(session_id, include_superseded=True)}
    blocks = store.list_context_blocks(session_id)
    evidences.update(_outside_evidences(store, evidences, session, pcm, blocks))
    doc = ContextDocument(
        schema_version=SCHEMA_VERSION,
        meta=meta,
        session=session,
        evidences=evidences,
        context_blocks=blocks,
        pcm=pcm,
        **x(""),
    )
    data = doc.model_dump(mode="json", by_alias=True)
    try:  # never hand out a document that import would refuse
        validate_document(data)
    except ExchangeError as err:
        raise ExchangeError(f"session {session_id} cannot be exported: {err}") from None
    return data


def _outside_evidences(store: SqliteStore, have: dict[str, Evidence], session: SessionDoc, pcm: PcmExtensions,
                       blocks: list[Any]) -> dict[str, Evidence]:
    """The evidences of other sessions this one cites (a memory or a profile statement of another
    session, the message it was taken from): carried along, so the document stands on its own."""
    cited = {r.evidence_id for b in blocks for r in b.refs}
    cited |= {r.evidence_id for m in session.messages for r in m.refs}
    cited |= {e for m in pcm.memory for e in m.source_evidence_ids}
    out: dict[str, Evidence] = {}
    for evidence_id in sorted(cited - set(have)):
        evidence = store.get_evidence(evidence_id)
        message = None if evidence is not None else store.get_message(evidence_id)
        if evidence is None and message is not None:
            evidence = Evidence(evidence_id=message.message_id, content=message.content, valid_from=message.at,
                                type=EvidenceType.USER_INPUT if message.role == Role.USER else EvidenceType.LLM_OUTPUT,
                                source=EvidenceSource(kind=SourceKind.USER if message.role == Role.USER else SourceKind.LLM,
                                                      name=message.role.value), metadata={"turn_id": message.turn_id})
        if evidence is None and message is None:
            evidence = _summary_evidence(store, evidence_id)
        if evidence is not None:
            out[evidence_id] = evidence
    return out


def _summary_evidence(store: SqliteStore, summary_id: str) -> Evidence | None:
    """A summary a context block cites (its lines' ``turns:a-b`` selectors), as an evidence."""
    summary = store.get_summary(summary_id)
    if summary is None:
        return None
    return Evidence(evidence_id=summary_id, type=EvidenceType.MEMORY, content=summary.content,
                    valid_from=summary.created_at, valid_to=summary.valid_to,
                    source=EvidenceSource(kind=SourceKind.SYSTEM if summary.provider == "extractive" else SourceKind.LLM,
                                          name=f"{summary.subject} summary ({summary.level})"),
                    metadata={"summary": summary.model_dump(mode="json", include={"subject", "subject_id", "level",
                                                                                   "covers", "provider", "model"})})


# ---------------------------------------------------------------------------- import


def _collect_extras(doc: ContextDocument) -> dict[str, dict[str, Any]]:
    containers: dict[str, BaseModel] = {
        "": doc, "session": doc.session, "session.task_state": doc.session.task_state,
        "session.task_state.todo_list": doc.session.task_state.todo_list,
        "session.tool_state": doc.session.tool_state, "pcm": doc.pcm, "pcm.graph": doc.pcm.graph,
    }
    extras: dict[str, dict[str, Any]] = {}
    for path in _EXTRA_PATHS:
        model = containers[path]
        if model.model_extra:
            dumped = model.model_dump(mode="json", by_alias=True)
            extras[path] = {key: dumped[key] for key in model.model_extra}
    return extras


def _turns(doc: ContextDocument) -> list[TurnDoc]:
    """The document's turns; for a document without them (1.0, or 1.1 before turns were kept),
    rebuilt from the message turn ids (no record). A turn still unfinished in the document (it
    was exported while it was answered: no answer stored) is interrupted here: no process of this
    folder answers it."""
    if doc.pcm.turns:
        return [t.model_copy(update={"status": "interrupted"})
                if t.status in UNFINISHED and t.answer_message_id is None else t for t in doc.pcm.turns]
    grouped: dict[str, list[Message]] = {}
    for message in doc.session.messages:
        if message.turn_id:
            grouped.setdefault(message.turn_id, []).append(message)
    turns = []
    for turn_id, group in grouped.items():
        first = next((m for m in group if m.role == Role.USER), group[0])
        answers = [m for m in group if m.role == Role.ASSISTANT]
        turns.append(TurnDoc(turn_id=turn_id, input_message_id=first.message_id, status="imported",
                             answer_message_id=answers[-1].message_id if answers else None, created_at=first.at))
    return turns


def _write_document(store: SqliteStore, sid: str, doc: ContextDocument) -> None:
    """Every record of ``doc`` into the store as session ``sid`` (inside the caller's transaction).

    Everything an import brings is outside text: the session's title, its messages and its
    memories are stored with origin "imported" (``Message.origin``, ``MemoryFragment.origin``,
    kept beside the records, never exported), so that no context reads them as the user's words
    and no other session sees a memory of it until the user accepts it (``pcm memory accept``)."""
    created_at = doc.meta.created_at if doc.meta and doc.meta.created_at else None
    store.create_session(doc.pcm.title, sid, created_at=created_at, origin="imported")
    store.update_session(sid, meta=doc.meta, summary=doc.session.summary,
                         doc_extras=_collect_extras(doc))
    for evidence in doc.evidences.values():
        if store.get_evidence(evidence.evidence_id) is None:  # one of another session may be here already
            store.add_evidence(sid, evidence)
    for message in doc.session.messages:
        store.add_message(sid, message.with_origin("imported"))
    for turn in _turns(doc):
        store.add_turn(sid, turn.turn_id, turn.input_message_id, answer_message_id=turn.answer_message_id,
                       status=turn.status, created_at=turn.created_at or None, anchor_node_id=turn.anchor_node_id,
                       record=turn.record)
    for task in doc.session.task_state.todo_list.tasks:
        store.add_task(sid, task)
    for call in doc.session.tool_state.tool_calls:
        store.add_tool_call(sid, call)
    for usage in doc.session.model_usage:
        store.add_model_usage(sid, usage)
    store.add_context_blocks(sid, None, doc.context_blocks)
    for event in doc.pcm.env_events:
        store.add_env_event(sid, event)
    for fragment in doc.pcm.memory:
        store.add_memory(sid, fragment.with_origin("imported"))
    store.add_session_topics(sid, [topic.model_dump(mode="json") for topic in doc.pcm.topics])
    for node in doc.pcm.graph.nodes:
        store.save_node(sid, node)
    for edge in doc.pcm.graph.edges:
        store.save_edge(sid, edge)
    store.append_event(sid, "session.imported", {
        "schema_version": doc.schema_version, "messages": len(doc.session.messages),
        "evidences": len(doc.evidences)})


class StoreExchange:
    """``export_session`` and ``import_session`` over one store: the engine's ``SessionExchange``
    port (``Engine.export_session``/``import_session``; ``app.main`` wires it)."""

    def __init__(self, store: SqliteStore) -> None:
        self.store = store

    def export_session(self, session_id: str) -> dict[str, Any]:
        return export_session(self.store, session_id)

    def import_session(self, data: dict[str, Any]) -> str:
        return import_session(self.store, data)


def import_session(store: SqliteStore, data: dict[str, Any]) -> str:
    """Validate ``data`` and write it as a new session in one transaction; return its id."""
    doc = validate_document(data)
    sid = doc.session.session_id
    if store.get_session(sid) is not None:
        raise ExchangeError(
            f"session.session_id: session {sid!r} already exists; import never overwrites "
            "a session (nothing was written)")
    try:
        with store.transaction():
            _write_document(store, sid, doc)
    except sqlite3.IntegrityError as err:
        raise ExchangeError(
            f"session {sid}: a record of this document already exists in the store ({err}); "
            "nothing was written") from None
    except StoreError as err:
        raise ExchangeError(f"session {sid}: {err}; nothing was written") from None
    return sid
