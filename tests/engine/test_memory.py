"""Memory that outlives a session (issue 13), end to end on real SQLite + LanceDB and the real
embedder: the background writer after each answered turn, the workspace profile, cross-session
recall, bi-temporal facts, the topic index, revocation, and exact replay."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from app.config import Settings
from app.core.engine.facade import Engine
from app.core.pipeline.record import TurnRecord
from app.store.exchange import export_session
from tests.conftest import EngineFactory, stored
from tests.engine.test_tools_env import _register_actions

pytestmark = pytest.mark.model


def _engine(make_engine: EngineFactory, tmp_path: Path) -> Engine:
    from app import main as wiring

    return make_engine(["Noted."], embedder=wiring.load_embedder(Settings.load(tmp_path / "settings")))


async def _turn(engine: Engine, session_id: str, text: str) -> TurnRecord:
    record = await (await engine.submit(session_id, text)).done
    await engine.memory_idle()
    return record


def _lines(record: TurnRecord) -> dict[str, list[str]]:
    """Each context line's text → the evidence ids of its block (the lines of a block share them)."""
    out: dict[str, list[str]] = {}
    for block in record.build.context.blocks:
        for line in block.content.splitlines():
            out[line] = [r.evidence_id for r in block.refs]
    return out


def test_a_prohibition_and_a_fact_of_session_1_act_in_a_new_session(make_engine: EngineFactory, tmp_path: Path) -> None:
    engine = _engine(make_engine, tmp_path)
    _register_actions(engine)

    async def main() -> None:
        await engine.start()
        try:
            one = await engine.open_session(None, title="Launch planning")
            said = await _turn(engine, one.session_id, "Never send emails to customers. My deadline is March 3.")
            said_id = one.turns[said.turn_id].message_ids[0]
            two = await engine.open_session(None, title="Fresh start")
            blocked = await _turn(engine, two.session_id, "Please send_email the draft to all customers")
            assert "send_email" in blocked.build.plan["tools"]["blocked"]
            [line] = [t for t in _lines(blocked) if t.startswith("Never: send emails")]
            assert "Launch planning" in line  # labelled with the session it was said in
            block = next(b for b in blocked.build.context.blocks if line in b.content)
            assert said_id in {r.evidence_id for r in block.refs}  # bound to session 1's message
            asked = await _turn(engine, two.session_id, "What is my deadline?")
            memory_lines = [t for t in asked.build.context.text().splitlines() if "deadline is March 3" in t]
            assert memory_lines and "Launch planning" in memory_lines[0]
            assert said_id in asked.build.context.source_ids()
            assert two.notes[said_id].kind == "outside"  # the engine added what recall read, after the build
            # The memory is evidence of session 2 now: its export stands on its own.
            doc = await stored(engine, export_session, two.session_id)
            assert said_id in doc["evidences"]
        finally:
            await engine.close()

    asyncio.run(main())


def test_a_contradicted_fact_is_closed_not_deleted_and_both_are_shown(make_engine: EngineFactory, tmp_path: Path) -> None:
    engine = _engine(make_engine, tmp_path)

    async def main() -> None:
        await engine.start()
        try:
            state = await engine.open_session(None, title="Moving")
            await _turn(engine, state.session_id, "My city is Lisbon.")
            porto = await _turn(engine, state.session_id, "My city is Porto.")
            assert await engine.replay(porto.turn_id) == []  # its own memory came after it, as live
            facts = {m.value: m for _, m in await engine.memories() if m.key == "city"}
            assert set(facts) == {"Lisbon", "Porto"}
            old, new = facts["Lisbon"], facts["Porto"]
            assert old.valid_to == new.valid_from and old.superseded_by == new.fragment_id and old.closed_at
            assert new.valid_to is None and new.recorded_at
            asked = await _turn(engine, state.session_id, "What was my city before, and what is my city now?")
            text = asked.build.context.text()
            assert "Fact: city is Porto" in text
            assert f"Fact: city is Lisbon (until {old.valid_to[:10]}; no longer true)" in text
            assert await engine.replay(asked.turn_id) == []
            # The Inspector maps each [n] to the line's own evidence: a memory line's source refs
            # (selector "source") do not shift the numbers of the lines after it.
            from app.ui.panels.citations import context_lines

            numbered = {line.text: line.evidence_ids for line in context_lines(asked) if line.number}
            assert numbered[next(t for t in numbered if "Fact: city is Porto" in t)] == (new.fragment_id,)
            assert numbered[next(t for t in numbered if "city is Lisbon" in t)] == (old.fragment_id,)
            sources = [r for b in asked.build.context.blocks for r in b.refs if r.selector == "source"]
            assert {r.evidence_id for r in sources} >= {*new.source_evidence_ids, *old.source_evidence_ids}
        finally:
            await engine.close()

    asyncio.run(main())


