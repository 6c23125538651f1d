"""Each ablation of ``app.core.types.Ablation`` really closes its mechanism (seed 000 §8.6): on a small
session, the same input built with and without it, and the context differs as it should — the rest
of the build unchanged. Real SQLite + LanceDB, the scripted fakes (the hash embedder, the word counter)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from app.config import Settings
from app.core.engine.facade import Engine
from app.core.pipeline.record import BuildRecord, TurnRecord
from app.core.types import MECHANISMS, Ablation, Author, AuthorKind, Message, Role
from app.eval.strategies import ABLATIONS
from tests.conftest import EngineFactory
from tests.engine.test_scheduler import StreamModel
from tests.texts import step_history

DAY_LABEL = re.compile(r"^\d{4}-\d{2}-\d{2}:$", re.MULTILINE)


def _said(texts: list[str], *, who: str = "user", day: int = 1) -> list[Message]:
    author = Author(kind=AuthorKind.USER, id=who)
    return [Message(role=Role.USER, author=author, content=t, at=f"2024-03-{day + i // 4:02d}T10:{i % 60:02d}:00")
            for i, t in enumerate(texts)]


async def _both(engine: Engine, session_id: str, text: str, ablation: Ablation, budget: int = 400,
                **kw: Any) -> tuple[BuildRecord, BuildRecord]:
    """The build of ``text`` as PCM makes it, and with ``ablation`` closed (then reopened)."""
    engine.lab().set_ablation(())
    full, _ = await engine.build(session_id, text, budget=budget, **kw)
    engine.lab().set_ablation((ablation.value,))
    try:
        closed, _ = await engine.build(session_id, text, budget=budget, **kw)
    finally:
        engine.lab().set_ablation(())
    return full, closed


def test_every_mechanism_has_one_named_ablation_preset() -> None:
    assert [s.ablate for s in ABLATIONS] == [(m.value,) for m in MECHANISMS]
    assert Ablation.DEADLINES not in MECHANISMS and len(MECHANISMS) == 10


def test_without_anchor_routing_the_input_continues_the_latest_turn(make_engine: EngineFactory) -> None:
    async def body(engine: Engine) -> None:
        state = await engine.open_session(None)
        sid = state.session_id
        await engine.ingest(sid, _said(["The Kyoto trip budget is 1500 euros for four nights.",
                                        "For the Kyoto trip we book a hotel in Gion."]))
        await engine.ingest(sid, _said(["My bike needs a new chain before Sunday.",
                                        "The bike shop closes at six on Saturdays."], day=5), chain=False,
                            parents={})
        latest = state.turns[state.turn_order[-1]].node_id
        full, closed = await _both(engine, sid, "For the Kyoto trip, which hotel area did we book?", Ablation.ROUTING)
        assert full.anchor_node != latest  # routing chose the Kyoto branch (or a new root)
        assert closed.anchor_node == latest and closed.routing["override"] == latest
        history = "\n".join(b.content for b in closed.context.blocks if b.block_type.value == "conversation")
        assert "bike shop closes at six" in history  # the latest turn's branch is carried as the conversation

    make_engine.run(body)


def test_without_evidence_boundaries_outside_text_enters_unfenced(make_engine: EngineFactory, tmp_path: Path) -> None:
    notes = tmp_path / "launch.txt"
    notes.write_text("Launch checklist\nThe launch date is the 14th of June.\nBring the banners.\n", encoding="utf-8")

    async def body(engine: Engine) -> None:
        state = await engine.open_session(None)
        await engine.attach_file(state.session_id, notes)
        full, closed = await _both(engine, state.session_id, "What is the launch date in the launch checklist?",
                                   Ablation.FENCES)
        fenced = next(b.content for b in full.context.blocks if "14th of June" in b.content)
        plain = next(b.content for b in closed.context.blocks if "14th of June" in b.content)
        assert "<<<" in fenced and ">>>" in fenced
        assert "<<<" not in plain and ">>>" not in plain and "[file" not in plain
        assert [r.evidence_id for b in full.context.blocks for r in b.refs if "14th" in b.content] == \
               [r.evidence_id for b in closed.context.blocks for r in b.refs if "14th" in b.content]

    make_engine.run(body)


def test_without_progress_extraction_the_task_stack_is_left_out(make_engine: EngineFactory) -> None:
    async def flow(engine: Engine, closed: bool) -> TurnRecord:
        engine.lab().set_ablation(("progress",) if closed else ())
        engine.lab().set_task_steps("off")  # each subtask answers in its own turn (the agent's steps: test_agent.py)
        state = await engine.open_session(None)
        sid = state.session_id
        root = (await engine.create_task(sid, "Plan the team offsite", acceptance="a plan everyone agreed to")).tasks[0]
        sched = engine.scheduler(sid)
        await sched.submit("Write the venue shortlist for the offsite", parent_task_id=root.task_id).done
        return await sched.submit("Draft the agenda for the offsite", parent_task_id=root.task_id).done

    full = make_engine.run(lambda engine: flow(engine, False), chat=StreamModel(["x"]))
    closed = make_engine.run(lambda engine: flow(engine, True), chat=StreamModel(["x"]),
                             data_dir=make_engine.tmp_path / "closed")
    full_text, closed_text = full.build.context.text(), closed.build.context.text()
    assert "Root goal: Plan the team offsite" in full_text and "Done: Write the venue shortlist" in full_text
    assert "Root goal" not in closed_text and "Done:" not in closed_text
    assert "numbered steps" in closed_text  # the task build keeps its step instruction


def test_without_the_structured_template_lines_are_spliced_plainly(make_engine: EngineFactory) -> None:
    async def body(engine: Engine) -> None:
        state = await engine.open_session(None)
        await engine.ingest(state.session_id, step_history(30))
        full, closed = await _both(engine, state.session_id, "Where did we keep the parser of step 7?",
                                   Ablation.TEMPLATE)
        text, plain = full.context.text(), closed.context.text()
        assert "Evidence:" in text and DAY_LABEL.search(text)
        assert "Evidence:" not in plain and not DAY_LABEL.search(plain)
        assert all(b.block_id.startswith("plain:") for b in closed.context.blocks)
        assert closed.context.blocks[0].block_type.value == "instruction"
        assert "src/step_7.py" in plain and closed.context.tokens <= 400

    make_engine.run(body)


def test_without_the_env_channel_no_environment_event_is_recalled(make_engine: EngineFactory, tmp_path: Path) -> None:
    notes = tmp_path / "launch.txt"
    notes.write_text("Launch checklist\nThe launch date is the 14th of June.\n", encoding="utf-8")

    async def body(engine: Engine) -> None:
        state = await engine.open_session(None)
        await engine.ingest(state.session_id, _said(["We should plan the launch party soon."]))
        attached = await engine.attach_file(state.session_id, notes)
        full, closed = await _both(engine, state.session_id, "What is the launch date in the launch checklist?",
                                   Ablation.ENV)
        assert attached.evidence_id in full.context.source_ids()
        assert attached.evidence_id not in closed.context.source_ids()
        assert not any(c.id == attached.evidence_id and c.kept for c in closed.recall.candidates)

    make_engine.run(body)


@pytest.mark.model
def test_without_the_relevance_gate_unrelated_turns_fill_the_context(make_engine: EngineFactory, tmp_path: Path) -> None:
    from app import main as wiring

    embedder = wiring.load_embedder(Settings.load(tmp_path / "settings"))  # the gate grades by meaning too

    async def body(engine: Engine) -> None:
        state = await engine.open_session(None)
        await engine.ingest(state.session_id, _said([f"The pottery class made bowl number {i} in blue glaze."
                                                     for i in range(12)], who="Ana"))
        full, closed = await _both(engine, state.session_id, "What is the capital city of Peru?", Ablation.GATE)
        assert full.recall.gate is not None and full.recall.gate.insufficient
        assert "insufficient" in full.context.text().lower()
        assert closed.recall.gate is None and closed.recall_request["relevance_threshold"] == 0.0
        assert "insufficient" not in closed.context.text().lower()
        kept = lambda r: sum(c.kept for c in r.recall.candidates)  # noqa: E731
        assert kept(closed) > kept(full)

    make_engine.run(body, embedder=embedder)


def test_without_query_aware_compression_a_long_turn_is_cut_from_its_start(make_engine: EngineFactory) -> None:
    filler = " ".join(f"Sentence {i} talks about the weather on the coast and the boats." for i in range(40))
    long_turn = f"{filler} The spare key is hidden under the blue flowerpot."

    async def body(engine: Engine) -> None:
        state = await engine.open_session(None)
        await engine.ingest(state.session_id, _said([long_turn, "Thanks for the long update."], who="Ana"))
        full, closed = await _both(engine, state.session_id, "Where is the spare key hidden?", Ablation.COMPRESSION,
                                   budget=300)
        assert "blue flowerpot" in full.context.text() and full.compressed
        assert "blue flowerpot" not in closed.context.text() and "Sentence 0 " in closed.context.text()
        assert closed.compressed and closed.compressed[0].selector.startswith("chars:0-")

    make_engine.run(body)


def test_without_memory_no_memory_object_is_recalled(make_engine: EngineFactory) -> None:
    async def body(engine: Engine) -> None:
        state = await engine.open_session(None)
        # the facts lie a few turns back: on the branch's recent turns they would be read from there
        await engine.ingest(state.session_id, _said(["My dentist appointment is on April 3.", "The weather is nice.",
                                                     "Update: my dentist appointment is now on April 10."]
                                                    + [f"The garden needs {n} new tomato plants." for n in range(3, 9)]))
        await engine.memory_idle()
        full, closed = await _both(engine, state.session_id, "When is my dentist appointment?", Ablation.MEMORY)
        assert any(b.block_type.value == "memory" for b in full.context.blocks)
        assert "no longer true" in full.context.text()  # the earlier value, with its date
        assert not any(b.block_type.value == "memory" for b in closed.context.blocks)
        assert closed.recall_request["channel_sizes"]["memory"] == 0

    make_engine.run(body)


def test_without_topics_the_topic_channel_asks_for_nothing(make_engine: EngineFactory) -> None:
    async def body(engine: Engine) -> None:
        state = await engine.open_session(None)
        await engine.ingest(state.session_id, _said([f"We run the Kubernetes cluster {i} with a new node pool."
                                                     for i in range(6)] + ["Lunch was soup."]))
        await engine.memory_idle()
        full, closed = await _both(engine, state.session_id, "What about the Kubernetes cluster?", Ablation.TOPIC)
        topic = {r.channel: r for r in full.recall.channels}["topic"]
        assert topic.hits and full.recall_request["channel_sizes"]["topic"] > 0
        assert not {r.channel: r for r in closed.recall.channels}["topic"].hits
        assert closed.recall_request["channel_sizes"]["topic"] == 0

    make_engine.run(body)


def test_without_summaries_no_branch_summary_is_offered(make_engine: EngineFactory) -> None:
    async def body(engine: Engine) -> None:
        state = await engine.open_session(None)
        await engine.ingest(state.session_id, step_history(40))
        await engine.summarize(state.session_id)
        full, closed = await _both(engine, state.session_id, "And what did we decide in step 3?", Ablation.SUMMARIES,
                                   budget=1500, anchor_override=state.turns[state.turn_order[-1]].node_id)
        assert full.summaries and any(b.block_type.value == "summary" for b in full.context.blocks)
        assert not closed.summaries and not any(b.block_type.value == "summary" for b in closed.context.blocks)

    make_engine.run(body)


def test_recall_weights_an_evaluation_sets_reach_the_build_and_are_undone(make_engine: EngineFactory) -> None:
    """``EngineLab.set_tuning`` (``pcm eval recall --tune``): the next builds fuse with those weights
    in place of the strategy's, and setting back what it returned restores the builds."""

    async def body(engine: Engine) -> None:
        state = await engine.open_session(None)
        sid = state.session_id
        await engine.ingest(sid, _said(["The Kyoto trip budget is 1500 euros for four nights.",
                                        "For the Kyoto trip we book a hotel in Gion.",
                                        "My bike needs a new chain before Sunday.",
                                        "The bike shop closes at six on Saturdays."]))
        question = "Which hotel did we book for the Kyoto trip?"

        async def fused() -> dict[str, float]:
            record, _ = await engine.build(sid, question, budget=400)
            return {c.id: c.fused for c in record.recall.candidates}

        plain = await fused()
        kept = engine.lab().set_tuning({"vector": 0.0, "fulltext": 0.0})
        try:
            tuned = await fused()
        finally:
            assert engine.lab().set_tuning(kept) == {"fulltext": 0.0, "vector": 0.0}
        assert kept == {}
        assert tuned != plain and max(tuned.values()) < max(plain.values())  # the index channels count for nothing
        assert await fused() == plain
        with pytest.raises(ValueError, match="unknown recall weight vectr"):
            engine.lab().set_tuning({"vectr": 1.0})

    make_engine.run(body)
