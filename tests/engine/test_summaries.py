"""Summaries in the engine (issue 14) on real SQLite + LanceDB: the background update after
history and turns, the cache, the versions' chain, and the export's session summary."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from app.core.context.sections import history as history_section
from app.core.engine.facade import Engine
from app.core.memory.summaries import LEVELS
from app.core.pipeline.builder import NEW_ROOT
from app.core.pipeline.detail import DetailAction, DetailError
from app.core.pipeline.record import TurnRecord
from app.core.session import state as state_module
from app.core.session.state import SessionState
from app.core.types import Author, AuthorKind, Message, Role, SummaryRecord
from app.store.exchange import export_session
from tests.conftest import EngineFactory, stored
from tests.texts import step_history as _history


def test_history_is_summarized_per_subject_and_level_and_the_cache_answers_a_replay(make_engine: EngineFactory) -> None:
    async def body(engine: Engine) -> None:
        state = await engine.open_session(None, title="summaries")
        await engine.ingest(state.session_id, _history(40))
        written = await engine.summarize(state.session_id)
        current = await engine.session_summaries(state.session_id)
        kinds = {(s.subject, s.level) for s in current}
        assert {("session", "brief"), ("session", "standard"), ("session", "detailed"),
                ("branch", "detailed")} <= kinds
        session = {s.level: s for s in current if s.subject == "session"}
        assert session["detailed"].covers.last == 39 and len(session["detailed"].covers.ids) == 40
        assert session["detailed"].provider == "extractive" and session["detailed"].tokens > 0
        paths = {level: len(re.findall(r"src/step_\d+\.py", s.content)) for level, s in session.items()}
        assert 0 < paths["brief"] < paths["standard"] < paths["detailed"]  # kept verbatim, more the more detail
        assert len(session["brief"].content) < len(session["standard"].content) < len(session["detailed"].content)
        misses = engine._summaries.stats.misses
        assert written == [] and misses == 12  # the ingest's cue did it: 2 parts × (session, branch) × 3 levels
        # a replay of the same conversation (the service forgets what it made): every update is found again
        again = await engine._summaries.replay(state.session_id)
        assert again == [] and engine._summaries.stats.misses == misses
        assert engine._summaries.stats.hits == misses
        # new turns: the next version is based on the previous one, which is closed (kept)
        await engine.ingest(state.session_id, _history(10, start=40))
        await engine.summarize(state.session_id)
        newer = {s.level: s for s in await engine.session_summaries(state.session_id) if s.subject == "session"}
        assert newer["standard"].based_on == session["standard"].summary_id
        history = await engine._ctx.on_store(engine._ctx.store.list_summaries, state.session_id, current=False)
        closed = next(s for s in history if s.summary_id == session["standard"].summary_id)
        assert closed.valid_to == newer["standard"].created_at
        doc = await stored(engine, export_session, state.session_id)
        summary = doc["session"]["summary"]
        assert summary["content"] == newer["standard"].content
        assert summary["message_index_range"] == {"from": 0, "to": 49}

    make_engine.run(body)


def test_summaries_off_makes_none(make_engine: EngineFactory) -> None:
    from app.core.engine.context import EngineConfig

    async def body(engine: Engine) -> None:
        state = await engine.open_session(None)
        await engine.ingest(state.session_id, _history(20))
        await engine._summaries.idle()
        assert await engine.session_summaries(state.session_id) == []

    make_engine.run(body, config=EngineConfig(summaries=False))


def _summary_lines(record: TurnRecord) -> list[tuple[str, list[str]]]:
    return [(b.content, [r.selector for r in b.refs]) for b in record.build.context.blocks
            if b.block_type.value == "summary"]


FILLERS = ["the lamp in room {k} is blue", "we walked {k} blocks to the bakery", "the plant on shelf {k} needs water",
           "there were {k} pigeons on the roof", "song number {k} was too loud"]
DECISION = "We decided to store the cache in /var/cache/pcm_v2 with a TTL of 37 minutes."
QUESTION = "Remind me where the cache is stored and with which TTL, as decided?"


async def _long_branch(engine: Engine, turns: int = 60) -> tuple[SessionState, TurnRecord, TurnRecord]:
    """A branch of ``turns`` turns whose second holds a decision; (state, the decision's turn, the last)."""
    state = await engine.open_session(None, title="long branch")
    await (await engine.submit(state.session_id, "Let us plan the caching layer.")).done
    decided = last = await (await engine.submit(state.session_id, DECISION)).done
    for k in range(turns - 2):
        last = await (await engine.submit(state.session_id, "Small talk: " + FILLERS[k % 5].format(k=k + 3) + ".")).done
    await engine._summaries.idle()
    return state, decided, last


def test_an_early_decision_of_a_60_turn_branch_reaches_a_later_context_through_the_branch_summary(
        make_engine: EngineFactory) -> None:
    async def body(engine: Engine) -> None:
        state, decided, last = await _long_branch(engine)
        sid = state.session_id
        asked = await (await engine.submit(sid, QUESTION, anchor_override=state.node_of(last.turn_id))).done
        chain = {n for n in state.main_chain(asked.build.anchor_node or "", asked.build.plan["history"]["main_chain_turns"])}
        assert state.node_of(decided.turn_id) not in chain  # the decision is far beyond the raw window
        assert asked.build.plan["history"]["summary_level"] in ("brief", "standard", "detailed")
        lines = _summary_lines(asked)
        assert lines, "the branch beyond the window is represented by its summary"
        content, selectors = lines[0]
        assert "/var/cache/pcm_v2" in content and "37 minutes" in content  # verbatim, through the summary
        assert selectors and all(s.startswith("turns:") for s in selectors)
        assert asked.build.summaries["root"] == state.graph.root_of(asked.build.anchor_node or "")
        # more turns (and newer summaries) later: the turn still replays exactly as it was built
        for k in range(10):
            await (await engine.submit(sid, f"Another note: the kettle {k} is red.")).done
        await engine._summaries.idle()
        assert await engine.replay(asked.turn_id) == []

    make_engine.run(body, budget=1200)


def test_the_first_build_after_the_session_is_opened_again_is_offered_its_summaries(
        make_engine: EngineFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Opening a session reads its summaries ahead (``Engine._warm``): before, the first build of
    an app run had none (the read started with it, for the next build) and its context lacked the
    branch summary every later build carried."""
    async def first(engine: Engine) -> tuple[str, str]:
        state, _, last = await _long_branch(engine)
        return state.session_id, state.node_of(last.turn_id) or ""

    sid, tip = make_engine.run(first, budget=1200)

    async def again(engine: Engine) -> None:
        await engine.open_session(sid)
        await asyncio.gather(*engine._warming)  # the read-ahead, which a user's typing gives time for
        quoted, indexed = [], []
        monkeypatch.setattr(state_module, "history_text", lambda text, *_: quoted.append(text) or text)
        monkeypatch.setattr(history_section._PartWords, "of", classmethod(lambda *a: indexed.append(a)))
        dumped: list[str] = []
        dump = SummaryRecord.model_dump
        monkeypatch.setattr(SummaryRecord, "model_dump", lambda self, **kw: dumped.append(self.summary_id) or dump(self, **kw))
        built, _ = await engine.build(sid, QUESTION, anchor_override=tip)
        assert built.summaries, "the branch summary is offered to the first build"
        assert not dumped, "the read-ahead made the records' JSON the build record keeps"
        parts = {p[level] for levels in built.summaries["levels"].values() for p in levels["parts"]
                 for level in LEVELS}
        assert not parts & set(quoted), "the read-ahead quoted the parts: the first build does not"
        assert not indexed, "nor does it index their words"
        content = " ".join(b.content for b in built.context.blocks if b.block_type.value == "summary")
        assert "/var/cache/pcm_v2" in content and "37 minutes" in content

    make_engine.run(again, budget=1200)


def test_with_several_conversations_a_branch_summary_line_must_hold_the_input_words(make_engine: EngineFactory) -> None:
    def offered(record: Any) -> list[str]:
        """The summary lines the compiler was given (packed, or dropped for want of budget)."""
        packed = [r.selector for b in record.context.blocks if b.block_type.value == "summary" for r in b.refs]
        return packed + [d.item_id.rsplit(":", 1)[-1] for d in record.context.dropped if d.item_id.startswith("summary:")]

    async def body(engine: Engine) -> None:
        state = await engine.open_session(None, title="one conversation, then two")
        sid = state.session_id
        await engine.ingest(sid, _history(40))
        await engine._summaries.idle()
        [tip] = state.graph.frontiers()
        aside = "Remind me which bicycle colour we picked, as decided?"  # none of the summary's words
        alone, _ = await engine.build(sid, aside, anchor_override=tip)
        assert offered(alone), "one conversation: the part before the window stands for the branch"
        await engine.ingest(sid, [Message(role=Role.USER, content="Separately: book a table for four on Friday.")],
                            chain=False)
        assert state.graph.several_conversations()
        mixed, _ = await engine.build(sid, aside, anchor_override=tip)
        assert not offered(mixed)  # its older turns may be another conversation's: no free pass
        path, _ = await engine.build(sid, "Where did we decide to keep the parser, in which src file?",
                                     anchor_override=tip)
        assert offered(path)  # a part holding the input's words still enters

    make_engine.run(body)


def _raw_turns(record: TurnRecord) -> set[str]:
    """The messages a context carries as raw turns of a branch (conversation blocks)."""
    return {r.evidence_id for b in record.build.context.blocks if b.block_type.value == "conversation" for r in b.refs}


def test_expand_collapse_and_focus_recompile_a_turn_within_its_budget_and_replay_exactly(
        make_engine: EngineFactory) -> None:
    async def body(engine: Engine) -> None:
        state, decided, last = await _long_branch(engine)
        sid = state.session_id
        other = await (await engine.submit(sid, "Separately: the garden plan needs 12 tulips by May.",
                                           anchor_override=NEW_ROOT)).done
        asked = await (await engine.submit(sid, QUESTION, anchor_override=state.node_of(last.turn_id))).done
        decision_id = state.turns[decided.turn_id].message_ids[0]
        span = next(s for c, sels in _summary_lines(asked) if "pcm_v2" in c for s in sels).removeprefix("turns:")
        levels = []
        for _ in range(3):  # the part holding the decision, one level finer each time, then its raw turns
            step = await engine.detail(asked.turn_id, DetailAction(kind="expand", span=span))
            levels.append(step.detail.spans[span])
            assert step.record.build.context.tokens <= step.record.build.context.budget == asked.build.context.budget
        assert levels[-1] == "raw" and levels[0] in ("standard", "detailed")
        first, end = (int(x) for x in span.split("-"))
        covered = set(state.order[first:end + 1])
        assert decision_id in covered and not covered <= _raw_turns(asked)
        raw = step.record.build
        assert covered <= _raw_turns(step.record)  # the part's turns are back, raw
        assert f"turns:{span}" not in {r.selector for b in raw.context.blocks for r in b.refs}  # instead of its line
        assert step.record.revisions[-1].kind == "detail" and step.record.revisions[0].build.comparable() == asked.build.comparable()
        assert await engine.replay(asked.turn_id) == []  # the detail is recorded with the turn
        with pytest.raises(DetailError, match="already shown in full"):
            await engine.detail(asked.turn_id, DetailAction(kind="expand", span=span))
        back = await engine.detail(asked.turn_id, DetailAction(kind="collapse", message_id=decision_id))
        assert back.detail.spans[span] == "detailed" and not covered & _raw_turns(back.record)
        assert f"turns:{span}" in {r.selector for b in back.record.build.context.blocks for r in b.refs}
        # the oldest raw turn of the window, collapsed: it is carried by the summary from now on
        oldest = min((state.messages[m] for m in _raw_turns(back.record)), key=lambda v: v.seq)
        folded = await engine.detail(asked.turn_id, DetailAction(kind="collapse", message_id=oldest.message_id))
        assert folded.detail.through is not None and folded.detail.through >= oldest.seq
        assert oldest.message_id not in _raw_turns(folded.record)
        # focus: the other branch becomes a subject of this context too
        focused = await engine.detail(asked.turn_id, DetailAction(kind="focus", node_id=state.node_of(other.turn_id)))
        texts = "\n".join(b.content for b in focused.record.build.context.blocks)
        assert "12 tulips" in texts and focused.record.build.context.tokens <= asked.build.context.budget
        assert await engine.replay(asked.turn_id) == []
        events = [e for e in await stored(engine, lambda s: s.list_events(sid)) if e["type"] == "turn.detail"]
        assert [e["payload"]["action"]["kind"] for e in events] == ["expand"] * 3 + ["collapse"] * 2 + ["focus"]
        # answering again answers with the detail the user set
        again = await (await engine.answer_again(sid, state.node_of(asked.turn_id))).done
        assert again.build.detail == focused.record.build.detail
        assert await engine.replay(again.turn_id) == []

    make_engine.run(body, budget=1200)


def _two_messages() -> list[Message]:
    said = [("Ana", "We moved the parser to src/parse.py on 2024-05-14 after the review."),
            ("Bo", "Good. I set the budget to 4096 tokens and told Carla.")]
    return [Message(role=Role.USER, author=Author(kind=AuthorKind.USER, id=who, name=who), content=text,
                    at=f"2024-05-14T10:00:0{n}Z") for n, (who, text) in enumerate(said)]


def test_the_model_writes_a_summary_that_keeps_the_identifiers_and_the_extractive_one_stands_in_otherwise(
        make_engine: EngineFactory) -> None:
    from app.core.engine.context import EngineConfig

    good = "Ana moved the parser to src/parse.py on 2024-05-14; Bo set the budget to 4096 and told Carla."

    async def body(engine: Engine) -> None:
        state = await engine.open_session(None)
        await engine.ingest(state.session_id, _two_messages())
        made = {s.level: s for s in await engine.summarize(state.session_id) if s.subject == "session"}
        assert made["standard"].provider != "extractive" and made["standard"].model == "scripted"
        assert made["standard"].content == good
        assert made["brief"].provider == "extractive"  # the model's brief dropped the identifiers: refused
        assert made["detailed"].provider == "extractive"  # the verbatim level is never the model's
        assert engine._summaries.stats.outcomes["invalid"] == 1
        [ask, *_] = engine._ctx.chat.calls  # type: ignore[attr-defined]
        assert ask["stage"] == "summary" and "src/parse.py" in ask["messages"][-1]["content"]  # the model reads the part's key sentences

    # one call per level the model writes (brief, standard); the branch is the session and is not asked again
    make_engine.run(body, ["They talked.", good],
                    config=EngineConfig(summary_model="auto", summary_every=100, llm_intent="off"))


def test_a_main_topic_of_the_session_gets_its_own_summary_of_the_turns_that_mention_it(
        make_engine: EngineFactory) -> None:
    said = [f"Note {k}: the Kubernetes cluster in zone {k} runs version 1.{k}." if k % 3 == 0
            else f"Lunch on day {k} was soup with {k} crackers." for k in range(24)]
    messages = [Message(role=Role.USER, author=Author(kind=AuthorKind.USER, id="Ana", name="Ana"), content=text,
                        at=f"2024-03-01T10:00:{k:02d}Z") for k, text in enumerate(said)]

    async def body(engine: Engine) -> None:
        state = await engine.open_session(None)
        await engine.ingest(state.session_id, messages)
        await engine.memory_idle()  # the topic index has read the history
        await engine.summarize(state.session_id)
        index = await engine.topics()
        topics = {s.subject_id: s for s in await engine.session_summaries(state.session_id)
                  if s.subject == "topic" and s.level == "detailed"}
        named = {index.topics[t].name.lower(): s for t, s in topics.items()}
        assert "kubernetes" in named
        summary = named["kubernetes"]
        mentioning = {state.order[k] for k in range(0, 24, 3)}
        assert set(summary.covers.ids) == mentioning  # only the turns that mention it
        assert "Kubernetes cluster in zone" in summary.content and "soup" not in summary.content
        assert summary.provider == "extractive"

    make_engine.run(body)


def test_the_summaries_ablation_offers_contexts_no_branch_summary(make_engine: EngineFactory) -> None:
    async def body(engine: Engine) -> None:
        state = await engine.open_session(None)
        await engine.ingest(state.session_id, _history(40))
        await engine.summarize(state.session_id)
        assert engine._summaries.offer(state.session_id)
        engine._ctx.config.ablate = ("summaries",)
        assert engine._summaries.offer(state.session_id) == {}

    make_engine.run(body)


def test_the_model_is_asked_for_a_summary_only_once_no_call_has_run_for_a_quiet_moment(
        make_engine: EngineFactory) -> None:
    import time

    from app.core.engine.context import EngineConfig
    from app.llm.fakes import ScriptedChatModel

    class Timed(ScriptedChatModel):
        def chat(self, messages, **kw):  # type: ignore[no-untyped-def, override]
            self.started = [*getattr(self, "started", []), (kw.get("stage", "answer"), time.monotonic())]
            return super().chat(messages, **kw)

    chat = Timed(["Noted.", "x", "y"])

    async def body(engine: Engine) -> None:
        state = await engine.open_session(None)
        await (await engine.submit(state.session_id, "We moved the parser to src/parse.py on 2024-05-14.")).done
        answered = engine._ctx.ex.foreground_done
        await engine.summarize(state.session_id)
        asked = [at for stage, at in chat.started if stage == "summary"]
        assert asked and min(asked) - answered >= 0.4  # (quiet 0.4 s): not right after the answer

    make_engine.run(body, chat=chat, config=EngineConfig(summary_model="auto", summary_every=100, llm_intent="off",
                                                          summary_quiet_s=0.4))


def test_the_service_keeps_a_bounded_number_of_versions_in_memory(make_engine: EngineFactory,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 40: every version written stayed in the service's cache (each holds its chain's ids and
    parts): ~20 GB after a 100,000-turn import. The store keeps them; memory keeps the latest few."""
    from app.core.engine import summaries

    monkeypatch.setattr(summaries, "CACHE_SIZE", 6)

    async def body(engine: Engine) -> None:
        state = await engine.open_session(None, title="bounded")
        for start in range(0, 80, 20):  # four imports, each a new part of every subject
            await engine.ingest(state.session_id, _history(20, start=start))
            await engine._summaries.idle()
        assert engine._summaries.stats.misses > 6
        assert len(engine._summaries._cache) <= 6
        stored_all = await stored(engine, lambda store: store.list_summaries(state.session_id, current=False))
        first = min(stored_all, key=lambda s: s.created_at)
        assert first.cache_key not in engine._summaries._cache  # long gone from memory ...
        assert (await engine._summaries._cached(first.cache_key)) == first  # ... and the store answers its key

    make_engine.run(body)