def test_a_revoked_memory_never_reaches_a_context_and_replay_stays_exact(make_engine: EngineFactory,
                                                                         tmp_path: Path) -> None:
    engine = _engine(make_engine, tmp_path)

    async def main() -> None:
        await engine.start()
        try:
            one = await engine.open_session(None, title="Garden")
            await _turn(engine, one.session_id, "My favourite plant is the fig tree.")
            two = await engine.open_session(None, title="Later")
            before = await _turn(engine, two.session_id, "What is my favourite plant?")
            [memory] = [m for _, m in await engine.memories() if m.key == "favourite plant"]
            assert memory.fragment_id in before.build.context.source_ids()
            # An edit is a new version: later contexts read the new words, replay the old ones.
            new = await engine.edit_memory(memory.fragment_id, "favourite plant is the olive tree")
            assert new.fragment_id != memory.fragment_id and new.revisions[-1]["content"] == memory.content
            edited, _ = await engine.build(two.session_id, "Which plant do I like best, my favourite plant?", budget=1200)
            assert "olive tree" in edited.context.text() and "fig tree" not in edited.context.text()
            assert await engine.replay(before.turn_id) == []
            memory = new
            revoked = await engine.revoke_memory(memory.fragment_id)
            assert revoked.revoked_at and revoked.valid_to  # kept, closed, marked
            after = await _turn(engine, two.session_id, "Tell me again: what is my favourite plant?")
            assert memory.fragment_id not in after.build.context.source_ids()
            assert "olive tree" not in after.build.context.text()
            assert await engine.replay(before.turn_id) == []  # the earlier turn still saw it
            assert await engine.replay(after.turn_id) == []
            kept = {m.fragment_id: m for _, m in await engine.memories()}
            assert kept[memory.fragment_id].access_count >= 1
        finally:
            await engine.close()

    asyncio.run(main())


def test_k8s_and_kubernetes_are_one_topic_with_a_merge_record(make_engine: EngineFactory, tmp_path: Path) -> None:
    engine = _engine(make_engine, tmp_path)

    async def main() -> None:
        await engine.start()
        try:
            state = await engine.open_session(None, title="Cluster")
            for text in ("How do I scale pods in k8s?", "Is Kubernetes worth it for a small team?",
                         "Where does kubernetes keep its ingress rules?"):
                await _turn(engine, state.session_id, text)
            topics = await engine.topics()
            [topic] = [t for t in topics.topics.values() if "k8s" in t.aliases]
            assert set(topic.aliases) == {"k8s", "Kubernetes", "kubernetes"} and topic.name == "Kubernetes"
            merges = [e for e in topics.log if e["op"] == "merge" and e["topic_id"] == topic.topic_id]
            assert {(e["alias"], e["rule"]) for e in merges} == {("Kubernetes", "numeronym"), ("kubernetes", "case")}
            assert len(topics.messages_of(topic.topic_id)) == 3
            # Names the rules cannot tie join by the real embedder's similarity of the two names,
            # logged with the score; names that differ in their digits never do.
            for text in ("We keep the jobs in Postgres.", "Which PostgreSQL index fits here?",
                         "Tests run on py311 today.", "Should we try py312 next?"):
                await _turn(engine, state.session_id, text)
            [pg] = [t for t in topics.topics.values() if "Postgres" in t.aliases]
            assert set(pg.aliases) == {"Postgres", "PostgreSQL"} and pg.aliases["PostgreSQL"].startswith("similar names (")
            assert any(e["op"] == "merge" and e["alias"] == "PostgreSQL" for e in topics.log)
            assert {t.name for t in topics.topics.values()} >= {"py311", "py312"}
            # The topic channel recalls the turns that mention the topic, under any of its names.
            record, _ = await engine.build(state.session_id, "Remind me what we said about K8S")
            [run] = [r for r in record.recall.channels if r.channel == "topic"]
            mentioned = {m.message_id for m in topics.messages_of(topic.topic_id)}
            assert {i for i, _ in run.hits} == mentioned
            engine._ctx.config.ablate = ("topic",)  # an ablation asks the channel for nothing
            record, _ = await engine.build(state.session_id, "Remind me what we said about K8S")
            assert [r.hits for r in record.recall.channels if r.channel == "topic"] == [[]]
            engine._ctx.config.ablate = ()
            # Idempotent: writing the same turn again adds nothing.
            first = state.messages[state.order[0]]
            assert await engine._memory.remember(state.session_id, [(first.message_id, first.text, "user", first.at)]) == []
            assert len(topics.messages_of(topic.topic_id)) == 3
            # Reversible: the merge is undone by a split, logged; the mentions move along.
            await engine._memory.split_topic(topic.topic_id, "k8s")
            assert set(topic.aliases) == {"Kubernetes", "kubernetes"} and len(topics.messages_of(topic.topic_id)) == 2
        finally:
            await engine.close()
        # Everything is in SQLite: a reopened engine reads the same topics.
        again = _engine(make_engine, tmp_path)
        await again.start()
        try:
            reread = await again.topics()
            assert sorted(t.name for t in reread.topics.values()) == sorted(t.name for t in topics.topics.values())
            assert [e["op"] for e in reread.log] == [e["op"] for e in topics.log]
        finally:
            await again.close()

    asyncio.run(main())


