"""A richly populated session shared by the store tests (every record type, odd values)."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.core.types import (
    Actor,
    Agent,
    Author,
    AuthorKind,
    ContextBlock,
    EnvEvent,
    Evidence,
    EvidenceSource,
    GraphEdge,
    GraphNode,
    MemoryFragment,
    Message,
    Meta,
    ModelUsage,
    Provider,
    Ref,
    Role,
    Summary,
    Task,
    TaskStatus,
    ToolCall,
)
from app.store.sqlite import SqliteStore


@dataclass
class Populated:
    session_id: str
    turn_ids: list[str] = field(default_factory=list)
    evidence_ids: list[str] = field(default_factory=list)
    node_ids: list[str] = field(default_factory=list)
    fragment_ids: list[str] = field(default_factory=list)
    event_ids: list[str] = field(default_factory=list)


def populate(store: SqliteStore, title: str = "Résumé: long work ✓") -> Populated:
    """Write one session with turns, answers, evidence, tasks, calls, usage, blocks, graph."""
    sid = store.create_session(title)
    out = Populated(sid)
    store.update_session(
        sid,
        meta=Meta(locale="zh-CN", created_at="2026-01-20T10:00:00Z",
                  updated_at="2026-01-20T10:05:00Z",
                  actor=Actor(user_id="u1", user_role="developer",
                              agent=Agent(agent_id="agent-001", name="pcm", version="0.1"))),
        summary=Summary(content="so far: renewals", updated_at="2026-02-10T10:07:00Z"),
    )
    store.add_message(sid, Message(role=Role.SYSTEM, content="你是一个专家",
                                   author=Author(kind=AuthorKind.AGENT, id="agent-001"),
                                   at="2026-02-10T10:05:00+08:00"))
    questions = ["How do I renew the subscription API?", "And what about the billing cycle?",
                 "Does the quota reset on renewal?"]
    for i, question in enumerate(questions):
        turn_id, _ = store.record_user_input(sid, question, at=f"2026-02-10T10:0{6 + i}:00Z")
        out.turn_ids.append(turn_id)
        evidence = store.add_evidence(sid, Evidence(
            type="rag_doc", source=EvidenceSource(kind="rag", name="wiki", uri=f"wiki://{i}"),
            content=f"Renewal doc part {i}: call POST /renew", confidence=0.92 - i / 10,
            metadata={"tags": ["billing", i]}, links={"tool_call_id": None},
            valid_from=f"2026-02-10T10:0{6 + i}:30.123456Z"))
        out.evidence_ids.append(evidence.evidence_id)
        task = store.add_task(sid, Task(name=f"step {i}", depends_on=[],
                                        result_evidence_ids=[evidence.evidence_id],
                                        created_at="2026-02-10T10:00:00Z",
                                        updated_at="2026-02-10T10:00:00Z"))
        store.add_tool_call(sid, ToolCall(tool="rag_search", turn_id=turn_id, task_id=task.task_id,
                                          provider=Provider(kind="mcp", name="srv", uri="mcp://x"),
                                          args_digest={"q": question}, duration_ms=12.5,
                                          result_evidence_ids=[evidence.evidence_id],
                                          called_at="2026-02-10T10:06:10Z"))
        store.add_model_usage(sid, ModelUsage(turn_id=turn_id, model="qwen", prompt_tokens=100 + i,
                                              completion_tokens=20, total_tokens=120 + i,
                                              first_token_latency_ms=None, latency_ms=812.25,
                                              params={"temperature": 0.2}, at="2026-02-10T10:07Z"))
        store.add_context_blocks(sid, turn_id, [
            ContextBlock(block_type="instruction", priority="must", token_estimate=12,
                         content="Answer with evidence."),
            ContextBlock(block_type="evidence", priority="high", token_estimate=40,
                         content=evidence.content,
                         refs=[Ref(evidence_id=evidence.evidence_id, selector="chars:0-10")]),
        ])
        store.set_turn_answer(turn_id, Message(
            role=Role.ASSISTANT, content=f"Answer {i}: use POST /renew.",
            author=Author(kind=AuthorKind.AGENT, id="agent-001"), at=f"2026-02-10T10:0{6 + i}:59Z",
            refs=[Ref(evidence_id=evidence.evidence_id)]))
        node = store.save_node(sid, GraphNode(kind="turn", label=question[:20], ref_id=turn_id,
                                              attrs={"depth": i, "tags": ["a", "b"], "w": 0.1},
                                              created_at=f"2026-02-10T10:0{6 + i}:00Z"))
        if out.node_ids:
            store.save_edge(sid, GraphEdge(src=out.node_ids[-1], dst=node.node_id,
                                           kind="continues", attrs={"score": 0.75}))
        out.node_ids.append(node.node_id)
        # no record: an export carries only records the engine can read back (TurnRecord); the
        # engine's own are round-tripped in tests/engine/test_round_trip.py
        store.update_turn(turn_id, anchor_node_id=node.node_id, status="answered")
    store.set_node_position(out.node_ids[0], 120.5, -33.25)
    store.supersede_evidence(out.evidence_ids[0], at="2026-02-11T00:00:00Z")
    for text, kw in [("User prefers curl examples", ["curl"]),
                     ("Billing cycle is monthly", ["billing", "monthly"])]:
        out.fragment_ids.append(store.add_memory(sid, MemoryFragment(
            content=text, keywords=kw, source_evidence_ids=[out.evidence_ids[1]])).fragment_id)
    store.supersede_memory(out.fragment_ids[0], at="2026-02-12T00:00:00Z")
    env = store.add_env_event(sid, EnvEvent(kind="file", source="/home/u/notes",
                                            uri="/home/u/notes/quota.md", title="quota.md changed",
                                            content="quota resets on the 1st",
                                            payload={"size": 42}))
    out.event_ids.append(env.event_id)
    task0 = store.list_tasks(sid)[0]
    store.update_task(task0.task_id, status=TaskStatus.COMPLETE, result_summary="done",
                      updated_at="2026-02-10T11:00:00Z")
    return out
