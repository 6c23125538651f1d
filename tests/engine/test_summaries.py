"""Summaries in the engine (issue 14) on real SQLite + LanceDB: the background update after
history and turns, the cache, the versions' chain, and the export's session summary."""

from __future__ import annotations

import re

from app.core.engine.facade import Engine
from app.core.types import Author, AuthorKind, Message, Role
from app.store.exchange import export_session
from tests.conftest import EngineFactory


def _history(n: int, start: int = 0) -> list[Message]:
    out = []
    for k in range(start, start + n):
        who = "Ana" if k % 2 == 0 else "Bo"
        text = (f"Step {k}: we decided to keep the parser in src/step_{k}.py and ship version 1.{k} "
                f"on 2024-03-{k % 28 + 1:02d}. The weather was fine.")
        out.append(Message(role=Role.USER, author=Author(kind=AuthorKind.USER, id=who, name=who), content=text,
                           at=f"2024-03-01T10:{k // 60:02d}:{k % 60:02d}Z"))
    return out


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
        misses = engine.summaries.stats.misses
        assert written == [] and misses == 12  # the ingest's cue did it: 2 parts × (session, branch) × 3 levels
        # a replay of the same conversation (the service forgets what it made): every update is found again
        again = await engine.summaries.replay(state.session_id)
        assert again == [] and engine.summaries.stats.misses == misses
        assert engine.summaries.stats.hits == misses
        # new turns: the next version is based on the previous one, which is closed (kept)
        await engine.ingest(state.session_id, _history(10, start=40))
        await engine.summarize(state.session_id)
        newer = {s.level: s for s in await engine.session_summaries(state.session_id) if s.subject == "session"}
        assert newer["standard"].based_on == session["standard"].summary_id
        history = await engine.ctx.on_store(engine.store.list_summaries, state.session_id, current=False)
        closed = next(s for s in history if s.summary_id == session["standard"].summary_id)
        assert closed.valid_to == newer["standard"].created_at
        doc = await engine.with_store(export_session, state.session_id)
        summary = doc["session"]["summary"]
        assert summary["content"] == newer["standard"].content
        assert summary["message_index_range"] == {"from": 0, "to": 49}

    make_engine.run(body)


def test_summaries_off_makes_none(make_engine: EngineFactory) -> None:
    from app.core.engine.context import EngineConfig

    async def body(engine: Engine) -> None:
        state = await engine.open_session(None)
        await engine.ingest(state.session_id, _history(20))
        await engine.summaries.idle()
        assert await engine.session_summaries(state.session_id) == []

    make_engine.run(body, config=EngineConfig(summaries=False))


def _summary_lines(record) -> list[tuple[str, list[str]]]:  # noqa: ANN001 - a TurnRecord
    return [(b.content, [r.selector for r in b.refs]) for b in record.build.context.blocks
            if b.block_type.value == "summary"]


def test_an_early_decision_of_a_60_turn_branch_reaches_a_later_context_through_the_branch_summary(
        make_engine: EngineFactory) -> None:
    fillers = ["the lamp in room {k} is blue", "we walked {k} blocks to the bakery", "the plant on shelf {k} needs water",
               "there were {k} pigeons on the roof", "song number {k} was too loud"]

    async def body(engine: Engine) -> None:
        state = await engine.open_session(None, title="long branch")
        sid = state.session_id
        first = await (await engine.submit(sid, "Let us plan the caching layer.")).done
        decided = await (await engine.submit(
            sid, "We decided to store the cache in /var/cache/pcm_v2 with a TTL of 37 minutes.")).done
        last = decided
        for k in range(57):
            last = await (await engine.submit(sid, "Small talk: " + fillers[k % 5].format(k=k + 3) + ".")).done
        await engine.summaries.idle()
        asked = await (await engine.submit(sid, "Remind me where the cache is stored and with which TTL, as decided?",
                                           anchor_override=state.node_of(last.turn_id))).done  # this branch
        chain = {n for n in state.main_chain(asked.build.anchor_node or "", asked.build.plan["history"]["main_chain_turns"])}
        assert state.node_of(decided.turn_id) not in chain  # the decision is far beyond the raw window
        assert first.turn_id != decided.turn_id
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
        await engine.summaries.idle()
        assert await engine.replay(asked.turn_id) == []

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
        assert engine.summaries.stats.outcomes["invalid"] == 1

    # one call per level (brief, standard, detailed); the branch is the session and is not asked again
    make_engine.run(body, ["They talked.", good, good],
                    config=EngineConfig(summary_model="auto", summary_every=100, llm_intent="off"))