def test_a_new_session_recalls_the_turns_of_earlier_sessions_labelled_and_replays(make_engine: EngineFactory,
                                                                                 tmp_path: Path) -> None:
    engine = _engine(make_engine, tmp_path)

    async def main() -> None:
        await engine.start()
        try:
            one = await engine.open_session(None, title="Shed project")
            said = await _turn(engine, one.session_id, "The garden shed roof needs 14 cedar shingles per row.")
            said_id = one.turns[said.turn_id].message_ids[0]
            two = await engine.open_session(None, title="New day")
            asked = await _turn(engine, two.session_id, "How many cedar shingles per row does the shed roof need?")
            assert asked.build.plan["retrieval"]["scope"] == "workspace"
            assert "holds 0 turn(s)" in asked.build.plan["retrieval"]["scope_reason"]
            assert said_id in asked.build.context.source_ids()
            lines = asked.build.context.text().splitlines()
            at = next(n for n, t in enumerate(lines) if "14 cedar shingles" in t)
            assert lines[at - 1].endswith(", session \u201cShed project\u201d:")  # its group's header
            assert await engine.replay(asked.turn_id) == []
            # A session created since does not change the scope an earlier turn's replay sees.
            assert said.build.plan["retrieval"]["scope"] == "session"
            assert await engine.replay(said.turn_id) == []
            # Once the session holds enough of its own, recall stays in it unless the input points back.
            for text in ("Let us plan the fence now.", "The fence is 20 metres long.", "Posts every 2 metres."):
                await _turn(engine, two.session_id, text)
            own = await _turn(engine, two.session_id, "How many posts does the fence need?")
            assert own.build.plan["retrieval"]["scope"] == "session"
            back = await _turn(engine, two.session_id, "What did we discuss last time about the shed roof?")
            assert back.build.plan["retrieval"]["scope"] == "workspace"
            assert "last time" in back.build.plan["retrieval"]["scope_reason"]
        finally:
            await engine.close()

    asyncio.run(main())


def test_memories_of_a_turn_are_memory_nodes_derived_from_it(make_engine: EngineFactory, tmp_path: Path) -> None:
    from app.core.types import EdgeKind, NodeKind

    engine = _engine(make_engine, tmp_path)

    async def main() -> None:
        await engine.start()
        try:
            state = await engine.open_session(None, title="Plans")
            said = await _turn(engine, state.session_id, "We decided to use Postgres for the store.")
            [node] = [n for n in state.graph.nodes() if n.kind == NodeKind.MEMORY]
            assert node.label == "decision: use Postgres for the store" and node.attrs["memory_type"] == "decision"
            [edge] = [e for e in state.graph.out_edges(node.node_id, EdgeKind.DERIVED_FROM)]
            assert edge.dst == said.node_id
            # A later memory close in meaning (no name in common: "PostgreSQL" is not "Postgres") is
            # linked by the real embedder's similarity, with the score as its reason.
            await _turn(engine, state.session_id, "We decided to store everything in PostgreSQL.")
            memories = {m.content: m for _, m in await engine.memories()}
            later = memories["store everything in PostgreSQL"]
            assert [link["memory_id"] for link in later.links] == [node.ref_id]
            assert later.links[0]["reason"].startswith("similar (")
            await engine.revoke_memory(node.ref_id)
            assert state.graph.node(node.node_id).label.startswith("(revoked) ")
            assert await engine.replay(said.turn_id) == []
            # Stored: a reopened session draws the same node and link.
            graph = await stored(engine, lambda store: store.load_graph(state.session_id))
            assert node.node_id in {n.node_id for n in graph.nodes} and edge.edge_id in {e.edge_id for e in graph.edges}
        finally:
            await engine.close()

    asyncio.run(main())
